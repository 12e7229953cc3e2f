"""`samsa config describe|set|delete`: the configs of a broker (or the cluster-wide broker
default), a topic, a group, a client-metrics subscription or a broker's loggers, by
DescribeConfigs and IncrementalAlterConfigs, as kafka-configs.sh --describe / --alter
(--add-config, --delete-config) does for these entity types.

A broker's own configs are asked of that broker (the one that knows its static and dynamic
values); everything else of any broker."""

from __future__ import annotations

from typing import Any

from .client import Admin, AdminError, Connection, check

DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
ENTITY_TYPES = {"topic": 2, "broker": 4, "broker-logger": 8, "client-metrics": 16, "group": 32}
# ConfigSource by wire code, as DescribeConfigs numbers it.
SOURCES = ("UNKNOWN", "DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG",
           "DYNAMIC_DEFAULT_BROKER_CONFIG", "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG",
           "DYNAMIC_BROKER_LOGGER_CONFIG", "CLIENT_METRICS_CONFIG", "GROUP_CONFIG")
# What kafka-configs.sh --describe shows without --all: the values set on the entity itself.
OWN_SOURCES = {"topic": {1}, "broker": {2, 3}, "broker-logger": {6}, "client-metrics": {7},
               "group": {8}}
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations


def _resource(entity_type: str, name: str) -> int:
    if entity_type not in ENTITY_TYPES:
        raise AdminError("INVALID_REQUEST", f"unknown entity type {entity_type!r}: one of "
                         f"{', '.join(ENTITY_TYPES)}")
    if not name and entity_type != "broker":
        raise AdminError("INVALID_REQUEST", f"a {entity_type} needs --entity-name (only a "
                         "broker has a default, --entity-default)")
    return ENTITY_TYPES[entity_type]


def _broker_for(admin: Admin, entity_type: str, name: str) -> Connection:
    if entity_type in ("broker", "broker-logger") and name:
        if not name.isdigit():
            raise AdminError("INVALID_REQUEST", f"a broker's --entity-name is its id, not "
                             f"{name!r}")
        return admin.node(int(name))
    return admin.any()


def describe(admin: Admin, entity_type: str, name: str, everything: bool = False,
             keys: list[str] | None = None) -> dict[str, Any]:
    body = {"resources": [{"resource_type": _resource(entity_type, name), "resource_name": name,
                           "configuration_keys": keys or None}],
            "include_synonyms": False, "include_documentation": False}
    (result,) = _broker_for(admin, entity_type, name).call(DESCRIBE_CONFIGS, body).results
    check(result.error_code, result.error_message)
    wanted = OWN_SOURCES[entity_type]
    configs = [{"name": c.name, "value": None if c.is_sensitive else c.value,
                "source": SOURCES[c.config_source] if 0 <= c.config_source < len(SOURCES)
                else "UNKNOWN", "sensitive": bool(c.is_sensitive),
                "read_only": bool(c.read_only)}
               for c in sorted(result.configs, key=lambda c: c.name)
               if everything or keys or c.config_source in wanted]
    return {"entity_type": entity_type, "entity_name": name, "configs": configs}


def alter(admin: Admin, entity_type: str, name: str, set_configs: dict[str, str],
          delete_configs: list[str]) -> dict[str, Any]:
    ops = [{"name": k, "config_operation": SET, "value": v} for k, v in set_configs.items()]
    ops += [{"name": k, "config_operation": DELETE, "value": None} for k in delete_configs]
    body = {"resources": [{"resource_type": _resource(entity_type, name),
                           "resource_name": name, "configs": ops}], "validate_only": False}
    for r in _broker_for(admin, entity_type, name).call(INCREMENTAL_ALTER_CONFIGS,
                                                         body).responses:
        check(r.error_code, r.error_message)
    return {"entity_type": entity_type, "entity_name": name, "set": set_configs,
            "deleted": delete_configs}
