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
