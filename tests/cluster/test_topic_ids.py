"""Topic ids in a cluster: one id per topic, the same in ZooKeeper (as Kafka writes it), on
every broker and in every replica's partition.metadata; a new id when the name is reused."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kazoo.client import KazooClient

from samsa.protocol.errors import ErrorCode
from samsa.protocol.uuids import kafka_uuid_string
from tests.cluster.cluster import Cluster, create_topic, wait_until
from tests.protocol.wire import WireClient


def _ids(cluster: Cluster, topic: str) -> dict[int, uuid.UUID]:
    """The topic's id as every running broker answers it, once each knows the topic (a broker
    learns a new topic from a ZooKeeper watch a moment after it was created elsewhere)."""
    out: dict[int, uuid.UUID] = {}

    def every_broker_knows() -> bool:
        for b in cluster.brokers:
            if b.is_running():
                with WireClient(b.bootstrap) as w:
                    t = w.call(3, 12, {"topics": [{"name": topic}],
                                       "allow_auto_topic_creation": False}).topics[0]
                if t.error_code != 0:
                    return False
                out[b.broker_id] = t.topic_id
        return True

    wait_until(every_broker_knows, 20, f"every broker knowing {topic}")
    return out


def _partition_metadata(d: Path) -> str:
    return (d / "partition.metadata").read_text()


def test_topic_id_is_kafkas_everywhere_and_new_for_a_reused_name(zookeeper, tmp_path):
    cluster = Cluster(zookeeper, tmp_path, size=2).start()
    try:
        topic = "ids"
        create_topic(cluster, topic, 2, rf=2)
        ids = _ids(cluster, topic)
        first = ids[0]
        assert ids == {0: first, 1: first} and first != uuid.UUID(int=0)
        zk = KazooClient(hosts=f"{zookeeper.connect_string}/{cluster.chroot}")
        zk.start(timeout=10)
        try:
            doc = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
        finally:
            zk.stop()
            zk.close()
        assert doc["version"] == 3 and doc["topic_id"] == kafka_uuid_string(first)
        for b in cluster.brokers:
            for p in (0, 1):
                assert _partition_metadata(b.data_dir / f"{topic}-{p}") == (
                    f"version: 0\ntopic_id: {kafka_uuid_string(first)}")

        # Partition 1 is led by broker 1; it keeps its replica on disk while the topic is
        # deleted (it is down), and leads partition 1 of the new topic of the same name.
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(3):
            p.produce(topic, b"old-%d" % i, partition=1)
        assert p.flush(20) == 0
        cluster.broker(1).stop()
        admin = cluster.admin()
        admin.delete_topics([topic])[topic].result(timeout=20)
        cluster.broker(1).start()
        wait_until(lambda: cluster.every_broker_sees({0, 1}), 20, "broker 1 back")
        create_topic(cluster, topic, 2, rf=2)
        ids = _ids(cluster, topic)
        second = ids[0]
        assert ids == {0: second, 1: second} and second != first
        assert _partition_metadata(cluster.broker(1).data_dir / f"{topic}-1") == (
            f"version: 0\ntopic_id: {kafka_uuid_string(second)}")
        assert cluster.leaders(topic)[1] == 1
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g",
                      "enable.auto.commit": False})
        try:
            low, high = c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10)
        finally:
            c.close()
        assert (low, high) == (0, 0)  # nothing of the old topic

        # Fetch v16 by id: the old id is unknown everywhere; a broker that does not lead the
        # partition names its leader and the leader's endpoint (KIP-951).
        def fetch(broker: int, topic_id: uuid.UUID):
            with WireClient(cluster.broker(broker).bootstrap) as w:
                return w.call(1, 16, {
                    "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                    "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
                    "rack_id": "", "topics": [{"topic_id": topic_id, "partitions": [
                        {"partition": 1, "current_leader_epoch": -1, "fetch_offset": 0,
                         "last_fetched_epoch": -1, "log_start_offset": -1,
                         "partition_max_bytes": 1 << 20}]}]})

        for broker in (0, 1):
            stale = fetch(broker, first).responses[0].partitions[0]
            assert stale.error_code == ErrorCode.unknown_topic_id
        hinted = fetch(0, second)
        part = hinted.responses[0].partitions[0]
        assert part.error_code == ErrorCode.not_leader_or_follower
        assert part.current_leader.leader_id == 1 and part.current_leader.leader_epoch >= 0
        b1 = cluster.broker(1)
        assert [(e.node_id, f"{e.host}:{e.port}") for e in hinted.node_endpoints] == [
            (1, b1.bootstrap)]

        # The id outlives a restart, and the restarted broker's replicas keep it.
        cluster.broker(0).restart()
        wait_until(lambda: cluster.every_broker_sees({0, 1}), 20, "broker 0 back")
        assert _ids(cluster, topic) == {0: second, 1: second}
        for p in (0, 1):
            assert _partition_metadata(cluster.broker(0).data_dir / f"{topic}-{p}") == (
                f"version: 0\ntopic_id: {kafka_uuid_string(second)}")
    finally:
        cluster.close()


async def test_a_topic_znode_without_an_id_gets_one(zookeeper):
    """A topic written to ZooKeeper without a topic id (as Kafka before 2.8 wrote it) gets
    one, written back in Kafka's format, and every broker reads the same."""
    import asyncio

    from samsa.broker.cluster.metadata_store import BrokerInfo
    from samsa.broker.cluster.zk.store import ZkMetadataStore

    chroot = f"ids{uuid.uuid4().hex[:8]}"
    connect = f"{zookeeper.connect_string}/{chroot}"
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start(timeout=10)
    znode = f"/{chroot}/brokers/topics/legacy"
    try:
        zk.create(f"{znode}/partitions/0/state", json.dumps(
            {"controller_epoch": 1, "leader": 1, "leader_epoch": 0, "version": 1,
             "isr": [1]}).encode(), makepath=True)
        zk.set(znode, json.dumps({"version": 1, "partitions": {"0": [1]}}).encode())
        stores = [ZkMetadataStore(connect, BrokerInfo(i, "127.0.0.1", 9000 + i),
                                  session_timeout_ms=4000) for i in (1, 2)]
        for s in stores:
            await s.start()
        try:
            for _ in range(100):
                if all(s.topic("legacy") is not None for s in stores):
                    break
                await asyncio.sleep(0.05)
            a, b = (s.topic("legacy") for s in stores)
            assert a is not None and b is not None and a.topic_id == b.topic_id
            doc = json.loads(zk.get(znode)[0])
            assert doc["version"] == 3 and doc["topic_id"] == kafka_uuid_string(a.topic_id)
            assert stores[0].topic_name_by_id(a.topic_id) == "legacy"
        finally:
            for s in stores:
                await s.close()
    finally:
        zk.stop()
        zk.close()
