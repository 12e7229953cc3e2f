"""BrokerConfig, the typed broker configuration in its layers, and its checks."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from samsa.config.forward import Forward
from samsa.config.schema.listeners import (
    LISTENER_PREFIX,
    MECHANISM_PREFIX,
    Listener,
    parse_listeners,
    parse_protocol_map,
)
from samsa.config.schema.property_def import AUTHORIZERS, PropertyDef
from samsa.config.schema.registry import BROKER_PROPERTIES, SYNONYM_GROUPS, TOPIC_SYNONYMS, lookup
from samsa.config.schema.values import ConfigError, ConfigSource


class _TopicDefault:
    """A read-only int attribute of BrokerConfig: a topic property's broker-level default
    (BrokerConfig.topic_default)."""

    def __init__(self, topic_name: str) -> None:
        self.topic_name = topic_name

    def __get__(self, config: BrokerConfig, owner: type | None = None) -> int:
        return int(config.topic_default(self.topic_name))

    def __set__(self, config: BrokerConfig, value: object) -> None:
        raise AttributeError("a derived value; set its broker property instead")


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
        group = SYNONYM_GROUPS.get(name)
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

    log_retention_ms = _TopicDefault("retention.ms")
    log_roll_ms = _TopicDefault("segment.ms")
    log_roll_jitter_ms = _TopicDefault("segment.jitter.ms")
    log_flush_interval_ms = _TopicDefault("flush.ms")

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

    listen_host = Forward[str]("listener.host")
    listen_port = Forward[int]("listener.port")

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
        m = LISTENER_PREFIX.fullmatch(str(key))
        if m is not None and value is not None:
            # listener.name.<listener>.<property>: a per-listener override (also of the
            # <mechanism>.sasl.jaas.config that exists only in that form).
            inner = m.group(2)
            base = BROKER_PROPERTIES.get(inner)
            per_mechanism = MECHANISM_PREFIX.fullmatch(inner)
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
