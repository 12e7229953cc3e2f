"""DescribeCluster (60): brokers, controller and cluster id (Java Admin prefers it).

Versions: v0-v1 (v1 asks for the brokers' or the controllers' endpoints).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .declare import api

if TYPE_CHECKING:
    from .requests import DescribeClusterRequest


@api(60, "DescribeCluster", (0, 1))
async def handle_describe_cluster(
    ctx: RequestContext, request: DescribeClusterRequest
) -> dict[str, Any]:
    store = ctx.store
    out: dict[str, Any] = {}
    if getattr(request, "include_cluster_authorized_operations", False):  # KIP-430
        out["cluster_authorized_operations"] = (
            ctx.authorized_operations(ResourceType.CLUSTER)
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER) else 0)
    return out | {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "cluster_id": store.cluster_id,
        "controller_id": store.controller_id(),
        "brokers": [
            {"broker_id": b.broker_id, "host": e.host, "port": e.port, "rack": b.rack}
            for b in store.brokers()
            for e in [b.endpoint(ctx.listener)]  # the addresses on the request's listener
            if e is not None
        ],
    }
