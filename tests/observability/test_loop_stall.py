"""Compaction does not stall the event loop: a client's ApiVersions round trips stay short
while the broker compacts a large log (tens of MB, many duplicate keys) in its cleaner thread.

Not a timing benchmark: the bound is a fraction of the compaction's own duration, which the
old in-loop compaction exceeded by construction (every request waited for all of it). The
measured numbers are in docs/performance/produce.md (bench/loop_stall.py)."""

from __future__ import annotations

from tests.support.loop_stall import measure_compaction_stall


def test_compaction_runs_off_the_event_loop(broker_factory, unique_topic):
    broker = broker_factory({"log.cleaner.backoff.ms": 1000})
    report = measure_compaction_stall(broker, unique_topic, mib=24)
    assert report.records_removed > 50_000, report
    assert report.pings >= 5, report  # the client was answered while the compaction ran
    # The loop answered throughout: even the slowest round trip is a fraction of the
    # compaction (with the compaction on the loop it is all of it).
    assert report.max_rtt_ms < report.compaction_ms / 2, report
    assert report.thread is not None and report.thread.startswith("log-cleaner"), report
