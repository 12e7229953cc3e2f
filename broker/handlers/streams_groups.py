"""Streams groups (KIP-1071): StreamsGroupHeartbeat (88), StreamsGroupDescribe (89), v0-1, and
StreamsGroupTopologyDescriptionUpdate (93) v0.

Thin: decode the request into coordinator/group/streams/transitions.Heartbeat, call the group
coordinator's streams part, create the internal topics (repartition, changelog) the group's
topology is missing, as Kafka's broker does for streams groups, and shape the answer.

v1 (KIP-1331) as Kafka 4.4 answers it with no topology description plugin configured (its
default, and the only way here): no description is ever required, one asked for is NOT_STORED,
and a description sent (93) is UNSUPPORTED_VERSION "The broker has no streams group topology
description plugin configured." once the principal may READ the group.

Served by default, as in Kafka 4.4: ApiVersions lists them while the cluster finalized
`streams.version` 1 (a new cluster does); a request otherwise is answered UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from samsa.coordinator.group.common import GroupError
from samsa.coordinator.group.streams.groups import Settings, task_ids
from samsa.coordinator.group.streams.model import (
    Subtopology,
    TaskMap,
    Tasks,
    TopicInfo,
    Topology,
    task_map,
)
from samsa.coordinator.group.streams.topology import Status, topics_of
from samsa.coordinator.group.streams.transitions import Answer, Heartbeat
from samsa.protocol.codec import millis
from samsa.protocol.errors import ErrorCode, KafkaError

from ..cluster.features import api_enabled
from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .consumer_groups import cached_group_configs, describe_groups, heartbeat_refusal
from .declare import api

if TYPE_CHECKING:
    from .requests import (
        StreamsGroupDescribeRequest,
        StreamsGroupHeartbeatRequest,
        StreamsGroupTopologyDescriptionUpdateRequest,
    )

log = logging.getLogger(__name__)

HEARTBEAT, DESCRIBE, TOPOLOGY_UPDATE = 88, 89, 93
STICKY = "sticky"  # Kafka's streams task assignor, the only one here
NOT_REQUESTED, NOT_STORED = 0, 1  # StreamsGroupDescribe v1's TopologyDescriptionStatus


def enabled(ctx: RequestContext, key: int) -> bool:
    """Whether this broker serves streams groups' API `key` now (see the module's docstring)."""
    return api_enabled(key, ctx.store.finalized_features())


def _error(code: ErrorCode, message: str | None = None, member_id: str = "") -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message,
            "member_id": member_id, "member_epoch": 0, "heartbeat_interval": 0,
            "acceptable_recovery_lag": 0, "task_offset_interval": 0, "status": None,
            "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
            "endpoint_information_epoch": 0, "partitions_by_user_endpoint": None,
            "topology_description_required": False}


def _tasks(entries: Any) -> TaskMap | None:
    if entries is None:
        return None
    return task_map({e.subtopology_id: set(e.partitions) for e in entries})


def _topic_infos(entries: Any) -> tuple[TopicInfo, ...]:
    return tuple(TopicInfo(t.name, t.partitions, t.replication_factor,
                           tuple((c.key, c.value) for c in t.topic_configs)) for t in entries)


def _topology(t: Any) -> Topology | None:
    if t is None:
        return None
    return Topology(t.epoch, tuple(
        Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.source_topic_regex),
                    _topic_infos(s.state_changelog_topics), tuple(s.repartition_sink_topics),
                    _topic_infos(s.repartition_source_topics),
                    tuple((tuple(g.source_topics), tuple(g.source_topic_regex),
                           tuple(g.repartition_source_topics)) for g in s.copartition_groups))
        for s in t.subtopologies))


def decode(ctx: RequestContext, r: StreamsGroupHeartbeatRequest) -> Heartbeat:
    endpoint = r.user_endpoint
    return Heartbeat(
        group_id=r.group_id, member_id=r.member_id, member_epoch=r.member_epoch,
        client_id=ctx.client_id or "", client_host="/" + ctx.client_host,
        instance_id=r.instance_id, rack_id=r.rack_id,
        rebalance_timeout_ms=millis(r.rebalance_timeout), topology=_topology(r.topology),
        active=_tasks(r.active_tasks), standby=_tasks(r.standby_tasks),
        warmup=_tasks(r.warmup_tasks), process_id=r.process_id,
        user_endpoint=None if endpoint is None else (endpoint.host, endpoint.port),
        client_tags=None if r.client_tags is None else tuple(
            (kv.key, kv.value) for kv in r.client_tags),
        shutdown_application=r.shutdown_application,
        endpoint_epoch=r.endpoint_information_epoch,
        task_offsets=_task_offsets(r.task_offsets),
        task_end_offsets=_task_offsets(r.task_end_offsets))


def _task_offsets(entries: Any) -> tuple[tuple[str, int, int], ...] | None:
    if entries is None:
        return None
    return tuple((t.subtopology_id, t.partition, t.offset) for t in entries)


async def _create_internal_topics(ctx: RequestContext, topics: tuple[TopicInfo, ...]
                                  ) -> list[str]:
    """Create the topology's missing internal topics (Kafka's broker does it for a streams
    group, with the configs the topology asks for) the principal may create (CREATE on the
    cluster or on each topic); returns what failed or was refused, for the status."""
    failed = []
    if not ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, log_denied=False):
        allowed = set(ctx.authorized(AclOperation.CREATE, ResourceType.TOPIC,
                                     {t.name for t in topics}))
        denied = sorted(t.name for t in topics if t.name not in allowed)
        if denied:
            failed.append("Unauthorized to CREATE on topics " + ", ".join(denied) + ".")
        topics = tuple(t for t in topics if t.name in allowed)
    for t in topics:
        try:
            await ctx.topics.create(t.name, t.partitions, t.replication_factor or -1,
                                    configs=dict(t.configs))
            log.info("created internal topic %s (%d partitions) of a streams group", t.name,
                     t.partitions)
        except KafkaError as exc:
            if exc.error_code != ErrorCode.topic_already_exists:
                failed.append(f"{t.name}: {exc}")
    return failed


def _answer(settings: Settings, answer: Answer, endpoint_epoch: int,
            endpoints: list[dict[str, Any]] | None) -> dict[str, Any]:
    tasks: Tasks | None = answer.tasks
    return {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
        "member_id": answer.member_id, "member_epoch": answer.member_epoch,
        "heartbeat_interval": settings.heartbeat_ms,
        "acceptable_recovery_lag": settings.acceptable_recovery_lag,
        "task_offset_interval": settings.task_offset_interval_ms,
        "status": [{"status_code": code, "status_detail": detail}
                   for code, detail in answer.status] or None,
        "active_tasks": None if tasks is None else task_ids(tasks.active),
        "standby_tasks": None if tasks is None else task_ids(tasks.standby),
        "warmup_tasks": None if tasks is None else task_ids(tasks.warmup),
        "endpoint_information_epoch": endpoint_epoch,
        "partitions_by_user_endpoint": endpoints,
        "topology_description_required": False,
    }


@api(HEARTBEAT, "StreamsGroupHeartbeat", (0, 1))
async def handle_streams_group_heartbeat(
    ctx: RequestContext, request: StreamsGroupHeartbeatRequest
) -> dict[str, Any]:
    if not enabled(ctx, HEARTBEAT):
        return _error(ErrorCode.unsupported_version,
                      "Streams groups are not enabled on this broker.")
    req = decode(ctx, request)
    names = sorted(topics_of(req.topology)) if req.topology is not None else None
    if refusal := heartbeat_refusal(ctx, request.group_id, names):
        return _error(refusal["error_code"], refusal["error_message"], request.member_id)
    settings = ctx.groups.streams.settings(await cached_group_configs(ctx, request.group_id))
    if ctx.api_version == 0:  # MISSING_CLIENT_TAGS is answered from v1 (Kafka 4.4)
        settings = replace(settings, rack_tags=())
    try:
        out = await ctx.groups.streams.heartbeat(req, settings)
    except GroupError as exc:
        return _error(exc.error_code, str(exc) if exc.args and not str(exc).isdigit()
                      else None, request.member_id)
    answer = out.answer
    if out.to_create:
        failed = await _create_internal_topics(ctx, out.to_create)
        if failed:
            answer.status = [(c, d) for c, d in answer.status
                             if c != Status.MISSING_INTERNAL_TOPICS]
            answer.status.append((int(Status.MISSING_INTERNAL_TOPICS),
                                  "Unable to create topics: " + "; ".join(failed)))
    group = out.group
    endpoints = None
    epoch = group.endpoint_epoch if group is not None else 0
    if group is not None and answer.member_epoch >= 0 and request.endpoint_information_epoch \
            < epoch:
        endpoints = ctx.groups.streams.endpoints(group)
    if ctx.api_version == 0:  # v0's AcceptableRecoveryLag is an int32
        settings = replace(settings, acceptable_recovery_lag=min(
            settings.acceptable_recovery_lag, 2**31 - 1))
    return _answer(settings, answer, epoch, endpoints)


@api(DESCRIBE, "StreamsGroupDescribe", (0, 1))
async def handle_streams_group_describe(
    ctx: RequestContext, request: StreamsGroupDescribeRequest
) -> dict[str, Any]:
    out = describe_groups(ctx, request.group_ids, request.include_authorized_operations,
                          enabled(ctx, DESCRIBE), ctx.groups.streams.describe)
    asked = bool(getattr(request, "include_topology_description", False))  # v1+
    for group in out["groups"]:
        ok = group["error_code"] == ErrorCode.none
        group["assignor_name"] = STICKY if ok else None
        group["topology_description_status"] = NOT_STORED if ok and asked else NOT_REQUESTED
    return out


@api(TOPOLOGY_UPDATE, "StreamsGroupTopologyDescriptionUpdate", (0, 0))
async def handle_streams_group_topology_description_update(
    ctx: RequestContext, request: StreamsGroupTopologyDescriptionUpdateRequest
) -> dict[str, Any]:
    """Kafka 4.4's KafkaApis and GroupCoordinatorService without a description plugin: the
    streams protocol's switch, READ on the group, then the plugin that is not there."""
    def error(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": message}

    if not enabled(ctx, TOPOLOGY_UPDATE):
        return error(ErrorCode.unsupported_version, "The version of API is not supported.")
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return error(ErrorCode.group_authorization_failed, "Group authorization failed.")
    return error(ErrorCode.unsupported_version,
                 "The broker has no streams group topology description plugin configured.")
