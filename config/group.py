"""Group-level properties (Kafka 4's GroupConfig): per-group overrides of the consumer-protocol
settings, their validation against the broker's group.consumer.* bounds, and their
DescribeConfigs entries (resource type GROUP).

The consumer-protocol group coordinator applies consumer.session.timeout.ms and
consumer.heartbeat.interval.ms (read again at most every few seconds);
consumer.assignment.interval.ms is stored and described only (Samsa computes a target
assignment at the heartbeat that needs it). A share group's share.auto.offset.reset (where a
share-partition starts) and share.isolation.level are read by the share-partition leader
(broker/handlers/share_fetch.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from samsa.config.schema import (
    BrokerConfig,
    ConfigSource,
    ConfigType,
    PropertyDef,
    ValidString,
    at_least,
    value_to_string,
)
from samsa.config.topic import (
    ConfigEntry,
    ConfigSynonym,
    InvalidConfigError,
    broker_layer_synonyms,
    parse_overrides,
)


def _g(name: str, default: int, doc: str, least: int) -> PropertyDef:
    return PropertyDef(name, ConfigType.INT, default, doc, at_least(least), group="group")


# Kafka's GroupConfig definitions (the consumer.* ones): name, static default, validator.
GROUP_PROPERTIES: dict[str, PropertyDef] = {p.name: p for p in [
    _g("consumer.session.timeout.ms", 45000,
       "The timeout to detect client failures when using the consumer group protocol.", 1),
    _g("consumer.heartbeat.interval.ms", 5000,
       "The heartbeat interval given to the members of a consumer group.", 1),
    _g("consumer.assignment.interval.ms", 1000,
       "The interval between assignment updates for a consumer group.", 0),
    PropertyDef("share.auto.offset.reset", ConfigType.STRING, "latest",
                "Where a share group starts reading a partition it has no state for.",
                ValidString(("earliest", "latest")), group="group"),
    PropertyDef("share.isolation.level", ConfigType.STRING, "read_uncommitted",
                "Whether a share group is delivered records of open or aborted "
                "transactions (read_uncommitted) or only committed ones (read_committed).",
                ValidString(("read_committed", "read_uncommitted")), group="group"),
]}

# The broker property each group config defaults to (Kafka's GroupConfig.brokerSynonym).
GROUP_SYNONYMS = {
    "consumer.session.timeout.ms": "group.consumer.session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.heartbeat.interval.ms",
    "consumer.assignment.interval.ms": "group.consumer.assignment.interval.ms",
}  # (share.auto.offset.reset and share.isolation.level have none)


def group_defaults(broker: BrokerConfig) -> dict[str, Any]:
    """Each group config's effective default: the broker's group.consumer.* value, else the
    config's own default."""
    return {
        "share.auto.offset.reset": GROUP_PROPERTIES["share.auto.offset.reset"].default,
        "share.isolation.level": GROUP_PROPERTIES["share.isolation.level"].default,
        "consumer.session.timeout.ms": broker["group.consumer.session.timeout.ms"],
        "consumer.heartbeat.interval.ms": broker["group.consumer.heartbeat.interval.ms"],
        "consumer.assignment.interval.ms": broker["group.consumer.assignment.interval.ms"],
    }


def _bounded(key: str, value: int, lo_name: str, lo: int, hi_name: str, hi: int) -> None:
    if value < lo:
        raise InvalidConfigError(key, f"{key} must be greater than or equal to {lo_name}")
    if value > hi:
        raise InvalidConfigError(key, f"{key} must be less than or equal to {hi_name}")


def validate_group_configs(configs: Mapping[str, str | None],
                           broker: BrokerConfig) -> dict[str, Any]:
    """Validate a group's complete set of overrides as Kafka's GroupConfig.validate does:
    known names, parseable values within each config's range (missing ones take the static
    defaults), each within the broker's group.consumer.min/max bounds, and the session
    timeout above the heartbeat interval. Raises InvalidConfigError; returns the parsed
    overrides."""
    nulls = sorted(k for k, v in configs.items() if v is None)
    if nulls:
        raise InvalidConfigError(nulls[0], "Null value not supported for group configs: "
                                 + ",".join(nulls))
    parsed = parse_overrides(configs, GROUP_PROPERTIES, "group")
    values: dict[str, Any] = {k: p.default for k, p in GROUP_PROPERTIES.items()}
    values.update(parsed)
    heartbeat = values["consumer.heartbeat.interval.ms"]
    session = values["consumer.session.timeout.ms"]
    _bounded("consumer.heartbeat.interval.ms", heartbeat,
             "group.consumer.min.heartbeat.interval.ms",
             broker["group.consumer.min.heartbeat.interval.ms"],
             "group.consumer.max.heartbeat.interval.ms",
             broker["group.consumer.max.heartbeat.interval.ms"])
    _bounded("consumer.session.timeout.ms", session,
             "group.consumer.min.session.timeout.ms",
             broker["group.consumer.min.session.timeout.ms"],
             "group.consumer.max.session.timeout.ms",
             broker["group.consumer.max.session.timeout.ms"])
    if "consumer.assignment.interval.ms" in parsed:
        _bounded("consumer.assignment.interval.ms", parsed["consumer.assignment.interval.ms"],
                 "group.consumer.min.assignment.interval.ms",
                 broker["group.consumer.min.assignment.interval.ms"],
                 "group.consumer.max.assignment.interval.ms",
                 broker["group.consumer.max.assignment.interval.ms"])
    if session <= heartbeat:
        raise InvalidConfigError("consumer.session.timeout.ms", "consumer.session.timeout.ms "
                                 "must be greater than consumer.heartbeat.interval.ms")
    return parsed


def describe_group_config(overrides: Mapping[str, str],
                          broker: BrokerConfig) -> list[ConfigEntry]:
    """Every group config of one group, as Kafka's DescribeConfigs reports a GROUP resource:
    the group's override (GROUP_CONFIG) first, then the broker synonym's layers."""
    values: dict[str, Any] = dict(group_defaults(broker))
    for key, raw in overrides.items():
        prop = GROUP_PROPERTIES.get(key)
        if prop is not None:
            values[key] = prop.parse(raw)
    entries = []
    for key in GROUP_PROPERTIES:
        prop = GROUP_PROPERTIES[key]
        text = value_to_string(prop.type, values[key])
        synonym = GROUP_SYNONYMS.get(key)
        synonyms = broker_layer_synonyms(broker, synonym) if synonym is not None else []
        if key in overrides:
            synonyms.insert(0, ConfigSynonym(key, text, int(ConfigSource.GROUP_CONFIG)))
        source = synonyms[0].source if synonyms else int(ConfigSource.DEFAULT_CONFIG)
        entries.append(ConfigEntry(key, text, source, False, False, int(prop.type), prop.doc,
                                   synonyms))
    return entries
