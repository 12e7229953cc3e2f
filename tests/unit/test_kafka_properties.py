"""Every broker and group property Kafka knows is known to Samsa.

config/schema/kafka_properties.toml is Kafka's own table (generated from Kafka's jars by
tools/kafka_configs/generate.py): a property there that Samsa does not know, or knows with
another type or Kafka default, fails here. Kafka's properties that Samsa does not implement
are accepted without effect, each for a reason config/schema/kafka_only.toml gives; they
change dynamically where Kafka's do, per broker only where Kafka's are per-broker.
"""

from __future__ import annotations

import pytest

from samsa.config import BROKER_PROPERTIES, BrokerConfig
from samsa.config.dynamic import DynamicConfigError, validate_update
from samsa.config.group import GROUP_PROPERTIES
from samsa.config.schema import (
    DYNAMIC_BROKER_CONFIGS,
    DYNAMIC_SECURITY_CONFIGS,
    PER_BROKER_ONLY_CONFIGS,
    ConfigType,
)
from samsa.config.schema.kafka_table import (
    READ_ONLY,
    kafka_only_reason,
    kafka_properties,
    kafka_version,
)
from samsa.config.schema.values import parse_value
from samsa.protocol.errors import ErrorCode

KAFKA = kafka_properties("broker")
# Kafka's ConfigDef types that Samsa's table spells as a string (Kafka's CLASS values are
# Java class names; Samsa's properties of that kind take its own names).
_SAME_TYPE = {ConfigType.CLASS: {ConfigType.CLASS, ConfigType.STRING}}
# Samsa's own properties it types otherwise than Kafka (it parses them itself): DescribeConfigs
# reports these as STRING where Kafka reports LIST or PASSWORD. Not widened: a new mismatch fails.
_TYPED_OTHERWISE = {"advertised.listeners", "listeners", "log.dir", "log.dirs",
                    "ssl.keystore.certificate.chain", "ssl.truststore.certificates"}


def test_the_table_is_kafka_4_4s() -> None:
    assert kafka_version() == "4.4.0"
    assert len(KAFKA) > 350 and "sasl.kerberos.min.time.before.relogin" in KAFKA


def test_every_kafka_broker_property_is_known() -> None:
    missing = sorted(set(KAFKA) - set(BROKER_PROPERTIES))
    assert missing == [], f"Kafka {kafka_version()} knows these, Samsa does not"


def test_kafka_only_properties_each_have_a_reason() -> None:
    unreviewed = sorted(p.name for p in BROKER_PROPERTIES.values()
                        if p.kafka_only and kafka_only_reason(p.name) is None)
    assert unreviewed == [], "give each a reason in config/schema/kafka_only.toml"


def test_known_properties_have_kafkas_type() -> None:
    wrong = {name: (BROKER_PROPERTIES[name].type.name, k.type.name) for name, k in KAFKA.items()
             if BROKER_PROPERTIES[name].type not in _SAME_TYPE.get(k.type, {k.type})
             and name not in _TYPED_OTHERWISE}
    assert wrong == {}


@pytest.mark.parametrize("name", sorted(n for n, p in BROKER_PROPERTIES.items() if p.kafka_only))
def test_kafka_only_property_takes_kafkas_default_and_mode(name: str) -> None:
    k, p = KAFKA[name], BROKER_PROPERTIES[name]
    assert p.default == parse_value(name, k.type, k.default)
    assert p.ignored and "has no effect in Samsa" in p.doc
    assert (name in DYNAMIC_BROKER_CONFIGS) == (k.mode != READ_ONLY)
    BrokerConfig({name: k.default})  # accepted at start-up


def test_dynamic_update_of_a_kafka_only_property_follows_kafkas_mode() -> None:
    broker = BrokerConfig()
    key = "sasl.kerberos.min.time.before.relogin"  # per-broker in Kafka
    assert key in PER_BROKER_ONLY_CONFIGS
    assert validate_update(broker, {key: "58000"}, per_broker=True)[key] == 58000
    with pytest.raises(DynamicConfigError) as info:
        validate_update(broker, {key: "58000"}, per_broker=False)
    assert info.value.error_code == ErrorCode.invalid_request
    assert "Cannot update these configs at default cluster level" in str(info.value)
    with pytest.raises(DynamicConfigError) as info:
        validate_update(broker, {key: "soon"}, per_broker=True)
    assert info.value.error_code == ErrorCode.invalid_config
    # cluster-wide in Kafka: at either level; read-only: refused as Kafka refuses it
    assert validate_update(broker, {"metric.reporters": ""}, per_broker=False)
    with pytest.raises(DynamicConfigError) as info:
        validate_update(broker, {"process.roles": "broker"}, per_broker=True)
    assert info.value.error_code == ErrorCode.invalid_request
    assert "Cannot update these configs dynamically: Set(process.roles)" in str(info.value)


# Kafka's per-broker and cluster-wide properties that Samsa implements but cannot change while
# it runs (refused as "Cannot update these configs dynamically"): the listeners, their SASL
# mechanisms and TLS settings, and the connection creation rate. Not widened: a new one fails.
_STATIC_IN_SAMSA = {
    "listeners", "listener.security.protocol.map", "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol", "ssl.cipher.suites", "ssl.client.auth",
    "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm", "ssl.protocol",
    "max.connection.creation.rate",
}


def test_dynamic_where_kafkas_are_and_nowhere_else() -> None:
    """A property changes while the broker runs where Kafka's does, except _STATIC_IN_SAMSA;
    the key and trust stores only with a listener prefix, as in Kafka."""
    kafka_dynamic = {n for n, k in KAFKA.items() if k.mode != READ_ONLY}
    samsa_dynamic = (DYNAMIC_BROKER_CONFIGS | DYNAMIC_SECURITY_CONFIGS) & set(KAFKA)
    assert sorted(samsa_dynamic - kafka_dynamic) == []
    assert sorted(kafka_dynamic - samsa_dynamic) == sorted(_STATIC_IN_SAMSA)


def test_a_read_only_synonym_is_refused_as_kafka_refuses_it() -> None:
    """log.retention.hours is read-only in Kafka (only log.retention.ms, the first synonym,
    is dynamic): "Cannot update these configs dynamically"."""
    with pytest.raises(DynamicConfigError) as info:
        validate_update(BrokerConfig(), {"log.retention.hours": "2"}, per_broker=False)
    assert info.value.error_code == ErrorCode.invalid_request
    assert "Cannot update these configs dynamically: Set(log.retention.hours)" in str(info.value)
    assert validate_update(BrokerConfig(), {"log.retention.ms": "7200000"},
                           per_broker=False).log_retention_ms == 7_200_000


def test_every_kafka_group_property_is_known() -> None:
    missing = sorted(set(kafka_properties("group")) - set(GROUP_PROPERTIES))
    assert missing == [], f"Kafka {kafka_version()}'s GroupConfig has these, Samsa does not"
