"""CreateTopics answers before the new partitions' logs exist (broker/replication/replica_manager.py
creates them in the background, as Kafka's broker does after its controller committed the
topic), and no request may tell: right after the answer every partition is served (raw
requests, which never retry), DescribeLogDirs lists every one, a write to the last one
lands, and a broker stopped before it created them all has them after its restart."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.protocol.records import build_batch
from tests.protocol.wire import WireClient
from tests.support.broker import BrokerProcess

TIMEOUT = 30
PARTITIONS = 2000  # enough that creating their logs takes a while after the answer
PRODUCE, LIST_OFFSETS, DESCRIBE_LOG_DIRS = 0, 2, 35


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)],
                        operation_timeout=TIMEOUT)[topic].result(TIMEOUT)


def _end_offsets(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
    """partition -> (error code, latest offset), one ListOffsets v5 request."""
    with WireClient(bootstrap, timeout=TIMEOUT) as w:
        resp = w.call(LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [
                {"partition_index": p, "current_leader_epoch": -1, "timestamp": -1}
                for p in partitions]}]})
    return {p.partition_index: (p.error_code, p.offset)
            for t in resp.topics for p in t.partitions}


def test_every_new_partition_is_served_right_after_create_topics(broker: BrokerProcess) -> None:
    topic = f"many-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap, topic, PARTITIONS)
    last = PARTITIONS - 1
    # A raw Produce to the last partition (created last), no retries: it lands at offset 0.
    with WireClient(broker.bootstrap, timeout=TIMEOUT) as w:
        resp = w.call(PRODUCE, 9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [
                {"index": last, "records": build_batch([(None, b"first", [], 0)])}]}]})
    answer = resp.responses[0].partition_responses[0]
    assert (answer.error_code, answer.base_offset) == (0, 0)
    # Every partition answers ListOffsets, and DescribeLogDirs lists every one.
    assert _end_offsets(broker.bootstrap, topic, list(range(PARTITIONS))) == {
        p: (0, 1 if p == last else 0) for p in range(PARTITIONS)}
    with WireClient(broker.bootstrap, timeout=TIMEOUT) as w:
        dirs = w.call(DESCRIBE_LOG_DIRS, 1, {"topics": None}).results
    listed = {p.partition_index for d in dirs for t in d.topics if t.name == topic
              for p in t.partitions}
    assert listed == set(range(PARTITIONS))
    # And a real client reads the record back.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, last, 0)])
        msg = c.poll(TIMEOUT)
        assert msg is not None and msg.error() is None and msg.value() == b"first"
    finally:
        c.close()


def test_partitions_not_created_before_a_restart_are_there_after_it(
        broker: BrokerProcess) -> None:
    topic = f"many-{uuid.uuid4().hex[:8]}"
    _create(broker.bootstrap, topic, PARTITIONS)
    assert broker.stop() == 0  # at once: their logs may still be in the making
    broker.start()
    assert _end_offsets(broker.bootstrap, topic, list(range(PARTITIONS))) == {
        p: (0, 0) for p in range(PARTITIONS)}
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    delivered: list[object] = []
    for part in (0, PARTITIONS // 2, PARTITIONS - 1):
        p.produce(topic, b"v", partition=part, on_delivery=lambda err, _m: delivered.append(err))
    assert p.flush(TIMEOUT) == 0
    assert delivered == [None, None, None]
