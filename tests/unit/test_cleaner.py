"""Compaction keeps the newest value per key; tombstones expire; txn batches stay intact."""

from pathlib import Path

from protocol.records import build_batch, build_control_batch, decode_records, iter_batches
from storage.config import LogConfig
from storage.log import Log


def values(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for seg in log.segments:
        for _pos, h, data in seg.batches():
            out += [(r.offset, r.key, r.value) for r in decode_records(data, 0, h)]
    return out


def make_log(tmp_path: Path, **cfg) -> Log:
    cfg.setdefault("segment_bytes", 400)
    return Log.open(tmp_path / "compacted-0", LogConfig(cleanup_policy="compact", **cfg),
                    recover=False)


def test_compaction_keeps_newest_per_key(tmp_path: Path) -> None:
    log = make_log(tmp_path)
    for i in range(30):
        log.append_as_leader(build_batch([(b"k%d" % (i % 3), b"v%d" % i, [], 1000 + i)]), 0)
    log.update_high_watermark(log.log_end_offset)
    active_base = log.active_segment.base_offset
    before = log.size_in_bytes
    result = log.compact(now_ms=2000)
    assert result is not None and result.records_removed > 0
    assert log.size_in_bytes < before
    kept = [(o, k, v) for o, k, v in values(log) if o < active_base]
    latest_below = {}
    for i in range(active_base):
        latest_below[b"k%d" % (i % 3)] = i
    assert sorted(o for o, _, _ in kept) == sorted(latest_below.values())
    # offsets are preserved, reads still work, appends continue
    assert log.read(0, 1 << 20).first_batch_offset == min(o for o, _, _ in kept)
    assert log.append_as_leader(build_batch([(b"k0", b"x", [], 5)]), 0).first_offset == 30
    expected = values(log)
    log.close()
    reopened = Log.open(log.dir, log.config, recover=True)
    assert values(reopened) == expected
    assert reopened.log_end_offset == 31


def test_compaction_within_a_batch_and_tombstones(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=10_000, delete_retention_ms=1000)
    log.append_as_leader(build_batch([(b"a", b"1", [], 10), (b"b", b"1", [], 10),
                                      (b"a", b"2", [], 10)], compression=1), 0)
    log.append_as_leader(build_batch([(b"b", None, [], 10)]), 0)  # tombstone for b
    log.roll()
    log.append_as_leader(build_batch([(b"c", b"1", [], 10)]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.compact(now_ms=500)  # tombstone still within delete.retention.ms
    assert values(log) == [(2, b"a", b"2"), (3, b"b", None), (4, b"c", b"1")]
    log.compact(now_ms=10_000)
    assert values(log) == [(2, b"a", b"2"), (4, b"c", b"1")]
    first = log.segments[0]
    (_, h, _), = list(first.batches())
    assert h.base_offset == 0 and h.compression == 1  # same base offset and codec


def test_compaction_stops_at_lso_and_keeps_txn_batches(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=10_000)
    txn = dict(producer_id=3, producer_epoch=0, transactional=True)
    log.append_as_leader(build_batch([(b"a", b"1", [], 1)], base_sequence=0, **txn), 0)
    log.append_as_leader(build_batch([(b"a", b"2", [], 1)], base_sequence=1, **txn), 0)
    log.append_as_leader(build_control_batch(3, 0, True, 0, 2), 0, origin="coordinator")
    log.roll()
    log.append_as_leader(build_batch([(b"a", b"3", [], 1)]), 0)
    log.update_high_watermark(log.log_end_offset)
    log.compact(now_ms=10)
    assert [o for o, _, _ in values(log)] == [0, 1, 2, 3]  # txn data + marker kept
    # an open transaction pins the LSO: nothing at/after it is cleaned
    log.append_as_leader(build_batch([(b"z", b"1", [], 1)], base_sequence=0, producer_id=4,
                                     producer_epoch=0, transactional=True), 0)
    log.roll()
    log.append_as_leader(build_batch([(b"a", b"4", [], 1)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 4
    log.compact(now_ms=10)
    # a@3 is only superseded by a@5, which lies beyond the LSO: it must survive
    assert [o for o, _, _ in values(log)] == [0, 1, 2, 3, 4, 5]


def test_cleaned_swap_completed_on_open(tmp_path: Path) -> None:
    log = make_log(tmp_path, segment_bytes=10_000)
    log.append_as_leader(build_batch([(b"a", b"1", [], 1)]), 0)
    log.roll()
    log.append_as_leader(build_batch([(b"a", b"2", [], 1)]), 0)
    log.roll()
    log.close()
    # simulate a crash after the cleaned output became `.swap` but before the old segments
    # were removed: the swap holds offset 0..1 with only offset 1 kept
    kept = build_batch([(b"a", b"2", [], 1)], base_offset=1)
    (log.dir / "00000000000000000000.log.swap").write_bytes(kept)
    reopened = Log.open(log.dir, log.config, recover=False)
    assert [s.base_offset for s in reopened.segments] == [0, 2]
    assert values(reopened) == [(1, b"a", b"2")]
    assert not list(reopened.dir.glob("*.swap"))
    assert [p for p, _ in iter_batches(reopened.read(1, 1000).records)] == [0]
