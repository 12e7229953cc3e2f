"""The broker property table in Kafka's order, its dynamic sets and topic synonyms, and lookup."""

from __future__ import annotations

from dataclasses import replace

from samsa.config.schema.kafka_table import (
    CLUSTER_WIDE,
    PER_BROKER,
    kafka_only_table,
    kafka_properties,
)
from samsa.config.schema.property_def import PropertyDef, load_table
from samsa.config.schema.values import ConfigError

# Every property, in the order DescribeConfigs and the documentation list them: Samsa's, then
# Kafka's others, accepted without effect.
_SAMSA_TABLE: list[PropertyDef] = load_table()
_KAFKA_ONLY = kafka_only_table({p.name for p in _SAMSA_TABLE})
_TABLE: list[PropertyDef] = _SAMSA_TABLE + _KAFKA_ONLY

# Kafka's DynamicBrokerConfig.AllDynamicConfigs (with DynamicConfig.Broker's replication
# quotas) that Samsa has and can change while it runs: the log defaults (every broker synonym
# of a topic config), the cleaner's settings, the thread counts, the connection limits, the
# producer-state settings, the replication throttles, the consumer groups' assignment
# interval bound and the streams groups' assignment interval. The listeners' key and trust stores
# change too, per listener and per broker only (DYNAMIC_SECURITY_CONFIGS). Kafka's other
# dynamic configs (listeners, SASL) are static in Samsa.
_DYNAMIC_NON_LOG = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "num.network.threads",
    "max.connections", "max.connections.per.ip",
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "group.consumer.assignment.interval.ms",  # read where used: the groups' configs' bounds
    "group.streams.assignment.interval.ms",  # read at each streams group heartbeat
    "cordoned.log.dirs",
})
# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only with a listener prefix
# (listener.name.<listener>.ssl.keystore.location), only per broker.
DYNAMIC_SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
# Kafka's DynamicThreadPool.ReconfigurableConfigs (and num.network.threads, checked alike):
# a new count must be at least half and at most double the current one.
THREAD_COUNT_CONFIGS = frozenset({"num.io.threads", "num.replica.fetchers",
                                  "num.recovery.threads.per.data.dir", "background.threads",
                                  "num.network.threads"})

# Topic property -> broker properties that set its default, highest priority first, each with
# the factor that converts it to the topic property's unit (Kafka's ServerTopicConfigSynonyms).
_MIN, _HOUR = 60_000, 3_600_000
TOPIC_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    p.topic_synonym: ((p.name, 1),) for p in _TABLE if p.topic_synonym
}
TOPIC_SYNONYMS["segment.ms"] = (("log.roll.ms", 1), ("log.roll.hours", _HOUR))
TOPIC_SYNONYMS["segment.jitter.ms"] = (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR))
TOPIC_SYNONYMS["retention.ms"] = (
    ("log.retention.ms", 1), ("log.retention.minutes", _MIN), ("log.retention.hours", _HOUR)
)
TOPIC_SYNONYMS["flush.ms"] = (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1))

# Kafka's internal broker configs: described only where set (Kafka's DescribeConfigs lists the
# originals and the non-internal values).
INTERNAL_BROKER_CONFIGS = frozenset(k.name for k in kafka_properties("broker").values()
                                    if k.internal)
# Kafka's properties that Samsa only accepts change dynamically where Kafka's do; Kafka's
# per-broker ones (its listener and SASL settings) only per broker, not as the cluster default.
PER_BROKER_ONLY_CONFIGS = frozenset(p.name for p in _KAFKA_ONLY if p.kafka_mode == PER_BROKER) | {
    "cordoned.log.dirs"}
# Of a topic property's broker synonyms only the first changes dynamically (Kafka's
# DynamicLogConfig: log.retention.ms, not log.retention.hours or .minutes).
DYNAMIC_BROKER_CONFIGS: frozenset[str] = _DYNAMIC_NON_LOG | frozenset(
    chain[0][0] for chain in TOPIC_SYNONYMS.values()) | PER_BROKER_ONLY_CONFIGS | \
    frozenset(p.name for p in _KAFKA_ONLY if p.kafka_mode == CLUSTER_WIDE)
BROKER_PROPERTIES: dict[str, PropertyDef] = {
    p.name: replace(p, dynamic=p.name in DYNAMIC_BROKER_CONFIGS) for p in _TABLE}


def broker_synonyms(name: str) -> list[str]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: a property's group of aliases
    (log.flush.scheduler.interval.ms is log.flush.interval.ms's fallback, not its alias)."""
    if name == "log.flush.scheduler.interval.ms":
        return [name]
    for chain in TOPIC_SYNONYMS.values():
        names = [n for n, _ in chain]
        if len(names) > 1 and name in names:
            return names
    return [name]


# Property -> the other properties whose value in a higher layer hides this one's value in
# the lower layers (those whose synonyms include it).
SYNONYM_GROUPS: dict[str, tuple[str, ...]] = {}
for _chain in TOPIC_SYNONYMS.values():
    for _k, _ in _chain:
        for _x in broker_synonyms(_k):
            if _x != _k:
                SYNONYM_GROUPS[_x] = (*SYNONYM_GROUPS.get(_x, ()), _k)


def lookup(name: str) -> PropertyDef:
    try:
        return BROKER_PROPERTIES[name]
    except KeyError:
        raise ConfigError.unknown(name, list(BROKER_PROPERTIES)) from None
