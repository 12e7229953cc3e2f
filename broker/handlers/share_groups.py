"""Share groups (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77).

Thin: check the gate and the ACLs, call `ctx.groups` (coordinator/group/share_groups.py). Both
are served only while the cluster's `share.version` is at least 1 (broker/cluster/features.py), as
in Kafka; ApiVersions does not list them otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..cluster.features import SHARE_VERSION
from ..context import HandlerContext, RequestContext
from .consumer_groups import describe_groups, heartbeat_error, heartbeat_refusal
from .declare import api

if TYPE_CHECKING:
    from .requests import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest


def _enabled(ctx: HandlerContext) -> bool:
    return ctx.store.finalized_features().level(SHARE_VERSION) >= 1


@api(76, "ShareGroupHeartbeat", (1, 1))
async def handle_share_group_heartbeat(
    ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> dict[str, Any]:
    if not _enabled(ctx):
        return heartbeat_error(ErrorCode.unsupported_version, "Share groups are not enabled.")
    names = request.subscribed_topic_names
    if refusal := heartbeat_refusal(ctx, request.group_id, names):
        return refusal
    result = await ctx.groups.share_group_heartbeat(
        request.group_id, request.member_id, request.member_epoch, request.rack_id,
        list(names) if names is not None else None, ctx.client_id or "",
        "/" + ctx.client_host)
    return dict(result, throttle_time=0)


@api(77, "ShareGroupDescribe", (1, 1))
async def handle_share_group_describe(
    ctx: RequestContext, request: ShareGroupDescribeRequest
) -> dict[str, Any]:
    return describe_groups(ctx, request.group_ids, request.include_authorized_operations,
                           _enabled(ctx), ctx.groups.describe_share_group)
