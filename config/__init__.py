"""Broker and topic configuration with Kafka's property names, types and defaults."""

from samsa.config.loader import load_config
from samsa.config.schema import (
    BROKER_PROPERTIES,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    PropertyDef,
)
from samsa.config.topic import (
    TOPIC_PROPERTIES,
    ConfigEntry,
    ConfigSynonym,
    InvalidConfigError,
    describe_broker_config,
    describe_topic_config,
    effective_topic_config,
    topic_defaults,
    validate_topic_configs,
)

__all__ = [
    "BROKER_PROPERTIES",
    "TOPIC_PROPERTIES",
    "BrokerConfig",
    "ConfigEntry",
    "ConfigError",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "InvalidConfigError",
    "PropertyDef",
    "describe_broker_config",
    "describe_topic_config",
    "effective_topic_config",
    "load_config",
    "topic_defaults",
    "validate_topic_configs",
]
