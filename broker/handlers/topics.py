"""Topic admin: CreateTopics (19), DeleteTopics (20), CreatePartitions (37).

Versions: CreateTopics v2-v7 (v7 answers each topic's id), DeleteTopics v1-v6 (v6 may name a
topic by id), CreatePartitions v0-v3.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Container
from typing import TYPE_CHECKING, Any

from samsa.config.topic import describe_topic_config
from samsa.protocol.errors import ErrorCode

from ..cluster.topic_admin import TopicError
from ..context import AdminContext, RequestContext
from ..network.policy import ApiPolicy
from ..network.quotas import CONTROLLER_MUTATION_TIME, MutationQuota
from ..security.authorizer import AclOperation, ResourceType
from .common import topic_name_by_id
from .declare import api

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from .requests import (
        CreatePartitionsRequest,
        CreateTopicsRequest,
        DeleteTopicsRequest,
        DeleteTopicsRequestByName,
    )


ZERO_UUID = uuid.UUID(int=0)


THROTTLED = "The throttling quota has been exceeded."
# held to the controller mutation quota (by the handler) and the connection muted for its answer
_MUTATION = ApiPolicy(CONTROLLER_MUTATION_TIME)


def _mutation_quota(ctx: AdminContext, strict_since: int) -> MutationQuota:
    """The request's controller mutation quota (controller_mutation_rate)."""
    quotas = ctx.quotas
    if quotas is None:
        return MutationQuota(None, False)
    return quotas.mutation_quota(ctx.listener, ctx.principal.name, ctx.client_id,
                                 ctx.version >= strict_since)


def _refusal(name: str, allowed: Container[str], quota: MutationQuota,
             denied: str) -> tuple[ErrorCode, str] | None:
    """Why a topic is not created or altered: TOPIC_AUTHORIZATION_FAILED (with Kafka's message
    `denied`, which differs by API), else THROTTLING_QUOTA_EXCEEDED while the quota is used up."""
    if name not in allowed:
        return ErrorCode.topic_authorization_failed, denied
    if quota.exceeded():
        return ErrorCode.throttling_quota_exceeded, THROTTLED
    return None


def _by_name(request: DeleteTopicsRequest) -> TypeIs[DeleteTopicsRequestByName]:
    """v1-5 name the topics; v6 gives names or topic ids."""
    return request.__version__ < 6


@api(19, "CreateTopics", (2, 7), policy=_MUTATION)
async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> dict[str, Any]:
    admin = ctx.topics
    validate_only = request.validate_only
    quota = _mutation_quota(ctx, strict_since=6)
    results = []
    seen: dict[str, int] = {}
    for t in request.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    # Kafka: CREATE on the cluster, else on each topic.
    creatable = set(seen) if ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER,
                                           log_denied=False) \
        else set(ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC, seen))
    for t in request.topics:
        out: dict[str, Any] = {"name": t.name, "error_code": ErrorCode.none,
                               "error_message": None}
        refusal = (_refusal(t.name, creatable, quota, "Authorization failed.")
                   if seen[t.name] == 1 else
                   (ErrorCode.invalid_request, f"Duplicate topic name {t.name}"))
        if refusal is not None:
            out.update(error_code=refusal[0], error_message=refusal[1])
            results.append(out)
            continue
        try:
            assignments: dict[int, list[int]] = {
                a.partition_index: list(a.broker_ids) for a in t.assignments
            }
            configs: dict[str, str | None] = {c.name: c.value for c in t.configs}
            topic = await admin.create(
                t.name,
                t.num_partitions,
                t.replication_factor,
                assignments or None,
                configs,
                validate_only=validate_only,
            )
            quota.record(len(topic.partitions))  # validate_only too, as Kafka's controller
            out["topic_id"] = topic.topic_id
            if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name,
                                 log_denied=False):
                # Kafka: the topic is created, its configs and layout are not told.
                out["topic_config_error_code"] = ErrorCode.topic_authorization_failed
                results.append(out)
                continue
            out.update(
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
                    for e in describe_topic_config(topic.name, topic.configs, ctx.config)
                ],
            )
        except TopicError as exc:
            out.update(error_code=exc.error_code, error_message=exc.message)
        results.append(out)
    return {"throttle_time": quota.throttle_ms(), "topics": results}


