"""Log: append/read, indexes, rolling, recovery, retention, timestamps, epochs, txns."""

from pathlib import Path

import pytest

from samsa.protocol.records import (
    BatchHeader,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batches,
)
from samsa.storage.config import LogConfig
from samsa.storage.errors import (
    CorruptRecord,
    InvalidProducerEpoch,
    InvalidRecord,
    MessageTooLarge,
    OffsetOutOfRange,
    RecordListTooLarge,
)
from samsa.storage.log import Log, parse_topic_partition
from samsa.storage.segment import LogSegment


def batch(n: int = 1, ts: int = 1000, value: bytes = b"v" * 100, **kw) -> bytes:
    return build_batch([(b"k%d" % i, value, [], ts + i) for i in range(n)], **kw)


def open_log(tmp_path: Path, recover: bool = False, **cfg) -> Log:
    return Log.open(tmp_path / "my.topic-with-dash-3", LogConfig(**cfg), recover=recover)


def all_offsets(log: Log, start: int = 0) -> list[int]:
    out = []
    pos = start
    while pos < log.log_end_offset:
        data = log.read(pos, 1 << 20).records
        for p, h in iter_batches(data):
            out += [r.offset for r in decode_records(data, p, h)]
            pos = h.next_offset
    return out


def test_parse_topic_partition() -> None:
    assert parse_topic_partition("a-b.c-12") == ("a-b.c", 12)
    with pytest.raises(ValueError):
        parse_topic_partition("nopartition")


def test_append_read_round_trip_dense_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.topic, log.partition) == ("my.topic-with-dash", 3)
    infos = [log.append_as_leader(batch(3), leader_epoch=0) for _ in range(10)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(3 * k, 3 * k + 2)
                                                                for k in range(10)]
    assert log.log_end_offset == 30
    assert all_offsets(log) == list(range(30))
    fd = log.read(7, 1 << 20)
    assert fd.first_batch_offset == 6  # the batch containing offset 7
    assert fd.next_offset == 30
    h = BatchHeader.parse(fd.records)
    assert h.partition_leader_epoch == 0
    assert log.read(30, 100).records == b""
    with pytest.raises(OffsetOutOfRange):
        log.read(31, 100)
    log.close()


def test_read_limits(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(batch(1), 0)
    size = len(batch(1))
    assert len(log.read(0, size * 2 + 10).records) == size * 2
    assert len(log.read(0, 10).records) == size  # first batch whole (min_one_message)
    assert log.read(0, 10, min_one_message=False).records == b""
    assert len(log.read(0, 1 << 20, max_offset=3).records) == size * 3
    assert log.read(3, 1 << 20, max_offset=3).records == b""


def test_validation_errors(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=500, segment_bytes=1500)
    with pytest.raises(InvalidRecord):
        log.append_as_leader(b"", 0)
    with pytest.raises(MessageTooLarge):
        log.append_as_leader(batch(1, value=b"x" * 600), 0)
    with pytest.raises(InvalidRecord, match="more than one batch"):  # Kafka's LogValidator
        log.append_as_leader(batch(1) + batch(1), 0)
    bad = bytearray(batch(1))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecord):
        log.append_as_leader(bytes(bad), 0)
    with pytest.raises(CorruptRecord):
        log.append_as_leader(batch(1) + batch(1)[:20], 0)
    assert log.log_end_offset == 0 and log.size_in_bytes == 0
    roomy = open_log(tmp_path / "roomy", max_message_bytes=5000, segment_bytes=1500)
    with pytest.raises(RecordListTooLarge):
        roomy.append_as_leader(batch(1, value=b"x" * 2000), 0)
    assert roomy.log_end_offset == 0


def test_offset_index_lookups(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=300)
    for _ in range(50):
        log.append_as_leader(batch(2), 0)
    seg = log.active_segment
    assert len(seg.offset_index) > 5
    for target in range(0, 100, 7):
        off, pos = seg.offset_index.lookup(target)
        assert off <= target
        h = BatchHeader.parse(seg.read_bytes(pos, 61))
        assert h.base_offset <= target
        assert log.read(target, 1 << 20).first_batch_offset == target - target % 2


