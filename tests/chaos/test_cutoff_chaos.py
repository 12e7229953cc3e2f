"""Workload 3, short form (tests/chaos/cutoff.py): one broker at a time cut from ZooKeeper and
both peers while clients still reach it, aimed at the controller, the transaction coordinator
and the broker leading most partitions; every acknowledged value must be read exactly once at
its offset (read_uncommitted and read_committed), no aborted value read_committed, and the
three replicas of each partition byte-for-byte the same. Skips where network namespaces
cannot be made. As in the long form, `make chaos CHAOS_WORKLOAD=cutoff`, every other round
cuts one way only (what the victim sends dropped; CHAOS_CUTOFF_ONE_WAY=0 cuts both ways
only)."""

from __future__ import annotations

import os

import pytest

from tests.chaos.cutoff import CutoffParams, run_cutoff

# One worker at a time changes the host's network (tests/support/xdist_units.py).
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("host-network")]


def test_exactly_once_across_brokers_cut_off(partitioned_cluster, tmp_path):
    cluster, lab = partitioned_cluster
    p = CutoffParams(rounds=int(os.environ.get("CHAOS_CUTOFF_SHORT_ROUNDS", "3")),
                     hold=(7.0, 9.0), seed=int(os.environ.get("CHAOS_SEED", "1")),
                     one_way=os.environ.get("CHAOS_CUTOFF_ONE_WAY", "1") != "0")
    res = run_cutoff(cluster, lab, p, tmp_path / "cutoff")
    print(res.text)
    assert [r.target for r in res.rounds] == ["controller", "txn_coordinator",
                                              "most_leaders"][:p.rounds], res.text
    assert not lab.cuts, res.text  # healed
    # the cuts held long enough for the others to elect new leaders of the victims' partitions
    assert sum(r.moved > 0 for r in res.rounds) >= 2, res.text
    assert res.counts.get("acked", 0) > 0 and res.counts.get("txn_ok", 0) > 0, res.text
    assert res.ok, res.text