@api(20, "DeleteTopics", (1, 6), families={"DeleteTopicsRequestByName": (1, 5)},
     policy=_MUTATION)
async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> dict[str, Any]:
    responses: list[dict[str, Any]] = []
    entries: list[tuple[str | None, uuid.UUID | None]]
    if _by_name(request):
        entries = [(name, None) for name in request.topic_names]
    else:
        entries = [(t.name, t.topic_id if t.topic_id != ZERO_UUID else None)
                   for t in request.topics]
    # As Kafka's ControllerApis.deleteTopics: a topic named twice (by name or by id), named by
    # both name and id, or by neither, is refused with INVALID_REQUEST and not deleted.
    counts = Counter(entries)
    quota = _mutation_quota(ctx, strict_since=5)
    answered: set[tuple[str | None, uuid.UUID | None]] = set()
    for name, topic_id in entries:
        refusal = None
        if name is None and topic_id is None:
            refusal = "Neither topic name nor id were specified."
        elif name is not None and topic_id is not None:
            refusal = "You may not specify both topic name and topic id."
        elif counts[(name, topic_id)] > 1:
            if (name, topic_id) in answered:
                continue  # one answer per duplicated topic
            answered.add((name, topic_id))
            refusal = f"Duplicate topic {'name' if topic_id is None else 'id'}."
        if refusal is not None:
            responses.append({"name": name, "topic_id": topic_id or ZERO_UUID,
                              "error_code": ErrorCode.invalid_request, "error_message": refusal})
            continue
        out: dict[str, Any] = {"name": name, "error_code": ErrorCode.none}
        if name is None:
            name = topic_name_by_id(ctx.store, topic_id) if topic_id is not None else None
            if name is None:
                out.update(error_code=ErrorCode.unknown_topic_id, topic_id=topic_id,
                           error_message="This server does not host this topic ID.")
                responses.append(out)
                continue
            out["name"] = name
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                # Kafka: no name for a topic the principal may not describe (the id is no
                # secret).
                out.update(name=None, topic_id=topic_id,
                           error_code=ErrorCode.topic_authorization_failed)
                responses.append(out)
                continue
        if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
            out.update(error_code=ErrorCode.topic_authorization_failed,
                       error_message="Authorization failed.")
            if topic_id is not None:
                out["topic_id"] = topic_id
            responses.append(out)
            continue
        if quota.exceeded():
            out.update(error_code=ErrorCode.throttling_quota_exceeded, error_message=THROTTLED)
            responses.append(out)
            continue
        try:
            topic = await ctx.topics.delete(name)
            quota.record(len(topic.partitions))
            out["topic_id"] = topic.topic_id
        except TopicError as exc:
            out.update(error_code=exc.error_code, error_message=exc.message)
        responses.append(out)
    return {"throttle_time": quota.throttle_ms(), "responses": responses}


@api(37, "CreatePartitions", (0, 3), policy=_MUTATION)
async def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> dict[str, Any]:
    admin = ctx.topics
    quota = _mutation_quota(ctx, strict_since=3)
    results = []
    alterable = set(ctx.authorized(AclOperation.ALTER, ResourceType.TOPIC,
                                   {t.name for t in request.topics}))
    for t in request.topics:
        out: dict[str, Any] = {"name": t.name, "error_code": ErrorCode.none}
        refusal = _refusal(t.name, alterable, quota, "The topic authorization is failed.")
        if refusal is not None:
            out.update(error_code=refusal[0], error_message=refusal[1])
            results.append(out)
            continue
        try:
            assignments: list[list[int]] | None = (
                [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            )
            current = ctx.store.topic(t.name)
            before = len(current.partitions) if current is not None else t.count
            await admin.create_partitions(t.name, t.count, assignments, request.validate_only)
            quota.record(t.count - before)
        except TopicError as exc:
            out.update(error_code=exc.error_code, error_message=exc.message)
        results.append(out)
    return {"throttle_time": quota.throttle_ms(), "results": results}

