"""Metadata (3): the brokers, the controller and each topic's partitions; an unknown topic is
created when auto-creation is allowed (by the request and auto.create.topics.enable)."""

from __future__ import annotations

import uuid

from samsa.protocol.errors import ErrorCode
from samsa.protocol.uuids import kafka_uuid_string

from .harness import ALICE


async def test_all_topics_with_their_partitions_and_this_broker(handlers):
    await handlers.create_topic("t", 3)
    r = await handlers.call("Metadata", 12, {"topics": None,
                                             "allow_auto_topic_creation": False})
    assert [(b.node_id, b.host, b.port) for b in r.brokers] == [(0, "127.0.0.1", 9092)]
    assert r.controller_id == 0
    (t,) = [t for t in r.topics if t.name == "t"]
    assert t.error_code == ErrorCode.none and not t.is_internal
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes)
            for p in sorted(t.partitions, key=lambda p: p.partition_index)] == [
        (i, 0, (0,), (0,)) for i in range(3)]


async def test_unknown_topic_without_auto_creation(handlers):
    r = await handlers.call("Metadata", 12, {"topics": [{"name": "nope"}],
                                             "allow_auto_topic_creation": False})
    assert r.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert handlers.broker.store.topic("nope") is None


async def test_unknown_topic_is_created_when_allowed(handlers):
    r = await handlers.call("Metadata", 12, {"topics": [{"name": "auto"}],
                                             "allow_auto_topic_creation": True})
    assert r.topics[0].error_code in (ErrorCode.none, ErrorCode.leader_not_available)
    assert handlers.broker.store.topic("auto") is not None


async def test_topic_by_id_from_v10(handlers):
    created = await handlers.create_topic("t")
    r = await handlers.call("Metadata", 12, {"topics": [{"topic_id": created.topic_id,
                                                         "name": None}]})
    unknown = await handlers.call("Metadata", 12, {"topics": [{"topic_id": uuid.uuid4(),
                                                               "name": None}]})
    assert (r.topics[0].name, r.topics[0].error_code) == ("t", ErrorCode.none)
    assert unknown.topics[0].error_code == ErrorCode.unknown_topic_id


async def test_topic_and_cluster_ids_have_no_dash_as_kafka_draws_them(handlers):
    """Kafka 4.4's Uuid.randomUuid draws no id whose text has a '-' in it: one starting with it
    reads as an option to the tools (kafka-topics --topic-id, kafka-storage format -t). About
    29 % of uniformly drawn ids have one, so 40 topics would show it."""
    for i in range(40):
        await handlers.create_topic(f"t{i}")
    r = await handlers.call("Metadata", 12, {"topics": None})
    ids = [kafka_uuid_string(t.topic_id) for t in r.topics]
    assert len(ids) == 40 and [i for i in ids if "-" in i] == []
    assert "-" not in r.cluster_id


async def test_topic_authorization_failed(secured):
    await secured.create_topic("t")
    r = await secured.call("Metadata", 12, {"topics": [{"name": "t"}],
                                            "allow_auto_topic_creation": False},
                           principal=ALICE)
    everything = await secured.call("Metadata", 12, {"topics": None}, principal=ALICE)
    assert r.topics[0].error_code == ErrorCode.topic_authorization_failed
    assert [t.name for t in everything.topics] == []  # unauthorized topics are left out
