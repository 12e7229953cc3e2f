"""Consumer-protocol groups (KIP-848): ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).

Thin: decode the request, call `ctx.groups` (coordinator/group/consumer/), shape the
answer. Both APIs are served only while the cluster's `group.version` is at least 1, as in
Kafka (broker/cluster/features.py; ApiVersions does not list them otherwise).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from samsa.protocol.codec import millis
from samsa.protocol.errors import ErrorCode

from ..cluster.features import GROUP_VERSION
from ..context import GroupContext, RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .common import field
from .declare import api

if TYPE_CHECKING:
    from .requests import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest

log = logging.getLogger(__name__)


# How long a group's consumer.* overrides (IncrementalAlterConfigs on the GROUP resource) are
# used before they are read again from the metadata store (ZooKeeper in a cluster).
_GROUP_CONFIGS_TTL_S = 5.0


def _enabled(ctx: GroupContext) -> bool:
    return ctx.store.finalized_features().level(GROUP_VERSION) >= 1


async def cached_group_configs(ctx: GroupContext, group_id: str) -> dict[str, Any]:
    """The group's dynamic configs, read from the store again at most every few seconds;
    none (the defaults, and a log line) while the store is unreachable."""
    cache = ctx.groups.group_config_cache
    now = time.monotonic()
    hit = cache.get(group_id)
    if hit is None or hit[0] < now:
        try:
            configs = await ctx.store.group_configs(group_id)
        except Exception as exc:
            log.warning("reading the configs of group %s failed: %r", group_id, exc)
            configs = {}
        if len(cache) > 10_000:
            cache.clear()
        hit = cache[group_id] = (now + _GROUP_CONFIGS_TTL_S, configs)
    return hit[1]


async def _group_timeouts(ctx: GroupContext, group_id: str) -> tuple[int, int]:
    """The group's session timeout and heartbeat interval: its consumer.* overrides, else
    the broker's group.consumer.* defaults."""
    configs = await cached_group_configs(ctx, group_id)
    session = configs.get("consumer.session.timeout.ms")
    heartbeat = configs.get("consumer.heartbeat.interval.ms")
    return (int(session) if session is not None else ctx.groups.consumer_session_ms,
            int(heartbeat) if heartbeat is not None else ctx.groups.consumer_heartbeat_ms)


def heartbeat_error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    """A ConsumerGroupHeartbeat's or ShareGroupHeartbeat's answer of an error."""
    return {"throttle_time": 0, "error_code": code, "error_message": message,
            "member_id": None, "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


def heartbeat_refusal(ctx: GroupContext, group_id: str,
                      names: Sequence[str] | None) -> dict[str, Any] | None:
    """The answer to a group heartbeat its principal may not send: READ on the group, and
    (Kafka) DESCRIBE on every subscribed topic, else TOPIC_AUTHORIZATION_FAILED."""
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return heartbeat_error(ErrorCode.group_authorization_failed)
    if names is not None:
        denied = set(names) - set(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                 set(names), log_denied=False))
        if denied:
            return heartbeat_error(ErrorCode.topic_authorization_failed,
                                   f"Unauthorized topics: {', '.join(sorted(denied))}")
    return None


@api(68, "ConsumerGroupHeartbeat", (0, 1))
async def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> dict[str, Any]:
    if not _enabled(ctx):
        log.info("ConsumerGroupHeartbeat from %s refused: group.version is not finalized at 1",
                 ctx.client_id)
        return heartbeat_error(ErrorCode.unsupported_version,
                               "The new group coordinator is not enabled (group.version < 1).")
    names = request.subscribed_topic_names
    if refusal := heartbeat_refusal(ctx, request.group_id, names):
        return refusal
    owned: list[tuple[uuid.UUID, list[int]]] | None = None
    if request.topic_partitions is not None:
        owned = [(tp.topic_id or uuid.UUID(int=0), list(tp.partitions))
                 for tp in request.topic_partitions]
    rebalance = millis(request.rebalance_timeout)
    session_ms, heartbeat_ms = await _group_timeouts(ctx, request.group_id)
    result = await ctx.groups.consumer_group_heartbeat(
        request.group_id,
        request.member_id,
        request.member_epoch,
        request.instance_id,
        request.rack_id,
        rebalance,
        list(names) if names is not None else None,
        field(request, "subscribed_topic_regex", None),
        request.server_assignor,
        owned,
        ctx.client_id or "",
        "/" + ctx.client_host,
        ctx.version,
        session_ms=session_ms,
        heartbeat_ms=heartbeat_ms,
    )
    return dict(result, throttle_time=0)


@api(69, "ConsumerGroupDescribe", (0, 1))
async def handle_consumer_group_describe(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> dict[str, Any]:
    return describe_groups(ctx, request.group_ids, request.include_authorized_operations,
                           _enabled(ctx), ctx.groups.describe_consumer_group)


def describe_groups(ctx: GroupContext, group_ids: Iterable[str], include_operations: bool,
                    enabled: bool, describe: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """ConsumerGroupDescribe and ShareGroupDescribe: the same checks and error entry."""
    groups = []
    for g in group_ids:
        if not enabled:
            code = ErrorCode.unsupported_version
        elif not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g):
            code = ErrorCode.group_authorization_failed
        else:
            described = describe(g)
            if described["error_code"] == ErrorCode.none and include_operations:
                described["authorized_operations"] = ctx.authorized_operations(
                    ResourceType.GROUP, g)
            groups.append(described)
            continue
        groups.append({"error_code": code, "error_message": None, "group_id": g,
                       "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                       "assignor_name": "", "members": []})
    return {"throttle_time": 0, "groups": groups}
