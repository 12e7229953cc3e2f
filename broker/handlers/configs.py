"""Configs: DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic overrides live in the metadata store; broker configs are static (from YAML and the
command line) in this version, so altering them answers INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from ..topic_admin import TopicError
from .common import INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION, field

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
INVALID_CONFIG = 40

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


async def handle_describe_configs(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    synonyms = field(request, "include_synonyms", False)
    docs = field(request, "include_documentation", False)
    results = []
    for r in request.resources:
        out: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
            "configs": [],
        }
        if r.resource_type == TOPIC:
            topic = broker.store.topic(r.resource_name)
            entries = broker.describe_topic_configs(topic) if topic else None
            if entries is None:
                out.update(
                    error_code=UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"Topic {r.resource_name} does not exist",
                )
        elif r.resource_type == BROKER and r.resource_name in ("", str(broker.broker_id)):
            entries = broker.describe_broker_configs()
        elif r.resource_type == BROKER_LOGGER:
            entries = []
        else:
            entries = None
            out.update(error_code=INVALID_REQUEST, error_message="Unknown resource")
        keys = set(r.configuration_keys) if r.configuration_keys else None
        for e in entries or []:
            if keys is not None and e.name not in keys:
                continue
            out["configs"].append(
                {
                    "name": e.name,
                    "value": e.value,
                    "read_only": e.read_only,
                    "config_source": e.source,
                    "is_sensitive": e.is_sensitive,
                    # v0 had is_default instead of config_source; kio drops what a version lacks.
                    "is_default": e.source == 5,
                    "synonyms": [
                        {"name": s.name, "value": s.value, "source": s.source} for s in e.synonyms
                    ]
                    if synonyms
                    else [],
                    "config_type": e.config_type,
                    "documentation": e.documentation if docs else None,
                }
            )
        results.append(out)
    return {"throttle_time": 0, "results": results}


async def handle_alter_configs(ctx: Any, request: Any) -> dict[str, Any]:
    responses = []
    for r in request.resources:
        new = {c.name: c.value for c in r.configs if c.value is not None}
        code, message = await _apply(
            ctx.broker, r, lambda _current, new=new: new, request.validate_only
        )
        responses.append(_result(r, code, message))
    return {"throttle_time": 0, "responses": responses}


async def handle_incremental_alter_configs(ctx: Any, request: Any) -> dict[str, Any]:
    responses = []
    for r in request.resources:

        def change(current: dict[str, str], r: Any = r) -> dict[str, str]:
            updated = dict(current)
            for c in r.configs:
                if c.config_operation == SET:
                    updated[c.name] = c.value
                elif c.config_operation == DELETE:
                    updated.pop(c.name, None)
                elif c.config_operation in (APPEND, SUBTRACT):
                    items = [x for x in updated.get(c.name, "").split(",") if x]
                    values = [x for x in (c.value or "").split(",") if x]
                    if c.config_operation == APPEND:
                        items += [v for v in values if v not in items]
                    else:
                        items = [x for x in items if x not in values]
                    updated[c.name] = ",".join(items)
                else:
                    raise TopicError(INVALID_REQUEST, f"Unknown operation {c.config_operation}")
            return updated

        code, message = await _apply(ctx.broker, r, change, request.validate_only)
        responses.append(_result(r, code, message))
    return {"throttle_time": 0, "responses": responses}


async def _apply(
    broker: Any, resource: Any, change: Any, validate_only: bool
) -> tuple[int, str | None]:
    if resource.resource_type == BROKER:
        return INVALID_REQUEST, "Dynamic broker configs are not supported; edit the YAML file"
    if resource.resource_type != TOPIC:
        return INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}"
    topic = broker.store.topic(resource.resource_name)
    if topic is None:
        return UNKNOWN_TOPIC_OR_PARTITION, f"Topic {resource.resource_name} does not exist"
    try:
        updated = change(dict(topic.configs))
        if validate_only:
            broker.topics.validate_configs(updated)
        else:
            await broker.topics.set_configs(topic.name, updated)
    except TopicError as exc:
        return exc.error_code, exc.message
    return 0, None


def _result(resource: Any, code: int, message: str | None) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
    }
