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


GROUP = 32


async def test_kafkas_broker_properties_are_accepted_where_kafka_accepts_them(handlers):
    """librdkafka's admin test sets sasl.kerberos.min.time.before.relogin on a broker, as
    Kafka allows (per broker only): accepted without effect, described; at the cluster
    default level refused as Kafka refuses it."""
    key = "sasl.kerberos.min.time.before.relogin"
    r = await handlers.call("AlterConfigs", 1, {"resources": [{
        "resource_type": BROKER, "resource_name": "0",
        "configs": [{"name": key, "value": "58000"}]}], "validate_only": False})
    assert (r.responses[0].error_code, r.responses[0].error_message) == (ErrorCode.none, None)
    assert (await _incremental(handlers, BROKER, "0", [(key, SET, "59000")])
            ).error_code == ErrorCode.none
    described = await _describe(handlers, BROKER, "0", [key])
    assert [(c.name, c.value, c.config_source) for c in described.configs] == [
        (key, "59000", 2)]  # DYNAMIC_BROKER_CONFIG
    default = await _incremental(handlers, BROKER, "", [(key, SET, "59000")])
    assert default.error_code == ErrorCode.invalid_request
    assert "broker id must be specified" in default.error_message


async def test_share_group_configs_kafka_accepts(handlers):
    """franz-go's share-group tests set share.record.lock.duration.ms (and
    share.auto.offset.reset) on a GROUP resource: Kafka 4.4's group configs are accepted within
    the broker's group.share.min/max bounds and described; outside them INVALID_CONFIG."""
    ops = [("share.auto.offset.reset", SET, "earliest"),
           ("share.record.lock.duration.ms", SET, "15000"),
           ("share.delivery.count.limit", SET, "3"),
           ("streams.num.standby.replicas", SET, "1")]
    r = await _incremental(handlers, GROUP, "g1", ops)
    assert (r.error_code, r.error_message) == (ErrorCode.none, None)
    described = await _describe(handlers, GROUP, "g1", [n for n, _, _ in ops])
    assert {c.name: c.value for c in described.configs} == {n: v for n, _, v in ops}
    low = await _incremental(handlers, GROUP, "g1", [("share.record.lock.duration.ms", SET,
                                                      "14999")])
    assert low.error_code == ErrorCode.invalid_config
    assert "group.share.min.record.lock.duration.ms" in low.error_message


async def test_describe_refusals_carry_kafkas_messages(handlers):
    """Each resource DescribeConfigs cannot describe answers its own error and Kafka's message,
    beside the others described."""
    client_metrics, unknown_type = 16, 99
    cases = [(TOPIC, "nope"), (BROKER, "x"), (BROKER, "7"), (GROUP, ""), (client_metrics, ""),
             (unknown_type, "r"), (BROKER, "")]
    r = await handlers.call("DescribeConfigs", 4, {"resources": [
        {"resource_type": t, "resource_name": n, "configuration_keys": ["x"]} for t, n in cases],
        "include_synonyms": False, "include_documentation": False})
    assert [(x.error_code, x.error_message, list(x.configs)) for x in r.results] == [
        (ErrorCode.unknown_topic_or_partition, "Topic nope does not exist", []),
        (ErrorCode.invalid_request, "Broker id must be an integer, but it is: x", []),
        (ErrorCode.invalid_request,
         "Unexpected broker id, expected 0 or empty string, but received 7", []),
        (ErrorCode.invalid_request, "Group name must not be empty", []),
        (ErrorCode.invalid_request, "Client metrics subscription name must not be empty", []),
        (ErrorCode.invalid_request, "Unknown resource", []),
        (ErrorCode.none, None, []),
    ]
