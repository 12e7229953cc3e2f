"""broker.rack on a ZooKeeper cluster: brokers register their rack, Metadata reports it, a
topic created without an explicit assignment gets Kafka's rack-aware placement (each
partition's replicas in different racks), and with the rack-aware replica selector a consumer
with client.rack reads from the in-sync follower in its rack (KIP-392)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster, create_topic, wait_until
from tests.observability.test_txn_metrics import scrape
from tests.protocol.wire import WireClient
from tests.support.broker import free_port

BYTES_OUT = "kafka_server_brokertopicmetrics_bytesoutpersec_total"


def _bytes_out(port: int, topic: str) -> float:
    return sum(v for k, v in scrape(port).items()
               if k.startswith(BYTES_OUT + "{") and f'topic="{topic}"' in k)


def test_rack_aware_placement_and_follower_fetching(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    cluster = Cluster(zookeeper, tmp_path, size=4, **{
        "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"})
    racks = {0: "east", 1: "east", 2: "west", 3: "west"}
    ports = {}
    for b in cluster.brokers:
        b.settings["broker.rack"] = racks[b.broker_id]
        ports[b.broker_id] = b.settings["metrics.port"] = free_port()
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

        # "near": led by broker 0 (east), its follower broker 2 in the west
        admin.create_topics([NewTopic("near", 1, replica_assignment=[[0, 2]])])["near"].result(20)
        wait_until(lambda: cluster.has_leaders("near", 1), 20, "a leader")
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(50):
            p.produce("near", b"v%d" % i, partition=0)
        assert p.flush(20) == 0
        wait_until(lambda: cluster.isr("near")[0] == [0, 2], 10, "broker 2 in sync")

        fetch = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                 "isolation_level": 1, "session_id": 0, "session_epoch": -1,
                 "forgotten_topics_data": [], "topics": [{"topic": "near", "partitions": [
                     {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                      "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
        with WireClient(cluster.broker(0).bootstrap) as w:
            west = w.call(1, 11, {**fetch, "rack_id": "west"}).responses[0].partitions[0]
            east = w.call(1, 11, {**fetch, "rack_id": "east"}).responses[0].partitions[0]
        assert (west.error_code, west.preferred_read_replica, west.records) == (0, 2, b"")
        assert east.preferred_read_replica == -1 and east.records
        leader_sent = _bytes_out(ports[0], "near")  # the east fetch's records
        assert leader_sent > 0

        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "west",
                      "client.rack": "west", "enable.auto.commit": False})
        try:
            c.assign([TopicPartition("near", 0, 0)])
            got: list[bytes] = []
            for _ in range(100):
                got += [m.value() for m in c.consume(100, timeout=0.2) if m.error() is None]
                if len(got) >= 50:
                    break
        finally:
            c.close()
        assert got == [b"v%d" % i for i in range(50)]
        # served by the follower: consumer bytes out of "near" counted on broker 2, none more
        # on the leader (follower fetches are not counted there)
        assert _bytes_out(ports[2], "near") > 0
        assert _bytes_out(ports[0], "near") == leader_sent
    finally:
        cluster.close()
