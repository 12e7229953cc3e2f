"""DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44): topic and broker
configs with their sources; each resource answers for itself."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5


async def _describe(h, rtype: int, name: str, keys: list[str] | None = None, **kw):
    r = await h.call("DescribeConfigs", 4, {"resources": [{
        "resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": False, "include_documentation": False}, **kw)
    return r.results[0]


async def _incremental(h, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
                       **kw):
    r = await h.call("IncrementalAlterConfigs", 1, {"resources": [{
        "resource_type": rtype, "resource_name": name, "configs": [
            {"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
        "validate_only": False}, **kw)
    return r.responses[0]


async def test_describe_a_topics_configs_with_their_sources(handlers):
    await handlers.create_topic("t", configs={"retention.ms": "1000"})
    r = await _describe(handlers, TOPIC, "t", ["retention.ms", "cleanup.policy"])
    configs = {c.name: (c.value, c.config_source) for c in r.configs}
    assert r.error_code == ErrorCode.none
    assert configs == {"retention.ms": ("1000", DYNAMIC_TOPIC_CONFIG),
                       "cleanup.policy": ("delete", DEFAULT_CONFIG)}


async def test_describe_unknown_topic_and_broker(handlers):
    topic = await _describe(handlers, TOPIC, "nope")
    broker = await _describe(handlers, BROKER, "7")
    assert topic.error_code == ErrorCode.unknown_topic_or_partition
    assert broker.error_code == ErrorCode.invalid_request


async def test_incremental_set_and_delete(handlers):
    await handlers.create_topic("t")
    assert (await _incremental(handlers, TOPIC, "t", [("retention.ms", SET, "5000")])
            ).error_code == ErrorCode.none
    assert {c.name: c.value for c in (await _describe(handlers, TOPIC, "t", ["retention.ms"])
                                      ).configs} == {"retention.ms": "5000"}
    await _incremental(handlers, TOPIC, "t", [("retention.ms", DELETE, None)])
    assert [c.config_source for c in (await _describe(handlers, TOPIC, "t", ["retention.ms"])
                                      ).configs] == [DEFAULT_CONFIG]


async def test_incremental_with_an_invalid_value_or_name(handlers):
    await handlers.create_topic("t")
    bad_value = await _incremental(handlers, TOPIC, "t", [("retention.ms", SET, "soon")])
    bad_name = await _incremental(handlers, TOPIC, "t", [("no.such.config", SET, "1")])
    assert bad_value.error_code == ErrorCode.invalid_config
    assert bad_name.error_code == ErrorCode.invalid_config


async def test_alter_configs_replaces_the_whole_set(handlers):
    await handlers.create_topic("t", configs={"retention.ms": "1000"})
    r = await handlers.call("AlterConfigs", 1, {"resources": [{
        "resource_type": TOPIC, "resource_name": "t",
        "configs": [{"name": "segment.ms", "value": "60000"}]}], "validate_only": False})
    configs = {c.name: c.config_source for c in (await _describe(
        handlers, TOPIC, "t", ["retention.ms", "segment.ms"])).configs}
    assert r.responses[0].error_code == ErrorCode.none
    assert configs == {"retention.ms": DEFAULT_CONFIG, "segment.ms": DYNAMIC_TOPIC_CONFIG}


async def test_authorization_failed(secured):
    await secured.create_topic("t")
    topic = await _describe(secured, TOPIC, "t", principal=ALICE)
    broker = await _incremental(secured, BROKER, "", [("log.cleaner.backoff.ms", SET, "1")],
                                principal=ALICE)
    assert topic.error_code == ErrorCode.topic_authorization_failed
    assert broker.error_code == ErrorCode.cluster_authorization_failed
