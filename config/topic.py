"""Topic-level properties (Kafka's LogConfig), their validation and DescribeConfigs entries."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# kio's enum itself, which protocol/errors.py re-exports: config sits below protocol, so it
# takes the one ErrorCode from kio directly rather than through the layer above it.
from kio.schema.errors import ErrorCode

from samsa.config.schema import (
    BROKER_PROPERTIES,
    COMPRESSION_TYPES,
    GZIP_LEVEL,
    INTERNAL_BROKER_CONFIGS,
    LONG_MAX,
    LZ4_LEVEL,
    TOPIC_SYNONYMS,
    ZSTD_LEVEL,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    PropertyDef,
    Validator,
    ValidList,
    ValidString,
    at_least,
    between,
    broker_synonyms,
    parse_value,
    split_listener_key,
    value_to_string,
)


class InvalidConfigError(ConfigError):
    """A topic config Kafka would reject with INVALID_CONFIG."""

    error_code: ErrorCode = ErrorCode.invalid_config


def _throttled_replicas(key: str, value: Any) -> None:
    # "*" or a list of "partition:brokerId" (Kafka's ThrottledReplicaListValidator).
    if value == ["*"] or not value:
        return
    for item in value:
        if not re.fullmatch(r"\d+:\d+", item):
            raise ConfigError.invalid(key, ",".join(value), "Must be the wildcard (*) or a list "
                                      "of 'partitionId:brokerId' replicas")


B, S, I, L, D, LS = (  # noqa: E741 - terse aliases keep the table readable
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)


_STRATEGIES = "io.confluent.kafka.serializers.subject."
TOPIC_NAME_STRATEGY = _STRATEGIES + "TopicNameStrategy"
SUBJECT_NAME_STRATEGIES = (TOPIC_NAME_STRATEGY, _STRATEGIES + "RecordNameStrategy",
                           _STRATEGIES + "TopicRecordNameStrategy")
ICEBERG_MODES = ("disabled", "key_value", "value_schema_id_prefix")


def _t(name: str, ctype: ConfigType, default: Any, doc: str,
       validator: Validator | None = None) -> PropertyDef:
    return PropertyDef(name, ctype, default, doc, validator, group="topic")


_TABLE: list[PropertyDef] = [
    _t("cleanup.policy", LS, ["delete"], "delete old segments, compact by key, or both.",
       ValidList(("compact", "delete"))),
    _t("compression.type", S, "producer", "Compression of the stored data; 'producer' keeps "
       "the producer's.", ValidString(COMPRESSION_TYPES)),
    _t("compression.gzip.level", I, -1, "gzip level when compression.type is gzip.",
       GZIP_LEVEL),
    _t("compression.lz4.level", I, 9, "lz4 level when compression.type is lz4.", LZ4_LEVEL),
    _t("compression.zstd.level", I, 3, "zstd level when compression.type is zstd.", ZSTD_LEVEL),
    # Confluent Server's broker-side schema validation (docs/schema-registry.md): each record's
    # key or value must carry the id of a schema registered under its subject
    _t("confluent.key.schema.validation", B, False, "Refuse a batch whose record keys do not "
       "carry a schema id registered under the key's subject (INVALID_RECORD)."),
    _t("confluent.key.subject.name.strategy", S, TOPIC_NAME_STRATEGY, "How the key's subject "
       "is named: <topic>-key, the record's name, or <topic>-<record name>.",
       ValidString(SUBJECT_NAME_STRATEGIES)),
    _t("confluent.value.schema.validation", B, False, "Refuse a batch whose record values do "
       "not carry a schema id registered under the value's subject (INVALID_RECORD)."),
    _t("confluent.value.subject.name.strategy", S, TOPIC_NAME_STRATEGY, "How the value's "
       "subject is named: <topic>-value, the record's name, or <topic>-<record name>.",
       ValidString(SUBJECT_NAME_STRATEGIES)),
    _t("delete.retention.ms", L, 86400000, "How long tombstones stay in a compacted topic.",
       at_least(0)),
    _t("file.delete.delay.ms", L, 60000, "Wait before deleting a removed segment's files.",
       at_least(0)),
    _t("flush.messages", L, LONG_MAX, "fsync after this many messages.", at_least(1)),
    _t("flush.ms", L, LONG_MAX, "fsync when unflushed data is this old.", at_least(0)),
    _t("follower.replication.throttled.replicas", LS, [], "Replicas throttled on the follower "
       "side.", _throttled_replicas),
    _t("index.interval.bytes", I, 4096, "Bytes of log between two offset-index entries.",
       at_least(0)),
    _t("leader.replication.throttled.replicas", LS, [], "Replicas throttled on the leader "
       "side.", _throttled_replicas),
    _t("local.retention.bytes", L, -2, "Local size limit with tiered storage; -2 follows "
       "retention.bytes.", at_least(-2)),
    _t("local.retention.ms", L, -2, "Local time limit with tiered storage; -2 follows "
       "retention.ms.", at_least(-2)),
    _t("max.compaction.lag.ms", L, LONG_MAX, "Most age before a record must be eligible for "
       "compaction.", at_least(1)),
    _t("max.message.bytes", I, 1048588, "Largest record batch accepted (after compression).",
       at_least(0)),
    _t("message.timestamp.after.max.ms", L, LONG_MAX, "How far a CreateTime timestamp may "
       "lead the broker clock.", at_least(0)),
    _t("message.timestamp.before.max.ms", L, LONG_MAX, "How far a CreateTime timestamp may "
       "lag the broker clock.", at_least(0)),
    _t("message.timestamp.type", S, "CreateTime", "CreateTime keeps the producer's timestamp; "
       "LogAppendTime stamps the broker's.", ValidString(("CreateTime", "LogAppendTime"))),
    _t("min.cleanable.dirty.ratio", D, 0.5, "Least dirty/total ratio before compaction.",
       between(0, 1)),
    _t("min.compaction.lag.ms", L, 0, "Least age before a record may be compacted.",
       at_least(0)),
    _t("min.insync.replicas", I, 1, "Replicas that must acknowledge an acks=all write.",
       at_least(1)),
    _t("preallocate", B, False, "Preallocate segment files at creation."),
    _t("remote.log.copy.disable", B, False, "Stop copying segments to tiered storage."),
    _t("remote.log.delete.on.disable", B, False, "Delete tiered data when remote storage is "
       "disabled."),
    _t("remote.storage.enable", B, False, "Tiered storage for this topic (not supported by "
       "Samsa: must stay false)."),
    _t("retention.bytes", L, -1, "Delete old segments while a partition is larger than this; "
       "-1 means no limit."),
    _t("retention.ms", L, 604800000, "Delete segments older than this; -1 keeps forever.",
       at_least(-1)),
    # Redpanda's redpanda.iceberg.mode (docs/lakehouse.md): the topic's committed records
    # also go into an Iceberg table of the same name
    _t("samsa.iceberg.mode", S, "disabled", "Write the topic's committed records into an "
       "Iceberg table: disabled, key_value (raw key, value, headers and record metadata) or "
       "value_schema_id_prefix (columns from the value's registered schema).",
       ValidString(ICEBERG_MODES)),
    # Kafka 4.x (KIP-1030): at least 1 MiB. `internal.segment.bytes` (below) is Kafka's way
    # for tests to have smaller segments.
    _t("segment.bytes", I, 1073741824, "Largest size of one segment file.",
       at_least(1024 * 1024)),
    _t("segment.index.bytes", I, 10485760, "Largest size of an offset/time index file.",
       at_least(4)),
    _t("segment.jitter.ms", L, 0, "Most random jitter subtracted from segment.ms.",
       at_least(0)),
    _t("segment.ms", L, 604800000, "Roll a new segment after this long.", at_least(1)),
    _t("unclean.leader.election.enable", B, False, "Allow an out-of-sync replica to become "
       "leader."),
    # Kafka's internal config (LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG): when set it is the
    # segment size instead of segment.bytes, with no lower bound. For testing only.
    _t("internal.segment.bytes", I, None, "The maximum size of a single log file. This should "
       "be used for testing only."),
]

# Kafka's internal topic configs: accepted, but described only where a topic overrides them
# (DescribeConfigs lists a config's originals plus its non-internal values).
INTERNAL_TOPIC_PROPERTIES = frozenset({"internal.segment.bytes"})

TOPIC_PROPERTIES: dict[str, PropertyDef] = {p.name: p for p in _TABLE}


def topic_defaults(broker: BrokerConfig) -> dict[str, object]:
    """Each topic property's effective default: its broker synonym's value, else Kafka's."""
    out: dict[str, object] = {}
    for name, prop in TOPIC_PROPERTIES.items():
        value = broker.topic_default(name) if name in TOPIC_SYNONYMS else None
        out[name] = prop.default if value is None else value
    return out


