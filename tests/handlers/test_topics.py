"""CreateTopics (19), DeleteTopics (20), CreatePartitions (37): topic lifecycle through the
topic admin; each topic answers for itself."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE


def _create(name: str, partitions: int = 1, replication_factor: int = 1, **extra: object):
    topic = {"name": name, "num_partitions": partitions,
             "replication_factor": replication_factor, "assignments": [], "configs": []}
    return {"topics": [topic], "timeout": 5000, **extra}


async def test_create_topics_answers_partitions_and_configs(handlers):
    r = await handlers.call("CreateTopics", 7, _create("t", 4))
    t = r.topics[0]
    assert (t.error_code, t.num_partitions, t.replication_factor) == (ErrorCode.none, 4, 1)
    assert {c.name: c.value for c in t.configs}["cleanup.policy"] == "delete"
    assert len(handlers.broker.store.topic("t").partitions) == 4


async def test_create_existing_topic(handlers):
    await handlers.call("CreateTopics", 7, _create("t"))
    r = await handlers.call("CreateTopics", 7, _create("t"))
    assert r.topics[0].error_code == ErrorCode.topic_already_exists


async def test_create_validate_only_creates_nothing(handlers):
    r = await handlers.call("CreateTopics", 7, _create("t", 2, validate_only=True))
    assert r.topics[0].error_code == ErrorCode.none
    assert handlers.broker.store.topic("t") is None


async def test_create_with_invalid_arguments(handlers):
    too_many = await handlers.call("CreateTopics", 7, _create("t", 1, replication_factor=3))
    bad_name = await handlers.call("CreateTopics", 7, _create("a/b"))
    no_partitions = await handlers.call("CreateTopics", 7, _create("z", 0))
    assert too_many.topics[0].error_code == ErrorCode.invalid_replication_factor
    assert bad_name.topics[0].error_code == ErrorCode.invalid_topic_exception
    assert no_partitions.topics[0].error_code == ErrorCode.invalid_partitions


async def test_create_with_an_unknown_config(handlers):
    body = _create("t")
    body["topics"][0]["configs"] = [{"name": "no.such.config", "value": "1"}]
    r = await handlers.call("CreateTopics", 7, body)
    assert r.topics[0].error_code == ErrorCode.invalid_config


async def test_delete_topics(handlers):
    await handlers.create_topic("t")
    r = await handlers.call("DeleteTopics", 6, {"topics": [{"name": "t"}, {"name": "nope"}],
                                                "timeout": 5000})
    codes = {x.name: x.error_code for x in r.responses}
    assert codes == {"t": ErrorCode.none, "nope": ErrorCode.unknown_topic_or_partition}
    assert handlers.broker.store.topic("t") is None


async def test_create_partitions(handlers):
    await handlers.create_topic("t", 2)
    grow = await handlers.call("CreatePartitions", 3, {
        "topics": [{"name": "t", "count": 5, "assignments": None}], "timeout": 5000,
        "validate_only": False})
    shrink = await handlers.call("CreatePartitions", 3, {
        "topics": [{"name": "t", "count": 1, "assignments": None}], "timeout": 5000,
        "validate_only": False})
    missing = await handlers.call("CreatePartitions", 3, {
        "topics": [{"name": "nope", "count": 3, "assignments": None}], "timeout": 5000,
        "validate_only": False})
    assert grow.results[0].error_code == ErrorCode.none
    assert len(handlers.broker.store.topic("t").partitions) == 5
    assert shrink.results[0].error_code == ErrorCode.invalid_partitions
    assert missing.results[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_authorization_failed(secured):
    create = await secured.call("CreateTopics", 7, _create("t"), principal=ALICE)
    await secured.create_topic("mine")
    delete = await secured.call("DeleteTopics", 6, {"topics": [{"name": "mine"}],
                                                    "timeout": 5000}, principal=ALICE)
    assert create.topics[0].error_code == ErrorCode.topic_authorization_failed
    assert delete.responses[0].error_code == ErrorCode.topic_authorization_failed
    assert secured.broker.store.topic("mine") is not None
