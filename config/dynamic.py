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
    THREAD_COUNT_CONFIGS,
    BrokerConfig,
    ConfigError,
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
    unknown = sorted(k for k in props if k not in BROKER_PROPERTIES)
    if unknown:
        raise DynamicConfigError(ErrorCode.invalid_config, unknown[0],
                                 str(ConfigError.unknown(unknown[0], list(BROKER_PROPERTIES))))
    fixed = sorted(k for k in props if k not in DYNAMIC_BROKER_CONFIGS)
    if fixed:
        raise DynamicConfigError(ErrorCode.invalid_request, fixed[0],
                                 f"Cannot update these configs dynamically: {_scala_set(fixed)}")
    try:
        for key, value in props.items():
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


def usable(props: Mapping[str, str], where: str) -> dict[str, str]:
    """The entries of a stored dynamic set the broker can apply (Kafka's
    fromPersistentProps): properties that are not dynamic, or whose value does not parse,
    are left out with an error in the log."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if key not in DYNAMIC_BROKER_CONFIGS:
            log.error("%s: non-dynamic config %s stored in the dynamic configs will be ignored",
                      where, key)
            continue
        try:
            BROKER_PROPERTIES[key].parse(value)
        except ConfigError as exc:
            log.error("%s: invalid dynamic config %s will be ignored: %s", where, key, exc)
            continue
        out[key] = value
    return out
