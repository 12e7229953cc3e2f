"""Group-level properties (Kafka 4's GroupConfig): per-group overrides of the consumer-protocol
settings, their validation against the broker's group.consumer.* bounds, and their
DescribeConfigs entries (resource type GROUP).

The consumer-protocol group coordinator applies consumer.session.timeout.ms and
consumer.heartbeat.interval.ms (read again at most every few seconds);
consumer.assignment.interval.ms is stored and described only (Samsa computes a target
assignment at the heartbeat that needs it). A share group's share.auto.offset.reset (where a
share-partition starts) and share.isolation.level are read by the share-partition leader
(broker/handlers/share_fetch.py). A streams group's streams.session.timeout.ms,
streams.heartbeat.interval.ms, streams.num.standby.replicas, streams.task.offset.interval.ms,
streams.acceptable.recovery.lag, streams.initial.rebalance.delay.ms,
streams.assignment.interval.ms and streams.rack.aware.assignment.tags are read at its
heartbeats (broker/handlers/streams_groups.py).
Kafka's other group configs (config/schema/kafka_properties.toml:
share.record.lock.duration.ms, ...) are accepted, validated as Kafka validates them (the share
and streams ones within the broker's group.share/streams.min/max.* bounds) and described,
documented as having no effect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from samsa.config.schema import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    PropertyDef,
    ValidString,
    at_least,
    parse_value,
    value_to_string,
)
from samsa.config.schema.kafka_table import KafkaProperty, kafka_properties
from samsa.config.schema.property_def import prop
from samsa.config.topic import (
    ConfigEntry,
    ConfigSynonym,
    InvalidConfigError,
    broker_layer_synonyms,
    parse_overrides,
)

BY_DURATION = "by_duration:"
# Java's Duration.parse (PnDTnHnMn.nS), which Kafka's by_duration strategy reads.
_ISO_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?"
                           r"(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def by_duration_ms(reset: str) -> int | None:
    """The duration of a share.auto.offset.reset of `by_duration:<ISO-8601 duration>`, in ms;
    None for earliest and latest. ValueError when the duration does not parse."""
    if not reset.lower().startswith(BY_DURATION):
        return None
    m = _ISO_DURATION.fullmatch(reset[len(BY_DURATION):])
    if m is None or not any(m.group(i) for i in (2, 4, 5, 6)) or (
            m.group(3) is not None and not any(m.group(i) for i in (4, 5, 6))):
        raise ValueError(reset)
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    millis = int((m.group(7) or "").ljust(3, "0")[:3])  # the fraction takes the seconds' sign
    if (m.group(6) or "").startswith("-"):
        millis = -millis
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + millis
    return -total if m.group(1) == "-" else total


class ShareAutoOffsetReset:
    """Kafka's ShareGroupAutoOffsetResetStrategy validator: latest, earliest or
    by_duration:<a non-negative ISO-8601 duration>."""

    def __call__(self, key: str, value: Any) -> None:
        if value in ("earliest", "latest"):
            return
        try:
            duration = by_duration_ms(str(value))
        except ValueError:
            raise ConfigError.invalid(key, value, "Unable to parse duration string in "
                                      "by_duration strategy.") from None
        if duration is None:
            raise ConfigError.invalid(key, value, f"String must be one of: {self}")
        if duration < 0:
            raise ConfigError.invalid(key, value, "Duration strategy must not be negative.")

    def __str__(self) -> str:
        return "[latest, earliest, by_duration:PnDTnHnMn.nS]"


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
                "Where a share group starts reading a partition it has no state for: its "
                "log start (earliest), its end (latest), or the first record at most this "
                "old (by_duration:<ISO-8601 duration>, e.g. by_duration:PT1H), else its end.",
                ShareAutoOffsetReset(), group="group"),
    PropertyDef("share.isolation.level", ConfigType.STRING, "read_uncommitted",
                "Whether a share group is delivered records of open or aborted "
                "transactions (read_uncommitted) or only committed ones (read_committed).",
                ValidString(("read_committed", "read_uncommitted")), group="group"),
]}

# Kafka's GroupConfig's other configs' validators (their least values).
_LEAST = {
    "share.session.timeout.ms": 1, "share.heartbeat.interval.ms": 1,
    "share.record.lock.duration.ms": 1000, "share.delivery.count.limit": 2,
    "share.partition.max.record.locks": 100, "share.assignment.interval.ms": 0,
    "streams.session.timeout.ms": 1, "streams.heartbeat.interval.ms": 1,
    "streams.num.standby.replicas": 0, "streams.initial.rebalance.delay.ms": 0,
    "streams.assignment.interval.ms": 0, "streams.task.offset.interval.ms": 1,
    "streams.num.warmup.replicas": 0, "streams.acceptable.recovery.lag": 0,
}
# Why the configs Samsa's groups do not read have no effect.
_NOT_READ = {
    "share.": "Samsa's share groups do not read it per group: the broker's group.share.* "
              "properties apply to every share group",
    "streams.": "Samsa's streams groups do not read it per group (the warm-up replicas and "
                "the assignor name are for pluggable assignors, which Samsa has not, issue 52)",
    "errors.deadletterqueue.": "share groups have no dead-letter queue in Samsa",
    "consumer.assignor.offload.enable": "assignors run on the coordinator's event loop",
}


# The streams group configs the streams groups read (broker/handlers/streams_groups.py).
STREAMS_GROUP_CONFIGS = frozenset({
    "streams.session.timeout.ms", "streams.heartbeat.interval.ms",
    "streams.num.standby.replicas", "streams.task.offset.interval.ms",
    "streams.acceptable.recovery.lag", "streams.initial.rebalance.delay.ms",
    "streams.assignment.interval.ms", "streams.rack.aware.assignment.tags"})


def _kafka_group_config(k: KafkaProperty) -> PropertyDef:
    reason = None if k.name in STREAMS_GROUP_CONFIGS else next(
        why for prefix, why in _NOT_READ.items() if k.name.startswith(prefix))
    least = _LEAST.get(k.name)
    return prop(k.name, k.type, parse_value(k.name, k.type, k.default),
                f"Kafka's group config {k.name}.", at_least(least) if least is not None else None,
                group="group", ignored=reason)


GROUP_PROPERTIES.update({k.name: _kafka_group_config(k) for k in kafka_properties("group").values()
                         if k.name not in GROUP_PROPERTIES})

# Kafka's internal group configs (its DescribeConfigs leaves them out unless set).
INTERNAL_GROUP_CONFIGS = frozenset(k.name for k in kafka_properties("group").values()
                                   if k.internal)

# The broker property each group config defaults to (Kafka's GroupConfig.brokerSynonym):
# group.<name> where Kafka has it (streams.assignor.name's, group.streams.assignors, is a list
# of names: Samsa gives it none).
_BROKER_NAMES = set(kafka_properties("broker"))
GROUP_SYNONYMS = {n: f"group.{n}" for n in GROUP_PROPERTIES
                  if f"group.{n}" in _BROKER_NAMES and n != "streams.assignor.name"}


def _share_bounds(broker: BrokerConfig) -> dict[str, tuple[str, int, str, int]]:
    """Share group config -> the broker's least and greatest value of it (Kafka's
    GroupConfig.validate), besides the consumer.* ones validate_group_configs checks."""
    def pair(s: str, lo: int, hi: int) -> tuple[str, int, str, int]:
        return f"group.share.min.{s}", lo, f"group.share.max.{s}", hi

    return {
        "share.session.timeout.ms": pair(
            "session.timeout.ms", broker["group.share.min.session.timeout.ms"],
            broker["group.share.max.session.timeout.ms"]),
        "share.heartbeat.interval.ms": pair(
            "heartbeat.interval.ms", broker["group.share.min.heartbeat.interval.ms"],
            broker["group.share.max.heartbeat.interval.ms"]),
        "share.record.lock.duration.ms": pair(
            "record.lock.duration.ms", broker["group.share.min.record.lock.duration.ms"],
            broker["group.share.max.record.lock.duration.ms"]),
        "share.delivery.count.limit": pair(
            "delivery.count.limit", broker["group.share.min.delivery.count.limit"],
            broker["group.share.max.delivery.count.limit"]),
    }


def _streams_bounds(broker: BrokerConfig) -> dict[str, tuple[str | None, str | None]]:
    """Streams group config -> the broker properties bounding it below and above (Kafka's
    GroupConfig.validateValues: validateIntRange, validateIntMin, validateIntMax)."""
    def pair(s: str) -> tuple[str, str]:
        return f"group.streams.min.{s}", f"group.streams.max.{s}"

    return {
        "streams.heartbeat.interval.ms": pair("heartbeat.interval.ms"),
        "streams.session.timeout.ms": pair("session.timeout.ms"),
        "streams.num.standby.replicas": (None, "group.streams.max.standby.replicas"),
        "streams.assignment.interval.ms": pair("assignment.interval.ms"),
        "streams.task.offset.interval.ms": ("group.streams.min.task.offset.interval.ms", None),
        "streams.num.warmup.replicas": (None, "group.streams.max.warmup.replicas"),
    }


def _validate_streams(parsed: Mapping[str, Any], broker: BrokerConfig) -> None:
    for key, (lo_name, hi_name) in _streams_bounds(broker).items():
        if key in parsed:
            _bounded(key, parsed[key], lo_name or "", broker[lo_name] if lo_name else -2**63,
                     hi_name or "", broker[hi_name] if hi_name else 2**63 - 1)
    session = parsed.get("streams.session.timeout.ms",
                         broker["group.streams.session.timeout.ms"])
    heartbeat = parsed.get("streams.heartbeat.interval.ms",
                           broker["group.streams.heartbeat.interval.ms"])
    if session <= heartbeat:
        raise InvalidConfigError("streams.session.timeout.ms", "streams.session.timeout.ms "
                                 "must be greater than streams.heartbeat.interval.ms")


def group_defaults(broker: BrokerConfig) -> dict[str, Any]:
    """Each group config's effective default: its broker synonym's value, else the config's
    own default."""
    out = {name: broker[GROUP_SYNONYMS[name]] if name in GROUP_SYNONYMS else p.default
           for name, p in GROUP_PROPERTIES.items()}
    out.update({
        "consumer.session.timeout.ms": broker["group.consumer.session.timeout.ms"],
        "consumer.heartbeat.interval.ms": broker["group.consumer.heartbeat.interval.ms"],
        "consumer.assignment.interval.ms": broker["group.consumer.assignment.interval.ms"],
    })
    return out


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
    for key, (lo_name, lo, hi_name, hi) in _share_bounds(broker).items():
        if key in parsed:
            _bounded(key, parsed[key], lo_name, lo, hi_name, hi)
    _validate_streams(parsed, broker)
    return parsed


def describe_group_config(overrides: Mapping[str, str],
                          broker: BrokerConfig) -> list[ConfigEntry]:
    """Every group config of one group, as Kafka's DescribeConfigs reports a GROUP resource:
    the group's override (GROUP_CONFIG) first, then the broker synonym's layers. Kafka's
    internal ones only when the group sets them (Kafka lists nonInternalValues and originals)."""
    values: dict[str, Any] = dict(group_defaults(broker))
    for key, raw in overrides.items():
        prop = GROUP_PROPERTIES.get(key)
        if prop is not None:
            values[key] = prop.parse(raw)
    entries = []
    for key in GROUP_PROPERTIES:
        if key in INTERNAL_GROUP_CONFIGS and key not in overrides:
            continue
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