def validate_topic_configs(configs: Mapping[str, str | None],
                           broker: BrokerConfig | None = None) -> dict[str, object]:
    """Parse and validate topic config overrides (CreateTopics / AlterConfigs input).

    Returns the parsed values; a None value (delete the override) is kept as None. Raises
    InvalidConfigError naming the key for an unknown key or a bad value.
    """
    parsed = parse_overrides(configs, TOPIC_PROPERTIES, "topic")
    _check_combination(parsed, broker or BrokerConfig())
    return parsed


def parse_overrides(configs: Mapping[str, str | None], properties: Mapping[str, PropertyDef],
                    kind: str) -> dict[str, Any]:
    """Each override parsed by its property; InvalidConfigError names an unknown key or the
    key of a bad value (a topic's or a group's configs alike)."""
    parsed: dict[str, Any] = {}
    for key, raw in configs.items():
        prop = properties.get(key)
        if prop is None:
            raise InvalidConfigError(key, f"Unknown {kind} config name: {key}")
        try:
            parsed[key] = prop.parse(raw)
        except ConfigError as e:
            raise InvalidConfigError(key, str(e)) from None
    return parsed


def _check_combination(parsed: Mapping[str, object], broker: BrokerConfig) -> None:
    merged: dict[str, Any] = topic_defaults(broker)
    merged.update({k: v for k, v in parsed.items() if v is not None})
    lo, hi = merged["min.compaction.lag.ms"], merged["max.compaction.lag.ms"]
    if lo > hi:
        raise InvalidConfigError("min.compaction.lag.ms", "conflict topic config setting "
                                 f"min.compaction.lag.ms ({lo}) > max.compaction.lag.ms ({hi})")
    if merged["remote.storage.enable"]:
        raise InvalidConfigError("remote.storage.enable", "Invalid value true for configuration "
                                 "remote.storage.enable: Tiered Storage functionality is "
                                 "disabled in the broker. Topic cannot be configured with "
                                 "remote log storage.")


