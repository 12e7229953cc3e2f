"""Compaction keeps the newest value per key; tombstones expire; txn batches stay intact."""

from pathlib import Path

from samsa.protocol.records import build_batch, build_control_batch, decode_records, iter_batches
from samsa.storage import cleaner
from samsa.storage.config import LogConfig
from samsa.storage.log import Log


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
    result = cleaner.compact(log, now_ms=2000)
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
    cleaner.compact(log, now_ms=500)  # tombstone still within delete.retention.ms
    assert values(log) == [(2, b"a", b"2"), (3, b"b", None), (4, b"c", b"1")]
    cleaner.compact(log, now_ms=10_000)
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
    cleaner.compact(log, now_ms=10)
    assert [o for o, _, _ in values(log)] == [0, 1, 2, 3]  # txn data + marker kept
    # an open transaction pins the LSO: nothing at/after it is cleaned
    log.append_as_leader(build_batch([(b"z", b"1", [], 1)], base_sequence=0, producer_id=4,
                                     producer_epoch=0, transactional=True), 0)
    log.roll()
    log.append_as_leader(build_batch([(b"a", b"4", [], 1)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 4
    cleaner.compact(log, now_ms=10)
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


def _newest_per_key(log: Log) -> dict[bytes, bytes | None]:
    latest: dict[bytes, bytes | None] = {}
    for _o, k, v in values(log):
        latest[k] = v
    return latest


async def test_cleaner_thread_while_the_loop_appends_and_reads(tmp_path: Path) -> None:
    """The LogManager's compaction runs in its cleaner thread while appends (which roll
    segments) and reads go on on the event loop: nothing appended is lost, every read sees
    a consistent segment list, and the swapped-in segments end up under their final names."""
    import asyncio
    import threading

    from samsa.storage.log_manager import LogManager

    cfg = LogConfig(cleanup_policy="compact", segment_bytes=20_000)
    lm = LogManager(tmp_path, cfg)
    lm.startup(lambda topic: cfg)
    log = lm.create_log("compacted", 0, cfg)
    for i in range(3000):
        log.append_as_leader(build_batch([(b"k%d" % (i % 50), b"v%d" % i, [], 1000 + i)]), 0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    expected = _newest_per_key(log)
    appended: list[int] = []
    cleaner_threads: set[str] = set()
    removed: list[int] = []
    stop = asyncio.Event()

    async def append_and_read() -> None:
        i = 0
        while not stop.is_set():
            value = b"new%d" % i
            first = log.append_as_leader(build_batch([(b"n%d" % (i % 7), value, [], 9000)]), 0)
            appended.append(first.first_offset)
            expected[b"n%d" % (i % 7)] = value
            log.update_high_watermark(log.log_end_offset)
            if i % 5 == 4:
                log.roll()  # the segment list changes on the loop while the cleaner swaps
            data = log.read(log.log_start_offset, 1 << 16)
            assert list(iter_batches(bytes(data.records)))  # never a torn list
            i += 1
            await asyncio.sleep(0)

    original = LogManager._cleaned

    def spy(self, tp, lg, result):  # noqa: ANN001, ANN202
        cleaner_threads.add(result.thread)
        removed.append(result.records_removed)
        return original(self, tp, lg, result)

    lm._cleaned = spy.__get__(lm)  # type: ignore[method-assign]
    task = asyncio.create_task(append_and_read())
    assert await lm._cleaner_off_loop(10_000, force=True) == 1
    stop.set()
    await task
    assert cleaner_threads and threading.main_thread().name not in cleaner_threads
    assert appended == list(range(3000, 3000 + len(appended)))  # offsets contiguous
    assert removed == [3000 - 50]  # all but the newest of the 50 keys
    assert _newest_per_key(log) == expected
    leftovers = [p.name for p in log.dir.iterdir()
                 if p.name.endswith((".swap", ".cleaned", ".deleted"))]
    assert leftovers == []
    lm.shutdown()
    reopened = Log.open(log.dir, cfg, recover=True)
    assert _newest_per_key(reopened) == expected


def test_cleaning_gives_up_when_the_log_is_truncated_meanwhile(tmp_path: Path) -> None:
    """A truncation between planning and swapping (a follower's, on the loop) aborts the
    clean: its key map may name records that are gone."""
    from samsa.storage import cleaner

    log = make_log(tmp_path, segment_bytes=10_000)
    for i in range(4):
        log.append_as_leader(build_batch([(b"a", b"%d" % i, [], 1)]), 0)
        log.roll()
    log.update_high_watermark(log.log_end_offset)
    segments = cleaner.cleanable_segments(log, 10)
    generation = log.generation
    log.truncate_to(3)  # a@3, which superseded a@0..2, is gone
    assert cleaner.clean_segments(log, segments, generation, 10) is None
    assert [v for _o, _k, v in values(log)] == [b"0", b"1", b"2"]
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".swap", ".cleaned"))]
