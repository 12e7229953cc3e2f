"""Workload 2, short form, under network partitions: each broker in its own network
namespace, and a nemesis that isolates one broker, cuts it from a peer, from both peers or from
ZooKeeper, then heals; the checker must find no anomaly. Skips where network namespaces cannot
be made (root and iproute2 needed). `make chaos CHAOS_FAULTS=kill,pause,stop,partition` runs
the long form."""

from __future__ import annotations

import os

import pytest

from tests.chaos.queue_workload import QueueParams, run_queue

# One worker at a time changes the host's network (tests/support/xdist_units.py).
pytestmark = [pytest.mark.timeout(400), pytest.mark.xdist_group("host-network")]


def test_queue_under_partitions(partitioned_cluster, tmp_path):
    cluster, lab = partitioned_cluster
    p = QueueParams(duration=float(os.environ.get("CHAOS_PARTITION_SHORT_DURATION", "35")),
                    fault_interval=3.0, faults=("partition",),
                    seed=int(os.environ.get("CHAOS_SEED", "1")))
    result = run_queue(cluster, p, tmp_path / "queue", lab)
    print(result.text)
    assert result.faults["partition"] >= 1, result.text  # partitions were made
    assert not lab.cuts, result.text  # and healed
    assert result.report.sends.get("ok", 0) > 0, result.text  # work got done
    assert result.report.ok, result.text
