"""Broker/topic config: Kafka's names and defaults, precedence, loading, validation, describe."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from samsa.config import (
    BROKER_PROPERTIES,
    TOPIC_PROPERTIES,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    InvalidConfigError,
    describe_broker_config,
    describe_topic_config,
    load_config,
    topic_defaults,
    validate_topic_configs,
)
from samsa.config.loader import DEFAULT_CONFIG_FILE
from samsa.config.schema import INTERNAL_BROKER_CONFIGS, java_double_str

LONG_MAX = 9223372036854775807


# --- defaults equal Kafka's ------------------------------------------------------------------

@pytest.mark.parametrize(
    "name, expected",
    [
        ("num.partitions", 1),
        ("default.replication.factor", 1),
        ("message.max.bytes", 1048588),
        ("socket.request.max.bytes", 104857600),
        ("log.segment.bytes", 1073741824),
        ("log.roll.hours", 168),
        ("log.retention.hours", 168),
        ("log.retention.ms", None),
        ("log.retention.bytes", -1),
        ("log.retention.check.interval.ms", 300000),
        ("log.cleanup.policy", ["delete"]),
        ("log.cleaner.enable", True),
        ("log.cleaner.backoff.ms", 15000),
        ("log.cleaner.min.cleanable.ratio", 0.5),
        ("log.cleaner.delete.retention.ms", 86400000),
        ("log.flush.interval.messages", LONG_MAX),
        ("log.flush.interval.ms", None),
        ("log.flush.scheduler.interval.ms", LONG_MAX),
        ("log.flush.offset.checkpoint.interval.ms", 60000),
        ("log.index.interval.bytes", 4096),
        ("log.index.size.max.bytes", 10485760),
        ("log.message.timestamp.type", "CreateTime"),
        ("log.segment.delete.delay.ms", 60000),
        ("compression.type", "producer"),
        ("min.insync.replicas", 1),
        ("unclean.leader.election.enable", False),
        ("offsets.topic.num.partitions", 50),
        ("offsets.topic.replication.factor", 3),
        ("offsets.topic.segment.bytes", 104857600),
        ("offsets.retention.minutes", 10080),
        ("offsets.retention.check.interval.ms", 600000),
        ("offsets.commit.timeout.ms", 5000),
        ("group.initial.rebalance.delay.ms", 3000),
        ("group.min.session.timeout.ms", 6000),
        ("group.max.session.timeout.ms", 1800000),
        ("group.max.size", 2147483647),
        ("transaction.state.log.num.partitions", 50),
        ("transaction.state.log.replication.factor", 3),
        ("transaction.state.log.min.isr", 2),
        ("transaction.max.timeout.ms", 900000),
        ("transactional.id.expiration.ms", 604800000),
        ("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000),
        ("transaction.remove.expired.transaction.cleanup.interval.ms", 3600000),
        ("producer.id.expiration.ms", 86400000),
        ("producer.id.expiration.check.interval.ms", 600000),
        ("replica.lag.time.max.ms", 30000),
        ("replica.fetch.max.bytes", 1048576),
        ("replica.fetch.wait.max.ms", 500),
        ("zookeeper.connect", None),
        ("zookeeper.session.timeout.ms", 18000),
        ("auto.create.topics.enable", True),
        ("delete.topic.enable", True),
        ("controlled.shutdown.enable", True),
        ("metrics.port", None),
        ("samsa.log.level", "INFO"),
    ],
)
def test_defaults_match_kafka(name: str, expected: object) -> None:
    cfg = BrokerConfig()
    assert cfg[name] == expected
    assert cfg.source(name) == "DEFAULT_CONFIG"
    assert cfg.is_default(name)


def test_samsa_specific_defaults_record_kafkas() -> None:
    cfg = BrokerConfig()
    assert (cfg.listen_host, cfg.listen_port) == ("127.0.0.1", 9092)
    assert cfg.data_dir == Path("./data")
    assert cfg.broker_id == 0 and cfg["broker.id"] == 0
    assert BROKER_PROPERTIES["listeners"].kafka_default == "PLAINTEXT://:9092"
    assert BROKER_PROPERTIES["node.id"].kafka_default == -1
    assert cfg["socket.send.buffer.bytes"] == -1  # the OS sizes it: one write per 1 MiB answer
    assert BROKER_PROPERTIES["socket.send.buffer.bytes"].kafka_default == 102400
    assert not BROKER_PROPERTIES["num.partitions"].differs_from_kafka


def test_types_follow_kafka() -> None:
    assert BROKER_PROPERTIES["log.segment.bytes"].type is ConfigType.INT
    assert BROKER_PROPERTIES["log.retention.ms"].type is ConfigType.LONG
    assert BROKER_PROPERTIES["offsets.topic.replication.factor"].type is ConfigType.SHORT
    assert BROKER_PROPERTIES["log.cleanup.policy"].type is ConfigType.LIST
    assert BROKER_PROPERTIES["log.cleaner.min.cleanable.ratio"].type is ConfigType.DOUBLE


def test_topic_synonyms() -> None:
    pairs = {
        "log.segment.bytes": "segment.bytes",
        "log.retention.ms": "retention.ms",
        "log.roll.ms": "segment.ms",
        "log.cleanup.policy": "cleanup.policy",
        "message.max.bytes": "max.message.bytes",
        "log.message.timestamp.type": "message.timestamp.type",
        "log.flush.interval.messages": "flush.messages",
        "log.flush.interval.ms": "flush.ms",
        "log.index.interval.bytes": "index.interval.bytes",
        "log.index.size.max.bytes": "segment.index.bytes",
        "min.insync.replicas": "min.insync.replicas",
        "unclean.leader.election.enable": "unclean.leader.election.enable",
        "compression.type": "compression.type",
        "log.cleaner.delete.retention.ms": "delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
        "log.segment.delete.delay.ms": "file.delete.delay.ms",
        "log.retention.bytes": "retention.bytes",
    }
    for broker_name, topic_name in pairs.items():
        assert BROKER_PROPERTIES[broker_name].topic_synonym == topic_name
        assert topic_name in TOPIC_PROPERTIES


# --- derived precedences ---------------------------------------------------------------------

def test_retention_precedence_ms_minutes_hours() -> None:
    assert BrokerConfig().log_retention_ms == 168 * 3_600_000
    assert BrokerConfig({"log.retention.hours": 1}).log_retention_ms == 3_600_000
    both = {"log.retention.hours": 1, "log.retention.minutes": 5}
    assert BrokerConfig(both).log_retention_ms == 300_000
    assert BrokerConfig({**both, "log.retention.ms": 1234}).log_retention_ms == 1234
    # Any negative value means unlimited, as in Kafka.
    assert BrokerConfig({"log.retention.hours": -5}).log_retention_ms == -1


def test_roll_and_flush_precedence() -> None:
    assert BrokerConfig().log_roll_ms == 168 * 3_600_000
    assert BrokerConfig({"log.roll.hours": 2}).log_roll_ms == 7_200_000
    assert BrokerConfig({"log.roll.hours": 2, "log.roll.ms": 10}).log_roll_ms == 10
    assert BrokerConfig().log_flush_interval_ms == LONG_MAX
    assert BrokerConfig({"log.flush.scheduler.interval.ms": 7}).log_flush_interval_ms == 7
    cfg = BrokerConfig({"log.flush.scheduler.interval.ms": 7, "log.flush.interval.ms": 3})
    assert cfg.log_flush_interval_ms == 3


def test_topic_defaults_follow_broker() -> None:
    cfg = BrokerConfig({"log.retention.minutes": 2, "log.segment.bytes": 4096,
                        "log.cleanup.policy": "compact,delete",
                        "log.message.timestamp.type": "LogAppendTime"})
    d = topic_defaults(cfg)
    assert d["retention.ms"] == 120_000
    assert d["segment.bytes"] == 4096
    assert d["cleanup.policy"] == ["compact", "delete"]
    assert d["message.timestamp.type"] == "LogAppendTime"
    assert d["max.message.bytes"] == 1048588
    assert d["flush.ms"] == LONG_MAX
    assert d["remote.storage.enable"] is False  # no broker synonym: Kafka's LogConfig default
    assert set(d) == set(TOPIC_PROPERTIES)


def test_node_id_and_broker_id_follow_each_other() -> None:
    assert BrokerConfig({"broker.id": 3}).broker_id == 3
    assert BrokerConfig({"node.id": 4})["broker.id"] == 4
    with pytest.raises(ConfigError, match="node.id"):
        BrokerConfig({"node.id": 1, "broker.id": 2})


def test_authorizer_class_name_names_kafkas_acl_authorizer_or_nothing() -> None:
    assert BrokerConfig({})["authorizer.class.name"] == ""
    assert BrokerConfig({})["allow.everyone.if.no.acl.found"] is False
    for name in ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "kafka.security.authorizer.AclAuthorizer"):
        BrokerConfig({"authorizer.class.name": name, "super.users": "User:a;User:CN=b,O=c"})
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        BrokerConfig({"authorizer.class.name": "com.example.MyAuthorizer"})
    with pytest.raises(ConfigError, match="super.users"):
        BrokerConfig({"super.users": "admin"})


# --- loading ---------------------------------------------------------------------------------

def test_yaml_then_overrides(tmp_path: Path) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("log.segment.bytes: 1048576\nnum.partitions: 3\n"
                 "log.cleanup.policy: [compact, delete]\nauto.create.topics.enable: false\n")
    cfg = load_config(f, {"num.partitions": "7", "log.dirs": str(tmp_path / "d")})
    assert cfg["log.segment.bytes"] == 1048576
    assert cfg["num.partitions"] == 7
    assert cfg["log.cleanup.policy"] == ["compact", "delete"]
    assert cfg["auto.create.topics.enable"] is False
    assert cfg.data_dir == tmp_path / "d"
    assert cfg.source("num.partitions") == "STATIC_BROKER_CONFIG"
    assert cfg.source("log.retention.hours") == "DEFAULT_CONFIG"
    assert dict(cfg.items())["num.partitions"] == 7


def test_override_broker_id_beats_file_node_id(tmp_path: Path) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("node.id: 1\nbroker.id: 1\n")
    assert load_config(f, {"node.id": "5"}).broker_id == 5


def test_unknown_key_named(tmp_path: Path) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("log.segment.byte: 10\n")
    with pytest.raises(ConfigError) as e:
        load_config(f, {})
    assert e.value.key == "log.segment.byte"
    assert "log.segment.byte" in str(e.value) and "log.segment.bytes" in str(e.value)


@pytest.mark.parametrize(
    "key, value, expect",
    [
        ("num.partitions", "many", r"num\.partitions.*32-bit integer"),
        ("num.partitions", "0", r"num\.partitions.*at least 1"),
        ("log.segment.bytes", "13", r"log\.segment\.bytes.*at least 14"),
        ("log.segment.bytes", str(2**31), r"log\.segment\.bytes.*32-bit"),
        ("log.cleaner.enable", "yes", r"log\.cleaner\.enable.*true or false"),
        ("compression.type", "brotli", r"compression\.type.*one of"),
        ("log.cleanup.policy", "delete,shred", r"log\.cleanup\.policy.*compact, delete"),
        ("log.message.timestamp.type", "createtime", r"timestamp\.type.*CreateTime"),
        ("listeners", "PLAINTEXT://0.0.0.0:9092", r"listeners.*127"),
        ("listeners", "FOO://127.0.0.1:9093", r"listeners.*FOO.*protocol\.map"),
        ("listeners", "SSL://127.0.0.1:1,SSL://127.0.0.1:2", r"listeners.*SSL is repeated"),
        ("advertised.listeners", "SSL://h:9093", r"advertised\.listeners.*subset.*SSL is not"),
        ("inter.broker.listener.name", "SSL", r"inter\.broker\.listener\.name.*must be a "),
        ("listener.security.protocol.map", "PLAINTEXT:TLS", r"protocol\.map.*TLS"),
        ("log.dirs", "/a,/b,/a/", r"log\.dirs.*Duplicate log directory"),
        ("metrics.port", "70000", r"metrics\.port.*no more than 65535"),
    ],
)
def test_bad_value_names_key_and_expectation(key: str, value: str, expect: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, {key: value})
    assert e.value.key == key
    assert re.search(expect, str(e.value)), str(e.value)


def test_nested_yaml_rejected(tmp_path: Path) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("log:\n  dirs: /x\n")
    with pytest.raises(ConfigError, match="log"):
        load_config(f, {})


def test_shipped_yaml_lists_every_property_with_its_default() -> None:
    text = DEFAULT_CONFIG_FILE.read_text()
    lines = re.findall(r"^#?([a-z][a-zA-Z0-9._]+): (.*)$", text, re.M)
    assert {k for k, _ in lines} == set(BROKER_PROPERTIES)
    # Uncommenting everything yields the defaults (null = unset).
    tmp = {k: v for k, v in lines}
    cfg = load_config(None, {k: v for k, v in tmp.items() if v != "null"})
    shipped = load_config(DEFAULT_CONFIG_FILE, {})
    for name, default in BrokerConfig().items():
        if name == "log.dirs":  # shipped active as ./data: the same directory as log.dir's
            continue
        assert cfg[name] == default, name
        assert shipped[name] == default, name
    assert cfg.data_dir == shipped.data_dir == BrokerConfig().data_dir


def test_listen_localhost_and_port_zero() -> None:
    cfg = load_config(None, {"listeners": "PLAINTEXT://localhost:0"})
    assert (cfg.listen_host, cfg.listen_port) == ("127.0.0.1", 0)
    cfg = load_config(None, {"listeners": "PLAINTEXT://127.0.0.5:9100",
                             "advertised.listeners": "PLAINTEXT://127.0.0.5:9100"})
    assert cfg.advertised_listener.port == 9100


# --- topic validation ------------------------------------------------------------------------

def test_validate_topic_configs_parses() -> None:
    out = validate_topic_configs({"cleanup.policy": "compact", "retention.ms": "-1",
                                  "segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.1",
                                  "unclean.leader.election.enable": "TRUE",
                                  "compression.type": "lz4", "retention.bytes": None})
    assert out == {"cleanup.policy": ["compact"], "retention.ms": -1, "segment.bytes": 1048576,
                   "min.cleanable.dirty.ratio": 0.1, "unclean.leader.election.enable": True,
                   "compression.type": "lz4", "retention.bytes": None}


@pytest.mark.parametrize(
    "key, value",
    [
        ("cleanup.policy", "remove"),
        ("compression.type", "none"),
        ("message.timestamp.type", "NowTime"),
        ("segment.bytes", "13"),
        ("retention.ms", "-2"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("max.message.bytes", "x"),
        ("segment.ms", "0"),
        ("leader.replication.throttled.replicas", "0:1,bad"),
        ("remote.storage.enable", "true"),
        ("message.downconversion.enable", "true"),  # gone in Kafka 4
        ("no.such.config", "1"),
    ],
)
def test_validate_topic_configs_rejects(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError) as e:
        validate_topic_configs({key: value})
    assert e.value.key == key
    assert e.value.error_code == 40
    assert key in str(e.value)


def test_compaction_lag_conflict() -> None:
    with pytest.raises(InvalidConfigError, match="min.compaction.lag.ms"):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_topic_property_set_matches_kafka_log_config() -> None:
    expected = {
        "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
        "flush.messages", "flush.ms", "index.interval.bytes", "max.compaction.lag.ms",
        "max.message.bytes", "message.timestamp.type", "message.timestamp.before.max.ms",
        "message.timestamp.after.max.ms", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
        "min.insync.replicas", "preallocate", "retention.bytes", "retention.ms",
        "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
        "unclean.leader.election.enable",
    }
    assert expected <= set(TOPIC_PROPERTIES)


# --- describe --------------------------------------------------------------------------------

def _by_name(entries: list) -> dict:
    return {e.name: e for e in entries}


def test_describe_topic_defaults() -> None:
    e = _by_name(describe_topic_config("t", {}, BrokerConfig()))
    seg = e["segment.bytes"]
    assert (seg.value, seg.source, seg.config_type) == ("1073741824", 5, 3)
    assert [(s.name, s.value, s.source) for s in seg.synonyms] == [
        ("log.segment.bytes", "1073741824", 5)]
    assert e["cleanup.policy"].value == "delete" and e["cleanup.policy"].config_type == 7
    assert e["unclean.leader.election.enable"].value == "false"
    assert e["min.cleanable.dirty.ratio"].value == "0.5"
    assert e["flush.messages"].value == str(LONG_MAX)
    assert not seg.is_sensitive and not seg.read_only and seg.documentation
    # Kafka lists nothing for retention.ms by default: its only default-valued alias is
    # log.retention.hours, and Kafka drops the aliases listed before log.retention.ms itself.
    assert e["retention.ms"].value == "604800000" and e["retention.ms"].synonyms == []
    assert e["retention.ms"].source == ConfigSource.DEFAULT_CONFIG


def test_describe_topic_override_then_static_then_default() -> None:
    broker = BrokerConfig({"log.segment.bytes": "2048", "log.retention.ms": 5000})
    e = _by_name(describe_topic_config("t", {"segment.bytes": "1024"}, broker))
    seg = e["segment.bytes"]
    assert seg.value == "1024" and seg.source == ConfigSource.TOPIC_CONFIG
    assert [(s.name, s.value, s.source) for s in seg.synonyms] == [
        ("segment.bytes", "1024", 1),
        ("log.segment.bytes", "2048", 4),
        ("log.segment.bytes", "1073741824", 5),
    ]
    ret = e["retention.ms"]
    assert ret.value == "5000" and ret.source == ConfigSource.STATIC_BROKER_CONFIG
    assert [(s.name, s.source) for s in ret.synonyms] == [
        ("log.retention.ms", 4), ("log.retention.hours", 5)]


def test_describe_topic_dynamic_broker_value() -> None:
    broker = BrokerConfig({"log.retention.bytes": "10"}).with_dynamic(
        {"log.retention.bytes": "20"})
    assert broker.source("log.retention.bytes") == "DYNAMIC_BROKER_CONFIG"
    e = _by_name(describe_topic_config("t", {}, broker))["retention.bytes"]
    assert e.value == "20" and e.source == ConfigSource.DYNAMIC_BROKER_CONFIG
    assert [s.source for s in e.synonyms] == [2, 4, 5]


def test_describe_broker_config() -> None:
    broker = BrokerConfig({"num.partitions": 3, "log.retention.hours": 2})
    e = _by_name(describe_broker_config(broker))
    # Kafka's internal configs only where set (Kafka lists originals and non-internal values)
    assert set(e) == set(BROKER_PROPERTIES) - INTERNAL_BROKER_CONFIGS
    shown = _by_name(describe_broker_config(BrokerConfig({"unstable.feature.versions.enable":
                                                          True})))
    assert shown["unstable.feature.versions.enable"].value == "true"
    n = e["num.partitions"]
    assert (n.value, n.source, n.read_only, n.config_type) == ("3", 4, True, 3)
    assert [(s.name, s.value, s.source) for s in n.synonyms] == [
        ("num.partitions", "3", 4), ("num.partitions", "1", 5)]
    assert e["log.retention.ms"].value is None
    assert e["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG
    assert e["offsets.topic.replication.factor"].config_type == ConfigType.SHORT
    assert e["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"


def test_java_double_format() -> None:
    assert java_double_str(0.5) == "0.5"
    assert java_double_str(1.0) == "1.0"
    assert java_double_str(1e7) == "1.0E7"
    assert java_double_str(1.5e-5) == "1.5E-5"


def test_dynamic_layers_precedence_and_synonyms() -> None:
    broker = BrokerConfig({"log.retention.ms": 5000, "num.partitions": 2})
    broker.set_dynamic({"log.retention.bytes": "20"},
                       {"log.retention.bytes": "10", "log.retention.hours": "2"})
    assert broker["log.retention.bytes"] == 20
    assert broker.source("log.retention.bytes") == "DYNAMIC_BROKER_CONFIG"
    # a default-layer log.retention.hours hides the static log.retention.ms (Kafka's
    # overrideProps drops a dynamic value's synonyms from the layers below)
    assert broker["log.retention.ms"] is None
    assert broker.log_retention_ms == 2 * 3_600_000
    e = _by_name(describe_broker_config(broker, per_broker=False))
    assert set(e) == {"log.retention.bytes", "log.retention.hours"}
    assert [(s.name, s.source) for s in e["log.retention.bytes"].synonyms] == [
        ("log.retention.bytes", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
    ret = _by_name(describe_topic_config("t", {}, broker))["retention.bytes"]
    assert ret.value == "20" and [s.source for s in ret.synonyms] == [2, 3, 5]
    assert not BROKER_PROPERTIES["log.dirs"].dynamic
    assert BROKER_PROPERTIES["message.max.bytes"].dynamic


def test_dynamic_update_validation() -> None:
    from samsa.config.dynamic import DynamicConfigError, validate_update
    from samsa.protocol.errors import ErrorCode

    broker = BrokerConfig({"num.io.threads": 8})
    for props, code, text in [
        ({"log.dirs": "/x"}, ErrorCode.invalid_request,
         "Cannot update these configs dynamically: Set(log.dirs)"),
        ({"log.retention.ms": "soon"}, ErrorCode.invalid_config, "log.retention.ms"),
        ({"num.io.threads": "3"}, ErrorCode.invalid_config, "at least half the current value 8"),
        ({"num.io.threads": "17"}, ErrorCode.invalid_config, "greater than double"),
        ({"log.cleaner.min.compaction.lag.ms": "10",
          "log.cleaner.max.compaction.lag.ms": "5"}, ErrorCode.invalid_config, "Must not exceed"),
        ({"no.such.thing": "1"}, ErrorCode.invalid_config, "Unknown configuration"),
    ]:
        with pytest.raises(DynamicConfigError) as info:
            validate_update(broker, props, per_broker=True)
        assert info.value.error_code == code and text in str(info.value), (props, info.value)
    assert validate_update(broker, {"num.io.threads": "16"}, True)["num.io.threads"] == 16
    assert broker["num.io.threads"] == 8  # validation changes nothing
