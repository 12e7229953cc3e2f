"""Broker properties: Kafka's names, types, defaults and validators, plus `BrokerConfig`.

The table mirrors Apache Kafka's broker ConfigDefs (ServerConfigs, ServerLogConfigs,
CleanerConfig, ReplicationConfigs, SocketServerConfigs, GroupCoordinatorConfig,
TransactionLogConfig, TransactionStateManagerConfig, ZkConfigs). Defaults are Kafka's except
where `kafka_default` records that Samsa differs (bind address, data directory, node id).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import IntEnum
from pathlib import Path
from typing import Any

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ConfigType ids."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs ConfigSource ids."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8  # a group's own override (Kafka 4's group configs)


class ConfigError(ValueError):
    """A bad configuration key or value; the message always names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key

    @classmethod
    def invalid(cls, key: str, value: object, reason: str) -> ConfigError:
        # Same shape as Kafka's ConfigException(name, value, message).
        return cls(key, f"Invalid value {value!r} for configuration {key}: {reason}")

    @classmethod
    def unknown(cls, key: str, known: Iterator[str] | list[str]) -> ConfigError:
        msg = f"Unknown configuration '{key}'"
        close = difflib.get_close_matches(key, list(known), n=1)
        if close:
            msg += f" (did you mean '{close[0]}'?)"
        return cls(key, msg)


# ---------------------------------------------------------------------------------------------
# Validators: callables (key, parsed value) -> None that raise ConfigError; None passes.


@dataclass(frozen=True)
class Range:
    min: float | None = None
    max: float | None = None

    def __call__(self, key: str, value: Any) -> None:
        if value is None:
            return
        if self.min is not None and value < self.min:
            raise ConfigError.invalid(key, value, f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigError.invalid(key, value, f"Value must be no more than {self.max}")

    def __str__(self) -> str:  # Kafka's Range.toString
        if self.min is None:
            return f"[...,{self.max}]"
        if self.max is None:
            return f"[{self.min},...]"
        return f"[{self.min},...,{self.max}]"


def at_least(n: float) -> Range:
    return Range(min=n)


def between(lo: float, hi: float) -> Range:
    return Range(min=lo, max=hi)


@dataclass(frozen=True)
class ValidString:
    choices: tuple[str, ...]

    def __call__(self, key: str, value: Any) -> None:
        if value is not None and value not in self.choices:
            choices = ", ".join(self.choices)
            raise ConfigError.invalid(key, value, f"String must be one of: {choices}")

    def __str__(self) -> str:
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True)
class ValidList:
    choices: tuple[str, ...]

    def __call__(self, key: str, value: Any) -> None:
        for item in value or ():
            if item not in self.choices:
                raise ConfigError.invalid(
                    key, ",".join(value), f"String must be one of: {', '.join(self.choices)}"
                )

    def __str__(self) -> str:
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True)
class LoggerLevels:
    """`logger=LEVEL[,logger=LEVEL...]` (Samsa's per-module log levels)."""

    levels: tuple[str, ...]

    def __call__(self, key: str, value: Any) -> None:
        if value is None:
            return
        try:
            parse_logger_levels(value, self.levels)
        except ValueError as exc:
            raise ConfigError.invalid(key, value, str(exc)) from None

    def __str__(self) -> str:
        return f"logger=LEVEL,... with LEVEL in [{', '.join(self.levels)}]"


def parse_logger_levels(value: str, levels: tuple[str, ...]) -> dict[str, str]:
    """'samsa.coordinator.transaction=DEBUG, broker=WARN' -> {logger: level}."""
    out: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        name, sep, level = item.partition("=")
        name, level = name.strip(), level.strip().upper()
        if not sep or not name:
            raise ValueError(f"{item.strip()!r} is not logger=LEVEL")
        if level not in levels:
            raise ValueError(f"level of {name} must be one of: {', '.join(levels)}")
        out[name] = level
    return out


@dataclass(frozen=True)
class OneOfOrRange:
    """A special value or a range, e.g. gzip level -1 (library default) or 1..9."""

    special: int
    range: Range

    def __call__(self, key: str, value: Any) -> None:
        if value is not None and value != self.special:
            self.range(key, value)

    def __str__(self) -> str:
        return f"{self.range} or {self.special}"


Validator = Callable[[str, Any], None]

# ---------------------------------------------------------------------------------------------
# Parsing and printing values the way Kafka's ConfigDef does.

_INT_RE = re.compile(r"[+-]?\d+")
_INT_BOUNDS = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1, "a 16-bit integer (short)"),
    ConfigType.INT: (-(2**31), INT_MAX, "a 32-bit integer (int)"),
    ConfigType.LONG: (-(2**63), LONG_MAX, "a 64-bit integer (long)"),
}


def parse_value(key: str, ctype: ConfigType, raw: object) -> Any:
    """Parse a string (from `--set`/AlterConfigs) or a YAML scalar into the property's type."""
    if raw is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise ConfigError.invalid(key, raw, "Expected value to be either true or false")
    if ctype in _INT_BOUNDS:
        lo, hi, what = _INT_BOUNDS[ctype]
        if isinstance(raw, int) and not isinstance(raw, bool):
            n = raw
        elif isinstance(raw, str) and _INT_RE.fullmatch(raw.strip()):
            n = int(raw.strip())
        else:
            raise ConfigError.invalid(key, raw, f"Expected value to be {what}")
        if not lo <= n <= hi:
            raise ConfigError.invalid(key, raw, f"Expected value to be {what}")
        return n
    if ctype is ConfigType.DOUBLE:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw.strip())
            except ValueError:
                pass
        raise ConfigError.invalid(key, raw, "Expected value to be a double")
    if ctype is ConfigType.LIST:
        if isinstance(raw, list | tuple):
            return [str(x).strip() for x in raw]
        if isinstance(raw, str):
            s = raw.strip()
            return [] if not s else [part.strip() for part in s.split(",")]
        raise ConfigError.invalid(key, raw, "Expected a comma separated list")
    # STRING: YAML may hand us a number or a bool for a string-typed property.
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, str | int | float):
        return str(raw).strip()
    raise ConfigError.invalid(key, raw, "Expected value to be a string")


