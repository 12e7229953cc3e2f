"""PropertyDef, the `prop` helper that builds table rows, and what the property tables share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from samsa.config.schema.validators import OneOfOrRange, Validator, between
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

G_SERVER, G_SOCKET, G_LOG, G_CLEANER = "server", "socket", "log", "log cleaner"
G_SECURITY = "security"
G_REPL, G_GROUP, G_TXN, G_ZK, G_SAMSA = (
    "replication",
    "group coordinator",
    "transactions",
    "zookeeper",
    "samsa",
)


def prop(name: str, ctype: ConfigType, default: Any, doc: str, validator: Validator | None = None,
       *, topic: str | None = None, kafka: Any = _SAME, group: str, ignored: str | None = None,
       refused: str | None = None) -> PropertyDef:
    if ignored is not None:
        doc += IGNORED_DOC.format(reason=ignored)
    if refused is not None:
        doc += REFUSED_DOC.format(reason=refused)
    return PropertyDef(name, ctype, default, doc, validator, False, topic, kafka, group, ignored,
                       refused)
