"""Behaviour found to differ from Apache Kafka by client libraries' own test suites.

- OffsetCommit / TxnOffsetCommit to a topic or partition that does not exist: each such
  partition is answered UNKNOWN_TOPIC_OR_PARTITION and nothing is committed (KafkaApis)
"""

from __future__ import annotations

import time

import pytest

from tests.protocol.wire import WireClient

from .pyclients import OP_TIMEOUT, create_topic, unique_name

pytestmark = pytest.mark.timeout(120)

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, TXN_OFFSET_COMMIT = 8, 9, 10, 28
UNKNOWN_TOPIC_OR_PARTITION = 3


def _coordinator_ready(c: WireClient, group: str) -> None:
    """FindCoordinator until the group's coordinator is loaded (the one broker)."""
    deadline = time.monotonic() + OP_TIMEOUT
    while True:
        resp = c.call(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        if resp.error_code == 0 or time.monotonic() > deadline:
            assert resp.error_code == 0, resp
            return
        time.sleep(0.1)


def _errors(resp) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code
            for t in resp.topics for p in t.partitions}


def test_offset_commit_to_missing_topic_or_partition(shared_broker):
    topic, missing = unique_name("compat-oc"), unique_name("compat-missing")
    group = unique_name("compat-oc-group")
    create_topic("confluent-kafka", shared_broker.bootstrap, topic, 1)
    with WireClient(shared_broker.bootstrap) as c:
        _coordinator_ready(c, group)
        resp = c.call(OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [
                {"name": topic, "partitions": [
                    {"partition_index": i, "committed_offset": 5,
                     "committed_leader_epoch": -1, "committed_metadata": ""}
                    for i in (0, 7)]},
                {"name": missing, "partitions": [
                    {"partition_index": 0, "committed_offset": 5,
                     "committed_leader_epoch": -1, "committed_metadata": ""}]},
            ]})
        assert _errors(resp) == {(topic, 0): 0, (topic, 7): UNKNOWN_TOPIC_OR_PARTITION,
                                 (missing, 0): UNKNOWN_TOPIC_OR_PARTITION}
        fetched = c.call(OFFSET_FETCH, 7, {"group_id": group, "topics": None,
                                          "require_stable": False})
    committed = {(t.name, p.partition_index): p.committed_offset
                 for t in fetched.topics for p in t.partitions}
    assert committed == {(topic, 0): 5}


def test_txn_offset_commit_to_missing_topic(shared_broker):
    missing = unique_name("compat-missing")
    with WireClient(shared_broker.bootstrap) as c:
        resp = c.call(TXN_OFFSET_COMMIT, 3, {
            "transactional_id": unique_name("compat-txn"), "group_id": unique_name("g"),
            "producer_id": 0, "producer_epoch": 0, "generation_id": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": missing, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
    assert _errors(resp) == {(missing, 0): UNKNOWN_TOPIC_OR_PARTITION}


def test_admin_alter_group_offsets_of_missing_topic(shared_broker):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    group, missing = unique_name("compat-alter"), unique_name("compat-missing")
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(missing, 0, 3)])
    (future,) = admin.alter_consumer_group_offsets([request]).values()
    with pytest.raises(Exception) as info:
        result = future.result(timeout=OP_TIMEOUT)
        errors = [tp.error for tp in result.topic_partitions if tp.error is not None]
        raise RuntimeError(errors) if errors else AssertionError("no error reported")
    text = str(info.value)
    assert "UNKNOWN_TOPIC_OR_PART" in text or str(KafkaError.UNKNOWN_TOPIC_OR_PART) in text, text
