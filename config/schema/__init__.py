"""Broker properties: Kafka's names, types, defaults and validators, plus `BrokerConfig`.

The table mirrors Apache Kafka's broker ConfigDefs (ServerConfigs, ServerLogConfigs,
CleanerConfig, ReplicationConfigs, SocketServerConfigs, GroupCoordinatorConfig,
TransactionLogConfig, TransactionStateManagerConfig, ZkConfigs). Defaults are Kafka's except
where `kafka_default` records that Samsa differs (bind address, data directory, node id).

This package's modules: `values` (types, sources, errors, parsing and printing values),
`validators`, `property_def` (PropertyDef, the reader of the table and what its entries share),
`properties.toml` (the table itself: every property's name, type, default, validator and doc, by
area), `registry` (the whole table in order, the dynamic sets, the topic synonyms), `listeners`
(listener parsing) and `broker_config` (BrokerConfig). Import from `samsa.config.schema`, which
re-exports them all.
"""

from __future__ import annotations

from samsa.config.schema.broker_config import BrokerConfig, ListenerConfig
from samsa.config.schema.listeners import (
    Listener,
    parse_listeners,
    parse_protocol_map,
    split_listener_key,
)
from samsa.config.schema.property_def import (
    AUTHORIZERS,
    COMPRESSION_TYPES,
    DEFAULT_PROTOCOL_MAP,
    GZIP_LEVEL,
    IGNORED_DOC,
    LOG_LEVELS,
    LS,
    LZ4_LEVEL,
    PW,
    RACK_AWARE_SELECTOR,
    REFUSED_DOC,
    REPLICA_SELECTORS,
    SECURITY_PROTOCOLS,
    SH,
    ZSTD_LEVEL,
    B,
    D,
    I,
    L,
    PropertyDef,
    S,
)
from samsa.config.schema.registry import (
    BROKER_PROPERTIES,
    DYNAMIC_BROKER_CONFIGS,
    DYNAMIC_SECURITY_CONFIGS,
    INTERNAL_BROKER_CONFIGS,
    PER_BROKER_ONLY_CONFIGS,
    THREAD_COUNT_CONFIGS,
    TOPIC_SYNONYMS,
    broker_synonyms,
    lookup,
)
from samsa.config.schema.validators import (
    LoggerLevels,
    OneOfOrRange,
    Range,
    Validator,
    ValidList,
    ValidString,
    at_least,
    between,
    parse_logger_levels,
)
from samsa.config.schema.values import (
    INT_MAX,
    LONG_MAX,
    ConfigError,
    ConfigSource,
    ConfigType,
    java_double_str,
    parse_value,
    value_to_string,
)

__all__ = [
    "AUTHORIZERS", "B", "BROKER_PROPERTIES", "COMPRESSION_TYPES", "D", "DEFAULT_PROTOCOL_MAP",
    "DYNAMIC_BROKER_CONFIGS", "DYNAMIC_SECURITY_CONFIGS", "GZIP_LEVEL", "I", "IGNORED_DOC",
    "INTERNAL_BROKER_CONFIGS",
    "INT_MAX", "L", "LOG_LEVELS", "LONG_MAX", "LS", "LZ4_LEVEL", "PER_BROKER_ONLY_CONFIGS", "PW",
    "RACK_AWARE_SELECTOR",
    "REFUSED_DOC", "REPLICA_SELECTORS", "S", "SECURITY_PROTOCOLS", "SH", "THREAD_COUNT_CONFIGS",
    "TOPIC_SYNONYMS", "ZSTD_LEVEL", "BrokerConfig", "ConfigError", "ConfigSource", "ConfigType",
    "Listener", "ListenerConfig", "LoggerLevels", "OneOfOrRange", "PropertyDef", "Range",
    "ValidList", "ValidString", "Validator", "at_least", "between", "broker_synonyms",
    "java_double_str", "lookup", "parse_listeners", "parse_logger_levels", "parse_protocol_map",
    "parse_value", "split_listener_key", "value_to_string",
]
