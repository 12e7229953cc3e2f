"""Dynamic broker configs: what may change while a broker runs, and how a change is checked.

Kafka keeps them per broker (ZooKeeper's /config/brokers/<id>) and as cluster-wide defaults
(/config/brokers/<default>); `BrokerConfig` resolves per-broker > default > static > Kafka's
default. `validate_update` is Kafka's DynamicBrokerConfig.validate of one entity's whole new
set: a property that cannot change while the broker runs is refused (INVALID_REQUEST, as
Kafka 4 answers: "Cannot update these configs dynamically: Set(...)"), a bad value or a
combination the broker would not start with is INVALID_CONFIG, and the thread counts follow
DynamicThreadPool's rule (at least half, at most double the current count).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from kio.schema.errors import ErrorCode

from samsa.config.schema import (
    BROKER_PROPERTIES,
    DYNAMIC_BROKER_CONFIGS,
    DYNAMIC_SECURITY_CONFIGS,
    PER_BROKER_ONLY_CONFIGS,
    THREAD_COUNT_CONFIGS,
    BrokerConfig,
    ConfigError,
    split_listener_key,
)

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"  # the cluster default's name in ZooKeeper paths


class DynamicConfigError(ConfigError):
    """A dynamic broker config change Kafka would refuse, with its error code."""

    def __init__(self, error_code: ErrorCode, key: str, message: str) -> None:
        super().__init__(key, message)
        self.error_code = error_code


def _scala_set(names: list[str]) -> str:
    return f"Set({', '.join(names)})"


def validate_update(current: BrokerConfig, props: Mapping[str, str],
                    per_broker: bool) -> BrokerConfig:
    """Check `props`, the whole new dynamic set of this broker (`per_broker`) or of the
    cluster default, against the running configuration; returns the configuration it would
    give this broker. Raises DynamicConfigError."""
    prefixed = {k: split for k in props if (split := split_listener_key(k)) is not None}
    unknown = sorted(k for k in props if k not in BROKER_PROPERTIES and k not in prefixed)
    if unknown:
        raise DynamicConfigError(ErrorCode.invalid_config, unknown[0],
                                 str(ConfigError.unknown(unknown[0], list(BROKER_PROPERTIES))))
    unprefixed = sorted(k for k in props if k in DYNAMIC_SECURITY_CONFIGS)
    if unprefixed:
        raise DynamicConfigError(
            ErrorCode.invalid_request, unprefixed[0], "These security configs can be "
            "dynamically updated only per-listener using the listener prefix: "
            f"{_scala_set(unprefixed)}")
    fixed = sorted(k for k in props if k not in DYNAMIC_BROKER_CONFIGS and k not in prefixed)
    if fixed:
        raise DynamicConfigError(ErrorCode.invalid_request, fixed[0],
                                 f"Cannot update these configs dynamically: {_scala_set(fixed)}")
    per_broker_only = set(prefixed) | {k for k in props if k in PER_BROKER_ONLY_CONFIGS}
    if not per_broker and per_broker_only:
        names = sorted(per_broker_only)
        raise DynamicConfigError(
            ErrorCode.invalid_request, names[0], "Cannot update these configs at default "
            f"cluster level, broker id must be specified: {_scala_set(names)}")
    _check_existing_listeners(current, props, prefixed)
    try:
        for key, value in props.items():
            if key not in prefixed:
                BROKER_PROPERTIES[key].parse(value)
        if per_broker:
            candidate = current.with_layers(props, current.dynamic_default_values)
        else:
            candidate = current.with_layers(current.dynamic_values, props)
    except ConfigError as exc:
        raise DynamicConfigError(ErrorCode.invalid_config, exc.key, str(exc)) from None
    for name in sorted(THREAD_COUNT_CONFIGS):
        old, new = int(current[name]), int(candidate[name])
        if new == old:
            continue
        msg = f"Dynamic thread count update validation failed for {name}={new}"
        if new < old / 2:
            raise DynamicConfigError(ErrorCode.invalid_config, name, f"{msg}, value should be "
                                     f"at least half the current value {old}")
        if new > old * 2:
            raise DynamicConfigError(ErrorCode.invalid_config, name, f"{msg}, value should not "
                                     f"be greater than double the current value {old}")
    return candidate


def _check_existing_listeners(current: BrokerConfig, props: Mapping[str, str],
                              prefixed: Mapping[str, tuple[str, str]]) -> None:
    """Kafka's DynamicListenerConfig.validateReconfiguration: of an existing listener only
    the key and trust stores change; its other per-listener configs (ssl.client.auth, the
    SASL mechanisms' JAAS configurations...) need a restart. Kafka answers only "Invalid
    dynamic configuration" and says why in its log."""
    def parsed(key: str, value: object) -> object:
        split = split_listener_key(key)
        base = BROKER_PROPERTIES.get(split[1]) if split is not None else None
        try:
            return base.parse(value) if base is not None and isinstance(value, str) else value
        except ConfigError:
            return value

    for listener in sorted({li.name.lower() for li in current.listeners}):
        def fixed(entries: Mapping[str, object], listener: str = listener) -> dict[str, str]:
            out = {}
            for key, value in entries.items():
                split = split_listener_key(key)
                if split is not None and split[0] == listener \
                        and split[1] not in DYNAMIC_SECURITY_CONFIGS:
                    out[key] = repr(parsed(key, value))
            return out
        new, old = fixed(props), fixed(current.dynamic_values)
        if new != old:
            changed = sorted(set(new.items()) ^ set(old.items()))
            log.info("Invalid dynamic configuration: Configs cannot be updated dynamically for "
                     "existing listener ListenerName(%s), restart broker or create a new "
                     "listener for update", listener.upper())
            raise DynamicConfigError(ErrorCode.invalid_request, changed[0][0],
                                     "Invalid dynamic configuration")
    for key, (_, name) in prefixed.items():
        if name in DYNAMIC_SECURITY_CONFIGS:
            try:
                BROKER_PROPERTIES[name].parse(props[key])
            except ConfigError as exc:
                raise DynamicConfigError(ErrorCode.invalid_config, key,
                                         str(exc).replace(name, key, 1)) from None


def usable(props: Mapping[str, str], where: str, per_broker: bool = True) -> dict[str, str]:
    """The entries of a stored dynamic set the broker can apply (Kafka's
    fromPersistentProps): properties that are not dynamic, or whose value does not parse,
    are left out with an error in the log."""
    out: dict[str, str] = {}
    for key, value in props.items():
        split = split_listener_key(key)
        if split is not None:
            if not per_broker:
                log.error("%s: per-broker config %s defined at default cluster level will be "
                          "ignored", where, key)
                continue
            base = BROKER_PROPERTIES.get(split[1])
            try:
                if base is not None:
                    base.parse(value)
            except ConfigError as exc:
                log.error("%s: invalid dynamic config %s will be ignored: %s", where, key, exc)
                continue
            out[key] = value
            continue
        if key not in DYNAMIC_BROKER_CONFIGS:
            log.error("%s: non-dynamic config %s stored in the dynamic configs will be ignored",
                      where, key)
            continue
        if not per_broker and key in PER_BROKER_ONLY_CONFIGS:
            log.error("%s: per-broker config %s defined at default cluster level will be "
                      "ignored", where, key)
            continue
        try:
            BROKER_PROPERTIES[key].parse(value)
        except ConfigError as exc:
            log.error("%s: invalid dynamic config %s will be ignored: %s", where, key, exc)
            continue
        out[key] = value
    return out
