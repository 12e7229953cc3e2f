"""Workload 2, short form: transactional producers and read_committed consumers against a
3-broker cluster while a nemesis kills (-9), pauses (SIGSTOP/SIGCONT) and cleanly restarts
brokers; the checker must find no anomaly. `make chaos` runs the long form (tests/chaos/run.py)."""

from __future__ import annotations

import os

import pytest

from tests.chaos.queue_workload import QueueParams, run_queue

pytestmark = pytest.mark.timeout(400)


def test_queue_under_kills_pauses_restarts(chaos_cluster, tmp_path):
    p = QueueParams(duration=float(os.environ.get("CHAOS_QUEUE_SHORT_DURATION", "25")),
                    fault_interval=3.0, seed=int(os.environ.get("CHAOS_SEED", "1")))
    result = run_queue(chaos_cluster, p, tmp_path / "queue")
    print(result.text)
    assert sum(result.faults.values()) >= 1, result.text  # faults were injected
    assert result.report.sends.get("ok", 0) > 0, result.text  # and work got done
    assert result.report.ok, result.text


def test_checker_flags_read_uncommitted_consumers(chaos_cluster, tmp_path):
    """The same workload without faults, but with read_uncommitted consumers: the checker must
    report the aborted transactions' records they see (it can fail on a real history)."""
    p = QueueParams(duration=8, faults=(), isolation="read_uncommitted", abort_rate=0.3,
                    consumer_lifetime=None, final_idle=4, seed=2)
    result = run_queue(chaos_cluster, p, tmp_path / "queue")
    counts = result.report.counts()
    assert result.report.sends.get("aborted", 0) > 0, result.text
    assert counts["aborted_read"] > 0, result.text
    assert counts["lost"] == counts["duplicate"] == counts["inconsistent_offset"] == 0, result.text