def test_roll_by_size_and_time(tmp_path: Path) -> None:
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 3)
    for _ in range(7):
        log.append_as_leader(batch(1), 0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert all_offsets(log) == list(range(7))
    log2 = Log.open(tmp_path / "t-0", LogConfig(segment_ms=1000), recover=False)
    log2.append_as_leader(batch(1, ts=10_000), 0)
    log2.append_as_leader(batch(1, ts=10_500), 0)
    assert log2.num_segments == 1
    log2.append_as_leader(batch(1, ts=11_001), 0)  # 1001 ms after the first batch
    assert [s.base_offset for s in log2.segments] == [0, 2]
    # the roll took a producer snapshot at the new base offset
    assert (log2.dir / "00000000000000000002.snapshot").exists()


def test_reopen_clean_keeps_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=200)
    for i in range(40):
        log.append_as_leader(batch(2, ts=1000 + i), i // 10)
    log.close()
    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=200)
    assert log.log_end_offset == 80 and all_offsets(log) == list(range(80))
    assert log.latest_epoch == 3
    assert log.append_as_leader(batch(1), 3).first_offset == 80


def test_recovery_truncates_torn_tail(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=3000)
    for _ in range(30):
        log.append_as_leader(batch(2), 0)
    leo = log.log_end_offset
    last = log.active_segment.log_path
    log.close_without_flush()
    with open(last, "ab") as f:
        f.write(batch(5)[:70])  # half a batch, as after kill -9 mid-write
    log = open_log(tmp_path, recover=True, segment_bytes=3000)
    assert log.log_end_offset == leo
    assert all_offsets(log) == list(range(leo))
    assert log.append_as_leader(batch(1), 0).first_offset == leo
    log.close()


def test_recovery_truncates_at_corruption_and_drops_later_segments(tmp_path: Path) -> None:
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 4)
    for _ in range(12):
        log.append_as_leader(batch(1), 0)
    assert log.num_segments == 3
    first = log.segments[0].log_path
    log.close_without_flush()
    raw = bytearray(first.read_bytes())
    raw[size * 2 + 40] ^= 0xFF  # corrupt the third batch's payload (CRC mismatch)
    first.write_bytes(raw)
    log = open_log(tmp_path, recover=True, segment_bytes=size * 4)
    assert log.log_end_offset == 2
    assert log.num_segments == 1
    assert all_offsets(log) == [0, 1]


def test_recovery_rebuilds_missing_indexes(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=100)
    for _ in range(20):
        log.append_as_leader(batch(1, ts=5000), 0)
    n = len(log.active_segment.offset_index)
    log.close()
    (log.dir / "00000000000000000000.index").unlink()
    (log.dir / "00000000000000000000.timeindex").write_bytes(b"\x01\x02\x03")
    log = open_log(tmp_path, index_interval_bytes=100)
    assert len(log.active_segment.offset_index) == n
    assert log.log_end_offset == 20


def test_temp_files_removed_on_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1), 0)
    log.close()
    for name in ("00000000000000000000.log.cleaned", "00000000000000000000.index.deleted",
                 "00000000000000000009.log.deleted"):
        (log.dir / name).write_bytes(b"junk")
    log = open_log(tmp_path)
    assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.deleted"))
    assert log.log_end_offset == 1


def test_retention_by_time(tmp_path: Path) -> None:
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 2, retention_ms=10_000)
    for i in range(6):
        log.append_as_leader(batch(1, ts=1000 * i), 0)
    log.update_high_watermark(log.log_end_offset)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    # segment [0,1] max ts 1000, [2,3] 3000, active [4,5]
    assert log.retention.enforce(now_ms=12_000) == 1
    assert log.log_start_offset == 2
    assert log.retention.enforce(now_ms=10**9) == 1  # never the active segment
    assert [s.base_offset for s in log.segments] == [4]
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)


def test_retention_by_bytes(tmp_path: Path) -> None:
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 2, retention_bytes=size * 3, retention_ms=-1)
    for _ in range(7):
        log.append_as_leader(batch(1, ts=1), 0)
    log.update_high_watermark(log.log_end_offset)
    assert log.retention.enforce(now_ms=10**12) == 2
    assert log.log_start_offset == 4
    assert log.size_in_bytes == size * 3


def test_retention_respects_high_watermark(tmp_path: Path) -> None:
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 2, retention_ms=0)
    for _ in range(5):
        log.append_as_leader(batch(1, ts=1), 0)
    log.update_high_watermark(1)
    assert log.retention.enforce(now_ms=10**12) == 0


def test_delete_records_before(tmp_path: Path) -> None:
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 2)
    for _ in range(6):
        log.append_as_leader(batch(1), 0)
    log.update_high_watermark(4)
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(5)
    assert log.delete_records_before(3) == 3
    assert [s.base_offset for s in log.segments] == [2, 4]
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)
    assert log.read(3, 1 << 20).first_batch_offset == 3
    log.close()
    log = Log.open(log.dir, log.config, recover=False, log_start_offset=3)
    assert log.log_start_offset == 3


