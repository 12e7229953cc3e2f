"""No broker property is accepted and then silently ignored.

Each property of config/schema/ either works (the broker's code looks it up, or it is the
default of a topic property the code reads), or is marked as accepted-without-effect (and its
documentation, as DescribeConfigs returns it, says so), or is refused at start-up.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from samsa.config import BROKER_PROPERTIES, BrokerConfig, ConfigError, describe_broker_config
from samsa.config.schema import (
    INTERNAL_BROKER_CONFIGS,
    TOPIC_SYNONYMS,
    ConfigType,
    PropertyDef,
    ValidString,
)
from samsa.coordinator.internal_log import CONFIGURED_SUFFIXES
from samsa.storage.config import LogConfig

REPO = Path(__file__).resolve().parents[2]
LAYERS = ("config", "protocol", "storage", "coordinator", "broker")


@cache
def looked_up_names() -> frozenset[str]:
    """String keys the code reads: x["name"] and x.get("name", ...) (not assignments)."""
    names: set[str] = set()
    for layer in LAYERS:
        for path in (REPO / layer).rglob("*.py"):
            if path.is_relative_to(REPO / "broker" / "admin"):
                continue  # the admin CLI reads a client's settings, some of the same names
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names.update(_read_by_prefix(node))
                if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                    key = node.slice
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr == "get" and node.args):
                    key = node.args[0]
                else:
                    continue
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    names.add(key.value)
    return frozenset(names)


def _read_by_prefix(node: ast.AST) -> set[str]:
    """What an `InternalTopic.configured(host, name, config, "prefix", "load.key")` call reads:
    the prefix with each of CONFIGURED_SUFFIXES that exists, and the load-buffer key."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "configured"):
        return set()
    prefix, load_key = (a.value for a in node.args[3:5] if isinstance(a, ast.Constant))
    return {f"{prefix}.{s}" for s in CONFIGURED_SUFFIXES} | {load_key}


def is_read(name: str) -> bool:
    if name in looked_up_names():
        return True
    # A broker property that only sets a topic property's default works if the topic
    # property does: storage's LogConfig takes it, or the code looks it up.
    topic_read = set(LogConfig.PROPERTY_NAMES) | looked_up_names()
    return any(topic in topic_read for topic, chain in TOPIC_SYNONYMS.items()
               if name in (n for n, _ in chain))


def test_every_property_works_or_says_it_does_not() -> None:
    silent = [name for name, p in BROKER_PROPERTIES.items()
              if p.ignored is None and p.refused is None and not is_read(name)]
    assert silent == [], "accepted but read nowhere: mark them ignored/refused or use them"


def test_properties_marked_ignored_are_really_unused() -> None:
    stale = [name for name, p in BROKER_PROPERTIES.items()
             if (p.ignored is not None or p.refused is not None) and is_read(name)]
    assert stale == [], "read by the code yet documented as having no effect"


def test_describe_configs_documents_what_has_no_effect() -> None:
    # Kafka's internal ones set, so that they are described too
    every = BrokerConfig({n: p.default for n, p in BROKER_PROPERTIES.items()
                          if p.default is not None and n in INTERNAL_BROKER_CONFIGS})
    docs = {e.name: e.documentation for e in describe_broker_config(every)}
    docs.update({n: BROKER_PROPERTIES[n].doc for n in INTERNAL_BROKER_CONFIGS if n not in docs})
    for name, p in BROKER_PROPERTIES.items():
        if p.ignored is not None:
            assert "has no effect in Samsa" in docs[name] and p.ignored in docs[name], name
        if p.refused is not None:
            assert "refuses any value other than the default" in docs[name], name
        if p.ignored is None and p.refused is None:
            assert "no effect" not in docs[name], name


def _other_value(p: PropertyDef) -> object:
    if isinstance(p.validator, ValidString):
        return next(c for c in p.validator.choices if c != p.default)
    if p.type in (ConfigType.INT, ConfigType.LONG):
        return p.default - 1
    raise AssertionError(f"add a non-default value for {p.name}")


@pytest.mark.parametrize("prop", [p for p in BROKER_PROPERTIES.values() if p.refused],
                         ids=lambda p: p.name)
def test_refused_properties_fail_naming_themselves(prop: PropertyDef) -> None:
    BrokerConfig({prop.name: prop.default})  # the default itself is fine
    with pytest.raises(ConfigError) as e:
        BrokerConfig({prop.name: _other_value(prop)})
    assert e.value.key == prop.name and prop.name in str(e.value)


def test_ignored_settings_are_the_explicit_ones() -> None:
    assert BrokerConfig().ignored_settings() == []
    cfg = BrokerConfig({"num.replica.fetchers": 2, "num.io.threads": 8,
                        "auto.leader.rebalance.enable": True, "num.partitions": 3})
    assert [p.name for p in cfg.ignored_settings()] == ["num.io.threads",
                                                        "num.replica.fetchers"]
