"""How long storage housekeeping holds the event loop (docs/performance/produce.md,
"Housekeeping off the event loop"). Measures, does not judge:

1. compaction: a broker compacts a `--mib` MiB log (2,000 keys, 1 MiB segments) while a client
   sends ApiVersions back to back: round-trip times during the compaction, and its duration;
2. retention: `--segments` segments expire at once: the time spent on the calling (loop)
   thread, and in the deletion thread where the broker has one;
3. roll: `Log.roll()` (it writes the producer snapshot) with `--producers` idempotent
   producers in the partition's state, median and max of `--rolls` rolls.

It runs against whatever `broker`/`storage` packages PYTHONPATH names, so the same script
measures an older tree (copy this file and tests/support/loop_stall.py into it).

    PYTHONPATH=$PWD .venv/bin/python bench/loop_stall.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from samsa.protocol.records import build_batch  # noqa: E402
from samsa.storage.config import LogConfig  # noqa: E402
from samsa.storage.log import Log  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.loop_stall import measure_compaction_stall  # noqa: E402


def compaction(mib: int) -> None:
    with tempfile.TemporaryDirectory(prefix="samsa-stall-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", settings={"log.cleaner.backoff.ms": 1000})
        broker.start()
        try:
            r = measure_compaction_stall(broker, "stall", mib, timeout=300)
        finally:
            broker.close()
    print(f"compaction: {r.log_bytes / 2**20:.1f} MiB, {r.records_removed} records removed in "
          f"{r.compaction_ms} ms (thread: {r.thread or 'not reported'}); ApiVersions during it: "
          f"{r.pings} round trips, median {r.median_rtt_ms:.1f} ms, p99 {r.p99_rtt_ms:.1f} ms, "
          f"max {r.max_rtt_ms:.1f} ms (idle max {r.idle_max_rtt_ms:.1f} ms)")


def _log(d: Path, segment_bytes: int, **cfg: object) -> Log:
    return Log.open(d, LogConfig(segment_bytes=segment_bytes, **cfg), recover=False)


def retention(segments: int) -> None:
    with tempfile.TemporaryDirectory(prefix="samsa-retention-") as tmp:
        log = _log(Path(tmp) / "r-0", 16_384, retention_ms=1000)
        value = b"x" * 4000
        while log.num_segments <= segments:
            log.append_as_leader(build_batch([(None, value, [], 1000)] * 3), 0)
        log.update_high_watermark(log.log_end_offset)
        log.flush()
        now = 10**12
        started = time.perf_counter()
        retention = getattr(log, "retention", None)  # older trees: its methods on the log
        if retention is not None or hasattr(log, "detach_expired_segments"):
            # the loop's part, then the thread's
            detach = retention.detach_expired if retention else log.detach_expired_segments
            delete = retention.delete_detached if retention else log.delete_detached
            doomed = detach(now)
            on_loop = time.perf_counter() - started
            t = time.perf_counter()
            worker = threading.Thread(target=delete, args=(doomed,))
            worker.start()
            worker.join()
            in_thread = time.perf_counter() - t
            deleted = len(doomed)
        else:
            deleted = log.enforce_retention(now)
            on_loop, in_thread = time.perf_counter() - started, 0.0
        log.close()
    print(f"retention: {deleted} segments deleted: {on_loop * 1000:.1f} ms on the loop, "
          f"{in_thread * 1000:.1f} ms in a thread")


def roll(producers: int, rolls: int) -> None:
    with tempfile.TemporaryDirectory(prefix="samsa-roll-") as tmp:
        log = _log(Path(tmp) / "s-0", 1 << 30)
        for pid in range(producers):
            log.append_as_leader(build_batch([(b"k", b"v", [], 1000)], producer_id=pid,
                                             producer_epoch=0, base_sequence=0), 0)
        times = []
        for _ in range(rolls):
            log.append_as_leader(build_batch([(b"k", b"v", [], 1000)]), 0)
            started = time.perf_counter()
            log.roll()
            times.append(time.perf_counter() - started)
        log.close()
    print(f"roll with a snapshot of {producers} producers: median "
          f"{statistics.median(times) * 1000:.2f} ms, max {max(times) * 1000:.2f} ms "
          f"({rolls} rolls)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=32)
    ap.add_argument("--segments", type=int, default=2000)
    ap.add_argument("--producers", type=int, default=1000)
    ap.add_argument("--rolls", type=int, default=100)
    ap.add_argument("--skip-compaction", action="store_true")
    args = ap.parse_args()
    roll(args.producers, args.rolls)
    retention(args.segments)
    if not args.skip_compaction:
        compaction(args.mib)


if __name__ == "__main__":
    main()