def java_double_str(x: float) -> str:
    """Double.toString: plain in [1e-3, 1e7), otherwise d.dddE<n>."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        s = repr(x)
        return s if ("." in s or "e" in s) else s + ".0"
    # Shortest round-trip digits (as Java prints them), re-laid out in Java's notation.
    _, digits, exp = Decimal(repr(abs(x))).normalize().as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits))
    sign = "-" if x < 0 else ""
    return f"{sign}{ds[0]}.{ds[1:] or '0'}E{len(ds) - 1 + exp}"


def value_to_string(ctype: ConfigType, value: Any) -> str | None:
    """ConfigDef.convertToString: how Kafka prints a parsed value in DescribeConfigs."""
    if value is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype is ConfigType.LIST:
        return ",".join(value)
    if ctype is ConfigType.DOUBLE:
        return java_double_str(float(value))
    return str(value)


# ---------------------------------------------------------------------------------------------
# The property table.

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
_NO_RECOMPRESSION = "batches are stored as the producer compressed them, never recompressed"
_NO_TIERED_STORAGE = "it applies only to tiered storage, which Samsa does not have"
_KEY_MAP_GROWS = "the cleaner's key map grows with the data instead of using fixed buffers"
IGNORED_DOC = " Accepted for compatibility; has no effect in Samsa: {reason}."
REFUSED_DOC = " Samsa refuses any value other than the default: {reason}."

_G_SERVER, _G_SOCKET, _G_LOG, _G_CLEANER = "server", "socket", "log", "log cleaner"
_G_SECURITY = "security"
_G_REPL, _G_GROUP, _G_TXN, _G_ZK, _G_SAMSA = (
    "replication",
    "group coordinator",
    "transactions",
    "zookeeper",
    "samsa",
)


def _p(name: str, ctype: ConfigType, default: Any, doc: str, validator: Validator | None = None,
       *, topic: str | None = None, kafka: Any = _SAME, group: str, ignored: str | None = None,
       refused: str | None = None) -> PropertyDef:
    if ignored is not None:
        doc += IGNORED_DOC.format(reason=ignored)
    if refused is not None:
        doc += REFUSED_DOC.format(reason=refused)
    return PropertyDef(name, ctype, default, doc, validator, False, topic, kafka, group, ignored,
                       refused)


_TABLE: list[PropertyDef] = [
    # --- server
    _p("node.id", I, 0, "This broker's id (Samsa runs one broker; broker.id is a synonym).",
       kafka=-1, group=_G_SERVER),
    _p("broker.id", I, 0, "Legacy name of node.id; when only one of the two is set the other "
       "follows it.", kafka=-1, group=_G_SERVER),
    _p("message.max.bytes", I, 1048588, "Largest record batch size the broker accepts "
       "(after compression).", at_least(0), topic="max.message.bytes", group=_G_SERVER),
    _p("auto.create.topics.enable", B, True, "Create a topic when a client asks for metadata "
       "of, or produces to, a topic that does not exist.", group=_G_SERVER),
    _p("unstable.feature.versions.enable", B, False, "Support the levels of features still "
       "in development, so UpdateFeatures may finalize them (none today: share.version 1 is "
       "production-ready, as in Kafka 4.2+); for testing only.", group=_G_SERVER),
    _p("initial.feature.levels", LS, [], "Feature levels a new cluster finalizes, as "
       "name=level (what kafka-storage format --feature gives a KRaft cluster), e.g. "
       "'transaction.version=1,group.version=0'; a feature not named gets Kafka 4.3's level "
       "for a new cluster (transaction.version 2, group.version 1, share.version 1). Read "
       "once, when the cluster's metadata is created; later, kafka-features changes the "
       "levels.",
       group=_G_SERVER),
    _p("delete.topic.enable", B, True, "Allow DeleteTopics; when false it is refused.",
       group=_G_SERVER),
    _p("compression.type", S, "producer", "Final compression of a topic's data; 'producer' "
       "keeps what the producer sent.", ValidString(COMPRESSION_TYPES),
       topic="compression.type", group=_G_SERVER,
       refused="batches are stored as the producer compressed them"),
    _p("compression.gzip.level", I, -1, "gzip level when compression.type is gzip.",
       GZIP_LEVEL, topic="compression.gzip.level", group=_G_SERVER, ignored=_NO_RECOMPRESSION),
    _p("compression.lz4.level", I, 9, "lz4 level when compression.type is lz4.", LZ4_LEVEL,
       topic="compression.lz4.level", group=_G_SERVER, ignored=_NO_RECOMPRESSION),
    _p("compression.zstd.level", I, 3, "zstd level when compression.type is zstd.", ZSTD_LEVEL,
       topic="compression.zstd.level", group=_G_SERVER, ignored=_NO_RECOMPRESSION),
    _p("num.io.threads", I, 8, "Threads handling requests.", at_least(1), group=_G_SERVER,
       ignored="requests are handled on one event loop"),
    _p("num.network.threads", I, 3, "Threads reading and writing sockets.", at_least(1),
       group=_G_SERVER, ignored="sockets are served by the same event loop"),
    _p("background.threads", I, 10, "Threads for background tasks.", at_least(1),
       group=_G_SERVER, ignored="background tasks run on the event loop"),
    _p("fetch.max.bytes", I, 57671680, "Most bytes returned for one fetch request (a fetch "
       "asking for more gets this much; the first batch is returned whatever its size).",
       at_least(1024), group=_G_SERVER),
    _p("max.request.partition.size.limit", I, 2000, "Most partitions one "
       "DescribeTopicPartitions response describes (the client asks for the rest).",
       at_least(1), group=_G_SERVER),
    _p("max.incremental.fetch.session.cache.slots", I, 1000, "Most incremental fetch sessions "
       "kept.", at_least(0), group=_G_SERVER,
       ignored="there are no incremental fetch sessions, every fetch is a full one"),
    _p("controlled.shutdown.enable", B, True, "Before shutting down, ask the controller "
       "(ControlledShutdown) to move the leadership of this broker's partitions to other "
       "in-sync replicas and take it out of their ISRs (a single broker just flushes and "
       "closes).", group=_G_SERVER),
    _p("controlled.shutdown.max.retries", I, 3, "Attempts of a controlled shutdown (the "
       "controller unreachable, or partitions still led here) before the broker shuts down "
       "anyway, leaving the rest to the controller once its registration is gone.",
       at_least(1), group=_G_SERVER),
    _p("controlled.shutdown.retry.backoff.ms", L, 5000, "Wait between attempts of a "
       "controlled shutdown.", at_least(0), group=_G_SERVER),
    _p("broker.rack", S, None, "Rack of this broker, reported in metadata.", group=_G_SERVER),
    # --- socket server
    _p("listeners", S, "PLAINTEXT://127.0.0.1:9092", "Where the broker listens: a comma "
       "separated list of NAME://HOST:PORT, each name mapped to a security protocol by "
       "listener.security.protocol.map, with HOST in 127.0.0.0/8 (any host once "
       "advertised.listeners is set).", kafka="PLAINTEXT://:9092",
       group=_G_SOCKET),
    _p("advertised.listeners", S, None, "Addresses given to clients in metadata, per listener "
       "name; a listener not named here is advertised as it listens.", group=_G_SOCKET),
    _p("listener.security.protocol.map", S, DEFAULT_PROTOCOL_MAP, "NAME:PROTOCOL pairs: the "
       "security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) of each listener name.",
       group=_G_SOCKET),
    _p("inter.broker.listener.name", S, None, "The listener brokers use to reach each other; "
       "unset: the listener of security.inter.broker.protocol.", group=_G_SOCKET),
    _p("security.inter.broker.protocol", S, "PLAINTEXT", "Security protocol between brokers "
       "when inter.broker.listener.name is unset: the brokers connect to the first listener "
       "of that protocol.", ValidString(SECURITY_PROTOCOLS), group=_G_SOCKET),
    _p("sasl.mechanism.inter.broker.protocol", S, "PLAIN", "SASL mechanism brokers log in to "
       "each other with on a SASL inter-broker listener (one of the listener's "
       "sasl.enabled.mechanisms), with the username and password of the listener's "
       "listener.name.<listener>.<mechanism>.sasl.jaas.config.", kafka="GSSAPI",
       group=_G_SECURITY),
    _p("ssl.endpoint.identification.algorithm", S, "https", "How a broker checks another's "
       "certificate when it connects to it over TLS: https (the certificate must name the "
       "host) or empty (any certificate the trust store accepts).",
       ValidString(("https", "")), group=_G_SECURITY),
    _p("connection.failed.authentication.delay.ms", I, 100, "Delay before the connection of a "
       "failed authentication is closed.", at_least(0), group=_G_SECURITY),
    _p("sasl.server.max.receive.size", I, 524288, "Largest request read from a client before "
       "its SASL authentication completes; a bigger one closes the connection.", at_least(1),
       group=_G_SECURITY),
    _p("sasl.enabled.mechanisms", LS, ["PLAIN"], "SASL mechanisms offered on SASL listeners: "
       "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.", kafka=["GSSAPI"], group=_G_SECURITY),
    _p("connections.max.reauth.ms", L, 0, "When positive, the most a SASL session may last "
       "before the client must re-authenticate on its connection (KIP-368; clients are told "
       "the lifetime, capped by the credential's own expiry); a connection whose session "
       "expired is closed at its next request. May be prefixed with the listener and the "
       "mechanism in lower case: listener.name.<listener>.<mechanism>."
       "connections.max.reauth.ms.", at_least(0), group=_G_SECURITY),
    _p("sasl.server.callback.handler.class", S, None, "OAUTHBEARER token validation: a Python "
       "callable named package.module:callable, called with the token and the listener's "
       "JAAS options, returning the principal and expiry (see the security documentation); "
       "unset: Kafka's unsecured JWT validator. Usually set per listener as "
       "listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class.",
       group=_G_SECURITY),
    _p("ssl.keystore.type", S, "PEM", "Format of the key store: PEM (a file holding the "
       "private key and the certificate chain, or ssl.keystore.key and "
       "ssl.keystore.certificate.chain inline) or PKCS12; JKS is not read.",
       ValidString(("PEM", "PKCS12")), kafka="JKS", group=_G_SECURITY),
    _p("ssl.keystore.location", S, None, "Key store file.", group=_G_SECURITY),
    _p("ssl.keystore.password", PW, None, "Password of the key store file (PKCS12), or of an "
       "encrypted PEM key when ssl.key.password is unset.", group=_G_SECURITY),
    _p("ssl.key.password", PW, None, "Password of the private key.", group=_G_SECURITY),
    _p("ssl.keystore.key", PW, None, "PEM private key (with ssl.keystore.type=PEM).",
       group=_G_SECURITY),
    _p("ssl.keystore.certificate.chain", S, None, "PEM certificate chain (with "
       "ssl.keystore.type=PEM).", group=_G_SECURITY),
    _p("ssl.truststore.type", S, "PEM", "Format of the trust store: PEM or PKCS12.",
       ValidString(("PEM", "PKCS12")), kafka="JKS", group=_G_SECURITY),
    _p("ssl.truststore.location", S, None, "Trust store file (PEM certificates) used to verify "
       "client certificates.", group=_G_SECURITY),
    _p("ssl.truststore.password", PW, None, "Password of a PKCS12 trust store.",
       group=_G_SECURITY),
    _p("ssl.truststore.certificates", S, None, "PEM trusted certificates inline.",
       group=_G_SECURITY),
    _p("ssl.client.auth", S, "none", "Client certificates: none, requested or required.",
       ValidString(("none", "requested", "required")), group=_G_SECURITY),
    _p("ssl.enabled.protocols", LS, ["TLSv1.2", "TLSv1.3"], "TLS versions accepted.",
       ValidList(("TLSv1.2", "TLSv1.3")), group=_G_SECURITY),
    _p("ssl.protocol", S, "TLSv1.3", "Newest TLS version offered.",
       ValidString(("TLSv1.2", "TLSv1.3", "TLS")), group=_G_SECURITY),
    _p("ssl.cipher.suites", LS, [], "TLS 1.2 cipher suites (OpenSSL names); empty: the "
       "defaults.", group=_G_SECURITY),
    _p("ssl.allow.dn.changes", B, False, "Whether a key store changed while the broker runs "
       "(listener.name.<listener>.ssl.keystore.*) may have a different subject "
       "distinguished name than the current one.", group=_G_SECURITY),
    _p("ssl.allow.san.changes", B, False, "Whether a key store changed while the broker runs "
       "may drop subject alternative names of the current one.", group=_G_SECURITY),
    _p("password.encoder.secret", PW, None, "The secret that encrypts the dynamic password "
       "configs (listener.name.<listener>.ssl.keystore.password...) stored in ZooKeeper; "
       "without it they cannot be set. (The single broker keeps them in its metadata file "
       "unencrypted, as Kafka's KRaft brokers keep them in the metadata log.)",
       group=_G_SECURITY),
    _p("password.encoder.keyfactory.algorithm", S, None, "The key derivation of the password "
       "encoder; unset: PBKDF2WithHmacSHA512.",
       ValidString(("PBKDF2WithHmacSHA512", "PBKDF2WithHmacSHA1")), group=_G_SECURITY),
    _p("password.encoder.key.length", I, 128, "The password encoder's key length in bits.",
       at_least(8), group=_G_SECURITY),
    _p("password.encoder.iterations", I, 4096, "The password encoder's key derivation "
       "iterations.", at_least(1024), group=_G_SECURITY),
    _p("ssl.principal.mapping.rules", S, "DEFAULT", "How a client certificate's distinguished "
       "name becomes a principal: DEFAULT keeps the whole name.", ValidString(("DEFAULT",)),
       group=_G_SECURITY),
    _p("authorizer.class.name", S, "", "The authorizer of requests: empty (every principal "
       "may do everything) or Kafka's built-in ACL authorizer, named "
       "org.apache.kafka.metadata.authorizer.StandardAuthorizer or "
       "kafka.security.authorizer.AclAuthorizer; Samsa has no other.", group=_G_SECURITY),
    _p("super.users", S, None, "Principals the authorizer allows everything, whatever the "
       "ACLs: a semicolon separated list such as User:admin;User:CN=broker.", group=_G_SECURITY),
    _p("allow.everyone.if.no.acl.found", B, False, "With an authorizer: allow an action on a "
       "resource that no ACL names (false: deny it).", group=_G_SECURITY),
    _p("socket.send.buffer.bytes", I, 102400, "SO_SNDBUF of accepted sockets; -1 keeps the OS "
       "default.", at_least(-1), group=_G_SOCKET),
    _p("socket.receive.buffer.bytes", I, 102400, "SO_RCVBUF of accepted sockets; -1 keeps the "
       "OS default.", at_least(-1), group=_G_SOCKET),
    _p("socket.request.max.bytes", I, 104857600, "Largest request the broker reads; bigger "
       "ones close the connection.", at_least(1), group=_G_SOCKET),
    _p("socket.listen.backlog.size", I, 50, "listen() backlog.", at_least(1), group=_G_SOCKET),
    _p("max.connections", I, INT_MAX, "Most connections at once; further ones wait (not "
       "accepted) until one closes.", at_least(0), group=_G_SOCKET),
    _p("max.connections.per.ip", I, INT_MAX, "Most connections from one address; a further "
       "one is closed as soon as it is accepted.", at_least(0), group=_G_SOCKET),
    _p("connections.max.idle.ms", L, 600000, "A connection with no request for this long is "
       "closed; -1 never closes one.", at_least(-1), group=_G_SOCKET),
    _p("quota.window.num", I, 11, "The number of samples to retain in memory for client "
       "quotas (a client's rate is measured over them).", at_least(1), group=_G_SOCKET),
    _p("quota.window.size.seconds", I, 1, "The time span of each sample for client quotas.",
       at_least(1), group=_G_SOCKET),
    _p("controller.quota.window.num", I, 11, "The number of samples of the controller "
       "mutation quota (controller_mutation_rate): its burst is num x size x rate.",
       at_least(1), group=_G_SOCKET),
    _p("controller.quota.window.size.seconds", I, 1, "The time span of each sample of the "
       "controller mutation quota.", at_least(1), group=_G_SOCKET),
    _p("queued.max.requests", I, 500, "Requests queued before reading pauses.", at_least(1),
       group=_G_SOCKET, ignored="each connection is handled one request at a time and there "
       "is no shared request queue to bound"),
    # --- log
    _p("num.partitions", I, 1, "Partitions of an auto-created topic, or of CreateTopics with "
       "num_partitions -1.", at_least(1), group=_G_LOG),
    _p("log.dir", S, "./data", "Data directory, used when log.dirs is not set.",
       kafka="/tmp/kafka-logs", group=_G_LOG),
    _p("log.dirs", S, None, "Comma-separated data directories; overrides log.dir. A new "
       "partition goes to the one holding the fewest partitions.", group=_G_LOG),
    _p("log.segment.bytes", I, 1073741824, "Largest size of one segment file.", at_least(14),
       topic="segment.bytes", group=_G_LOG),
    _p("log.roll.ms", L, None, "Roll a new segment after this long; if unset log.roll.hours "
       "is used.", topic="segment.ms", group=_G_LOG),
    _p("log.roll.hours", I, 168, "Roll a new segment after this many hours (secondary to "
       "log.roll.ms).", at_least(1), group=_G_LOG),
    _p("log.roll.jitter.ms", L, None, "Most random jitter subtracted from the roll time; if "
       "unset log.roll.jitter.hours is used.", topic="segment.jitter.ms", group=_G_LOG),
    _p("log.roll.jitter.hours", I, 0, "Roll jitter in hours (secondary to log.roll.jitter.ms).",
       at_least(0), group=_G_LOG),
    _p("log.retention.ms", L, None, "Delete segments older than this; -1 keeps forever; if "
       "unset log.retention.minutes is used.", topic="retention.ms", group=_G_LOG),
    _p("log.retention.minutes", I, None, "Retention in minutes (secondary to "
       "log.retention.ms); if unset log.retention.hours is used.", group=_G_LOG),
    _p("log.retention.hours", I, 168, "Retention in hours (tertiary to log.retention.ms).",
       group=_G_LOG),
    _p("log.retention.bytes", L, -1, "Delete old segments while a partition is larger than "
       "this; -1 means no size limit.", topic="retention.bytes", group=_G_LOG),
    _p("log.retention.check.interval.ms", L, 300000, "How often retention is enforced.",
       at_least(1), group=_G_LOG),
    _p("log.cleanup.policy", LS, ["delete"], "Default cleanup policy: delete, compact or both.",
       ValidList(("compact", "delete")), topic="cleanup.policy", group=_G_LOG),
    _p("log.index.size.max.bytes", I, 10485760, "Largest size of an offset/time index file.",
       at_least(4), topic="segment.index.bytes", group=_G_LOG),
    _p("log.index.interval.bytes", I, 4096, "Bytes of log between two offset-index entries.",
       at_least(0), topic="index.interval.bytes", group=_G_LOG),
    _p("log.flush.interval.messages", L, LONG_MAX, "fsync a partition after this many "
       "messages.", at_least(1), topic="flush.messages", group=_G_LOG),
    _p("log.flush.interval.ms", L, None, "fsync a partition when its oldest unflushed message "
       "is this old; if unset log.flush.scheduler.interval.ms is used.", topic="flush.ms",
       group=_G_LOG),
    _p("log.flush.scheduler.interval.ms", L, LONG_MAX, "How often the flusher checks whether a "
       "log needs an fsync.", group=_G_LOG),
    _p("log.flush.offset.checkpoint.interval.ms", I, 60000, "How often the recovery-point "
       "checkpoint is written.", at_least(0), group=_G_LOG),
    _p("log.flush.start.offset.checkpoint.interval.ms", I, 60000, "How often the log-start-"
       "offset checkpoint is written.", at_least(0), group=_G_LOG),
    _p("log.segment.delete.delay.ms", L, 60000, "Wait this long before deleting a removed "
       "segment's files.", at_least(0), topic="file.delete.delay.ms", group=_G_LOG),
    _p("log.preallocate", B, False, "Preallocate segment files at creation.",
       topic="preallocate", group=_G_LOG),
    _p("log.message.timestamp.type", S, "CreateTime", "Record timestamps are the producer's "
       "(CreateTime) or the broker's (LogAppendTime).", ValidString(("CreateTime",
       "LogAppendTime")), topic="message.timestamp.type", group=_G_LOG),
    _p("log.message.timestamp.before.max.ms", L, LONG_MAX, "How far a CreateTime timestamp may "
       "lag the broker clock; an older record fails its batch with "
       "INVALID_TIMESTAMP.", at_least(0), topic="message.timestamp.before.max.ms", group=_G_LOG),
    _p("log.message.timestamp.after.max.ms", L, LONG_MAX, "How far a CreateTime timestamp may "
       "lead the broker clock; a later record fails its batch with "
       "INVALID_TIMESTAMP.", at_least(0), topic="message.timestamp.after.max.ms", group=_G_LOG),
    _p("log.local.retention.ms", L, -2, "Local retention with tiered storage; -2 follows "
       "retention.ms.", at_least(-2), topic="local.retention.ms", group=_G_LOG,
       ignored=_NO_TIERED_STORAGE),
    _p("log.local.retention.bytes", L, -2, "Local retention bytes with tiered storage; -2 "
       "follows retention.bytes.", at_least(-2), topic="local.retention.bytes", group=_G_LOG,
       ignored=_NO_TIERED_STORAGE),
    _p("num.recovery.threads.per.data.dir", I, 1, "Threads recovering logs at start-up.",
       at_least(1), group=_G_LOG, ignored="recovery and shutdown flushes use a fixed pool of "
       "8 threads"),
    _p("min.insync.replicas", I, 1, "Replicas that must acknowledge an acks=all write.",
       at_least(1), topic="min.insync.replicas", group=_G_LOG),
    # --- log cleaner
    _p("log.cleaner.enable", B, True, "Run the log cleaner; when false compacted topics are "
       "not cleaned.", group=_G_CLEANER),
    _p("log.cleaner.threads", I, 1, "Cleaner threads.", at_least(0), group=_G_CLEANER,
       ignored="one cleaner compacts one log at a time"),
    _p("log.cleaner.backoff.ms", L, 15000, "How often the cleaner looks for a log to clean.",
       at_least(0), group=_G_CLEANER),
    _p("log.cleaner.dedupe.buffer.size", L, 134217728, "Memory for the cleaner's key map.",
       group=_G_CLEANER, ignored=_KEY_MAP_GROWS),
    _p("log.cleaner.io.buffer.size", I, 524288, "Cleaner I/O buffer memory.", at_least(0),
       group=_G_CLEANER, ignored="the cleaner has no fixed-size I/O buffers"),
    _p("log.cleaner.io.buffer.load.factor", D, 0.9, "Load factor of the cleaner's key map.",
       group=_G_CLEANER, ignored=_KEY_MAP_GROWS),
    _p("log.cleaner.io.max.bytes.per.second", D, 1.7976931348623157e308, "Cleaner I/O "
       "throttle.", group=_G_CLEANER, ignored="cleaner I/O is not throttled"),
    _p("log.cleaner.min.cleanable.ratio", D, 0.5, "Least dirty/total ratio before a log is "
       "cleaned.", between(0, 1), topic="min.cleanable.dirty.ratio", group=_G_CLEANER),
    _p("log.cleaner.delete.retention.ms", L, 86400000, "How long tombstones are kept in "
       "compacted topics.", at_least(0), topic="delete.retention.ms", group=_G_CLEANER),
    _p("log.cleaner.min.compaction.lag.ms", L, 0, "Least age before a record may be "
       "compacted.", at_least(0), topic="min.compaction.lag.ms", group=_G_CLEANER),
    _p("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, "Most age before a record must be "
       "eligible for compaction.", at_least(1), topic="max.compaction.lag.ms",
       group=_G_CLEANER),
    # --- replication
    _p("default.replication.factor", I, 1, "Replication factor of auto-created topics.",
       group=_G_REPL),
    _p("unclean.leader.election.enable", B, False, "Allow an out-of-sync replica to become "
       "leader.", topic="unclean.leader.election.enable", group=_G_REPL),
    _p("replica.lag.time.max.ms", L, 30000, "A follower not caught up for this long leaves the "
       "ISR.", group=_G_REPL),
    _p("replica.fetch.max.bytes", I, 1048576, "Bytes fetched per partition by followers.",
       at_least(0), group=_G_REPL),
    _p("replica.fetch.wait.max.ms", I, 500, "Most wait of a follower fetch.", group=_G_REPL),
    _p("replica.fetch.min.bytes", I, 1, "Least bytes for a follower fetch response.",
       group=_G_REPL),
    _p("replica.fetch.response.max.bytes", I, 10485760, "Most bytes of a follower fetch "
       "response.", at_least(0), group=_G_REPL),
    _p("replica.high.watermark.checkpoint.interval.ms", L, 5000, "How often high watermarks "
       "are checkpointed.", group=_G_REPL),
    _p("num.replica.fetchers", I, 1, "Follower fetcher threads.", group=_G_REPL,
       ignored="a follower runs one fetcher per leader broker"),
    _p("leader.replication.throttled.rate", L, LONG_MAX, "Bytes per second a leader sends "
       "to out-of-sync followers of the replicas its topics list in "
       "leader.replication.throttled.replicas (usually set as a dynamic broker config, as "
       "kafka-reassign-partitions --throttle does).", at_least(0), group=_G_REPL),
    _p("follower.replication.throttled.rate", L, LONG_MAX, "Bytes per second a follower "
       "fetches for the out-of-sync replicas its topics list in "
       "follower.replication.throttled.replicas (usually set as a dynamic broker config, "
       "as kafka-reassign-partitions --throttle does).", at_least(0), group=_G_REPL),
    _p("replica.alter.log.dirs.io.max.bytes.per.second", L, LONG_MAX, "Bytes per second "
       "moved between the log directories of one broker (AlterReplicaLogDirs).", at_least(0),
       group=_G_REPL),
    _p("replica.selector.class", S, None, "How a partition leader picks the replica a "
       "consumer should fetch from (KIP-392): unset or "
       "org.apache.kafka.common.replica.LeaderSelector, the leader; "
       "org.apache.kafka.common.replica.RackAwareReplicaSelector, an in-sync replica in the "
       "consumer's rack (its client.rack), told in the Fetch response's preferred read "
       "replica. While it is set, followers serve consumers' fetches (v11+) up to their "
       "high watermark.", ValidString(REPLICA_SELECTORS), group=_G_REPL),
    _p("replication.quota.window.num", I, 11, "The number of samples a replication "
       "throttle's rate is measured over.", at_least(1), group=_G_REPL),
    _p("replication.quota.window.size.seconds", I, 1, "The time span of each sample of a "
       "replication throttle.", at_least(1), group=_G_REPL),
    _p("auto.leader.rebalance.enable", B, True, "The controller moves leadership back to "
       "preferred replicas when a broker's leader imbalance exceeds "
       "leader.imbalance.per.broker.percentage.", group=_G_REPL),
    _p("leader.imbalance.check.interval.seconds", L, 300, "How often the controller checks "
       "the leader imbalance.", at_least(1), group=_G_REPL),
    _p("leader.imbalance.per.broker.percentage", I, 10, "Share (percent) of a broker's "
       "preferred partitions led elsewhere above which the controller rebalances them.",
       group=_G_REPL),
    # --- group coordinator
    _p("group.initial.rebalance.delay.ms", I, 3000, "Wait for more members before the first "
       "rebalance of an empty group.", group=_G_GROUP),
    _p("group.min.session.timeout.ms", I, 6000, "Smallest session timeout a member may ask "
       "for.", group=_G_GROUP),
    _p("group.max.session.timeout.ms", I, 1800000, "Largest session timeout a member may ask "
       "for.", group=_G_GROUP),
    _p("group.max.size", I, INT_MAX, "Most members in one classic group.", at_least(1),
       group=_G_GROUP),
    # Consumer-protocol (KIP-848) group settings: the coordinator's session timeout and
    # heartbeat interval, the defaults of the consumer.* group configs (DescribeConfigs of a
    # GROUP resource) and the bounds IncrementalAlterConfigs checks them against.
    _p("group.consumer.assignors", LS,
       ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor"],
       "Server-side assignors of consumer groups (Kafka's class names, or their names uniform "
       "and range); the first is the default.", ValidList(("uniform", "range",
                              "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                              "org.apache.kafka.coordinator.group.assignor.RangeAssignor")),
       group=_G_GROUP),
    _p("group.consumer.migration.policy", S, "bidirectional",
       "Online migration of a group with members between the classic and the consumer "
       "protocol: upgrade (a classic group becomes a consumer group when a consumer-protocol "
       "member joins), downgrade, bidirectional, or disabled.",
       ValidString(("disabled", "upgrade", "downgrade", "bidirectional")), group=_G_GROUP),
    _p("group.consumer.max.size", I, INT_MAX, "Most members in one consumer group.",
       at_least(1), group=_G_GROUP),
    _p("group.consumer.session.timeout.ms", I, 45000, "Default consumer.session.timeout.ms "
       "of a group.", at_least(1), group=_G_GROUP),
    _p("group.consumer.min.session.timeout.ms", I, 45000, "Smallest consumer.session.timeout.ms "
       "a group may be configured with.", at_least(1), group=_G_GROUP),
    _p("group.consumer.max.session.timeout.ms", I, 60000, "Largest consumer.session.timeout.ms "
       "a group may be configured with.", at_least(1), group=_G_GROUP),
    _p("group.consumer.heartbeat.interval.ms", I, 5000, "Default "
       "consumer.heartbeat.interval.ms of a group.", at_least(1), group=_G_GROUP),
    _p("group.consumer.min.heartbeat.interval.ms", I, 5000, "Smallest "
       "consumer.heartbeat.interval.ms a group may be configured with.", at_least(1),
       group=_G_GROUP),
    _p("group.consumer.max.heartbeat.interval.ms", I, 15000, "Largest "
       "consumer.heartbeat.interval.ms a group may be configured with.", at_least(1),
       group=_G_GROUP),
    _p("group.consumer.assignment.interval.ms", I, 1000, "Default "
       "consumer.assignment.interval.ms of a group.", at_least(0), group=_G_GROUP),
    _p("group.consumer.min.assignment.interval.ms", I, 0, "Smallest "
       "consumer.assignment.interval.ms a group may be configured with.", at_least(0),
       group=_G_GROUP),
    _p("group.consumer.max.assignment.interval.ms", I, 15000, "Largest "
       "consumer.assignment.interval.ms a group may be configured with.", at_least(0),
       group=_G_GROUP),
    _p("group.share.max.size", I, 200, "Most members in one share group (KIP-932).",
       between(1, 1000), group=_G_GROUP),
    _p("group.share.session.timeout.ms", I, 45000, "A share group member that sends no "
       "heartbeat for this long is removed from its group.", at_least(1), group=_G_GROUP),
    _p("group.share.heartbeat.interval.ms", I, 5000, "How often share group members are asked "
       "to heartbeat.", at_least(1), group=_G_GROUP),
    _p("group.share.record.lock.duration.ms", I, 30000, "How long a share group member holds "
       "the records it acquired before they are released for redelivery.",
       between(1000, 3600000), group=_G_GROUP),
    _p("group.share.delivery.count.limit", I, 5, "Deliveries after which a share group's "
       "record that was released or whose lock expired is archived.", between(2, 10),
       group=_G_GROUP),
    _p("offsets.topic.num.partitions", I, 50, "Partitions of __consumer_offsets (fixed after "
       "creation).", at_least(1), group=_G_GROUP),
    _p("offsets.topic.replication.factor", SH, 3, "Replication factor of __consumer_offsets.",
       at_least(1), group=_G_GROUP),
    _p("offsets.topic.segment.bytes", I, 104857600, "Segment size of __consumer_offsets.",
       at_least(1), group=_G_GROUP),
    _p("offsets.topic.compression.codec", I, 0, "Compression codec id for __consumer_offsets "
       "writes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).", between(0, 4), group=_G_GROUP),
    _p("offsets.load.buffer.size", I, 5242880, "Bytes read at a time when loading offsets (a "
       "larger batch is still read whole).", at_least(1), group=_G_GROUP),
    _p("offsets.retention.minutes", I, 10080, "Committed offsets of an empty group expire after "
       "this.", at_least(1), group=_G_GROUP),
    _p("offsets.retention.check.interval.ms", L, 600000, "How often expired offsets are "
       "removed.", at_least(1), group=_G_GROUP),
    _p("offsets.commit.timeout.ms", I, 5000, "Most wait for an offset commit to be written.",
       at_least(1), group=_G_GROUP),
    _p("offset.metadata.max.bytes", I, 4096, "Largest metadata string of an offset commit, in "
       "UTF-16 code units as Kafka counts them; longer ones get OFFSET_METADATA_TOO_LARGE.",
       group=_G_GROUP),
    _p("share.coordinator.state.topic.num.partitions", I, 50, "Partitions of "
       "__share_group_state, the share-group state topic (fixed after creation).",
       at_least(1), group=_G_GROUP),
    _p("share.coordinator.state.topic.replication.factor", SH, 3, "Replication factor of "
       "__share_group_state (capped at the live brokers when it is created).", at_least(1),
       group=_G_GROUP),
    _p("share.coordinator.state.topic.min.isr", SH, 2, "min.insync.replicas of "
       "__share_group_state (capped at the replication factor it is created with).",
       at_least(1), group=_G_GROUP),
    _p("share.coordinator.state.topic.segment.bytes", I, 104857600, "Segment size of "
       "__share_group_state.", at_least(1), group=_G_GROUP),
    _p("share.coordinator.state.topic.compression.codec", I, 0, "Compression codec id of "
       "__share_group_state writes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).", between(0, 4),
       group=_G_GROUP),
    _p("share.coordinator.load.buffer.size", I, 5242880, "Bytes read at a time when loading "
       "share-group state (a larger batch is still read whole).", at_least(1), group=_G_GROUP),
    _p("share.coordinator.snapshot.update.records.per.snapshot", I, 500, "Update records the "
       "share coordinator writes for a share-partition between two snapshot records.",
       between(0, 500), group=_G_GROUP),
    _p("share.coordinator.state.topic.prune.interval.ms", I, 300000, "How often the share "
       "coordinator deletes the records of __share_group_state that no share-partition's state "
       "needs any more.", at_least(1), group=_G_GROUP),
    _p("share.coordinator.cold.partition.snapshot.interval.ms", I, 300000, "A share-partition "
       "whose last snapshot record is older than this gets a new one (so its old records can be "
       "pruned).", at_least(1), group=_G_GROUP),
    _p("share.coordinator.write.timeout.ms", I, 5000, "How long the share coordinator waits for "
       "the replicas of __share_group_state to receive a write.", at_least(1), group=_G_GROUP),
    # --- transactions
    _p("transaction.state.log.num.partitions", I, 50, "Partitions of __transaction_state.",
       at_least(1), group=_G_TXN),
    _p("transaction.state.log.replication.factor", SH, 3, "Replication factor of "
       "__transaction_state.", at_least(1), group=_G_TXN),
    _p("transaction.state.log.min.isr", I, 2, "min.insync.replicas of __transaction_state "
       "(capped at the replication factor it is created with).", at_least(1), group=_G_TXN),
    _p("transaction.state.log.segment.bytes", I, 104857600, "Segment size of "
       "__transaction_state.", at_least(1), group=_G_TXN),
    _p("transaction.state.log.load.buffer.size", I, 5242880, "Bytes read at a time "
       "when loading transaction state (a larger batch is still read whole).", at_least(1),
       group=_G_TXN),
    _p("transaction.max.timeout.ms", I, 900000, "Largest transaction timeout a producer may "
       "ask for.", at_least(1), group=_G_TXN),
    _p("transactional.id.expiration.ms", I, 604800000, "A transactional id with no activity "
       "for this long expires.", at_least(1), group=_G_TXN),
    _p("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10000, "How often "
       "timed-out transactions are aborted.", at_least(1), group=_G_TXN),
    _p("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3600000, "How often "
       "expired transactional ids are removed.", at_least(1), group=_G_TXN),
    _p("transaction.partition.verification.enable", B, True, "Check that a partition was added "
       "to the transaction before a transactional write.", group=_G_TXN),
    _p("producer.id.expiration.ms", I, 86400000, "Producer-id state of an idle idempotent "
       "producer expires after this.", at_least(1), group=_G_TXN),
    _p("producer.id.expiration.check.interval.ms", I, 600000, "How often expired producer ids "
       "are removed.", at_least(1), group=_G_TXN),
    # --- zookeeper
    _p("zookeeper.connect", S, None, "ZooKeeper connect string; unset means a single broker "
       "with in-process metadata.", group=_G_ZK),
    _p("zookeeper.session.timeout.ms", I, 18000, "ZooKeeper session timeout.", group=_G_ZK),
    _p("zookeeper.connection.timeout.ms", I, None, "ZooKeeper connect timeout; unset uses the "
       "session timeout.", group=_G_ZK),
    _p("zookeeper.set.acl", B, False, "Create znodes with secure ACLs: all rights for the "
       "creating identity (sasl:<username> with ZooKeeper SASL, the client certificate's "
       "distinguished name over mutual TLS), read for everyone else except under "
       "/config/users and /config/brokers; needs ZooKeeper SASL (a JAAS Client section) or "
       "zookeeper.ssl.client.enable and a client key store.", group=_G_ZK),
    _p("java.security.auth.login.config", S, None, "JAAS file whose zookeeper.sasl.clientconfig "
       "section (Client) is the broker's login to ZooKeeper: "
       "org.apache.zookeeper.server.auth.DigestLoginModule required username=\"...\" "
       "password=\"...\"; (SASL DIGEST-MD5). A JVM system property in Kafka: unset, Samsa "
       "reads -Djava.security.auth.login.config=... from the KAFKA_OPTS environment variable.",
       group=_G_ZK),
    _p("zookeeper.sasl.client", B, True, "Authenticate to ZooKeeper with SASL when the JAAS "
       "file has the zookeeper.sasl.clientconfig section; false while it has one is refused, "
       "as Kafka does. A JVM system property in Kafka: unset, -Dzookeeper.sasl.client of "
       "KAFKA_OPTS.", group=_G_ZK),
    _p("zookeeper.sasl.clientconfig", S, "Client", "The JAAS login context (section) with the "
       "broker's ZooKeeper login. A JVM system property in Kafka: unset, "
       "-Dzookeeper.sasl.clientconfig of KAFKA_OPTS.", group=_G_ZK),
    _p("zookeeper.ssl.client.enable", B, False, "Connect to ZooKeeper over TLS (its "
       "secureClientPort).", group=_G_ZK),
    _p("zookeeper.clientCnxnSocket", S, None, "ZooKeeper's Java client socket "
       "(org.apache.zookeeper.ClientCnxnSocketNetty for TLS).", group=_G_ZK,
       ignored="Samsa's ZooKeeper client speaks TLS without it"),
    _p("zookeeper.ssl.keystore.location", S, None, "Key store presented to ZooKeeper (mutual "
       "TLS): PEM (the private key and certificate chain in one file) or PKCS12.",
       group=_G_ZK),
    _p("zookeeper.ssl.keystore.password", PW, None, "Password of the key store (PKCS12) or "
       "of the encrypted PEM key.", group=_G_ZK),
    _p("zookeeper.ssl.keystore.type", S, None, "PEM or PKCS12; unset: from the file's "
       "extension (.p12 and .pfx are PKCS12, others PEM), as ZooKeeper does; JKS is not read.",
       ValidString(("PEM", "PKCS12")), group=_G_ZK),
    _p("zookeeper.ssl.truststore.location", S, None, "Trust store that verifies ZooKeeper's "
       "certificate: PEM certificates or PKCS12; unset: the system's default CAs.",
       group=_G_ZK),
    _p("zookeeper.ssl.truststore.password", PW, None, "Password of a PKCS12 trust store.",
       group=_G_ZK),
    _p("zookeeper.ssl.truststore.type", S, None, "PEM or PKCS12; unset: from the file's "
       "extension.", ValidString(("PEM", "PKCS12")), group=_G_ZK),
    _p("zookeeper.ssl.protocol", S, "TLSv1.2", "Newest TLS version offered to ZooKeeper "
       "(TLSv1.2, or TLSv1.3 where both sides have it).",
       ValidString(("TLSv1.2", "TLSv1.3", "TLS")), group=_G_ZK),
    _p("zookeeper.ssl.enabled.protocols", LS, None, "TLS versions allowed; unset: up to "
       "zookeeper.ssl.protocol.", ValidList(("TLSv1.2", "TLSv1.3")), group=_G_ZK),
    _p("zookeeper.ssl.cipher.suites", LS, None, "TLS 1.2 cipher suites (OpenSSL names); "
       "unset: the defaults.", group=_G_ZK),
    _p("zookeeper.ssl.endpoint.identification.algorithm", S, "HTTPS", "HTTPS: ZooKeeper's "
       "certificate must name the host of zookeeper.connect; empty: any certificate the "
       "trust store accepts.", group=_G_ZK),
    _p("zookeeper.ssl.crl.enable", B, False, "Certificate revocation lists.", group=_G_ZK,
       ignored="revocation is not checked; a revoked certificate must leave the trust store"),
    _p("zookeeper.ssl.ocsp.enable", B, False, "Online certificate status checks.",
       group=_G_ZK, ignored="revocation is not checked"),
    # --- Samsa's own
    _p("metrics.port", I, None, "Port of the Prometheus /metrics endpoint on the listener's "
       "host; unset disables it.", between(0, 65535), group=_G_SAMSA),
    _p("samsa.fetch.sendfile.enable", B, False, "Send Fetch records from the segment files "
       "to the socket with sendfile (zero-copy, as Kafka does) on plaintext listeners "
       "(PLAINTEXT, SASL_PLAINTEXT); TLS listeners always read them into memory to encrypt "
       "them. Off by default: on loopback on the 2-core test machine it cost more broker CPU "
       "per GB than reading and writing (docs/performance.md).", group=_G_SAMSA),
    _p("samsa.log.level", S, "INFO", "Level of Samsa's own log on stderr.",
       ValidString(LOG_LEVELS), group=_G_SAMSA),
    _p("samsa.log.loggers", S, None, "Per-module levels overriding samsa.log.level, e.g. "
       "'samsa.coordinator.transaction=DEBUG,samsa.broker.handlers=DEBUG' "
       "(logger names are module paths).",
       LoggerLevels(LOG_LEVELS), group=_G_SAMSA),
]

# Kafka's DynamicBrokerConfig.AllDynamicConfigs (with DynamicConfig.Broker's replication
# quotas) that Samsa has and can change while it runs: the log defaults (every broker synonym
# of a topic config), the cleaner's settings, the thread counts, the connection limits, the
# producer-state settings and the replication throttles. The listeners' key and trust stores
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

DYNAMIC_BROKER_CONFIGS: frozenset[str] = _DYNAMIC_NON_LOG | frozenset(
    n for chain in TOPIC_SYNONYMS.values() for n, _ in chain)
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
_SYNONYM_GROUPS: dict[str, tuple[str, ...]] = {}
for _chain in TOPIC_SYNONYMS.values():
    for _k, _ in _chain:
        for _x in broker_synonyms(_k):
            if _x != _k:
                _SYNONYM_GROUPS[_x] = (*_SYNONYM_GROUPS.get(_x, ()), _k)


def lookup(name: str) -> PropertyDef:
    try:
        return BROKER_PROPERTIES[name]
    except KeyError:
        raise ConfigError.unknown(name, list(BROKER_PROPERTIES)) from None


# ---------------------------------------------------------------------------------------------
# BrokerConfig


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


_LISTENER_RE = re.compile(r"\s*([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(\d+)\s*")
_LISTENER_PREFIX = re.compile(r"listener\.name\.([a-z0-9_]+)\.(.+)")
# What a listener may set per SASL mechanism (the JAAS configuration exists only so).
_MECHANISM_PREFIX = re.compile(r"([a-z0-9-]+)\.(sasl\.jaas\.config|sasl\.server\.callback"
                               r"\.handler\.class|connections\.max\.reauth\.ms)")


def split_listener_key(key: str) -> tuple[str, str] | None:
    """(listener, property) of a per-listener name `listener.name.<listener>.<property>`
    (the property may be `<mechanism>.sasl.jaas.config` and the like), None for others."""
    m = _LISTENER_PREFIX.fullmatch(key)
    return None if m is None else (m.group(1), m.group(2))


def parse_protocol_map(value: str) -> dict[str, str]:
    """listener.security.protocol.map: NAME:PROTOCOL,... (Kafka's
    SocketServerConfigs.LISTENER_SECURITY_PROTOCOL_MAP_CONFIG)."""
    key = "listener.security.protocol.map"
    out: dict[str, str] = {}
    for item in (s.strip() for s in value.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not re.fullmatch(r"[A-Z0-9_]+", name):
            raise ConfigError.invalid(key, value, "Expected NAME:PROTOCOL pairs")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError.invalid(key, value, f"No enum constant for {protocol!r}; "
                                      f"expected one of {', '.join(SECURITY_PROTOCOLS)}")
        if name in out:
            raise ConfigError.invalid(key, value, f"Duplicate listener name {name}")
        out[name] = protocol
    return out


def parse_listeners(
    key: str, value: str, protocols: Mapping[str, str], *, local_only: bool,
    advertised: bool = False,
) -> list[Listener]:
    """`listeners` / `advertised.listeners`: NAME://HOST:PORT,... with distinct names, each
    in the security protocol map (Kafka's CoreUtils.listenerListToEndPoints)."""
    out: list[Listener] = []
    for part in (s for s in value.split(",") if s.strip()):
        m = _LISTENER_RE.fullmatch(part)
        if not m:
            raise ConfigError.invalid(key, value, "Expected LISTENER://HOST:PORT")
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if name not in protocols:
            raise ConfigError.invalid(key, value, f"No security protocol defined for listener "
                                      f"{name} (see listener.security.protocol.map)")
        if port > 65535:
            raise ConfigError.invalid(key, value, "Port must be in [0, 65535]")
        if local_only:
            if host == "localhost":
                host = "127.0.0.1"
            if not re.fullmatch(r"127\.\d{1,3}\.\d{1,3}\.\d{1,3}", host):
                raise ConfigError.invalid(
                    key, value, "Samsa binds 127.0.0.0/8 addresses only, unless "
                    "advertised.listeners is set (e.g. in a container)")
        elif advertised and (not host or host == "0.0.0.0"):
            raise ConfigError.invalid(key, value, "An advertised host must be a real address")
        if any(li.name == name for li in out):
            raise ConfigError.invalid(key, value, f"Each listener must have a different name, "
                                      f"{name} is repeated")
        out.append(Listener(name, host, port, protocols[name]))
    if not out:
        raise ConfigError.invalid(key, value, "At least one listener is needed")
    return out


class BrokerConfig:
    """Typed broker configuration.

    Values resolve per-broker dynamic > cluster-default dynamic > static (YAML file, command
    line) > default, as in Kafka. A layer that sets any of a property's synonyms (log.roll.ms
    and log.roll.hours, ...) hides the lower layers' values of all of them, as Kafka's
    DynamicBrokerConfig.overrideProps removes them. Only the two dynamic layers ever change
    (`set_dynamic`, replacing both at once); holders of the object see the new values.
    """

    def __init__(self, static: Mapping[str, object] | None = None,
                 dynamic: Mapping[str, object] | None = None,
                 dynamic_default: Mapping[str, object] | None = None) -> None:
        self._static = _parse_all(static or {})
        self._dynamic = _parse_all(dynamic or {})
        self._dynamic_default = _parse_all(dynamic_default or {})
        self._sync_ids()
        self._check()

    # -- access
    def __getitem__(self, name: str) -> Any:
        prop = lookup(name)
        group = _SYNONYM_GROUPS.get(name)
        for layer in (self._dynamic, self._dynamic_default, self._static):
            if name in layer:
                return layer[name]
            if group is not None and any(n in layer for n in group):
                return prop.default
        return prop.default

    def __contains__(self, name: object) -> bool:
        return name in BROKER_PROPERTIES

    def get(self, name: str, default: Any = None) -> Any:
        if name not in BROKER_PROPERTIES:
            return default
        return self[name]

    def items(self) -> Iterator[tuple[str, Any]]:
        for name in sorted(BROKER_PROPERTIES):
            yield name, self[name]

    def source(self, name: str) -> str:
        lookup(name)
        if name in self._dynamic:
            return ConfigSource.DYNAMIC_BROKER_CONFIG.name
        if name in self._dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.name
        if name in self._static:
            return ConfigSource.STATIC_BROKER_CONFIG.name
        return ConfigSource.DEFAULT_CONFIG.name

    def is_default(self, name: str) -> bool:
        return self.source(name) == ConfigSource.DEFAULT_CONFIG.name

    @property
    def static_values(self) -> Mapping[str, Any]:
        return dict(self._static)

    @property
    def dynamic_values(self) -> Mapping[str, Any]:
        """This broker's own dynamic values (ZooKeeper's /config/brokers/<id>)."""
        return dict(self._dynamic)

    @property
    def dynamic_default_values(self) -> Mapping[str, Any]:
        """The cluster-wide dynamic defaults (ZooKeeper's /config/brokers/<default>)."""
        return dict(self._dynamic_default)

    def ignored_settings(self) -> list[PropertyDef]:
        """Properties set here (not left at their default) that have no effect in Samsa."""
        return [p for p in BROKER_PROPERTIES.values()
                if p.ignored is not None and not self.is_default(p.name)]

    def with_dynamic(self, updates: Mapping[str, object | None]) -> BrokerConfig:
        """A copy with dynamic values set (None deletes a dynamic value)."""
        dynamic: dict[str, object] = dict(self._dynamic)
        for k, v in updates.items():
            if v is None:
                dynamic.pop(k, None)
            else:
                dynamic[k] = v
        return BrokerConfig(self._static, dynamic, self._dynamic_default)

    def with_layers(self, dynamic: Mapping[str, object],
                    dynamic_default: Mapping[str, object]) -> BrokerConfig:
        """A copy with both dynamic layers replaced (raises ConfigError, naming the key, if
        the result is not a valid configuration)."""
        return BrokerConfig(self._static, dynamic, dynamic_default)

    def set_dynamic(self, dynamic: Mapping[str, object],
                    dynamic_default: Mapping[str, object]) -> None:
        """Replace both dynamic layers of this object (validated first, as `with_layers`)."""
        new = self.with_layers(dynamic, dynamic_default)
        self._dynamic, self._dynamic_default = new._dynamic, new._dynamic_default

    # -- derived values
    def topic_default(self, topic_name: str) -> Any:
        """Effective default of a topic property from its broker synonyms."""
        chain = TOPIC_SYNONYMS[topic_name]
        for name, factor in chain:
            value = self[name]
            if value is not None:
                value = value * factor if factor != 1 else value
                if topic_name == "retention.ms" and value < 0:
                    return -1  # Kafka: any negative retention means unlimited
                return value
        return None

    @property
    def log_retention_ms(self) -> int:
        return int(self.topic_default("retention.ms"))

    @property
    def log_roll_ms(self) -> int:
        return int(self.topic_default("segment.ms"))

    @property
    def log_roll_jitter_ms(self) -> int:
        return int(self.topic_default("segment.jitter.ms"))

    @property
    def log_flush_interval_ms(self) -> int:
        return int(self.topic_default("flush.ms"))

    @property
    def broker_id(self) -> int:
        return int(self["node.id"])

    @property
    def security_protocol_map(self) -> dict[str, str]:
        return parse_protocol_map(self["listener.security.protocol.map"])

    @property
    def listeners(self) -> list[Listener]:
        """Every listener, in the order configured."""
        # Binding beyond loopback is an explicit choice: it needs an address to advertise.
        local_only = self["advertised.listeners"] is None
        return parse_listeners("listeners", self["listeners"], self.security_protocol_map,
                               local_only=local_only)

    @property
    def advertised_listeners(self) -> list[Listener]:
        """What clients are told, per listener name (Kafka's effectiveAdvertisedListeners:
        a listener missing from advertised.listeners is advertised as it listens)."""
        adv = self["advertised.listeners"]
        if adv is None:
            return self.listeners
        given = {li.name: li for li in parse_listeners(
            "advertised.listeners", adv, self.security_protocol_map, local_only=False,
            advertised=True)}
        return [given.get(li.name, li) for li in self.listeners]

    @property
    def inter_broker_listener_name(self) -> str:
        name = self["inter.broker.listener.name"]
        if name is not None:
            return str(name).upper()
        protocol = self["security.inter.broker.protocol"]
        for li in self.listeners:
            if li.security_protocol == protocol:
                return li.name
        return str(protocol)

    @property
    def listener(self) -> Listener:
        """The inter-broker listener (the one address of a broker in the cluster's own
        traffic)."""
        name = self.inter_broker_listener_name
        return next(li for li in self.listeners if li.name == name)

    @property
    def listen_host(self) -> str:
        return self.listener.host

    @property
    def listen_port(self) -> int:
        return self.listener.port

    @property
    def advertised_listener(self) -> Listener:
        name = self.inter_broker_listener_name
        return next(li for li in self.advertised_listeners if li.name == name)

    def for_listener(self, listener: str) -> ListenerConfig:
        """The properties as one listener sees them (`view["ssl.client.auth"]`)."""
        return ListenerConfig(self, listener)

    def listener_value(self, listener: str, name: str) -> Any:
        """A property as one listener sees it: `listener.name.<listener>.<name>` if set, else
        the property itself (Kafka's per-listener overrides)."""
        key = f"listener.name.{listener.lower()}.{name}"
        for layer in (self._dynamic, self._dynamic_default, self._static):
            if key in layer:
                return layer[key]
        if name in BROKER_PROPERTIES:
            return self[name]
        return None

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self["log.dirs"]
        if dirs is None:
            return [Path(self["log.dir"]).expanduser()]
        return [Path(d.strip()).expanduser() for d in dirs.split(",") if d.strip()]

    @property
    def data_dir(self) -> Path:
        """The first log directory: it also holds the single-broker metadata (Kafka's
        metadata.log.dir defaults to the first of log.dirs too)."""
        return self.log_dirs[0]

    def __repr__(self) -> str:
        return (f"BrokerConfig(static={self._static!r}, dynamic={self._dynamic!r}, "
                f"dynamic_default={self._dynamic_default!r})")

    # -- construction helpers
    def _sync_ids(self) -> None:
        # Kafka's populateSynonyms: setting only one of node.id / broker.id sets both.
        for layer in (self._static, self._dynamic, self._dynamic_default):
            if "broker.id" in layer and "node.id" not in layer:
                layer["node.id"] = layer["broker.id"]
            elif "node.id" in layer and "broker.id" not in layer:
                layer["broker.id"] = layer["node.id"]

    def _check_listeners(self) -> None:
        listeners = self.listeners
        names = {li.name for li in listeners}
        adv = self["advertised.listeners"]
        if adv is not None:
            given = parse_listeners("advertised.listeners", adv, self.security_protocol_map,
                                    local_only=False, advertised=True)
            extra = sorted({li.name for li in given} - names)
            if extra:
                raise ConfigError.invalid(
                    "advertised.listeners", adv, "advertised.listeners listener names must be "
                    f"equal to or a subset of the ones defined in listeners ({', '.join(extra)} "
                    "is not)")
        ib = self.inter_broker_listener_name
        if self["inter.broker.listener.name"] is not None \
                and self["security.inter.broker.protocol"] != "PLAINTEXT":
            raise ConfigError("inter.broker.listener.name", "Only one of "
                              "inter.broker.listener.name and security.inter.broker.protocol "
                              "should be set.")
        if ib not in names:
            raise ConfigError.invalid(
                "inter.broker.listener.name", ib, "inter.broker.listener.name must be a "
                "listener name defined in advertised.listeners")

    def _check(self) -> None:
        if self["node.id"] != self["broker.id"]:
            raise ConfigError("node.id", "You must set `node.id` to the same value as "
                              "`broker.id`.")
        if self["node.id"] < 0:
            raise ConfigError.invalid("node.id", self["node.id"], "Value must be at least 0")
        self._check_listeners()
        dirs = self["log.dirs"]
        if dirs is not None and not self.log_dirs:
            raise ConfigError.invalid("log.dirs", dirs, "At least one log directory is needed")
        if len({os.path.abspath(d) for d in self.log_dirs}) != len(self.log_dirs):
            raise ConfigError.invalid("log.dirs", dirs, "Duplicate log directory found")
        lo, hi = self["group.min.session.timeout.ms"], self["group.max.session.timeout.ms"]
        if lo > hi:
            raise ConfigError.invalid("group.min.session.timeout.ms", lo,
                                      f"Must not exceed group.max.session.timeout.ms ({hi})")
        if not self["group.consumer.assignors"]:
            raise ConfigError.invalid("group.consumer.assignors", "",
                                      "At least one assignor is needed")
        lag_lo = self["log.cleaner.min.compaction.lag.ms"]
        lag_hi = self["log.cleaner.max.compaction.lag.ms"]
        if lag_lo > lag_hi:
            raise ConfigError.invalid("log.cleaner.min.compaction.lag.ms", lag_lo,
                                      f"Must not exceed log.cleaner.max.compaction.lag.ms "
                                      f"({lag_hi})")
        for prop in BROKER_PROPERTIES.values():
            if prop.refused is not None and self[prop.name] != prop.default:
                raise ConfigError.invalid(prop.name, self[prop.name], "Samsa supports only the "
                                          f"default ({prop.default_string()}): {prop.refused}")
        authorizer = self["authorizer.class.name"] or ""
        if authorizer.strip() and authorizer.strip() not in AUTHORIZERS:
            raise ConfigError.invalid("authorizer.class.name", authorizer, "Samsa has only "
                                      f"Kafka's ACL authorizer: {' or '.join(AUTHORIZERS)}")
        for part in (self["super.users"] or "").split(";"):
            if part.strip() and ":" not in part:
                raise ConfigError.invalid("super.users", self["super.users"], "expected a "
                                          "semicolon separated list of principalType:name")
        if self.log_roll_ms < 1:
            raise ConfigError.invalid("log.roll.ms", self.log_roll_ms, "Value must be at least 1")
        if self.log_roll_jitter_ms < 0:
            raise ConfigError.invalid("log.roll.jitter.ms", self.log_roll_jitter_ms,
                                      "Value must be at least 0")


class ListenerConfig:
    """A BrokerConfig seen from one listener: `listener.name.<listener>.<name>` overrides
    `<name>`."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        self.config = config
        self.listener = listener

    def __getitem__(self, name: str) -> Any:
        return self.config.listener_value(self.listener, name)

    def override(self, name: str) -> Any:
        """`listener.name.<listener>.<name>` alone (None if unset)."""
        key = self.key(name)
        for layer in (self.config.dynamic_values, self.config.static_values):
            if key in layer:
                return layer[key]
        return None

    def key(self, name: str) -> str:
        """The per-listener property name (for error messages)."""
        return f"listener.name.{self.listener.lower()}.{name}"


def _parse_all(raw: Mapping[str, object]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        m = _LISTENER_PREFIX.fullmatch(str(key))
        if m is not None and value is not None:
            # listener.name.<listener>.<property>: a per-listener override (also of the
            # <mechanism>.sasl.jaas.config that exists only in that form).
            inner = m.group(2)
            base = BROKER_PROPERTIES.get(inner)
            per_mechanism = _MECHANISM_PREFIX.fullmatch(inner)
            if base is None and per_mechanism is not None:
                # listener.name.<listener>.<mechanism>.<property>
                base = BROKER_PROPERTIES.get(per_mechanism.group(2))
            elif base is None:
                raise ConfigError.unknown(str(key), list(BROKER_PROPERTIES))
            out[str(key)] = base.parse(value) if base is not None else str(value)
            continue
        prop = lookup(str(key))
        if value is None:
            continue  # unset: falls back to the next layer
        out[prop.name] = prop.parse(value)
    return out
