"""`samsa topic ...`: CreateTopics, Metadata, DescribeConfigs, DeleteTopics,
IncrementalAlterConfigs and CreatePartitions, each result as plain data (dicts with stable keys)
for output.py to print."""

from __future__ import annotations

import uuid
from typing import Any

from samsa.protocol.errors import ErrorCode

from . import configs
from .client import Admin, check

TOPIC_RESOURCE = 2  # DescribeConfigs / IncrementalAlterConfigs resource type
DYNAMIC_TOPIC_CONFIG = 1  # config source of a topic's own override
TIMEOUT_MS = 30_000


def _topic_id(value: uuid.UUID | None) -> str | None:
    return None if value is None or value.int == 0 else str(value)


def check_found(topic: Any) -> None:
    """A Metadata topic's error, UNKNOWN_TOPIC_OR_PARTITION worded as Kafka's tools word it."""
    check(topic.error_code, f"Topic '{topic.name}' does not exist." if (
        topic.error_code == ErrorCode.unknown_topic_or_partition) else None)


def parse_configs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"want KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def create(admin: Admin, name: str, partitions: int, replication_factor: int,
           configs: dict[str, str], if_not_exists: bool = False) -> dict[str, Any]:
    body = {"topics": [{"name": name, "num_partitions": partitions,
                        "replication_factor": replication_factor, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout": TIMEOUT_MS, "validate_only": False}
    (result,) = admin.any().call(19, body).topics
    if if_not_exists and result.error_code == ErrorCode.topic_already_exists:
        return {"name": name, "created": False}
    check(result.error_code, result.error_message)
    return {"name": name, "created": True, "topic_id": _topic_id(result.topic_id),
            "partitions": int(result.num_partitions),
            "replication_factor": int(result.replication_factor)}


def _summary(topic: Any) -> dict[str, Any]:
    replicas = len(topic.partitions[0].replica_nodes) if topic.partitions else 0
    return {"name": topic.name, "topic_id": _topic_id(topic.topic_id),
            "partitions": len(topic.partitions), "replication_factor": replicas,
            "internal": bool(topic.is_internal)}


def list_topics(admin: Admin, include_internal: bool = True) -> list[dict[str, Any]]:
    topics = [t for t in admin.metadata().topics if t.error_code == ErrorCode.none]
    rows = [_summary(t) for t in topics if include_internal or not t.is_internal]
    return sorted(rows, key=lambda r: r["name"])


def topic_configs(admin: Admin, names: list[str]) -> dict[str, dict[str, str | None]]:
    """Each topic's own overrides (config source DYNAMIC_TOPIC_CONFIG), as kafka-topics
    --describe prints them."""
    if not names:
        return {}
    body = {"resources": [{"resource_type": TOPIC_RESOURCE, "resource_name": n,
                           "configuration_keys": None} for n in names],
            "include_synonyms": False, "include_documentation": False}
    out: dict[str, dict[str, str | None]] = {}
    for result in admin.any().call(32, body).results:
        check(result.error_code, result.error_message)
        out[result.resource_name] = {
            c.name: (None if c.is_sensitive else c.value)
            for c in sorted(result.configs, key=lambda c: c.name)
            if c.config_source == DYNAMIC_TOPIC_CONFIG}
    return out


def describe(admin: Admin, names: list[str] | None,
             include_internal: bool = True) -> list[dict[str, Any]]:
    topics = admin.metadata(names).topics
    for t in topics:
        check_found(t)
    topics = sorted((t for t in topics if names or include_internal or not t.is_internal),
                    key=lambda t: t.name)
    overrides = topic_configs(admin, [t.name for t in topics])
    out = []
    for t in topics:
        partitions = [{"partition": int(p.partition_index), "leader": int(p.leader_id),
                       "replicas": [int(r) for r in p.replica_nodes],
                       "isr": [int(r) for r in p.isr_nodes],
                       "offline_replicas": [int(r) for r in p.offline_replicas]}
                      for p in sorted(t.partitions, key=lambda p: p.partition_index)]
        out.append({**_summary(t), "configs": overrides.get(t.name, {}),
                    "partition_details": partitions})
    return out


def delete(admin: Admin, names: list[str]) -> list[dict[str, Any]]:
    body = {"topics": [{"name": n} for n in names], "topic_names": names,
            "timeout": TIMEOUT_MS}
    results = admin.any().call(20, body).responses
    for r in results:
        check(r.error_code, getattr(r, "error_message", None))
    return [{"name": r.name, "deleted": True, "topic_id": _topic_id(getattr(r, "topic_id", None))}
            for r in results]


def alter_config(admin: Admin, name: str, set_configs: dict[str, str],
                 delete_configs: list[str]) -> dict[str, Any]:
    configs.alter(admin, "topic", name, set_configs, delete_configs)
    return {"name": name, "set": set_configs, "deleted": delete_configs}


def add_partitions(admin: Admin, name: str, total: int) -> dict[str, Any]:
    body = {"topics": [{"name": name, "count": total, "assignments": None}],
            "timeout": TIMEOUT_MS, "validate_only": False}
    for r in admin.any().call(37, body).results:
        check(r.error_code, r.error_message)
    return {"name": name, "partitions": total}
