"""Classic group membership and admin: JoinGroup (11), SyncGroup (14), Heartbeat (12),
LeaveGroup (13), ListGroups (16), DescribeGroups (15), DeleteGroups (42).
DescribeGroups v6 (KIP-1043) answers GROUP_ID_NOT_FOUND, with a message, for a group that does
not exist or is not a classic one, where older versions answer it as Dead without an error.
DeleteGroups v3 (Kafka 4.4; kio lacks it: protocol/own_versions.py) gives each result an error
message, which Kafka sets only when deleting a streams group's internal topics fails: here none.

Thin: decode version differences, call `ctx.groups` (coordinator/group), shape the answer.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from samsa.coordinator.share.coordinator import ShareStateError
from samsa.protocol.codec import millis
from samsa.protocol.errors import ErrorCode

from ..context import GroupContext, RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .common import field
from .declare import api

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from samsa.coordinator.group import GroupCoordinator

    from .requests import (
        DeleteGroupsRequest,
        DescribeGroupsRequest,
        HeartbeatRequest,
        JoinGroupRequest,
        LeaveGroupRequest,
        LeaveGroupRequestBatched,
        ListGroupsRequest,
        SyncGroupRequest,
    )


def _batched(request: LeaveGroupRequest) -> TypeIs[LeaveGroupRequestBatched]:
    """v3+ remove several members at once (KIP-345)."""
    return request.__version__ >= 3


def _may_read(ctx: GroupContext, group: str) -> bool:
    """Kafka: joining, syncing, heartbeating, leaving need READ on the group."""
    return ctx.authorize(AclOperation.READ, ResourceType.GROUP, group)


@api(11, "JoinGroup", (0, 9))
async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> dict[str, Any]:
    if not _may_read(ctx, request.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                "generation_id": -1, "protocol_type": None,
                "protocol_name": "" if ctx.version < 7 else None, "leader": "",
                "member_id": "", "members": []}
    session_ms = millis(request.session_timeout)
    rebalance: timedelta | None = field(request, "rebalance_timeout", None)
    rebalance_ms = millis(rebalance) if rebalance is not None else -1
    if rebalance_ms < 0:
        rebalance_ms = session_ms  # v0 has no rebalance timeout: Kafka uses the session timeout
    result = await ctx.groups.join_group(
        request.group_id,
        request.member_id,
        field(request, "group_instance_id", None),
        request.protocol_type,
        [(p.name, p.metadata) for p in request.protocols],
        session_ms,
        rebalance_ms,
        ctx.client_id or "",
        "/" + ctx.client_host,
        ctx.version,
    )
    result = dict(result, throttle_time=0)
    if ctx.version < 7 and result.get("protocol_name") is None:
        result["protocol_name"] = ""  # nullable from v7 only
    if result.get("leader") is None:
        result["leader"] = ""
    return result


@api(14, "SyncGroup", (0, 5))
async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> dict[str, Any]:
    if not _may_read(ctx, request.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                "protocol_type": None, "protocol_name": None, "assignment": b""}
    result = await ctx.groups.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        field(request, "group_instance_id", None),
        field(request, "protocol_type", None),
        field(request, "protocol_name", None),
        [(a.member_id, a.assignment) for a in request.assignments],
    )
    return {"throttle_time": 0, "error_code": result["error_code"],
            "protocol_type": result.get("protocol_type"),
            "protocol_name": result.get("protocol_name"),
            "assignment": result.get("assignment") or b""}


@api(12, "Heartbeat", (0, 4))
async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> dict[str, Any]:
    if not _may_read(ctx, request.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    code = ctx.groups.heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        field(request, "group_instance_id", None),
    )
    return {"throttle_time": 0, "error_code": code}


@api(13, "LeaveGroup", (0, 5), families={"LeaveGroupRequestBatched": (3, 5)})
async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> dict[str, Any]:
    if not _may_read(ctx, request.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                "members": []}
    members: list[tuple[str, str | None]]
    if _batched(request):
        members = [(m.member_id, field(m, "group_instance_id", None)) for m in request.members]
    else:
        members = [(request.member_id, None)]
    error, results = ctx.groups.leave_group(request.group_id, members)
    if ctx.version < 3 and error == ErrorCode.none and results:
        error = results[0]["error_code"]
    return {"throttle_time": 0, "error_code": error, "members": results}


@api(16, "ListGroups", (0, 5))
async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> dict[str, Any]:
    error, groups = ctx.groups.list_groups(
        field(request, "states_filter", ()) or (), field(request, "types_filter", ()) or ()
    )
    # Kafka: every group with DESCRIBE on the cluster, else those the principal may describe.
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, log_denied=False):
        groups = ctx.authorized(AclOperation.DESCRIBE, ResourceType.GROUP, groups,
                                lambda g: str(g["group_id"]), log_denied=False)
    return {"throttle_time": 0, "error_code": error, "groups": groups}


@api(15, "DescribeGroups", (0, 6))
async def handle_describe_groups(
    ctx: RequestContext, request: DescribeGroupsRequest
) -> dict[str, Any]:
    coordinator = ctx.groups
    with_operations = bool(field(request, "include_authorized_operations", False))  # KIP-430
    groups = []
    for g in request.groups:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g):
            groups.append({"error_code": ErrorCode.group_authorization_failed, "group_id": g,
                           "group_state": "", "protocol_type": "", "protocol_data": "",
                           "members": []})
            continue
        described = coordinator.describe_group(g)
        if ctx.version >= 6:
            _not_found_as_an_error(ctx.groups, described)
        if with_operations and described["error_code"] == ErrorCode.none:
            described["authorized_operations"] = ctx.authorized_operations(
                ResourceType.GROUP, g)
        groups.append(described)
    return {"throttle_time": 0, "groups": groups}


def _not_found_as_an_error(groups: GroupCoordinator, described: dict[str, Any]) -> None:
    """v6 (KIP-1043): a group that is not a classic one, which older versions describe as Dead
    without an error, is GROUP_ID_NOT_FOUND with Kafka's message."""
    group_id = described["group_id"]
    if described["error_code"] != ErrorCode.none or described["group_state"] != "Dead":
        return
    if group_id in groups.groups and group_id not in groups.consumer_groups:
        return  # a classic group that is Dead itself
    exists = group_id in groups.consumer_groups or group_id in groups.share_groups
    described["error_code"] = ErrorCode.group_id_not_found
    described["error_message"] = (f"Group {group_id} is not a classic group." if exists
                                  else f"Group {group_id} not found.")


@api(42, "DeleteGroups", (0, 3))
async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> dict[str, Any]:
    coordinator = ctx.groups
    results = []
    for g in request.groups_names:
        if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, g):
            code = ErrorCode.group_authorization_failed
        else:
            code = await _delete_share_state(ctx, g)
            if code == ErrorCode.none:
                code = await coordinator.delete_group(g)
        results.append({"group_id": g, "error_code": code})
    return {"throttle_time": 0, "results": results}


async def _delete_share_state(ctx: GroupContext, group_id: str) -> ErrorCode:
    """An empty share group's persisted share-partition state goes before the group does (as
    Kafka's DeleteGroups): a group created again under its name starts afresh."""
    group = ctx.groups.share_groups.get(group_id)
    persister = ctx.share_persister
    if group is None or group.members or persister is None:
        return ErrorCode.none
    for name in sorted(group.offsets_topics):
        state = ctx.store.topic(name)
        if state is None:
            continue
        for p in sorted(state.partitions):
            try:
                await persister.delete(group_id, state.topic_id, p)
            except ShareStateError as exc:
                log.warning("deleting the state of share group %s on %s-%d failed: %r",
                            group_id, name, p, exc)
                return exc.error_code
    return ErrorCode.none
