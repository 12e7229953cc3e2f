"""broker.rack on a ZooKeeper cluster: brokers register their rack, Metadata reports it, and a
topic created without an explicit assignment gets Kafka's rack-aware placement (each
partition's replicas in different racks)."""

from __future__ import annotations

from pathlib import Path

from broker.zk_process import ZooKeeperProcess
from tests.cluster.cluster import Cluster, create_topic


def test_rack_aware_placement(zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    cluster = Cluster(zookeeper, tmp_path, size=4)
    racks = {0: "east", 1: "east", 2: "west", 3: "west"}
    for b in cluster.brokers:
        b.settings["broker.rack"] = racks[b.broker_id]
    cluster.start()
    try:
        create_topic(cluster, "spread", 8, rf=2)
        admin = cluster.admin()  # must outlive its futures
        nodes = admin.describe_cluster().result(20).nodes
        assert {n.id: n.rack for n in nodes} == racks
        md = admin.list_topics("spread", timeout=10)
        placement = {p: list(pm.replicas) for p, pm in md.topics["spread"].partitions.items()}
        for replicas in placement.values():
            assert {racks[b] for b in replicas} == {"east", "west"}, placement
        assert sorted(r[0] for r in placement.values()) == [0, 0, 1, 1, 2, 2, 3, 3]
    finally:
        cluster.close()