def effective_topic_config(overrides: Mapping[str, object],
                           broker: BrokerConfig) -> dict[str, object]:
    """Defaults from the broker, then the topic's overrides (which may be strings or parsed).

    Overrides are parsed, not range-checked again: they were validated when set, and a value
    an older version accepted (segment.bytes under 1 MiB before Kafka 4) must not keep a
    stored topic from loading."""
    out = topic_defaults(broker)
    for key, raw in overrides.items():
        if raw is not None:
            prop = TOPIC_PROPERTIES[key]
            out[key] = parse_value(prop.name, prop.type, raw)
    return out


# ---------------------------------------------------------------------------------------------
# DescribeConfigs


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    is_sensitive: bool
    read_only: bool
    config_type: int
    documentation: str | None
    synonyms: list[ConfigSynonym] = field(default_factory=list)


def broker_layer_synonyms(broker: BrokerConfig, name: str) -> list[ConfigSynonym]:
    """Kafka's ConfigHelper.configSynonyms: dynamic, then static, then default values of the
    property's alias group, dropping entries before `name` itself."""
    group = broker_synonyms(name)
    out: list[ConfigSynonym] = []
    layers = (
        (broker.dynamic_values, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (broker.dynamic_default_values, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (broker.static_values, ConfigSource.STATIC_BROKER_CONFIG),
        ({n: BROKER_PROPERTIES[n].default for n in group}, ConfigSource.DEFAULT_CONFIG),
    )
    for values, source in layers:
        for n in group:
            if values.get(n) is not None:
                text = value_to_string(BROKER_PROPERTIES[n].type, values[n])
                out.append(ConfigSynonym(n, text, int(source)))
    # Kafka drops leading synonyms that are not the property itself; so for retention.ms with
    # only log.retention.hours set nothing is listed and the source reads DEFAULT_CONFIG.
    while out and out[0].name != name:
        out.pop(0)
    return out


def describe_topic_config(name: str, overrides: Mapping[str, object],
                          broker: BrokerConfig) -> list[ConfigEntry]:
    """Every topic property of topic `name`, as Kafka's DescribeConfigs reports it."""
    del name  # all topics share one schema; kept for the handler's call shape
    values = effective_topic_config(overrides, broker)
    entries = []
    for key in sorted(TOPIC_PROPERTIES):
        if key in INTERNAL_TOPIC_PROPERTIES and overrides.get(key) is None:
            continue
        prop = TOPIC_PROPERTIES[key]
        text = value_to_string(prop.type, values[key])
        server_name = TOPIC_SYNONYMS.get(key, ((None, 1),))[0][0]
        synonyms = broker_layer_synonyms(broker, server_name) if server_name else []
        if overrides.get(key) is not None:
            synonyms.insert(0, ConfigSynonym(key, text, int(ConfigSource.TOPIC_CONFIG)))
        source = synonyms[0].source if synonyms else int(ConfigSource.DEFAULT_CONFIG)
        entries.append(ConfigEntry(key, text, source, False, False, int(prop.type), prop.doc,
                                   synonyms))
    return entries


def describe_broker_config(broker: BrokerConfig, per_broker: bool = True) -> list[ConfigEntry]:
    """Every broker property (Kafka's internal ones only where set), as Kafka's
    DescribeConfigs reports a BROKER resource; for the
    cluster default resource (`per_broker` False, the empty name) only the dynamic defaults,
    with their DYNAMIC_DEFAULT_BROKER_CONFIG synonyms."""
    entries = []
    items = (broker.items() if per_broker
             else ((k, v) for k, v in sorted(broker.dynamic_default_values.items())))
    for key, value in items:
        if key in INTERNAL_BROKER_CONFIGS and broker.is_default(key):
            continue
        prop = BROKER_PROPERTIES[key]
        synonyms = broker_layer_synonyms(broker, key)
        if not per_broker:
            synonyms = [s for s in synonyms
                        if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        source = synonyms[0].source if synonyms else int(ConfigSource.DEFAULT_CONFIG)
        if prop.type is ConfigType.PASSWORD:  # Kafka never returns a password's value
            entries.append(ConfigEntry(key, None, source, True, not prop.dynamic,
                                       int(prop.type), prop.doc, []))
            continue
        entries.append(ConfigEntry(key, value_to_string(prop.type, value), source, False,
                                   not prop.dynamic, int(prop.type), prop.doc, synonyms))
    if per_broker:
        entries.extend(_listener_entries(broker))
    return entries


def _listener_entries(broker: BrokerConfig) -> list[ConfigEntry]:
    """The per-listener properties set (listener.name.<listener>.<property>), as Kafka lists
    them among a broker's configs: passwords (and what has no known type, such as a JAAS
    configuration) without their value."""
    layers = ((broker.dynamic_values, ConfigSource.DYNAMIC_BROKER_CONFIG),
              (broker.static_values, ConfigSource.STATIC_BROKER_CONFIG))
    names = sorted({k for values, _ in layers for k in values
                    if split_listener_key(k) is not None})
    entries = []
    for key in names:
        split = split_listener_key(key)
        assert split is not None
        prop = BROKER_PROPERTIES.get(split[1])
        sensitive = prop is None or prop.type is ConfigType.PASSWORD
        ctype = ConfigType.PASSWORD if prop is None else prop.type
        synonyms = [ConfigSynonym(key, None if sensitive else value_to_string(ctype, v[key]),
                                  int(source))
                    for v, source in layers if v.get(key) is not None]
        if not synonyms:
            continue
        entries.append(ConfigEntry(key, synonyms[0].value, synonyms[0].source, sensitive,
                                   False, int(ctype), None, synonyms))
    return entries
