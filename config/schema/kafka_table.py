"""Kafka's own property tables (kafka_properties.toml, generated from Kafka's jars by
tools/kafka_configs/generate.py) and the Kafka broker properties Samsa accepts without effect.

Every broker property Kafka knows is known here: properties.toml defines the ones Samsa
implements (or documents as having no effect, or refuses); the others are made from Kafka's
table with Kafka's type, default and dynamic update mode, and the reason kafka_only.toml gives
for them, so a client that sets one (librdkafka's admin test sets
sasl.kerberos.min.time.before.relogin) meets what Kafka answers instead of "Unknown
configuration".
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path
from typing import Any

from samsa.config.schema.property_def import PropertyDef, prop
from samsa.config.schema.values import ConfigType, parse_value

KAFKA_TABLE_FILE = Path(__file__).with_name("kafka_properties.toml")
REASONS_FILE = Path(__file__).with_name("kafka_only.toml")
# DynamicBrokerConfig's update modes.
READ_ONLY, PER_BROKER, CLUSTER_WIDE = "read-only", "per-broker", "cluster-wide"


@dataclass(frozen=True)
class KafkaProperty:
    name: str
    type: ConfigType
    default: str | None  # as Kafka prints it
    mode: str = READ_ONLY
    internal: bool = False


@cache
def _kafka_tables() -> dict[str, Any]:
    return tomllib.loads(KAFKA_TABLE_FILE.read_text(encoding="utf-8"))


def kafka_version() -> str:
    return str(_kafka_tables()["kafka_version"])


def kafka_properties(table: str) -> dict[str, KafkaProperty]:
    """Kafka's `broker` or `group` properties by name."""
    return {name: KafkaProperty(name, ConfigType[e["type"].upper()], e.get("default"),
                                e.get("mode", READ_ONLY), e.get("internal", False))
            for name, e in _kafka_tables()[table].items()}


@cache
def _reasons() -> list[tuple[str, tuple[str, ...]]]:
    data = tomllib.loads(REASONS_FILE.read_text(encoding="utf-8"))
    return [(r["why"], tuple(r["names"])) for r in data["reason"]]


def kafka_only_reason(name: str) -> str | None:
    """Why Kafka's property `name` has no effect in Samsa (the first matching reason)."""
    for why, patterns in _reasons():
        if any(fnmatchcase(name, p) for p in patterns):
            return why
    return None


# A property no reason names yet (a newer Kafka's): accepted, said to be unimplemented.
UNREVIEWED = "Samsa does not implement this property"


def kafka_only_table(known: set[str]) -> list[PropertyDef]:
    """Kafka's broker properties that `known` (properties.toml's) lacks, in Kafka's order,
    each accepted with Kafka's type and default and documented as having no effect."""
    out = []
    for k in kafka_properties("broker").values():
        if k.name in known:
            continue
        reason = kafka_only_reason(k.name) or UNREVIEWED
        p = prop(k.name, k.type, parse_value(k.name, k.type, k.default),
                 f"Kafka's {k.name}.", group="kafka", ignored=reason)
        out.append(p.with_kafka_mode(k.mode))
    return out
