"""Topic admin: CreateTopics (19), DeleteTopics (20), CreatePartitions (37)."""

from __future__ import annotations

from typing import Any

from ..topic_admin import TopicError
from .common import UNKNOWN_TOPIC_OR_PARTITION, field

UNKNOWN_TOPIC_ID = 100


async def handle_create_topics(ctx: Any, request: Any) -> dict[str, Any]:
    admin = ctx.broker.topics
    validate_only = field(request, "validate_only", False)
    results = []
    seen: dict[str, int] = {}
    for t in request.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    for t in request.topics:
        out: dict[str, Any] = {"name": t.name, "error_code": 0, "error_message": None}
        if seen[t.name] > 1:
            out.update(error_code=42, error_message=f"Duplicate topic name {t.name}")
            results.append(out)
            continue
        try:
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            configs = {c.name: c.value for c in t.configs}
            topic = await admin.create(
                t.name,
                t.num_partitions,
                t.replication_factor,
                assignments or None,
                configs,
                validate_only=validate_only,
            )
            out.update(
                topic_id=topic.topic_id,
                num_partitions=len(topic.partitions),
                replication_factor=len(topic.partitions[0].replicas),
                configs=[
                    {
                        "name": e.name,
                        "value": e.value,
                        "read_only": e.read_only,
                        "config_source": e.source,
                        "is_sensitive": e.is_sensitive,
                    }
                    for e in ctx.broker.describe_topic_configs(topic)
                ],
            )
        except TopicError as exc:
            out.update(error_code=exc.error_code, error_message=exc.message)
        results.append(out)
    return {"throttle_time": 0, "topics": results}


async def handle_delete_topics(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    responses = []
    if ctx.version < 6:
        entries = [(name, None) for name in field(request, "topic_names", ())]
    else:
        entries = [(t.name, t.topic_id) for t in request.topics]
    for name, topic_id in entries:
        out: dict[str, Any] = {"name": name, "error_code": 0}
        if name is None:
            name = broker.topic_name_by_id(topic_id)
            if name is None:
                out.update(error_code=UNKNOWN_TOPIC_ID, topic_id=topic_id)
                responses.append(out)
                continue
            out["name"] = name
        try:
            topic = await broker.topics.delete(name)
            out["topic_id"] = topic.topic_id
        except TopicError as exc:
            out.update(error_code=exc.error_code, error_message=exc.message)
        responses.append(out)
    return {"throttle_time": 0, "responses": responses}


async def handle_create_partitions(ctx: Any, request: Any) -> dict[str, Any]:
    admin = ctx.broker.topics
    results = []
    for t in request.topics:
        out: dict[str, Any] = {"name": t.name, "error_code": 0}
        try:
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            await admin.create_partitions(t.name, t.count, assignments, request.validate_only)
        except TopicError as exc:
            out.update(error_code=exc.error_code, error_message=exc.message)
        results.append(out)
    return {"throttle_time": 0, "results": results}


__all__ = ["UNKNOWN_TOPIC_OR_PARTITION"]
