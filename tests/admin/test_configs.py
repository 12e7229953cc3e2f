"""`samsa config describe|set|delete` against a Samsa broker: a topic's, a broker's, the
cluster-wide broker default's, a group's and a client-metrics subscription's configs, set,
described (own values, --all, --key) and deleted, as tables and JSON."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.admin.conftest import Samsa, parse_table
from tests.support.broker import BrokerProcess

CONFIG_KEYS = {"name", "value", "source", "sensitive", "read_only"}


@pytest.fixture(scope="module")
def config_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("admin-configs") / "data", name="admin-configs")
    b.start()
    try:
        yield b
    finally:
        b.close()


def _describe(samsa: Samsa, b: str, *args: str) -> dict[str, Any]:
    d = samsa("config", "describe", *args, "--format", "json", bootstrap=b).json()
    assert set(d) == {"entity_type", "entity_name", "configs"}
    assert all(set(c) == CONFIG_KEYS for c in d["configs"])
    return d


def _own(samsa: Samsa, b: str, *args: str) -> dict[str, tuple[str, str]]:
    return {c["name"]: (c["value"], c["source"]) for c in _describe(samsa, b, *args)["configs"]}


def test_topic_configs(config_broker: BrokerProcess, samsa: Samsa, unique_topic: str) -> None:
    b, topic = config_broker.bootstrap, ("--entity-type", "topic", "--entity-name", unique_topic)
    assert samsa("topic", "create", unique_topic, bootstrap=b).rc == 0
    assert _own(samsa, b, *topic) == {}
    r = samsa("config", "set", *topic, "retention.ms=60000", "cleanup.policy=compact",
              bootstrap=b)
    assert (r.rc, r.out) == (0, f"Altered the configs of topic {unique_topic}.\n")
    assert _own(samsa, b, *topic) == {"cleanup.policy": ("compact", "DYNAMIC_TOPIC_CONFIG"),
                                      "retention.ms": ("60000", "DYNAMIC_TOPIC_CONFIG")}
    every = _own(samsa, b, *topic, "--all")
    assert every["retention.ms"] == ("60000", "DYNAMIC_TOPIC_CONFIG")
    assert every["segment.bytes"][1] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
    assert list(_own(samsa, b, *topic, "--key", "segment.bytes")) == ["segment.bytes"]

    out = samsa("config", "describe", *topic, bootstrap=b).out.splitlines()
    assert out[0] == f"Configs of topic {unique_topic}:"
    assert [(r["NAME"], r["VALUE"], r["SOURCE"], r["SENSITIVE"]) for r in parse_table(
        out[1:])] == [("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG", "no"),
                      ("retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG", "no")]
    assert samsa("config", "delete", *topic, "cleanup.policy", "--format", "json",
                 bootstrap=b).json() == {"entity_type": "topic", "entity_name": unique_topic,
                                         "set": {}, "deleted": ["cleanup.policy"]}
    assert list(_own(samsa, b, *topic)) == ["retention.ms"]
    r = samsa("config", "set", *topic, "retention.ms=soon", bootstrap=b)
    assert r.rc == 1 and r.err.startswith("samsa: INVALID_CONFIG")


def test_broker_configs(config_broker: BrokerProcess, samsa: Samsa) -> None:
    b = config_broker.bootstrap
    broker = ("--entity-type", "broker", "--entity-name", "0")
    key = "sasl.kerberos.min.time.before.relogin"  # per broker only, as in Kafka
    assert samsa("config", "set", *broker, f"{key}=59000", bootstrap=b).rc == 0
    assert _own(samsa, b, *broker)[key] == ("59000", "DYNAMIC_BROKER_CONFIG")
    static = _own(samsa, b, *broker, "--all")
    assert static["broker.id"] == ("0", "STATIC_BROKER_CONFIG")
    r = samsa("config", "set", "--entity-type", "broker", "--entity-default", f"{key}=1",
              bootstrap=b)
    assert r.rc == 1 and r.err.startswith("samsa: INVALID_REQUEST")
    assert samsa("config", "set", "--entity-type", "broker", "--entity-default",
                 "log.cleaner.threads=2", bootstrap=b).rc == 0
    default = _describe(samsa, b, "--entity-type", "broker", "--entity-default")
    assert default["entity_name"] == ""
    assert {c["name"]: c["source"] for c in default["configs"]}[
        "log.cleaner.threads"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert samsa("config", "delete", *broker, key, bootstrap=b).rc == 0
    assert key not in _own(samsa, b, *broker)
    assert samsa("config", "delete", "--entity-type", "broker", "--entity-default",
                 "log.cleaner.threads", bootstrap=b).rc == 0


def test_group_and_client_metrics_configs(config_broker: BrokerProcess, samsa: Samsa) -> None:
    b = config_broker.bootstrap
    group = ("--entity-type", "group", "--entity-name", "g1")
    assert samsa("config", "set", *group, "share.auto.offset.reset=earliest",
                 bootstrap=b).rc == 0
    assert _own(samsa, b, *group) == {"share.auto.offset.reset": ("earliest", "GROUP_CONFIG")}
    metrics = ("--entity-type", "client-metrics", "--entity-name", "every-second")
    assert samsa("config", "set", *metrics, "interval.ms=1000", "metrics=org.apache.kafka.",
                 bootstrap=b).rc == 0
    assert _own(samsa, b, *metrics)["interval.ms"] == ("1000", "CLIENT_METRICS_CONFIG")
    r = samsa("config", "set", *metrics, "interval.ms=50", bootstrap=b)
    assert (r.rc, r.err) == (1, "samsa: INVALID_REQUEST: Invalid value 50 for interval.ms, "
                                "interval must be between 100 and 3600000 (1 hour)\n")
    r = samsa("config", "describe", "--entity-type", "topic", "--entity-default", bootstrap=b)
    assert (r.rc, r.err) == (1, "samsa: INVALID_REQUEST: a topic needs --entity-name (only a "
                                "broker has a default, --entity-default)\n")