def test_fetch_offset_for_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000, index_interval_bytes=100)
    for i in range(20):
        log.append_as_leader(batch(3, ts=10_000 + 100 * i, compression=i % 3), i // 5)
    # batch i holds timestamps 10000+100i .. +2, offsets 3i..3i+2
    assert log.fetch_offset_for_timestamp(0) == (0, 10_000, 0)
    assert log.fetch_offset_for_timestamp(10_501) == (16, 10_501, 1)
    assert log.fetch_offset_for_timestamp(10_503) == (18, 10_600, 1)
    assert log.fetch_offset_for_timestamp(11_902) == (59, 11_902, 3)
    assert log.fetch_offset_for_timestamp(11_903) is None
    assert log.max_timestamp_and_offset() == (59, 11_902, 3)


def test_log_append_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch(2, ts=5), 0, now_ms=123_456)
    assert info.log_append_time == 123_456
    recs = decode_records(log.read(0, 1 << 20).records)
    assert [r.timestamp for r in recs] == [123_456, 123_456]


def test_leader_epoch_end_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for epoch, n in ((1, 3), (2, 4), (4, 2)):
        for _ in range(n):
            log.append_as_leader(batch(1), epoch)
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 3), (4, 7)]
    assert log.end_offset_for_epoch(4) == (4, 9)
    assert log.end_offset_for_epoch(2) == (2, 7)
    assert log.end_offset_for_epoch(3) == (2, 7)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(5) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    text = (log.dir / "leader-epoch-checkpoint").read_text()
    assert text == "0\n3\n1 0\n2 3\n4 7\n"
    log.truncate_to(5)
    assert log.leader_epoch_cache.entries == [(1, 0), (2, 3)]
    assert log.log_end_offset == 5


def test_epoch_cache_rebuilt_by_recovery(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for epoch in range(4):
        log.append_as_leader(batch(1), epoch)
    log.close_without_flush()
    (log.dir / "leader-epoch-checkpoint").unlink()
    log = open_log(tmp_path, recover=True)
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_truncate_to_and_fully(tmp_path: Path) -> None:
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 2)
    for _ in range(7):
        log.append_as_leader(batch(1), 0)
    assert log.truncate_to(3)
    assert log.log_end_offset == 3 and all_offsets(log) == [0, 1, 2]
    assert log.append_as_leader(batch(1), 0).first_offset == 3
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (100, 100, 1)
    assert log.append_as_leader(batch(1), 0).first_offset == 100


def test_truncate_fully_at_an_existing_segments_base(tmp_path: Path) -> None:
    """Starting over at the base offset of a segment the log has: the old segment's files
    are gone and the new one's are there (it used to delete the new files with the old)."""
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 2)
    for _ in range(5):
        log.append_as_leader(batch(1), 0)
    bases = [s.base_offset for s in log.segments]
    assert 2 in bases
    log.truncate_fully_and_start_at(2)
    assert (log.log_start_offset, log.log_end_offset, log.num_segments) == (2, 2, 1)
    assert log.append_as_leader(batch(1), 0).first_offset == 2
    assert all_offsets(log, 2) == [2]
    assert sorted(p.name for p in log.dir.glob("*.log")) == ["00000000000000000002.log"]


def test_idempotent_duplicate_and_fencing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    b0 = batch(2, producer_id=5, producer_epoch=0, base_sequence=0)
    b1 = batch(2, producer_id=5, producer_epoch=0, base_sequence=2)
    assert log.append_as_leader(b0, 0).first_offset == 0
    assert log.append_as_leader(b1, 0).first_offset == 2
    dup = log.append_as_leader(b1, 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (2, 3)
    assert log.log_end_offset == 4
    log.append_as_leader(batch(1, producer_id=5, producer_epoch=1, base_sequence=0), 0)
    with pytest.raises(InvalidProducerEpoch):
        log.append_as_leader(batch(1, producer_id=5, producer_epoch=0, base_sequence=4), 0)
    assert log.log_end_offset == 5


def test_producer_state_survives_recovery(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    b = batch(2, producer_id=9, producer_epoch=0, base_sequence=0)
    log.append_as_leader(b, 0)
    log.close_without_flush()
    log = open_log(tmp_path, recover=True)
    assert log.append_as_leader(b, 0).duplicate


def test_transactions_lso_and_aborted_index(tmp_path: Path) -> None:
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 3)
    txn = dict(producer_id=7, producer_epoch=0, transactional=True)
    log.append_as_leader(batch(1), 0)                                   # 0
    log.append_as_leader(batch(2, base_sequence=0, **txn), 0)           # 1-2
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    log.append_as_leader(build_control_batch(7, 0, commit=False, coordinator_epoch=0,
                                             timestamp=5), 0, origin="coordinator")  # 3
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 4
    aborted = log.collect_aborted_transactions(0, 4)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborted] == [(7, 1, 3)]
    assert log.collect_aborted_transactions(4, 10) == []
    # the txn index is rebuilt by recovery
    log.close_without_flush()
    for f in log.dir.glob("*.txnindex"):
        f.unlink()
    log = open_log(tmp_path, recover=True, segment_bytes=size * 3)
    aborted = log.collect_aborted_transactions(0, 4)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborted] == [(7, 1, 3)]


