"""PropertyDef, the reader of the property table (properties.toml) and what its entries share."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from samsa.config.schema.validators import (
    LoggerLevels,
    OneOfOrRange,
    Validator,
    ValidList,
    ValidString,
    at_least,
    between,
)
from samsa.config.schema.values import ConfigType, parse_value, value_to_string

_SAME = object()


@dataclass(frozen=True)
class PropertyDef:
    name: str
    type: ConfigType
    default: Any
    doc: str
    validator: Validator | None = None
    dynamic: bool = False
    # The topic property this broker property is the default for (Kafka's synonym).
    topic_synonym: str | None = None
    # Kafka's default when Samsa's differs; _SAME otherwise.
    kafka_default: Any = field(default=_SAME, compare=False)
    group: str = "server"
    # Why Samsa accepts this property but it has no effect (the doc says so too); None when
    # the property works.
    ignored: str | None = None
    # Why Samsa refuses any value but the default at start-up; None when it does not.
    refused: str | None = None
    # A Kafka property Samsa has only to accept (config/schema/kafka_table.py): Kafka's
    # dynamic update mode of it (read-only, per-broker or cluster-wide); None otherwise.
    kafka_mode: str | None = None

    @property
    def kafka_only(self) -> bool:
        return self.kafka_mode is not None

    def with_kafka_mode(self, mode: str) -> PropertyDef:
        return replace(self, kafka_mode=mode)

    def parse(self, raw: object) -> Any:
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value

    @property
    def differs_from_kafka(self) -> bool:
        return self.kafka_default is not _SAME

    def default_string(self) -> str | None:
        return value_to_string(self.type, self.default)


B, S, I, SH, L, D, LS = (  # noqa: E741 - terse aliases keep the table readable
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
)
PW = ConfigType.PASSWORD
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
# authorizer.class.name values that select the built-in ACL authorizer (Kafka's two names).
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "kafka.security.authorizer.AclAuthorizer")
# replica.selector.class values (Kafka's two ReplicaSelector implementations).
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
REPLICA_SELECTORS = ("org.apache.kafka.common.replica.LeaderSelector", RACK_AWARE_SELECTOR)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
GZIP_LEVEL = OneOfOrRange(-1, between(1, 9))
LZ4_LEVEL = between(1, 17)
ZSTD_LEVEL = between(-131072, 22)
LOG_LEVELS = ("DEBUG", "INFO", "WARN", "WARNING", "ERROR", "CRITICAL")
# Shared reasons of properties that are accepted but have no effect, or refused.
NO_RECOMPRESSION = "batches are stored as the producer compressed them, never recompressed"
NO_TIERED_STORAGE = "it applies only to tiered storage, which Samsa does not have"
KEY_MAP_GROWS = "the cleaner's key map grows with the data instead of using fixed buffers"
IGNORED_DOC = " Accepted for compatibility; has no effect in Samsa: {reason}."
REFUSED_DOC = " Samsa refuses any value other than the default: {reason}."


def prop(name: str, ctype: ConfigType, default: Any, doc: str, validator: Validator | None = None,
       *, topic: str | None = None, kafka: Any = _SAME, group: str, ignored: str | None = None,
       refused: str | None = None) -> PropertyDef:
    if ignored is not None:
        doc += IGNORED_DOC.format(reason=ignored)
    if refused is not None:
        doc += REFUSED_DOC.format(reason=refused)
    return PropertyDef(name, ctype, default, doc, validator, False, topic, kafka, group, ignored,
                       refused)


TABLE_FILE = Path(__file__).with_name("properties.toml")
# What a string in properties.toml's `valid`, `ignored_as` and `refused_as` may name.
_NAMED: dict[str, Any] = {
    "SECURITY_PROTOCOLS": SECURITY_PROTOCOLS, "AUTHORIZERS": AUTHORIZERS,
    "REPLICA_SELECTORS": REPLICA_SELECTORS, "COMPRESSION_TYPES": COMPRESSION_TYPES,
    "LOG_LEVELS": LOG_LEVELS, "GZIP_LEVEL": GZIP_LEVEL, "LZ4_LEVEL": LZ4_LEVEL,
    "ZSTD_LEVEL": ZSTD_LEVEL, "NO_RECOMPRESSION": NO_RECOMPRESSION,
    "NO_TIERED_STORAGE": NO_TIERED_STORAGE, "KEY_MAP_GROWS": KEY_MAP_GROWS,
}
_CHOICES: dict[str, type[ValidString] | type[ValidList] | type[LoggerLevels]] = {
    "one_of": ValidString, "list_of": ValidList, "logger_levels": LoggerLevels}


def load_table(path: Path = TABLE_FILE) -> list[PropertyDef]:
    """Every property of the table file, in its order (the file's header describes its keys)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    groups: dict[str, str] = data.pop("groups")
    return [_entry(e, groups[table]) for table, entries in data.items() for e in entries]


def _entry(e: dict[str, Any], group: str) -> PropertyDef:
    return prop(e["name"], ConfigType[e["type"].upper()], e.get("default"), e["doc"],
                _validator(e.get("valid")), topic=e.get("topic"), kafka=e.get("kafka", _SAME),
                group=e.get("group", group), ignored=_reason(e, "ignored"),
                refused=_reason(e, "refused"))


def _validator(spec: str | dict[str, Any] | None) -> Validator | None:
    if spec is None or isinstance(spec, str):
        return None if spec is None else _NAMED[spec]
    ((kind, arg),) = spec.items()
    if kind == "at_least":
        return at_least(arg)
    if kind == "between":
        return between(*arg)
    return _CHOICES[kind](tuple(_NAMED[arg] if isinstance(arg, str) else arg))


def _reason(e: dict[str, Any], key: str) -> str | None:
    named = e.get(f"{key}_as")
    return e.get(key) if named is None else str(_NAMED[named])
