"""Workload 2, short form, under the coordinator nemesis: every fault strikes the broker that
coordinates one of the producers' transactional ids, preferably while it has a transaction in
PrepareCommit/PrepareAbort (between EndTxn and the end of its markers), with kill -9 or
SIGSTOP; the checker must find no anomaly. `make chaos` runs the long form (the coordinator
fault is among CHAOS_FAULTS' defaults)."""

from __future__ import annotations

import os

import pytest

from tests.chaos.queue_workload import QueueParams, run_queue

pytestmark = pytest.mark.timeout(400)


def test_queue_under_coordinator_faults(chaos_cluster, tmp_path):
    p = QueueParams(duration=float(os.environ.get("CHAOS_COORDINATOR_SHORT_DURATION", "30")),
                    fault_interval=2.0, faults=("coordinator",),
                    seed=int(os.environ.get("CHAOS_SEED", "1")))
    result = run_queue(chaos_cluster, p, tmp_path / "queue")
    print(result.text)
    assert result.faults["coordinator"] >= 2, result.text  # coordinators were struck
    assert result.report.sends.get("ok", 0) > 0, result.text  # and work got done
    assert result.report.ok, result.text