def test_follower_append_keeps_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_follower(batch(2, base_offset=0, partition_leader_epoch=4))
    log.append_as_follower(batch(1, base_offset=2, partition_leader_epoch=5))
    assert log.log_end_offset == 3 and log.latest_epoch == 5
    with pytest.raises(InvalidRecord):
        log.append_as_follower(batch(1, base_offset=1))


def test_flush_messages_advances_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_messages=2)
    log.append_as_leader(batch(1), 0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(1), 0)
    assert log.recovery_point == 2


def test_segment_scan_large_batches(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 0)
    big = batch(1, value=b"z" * (3 << 20))
    seg.append([big], list(iter_batches(big)))
    small = batch(1, base_offset=1)
    seg.append([small], list(iter_batches(small)))
    assert [h.base_offset for _, h in seg._scan(0)] == [0, 1]
    assert seg.recover() == 0 and seg.next_offset == 2
    seg.close()


def test_retention_detaches_on_the_caller_and_deletes_files_later(tmp_path: Path) -> None:
    """The broker detaches expired segments on the event loop (readers stop finding them at
    once) and deletes their files in a thread; until then the files are untouched."""
    size = len(batch(1))
    log = open_log(tmp_path, segment_bytes=size * 2, retention_ms=10_000)
    for i in range(6):
        log.append_as_leader(batch(1, ts=1000 * i), 0)
    log.update_high_watermark(log.log_end_offset)
    doomed = log.retention.detach_expired(now_ms=10**9)
    assert [s.base_offset for s in doomed] == [0, 2]
    assert [s.base_offset for s in log.segments] == [4] and log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    assert all(s.log_path.exists() for s in doomed)
    log.retention.delete_detached(doomed)
    assert not any(s.log_path.exists() for s in doomed)
    assert sorted(p.name for p in log.dir.glob("*.log")) == ["00000000000000000004.log"]


def test_roll_leaves_the_snapshot_fsync_to_the_flush(tmp_path: Path, monkeypatch) -> None:
    """Kafka's roll: the producer snapshot is written at once but fsynced by the (background)
    flush that moves the recovery point past it; a crash before that recovers correctly."""
    import os

    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    log = open_log(tmp_path)
    idem = dict(producer_id=7, producer_epoch=0)
    log.append_as_leader(batch(2, base_sequence=0, **idem), 0)
    synced.clear()
    log.roll()
    assert synced == []  # nothing on the caller's (the loop's) thread
    snapshot = log.dir / "00000000000000000002.snapshot"
    assert snapshot.exists()
    log.append_as_leader(batch(1, base_sequence=2, **idem), 0)
    log.flush(log.active_segment.base_offset)  # what the LogManager's flush on roll does
    assert str(snapshot) in synced and log.recovery_point == 2
    # kill -9 now: recovery starts from the snapshot and the segment after it
    log.close_without_flush()
    reopened = open_log(tmp_path, recover=True)
    assert reopened.log_end_offset == 3
    retry = reopened.append_as_leader(batch(1, base_sequence=2, **idem), 0)
    assert retry.duplicate and retry.first_offset == 2  # the producer state survived


def test_truncate_to_the_end_drops_an_epoch_started_there(tmp_path: Path) -> None:
    """A leader that started epoch 2 at its log end and wrote nothing before losing the
    leadership follows a leader that never had epoch 2: truncating to its own log end must
    forget the epoch, or it diverges at the same offset on every fetch."""
    log = open_log(tmp_path)
    log.append_as_leader(batch(1), 0)
    leo = log.log_end_offset
    log.leader_epoch_cache.assign(2, leo)
    assert log.latest_epoch == 2
    assert not log.truncate_to(leo)
    assert log.latest_epoch == 0
    log.close()
