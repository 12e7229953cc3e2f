"""Rack-aware replica placement on topic creation (Kafka's
AdminUtils.assignReplicasToBrokersRackAware), checked by the properties Kafka's
AdminRackAwareTest checks: every partition spread over as many racks as it can be, leaders
and replicas evenly over the brokers."""

from __future__ import annotations

from collections import Counter

from samsa.broker.cluster.topic_admin import _rack_alternated, assign_replicas


def test_rack_alternated_broker_list() -> None:
    racks: dict[int, str | None] = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3",
                                    4: "rack3", 5: "rack1"}
    assert _rack_alternated(racks) == [0, 1, 3, 5, 2, 4]


def test_replicas_spread_over_racks() -> None:
    racks: dict[int, str | None] = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    placement = assign_replicas(racks, 12, 3, 0)
    assert sorted(placement) == list(range(12))
    for replicas in placement.values():
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}
    assert set(Counter(r[0] for r in placement.values()).values()) == {2}
    assert set(Counter(b for r in placement.values() for b in r).values()) == {6}
    # more replicas than racks: every rack used, then the brokers not used yet
    for replicas in assign_replicas({0: "a", 1: "a", 2: "b", 3: "b"}, 4, 3, 0).values():
        assert len(set(replicas)) == 3 and {replicas[0] // 2, replicas[1] // 2} == {0, 1}


def test_no_racks_keeps_the_plain_spread() -> None:
    assert assign_replicas({0: None, 1: None, 2: None}, 3, 2, 0) == {
        0: [0, 1], 1: [1, 2], 2: [2, 0]}


def test_processes_of_one_host_never_share_a_partition_while_hosts_suffice() -> None:
    """Nodes of several broker processes (`samsa serve --processes N`, each node's processes in
    one rack, its host): a partition's replicas are on as many hosts as there are, up to its
    replication factor, for any mix of node sizes and any first partition (CreatePartitions)."""
    for sizes in ([2, 2, 2], [4, 1, 2], [3, 3], [1, 4], [2, 2, 2, 2]):
        racks: dict[int, str | None] = {}
        for host, size in enumerate(sizes):
            racks.update({len(racks) + i: f"host{host}" for i in range(size)})
        for rf in range(1, min(len(racks), 4) + 1):
            for start in (0, 1, 5):
                for replicas in assign_replicas(racks, 12, rf, start).values():
                    hosts = [racks[b] for b in replicas]
                    assert len(set(replicas)) == rf
                    assert len(set(hosts)) == min(rf, len(sizes)), (sizes, rf, replicas)
