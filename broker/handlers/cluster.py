"""DescribeCluster (60): brokers, controller and cluster id (Java Admin prefers it).

Versions: v0-v2 (v1 asks for the brokers' or the controllers' endpoints, KIP-919: a broker
serves only the first; v2 may ask for fenced brokers too and says which are, KIP-1073).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .declare import api

if TYPE_CHECKING:
    from .requests import DescribeClusterRequest

# Kafka's EndpointType ids (KIP-919); any other id is UNKNOWN.
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
_ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}


@api(60, "DescribeCluster", (0, 2))
async def handle_describe_cluster(
    ctx: RequestContext, request: DescribeClusterRequest
) -> dict[str, Any]:
    refused = _endpoint_refused(int(getattr(request, "endpoint_type", BROKER_ENDPOINT)))
    if refused is not None:
        return refused
    store = ctx.store
    out: dict[str, Any] = {}
    if getattr(request, "include_cluster_authorized_operations", False):  # KIP-430
        out["cluster_authorized_operations"] = (
            ctx.authorized_operations(ResourceType.CLUSTER)
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER) else 0)
    # A broker is registered only while it lives (its ZooKeeper znode is ephemeral; the single
    # broker is itself): none is ever fenced, so IncludeFencedBrokers adds none and each is
    # unfenced.
    return out | {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "cluster_id": store.cluster_id,
        "controller_id": store.controller_id(),
        "brokers": [
            {"broker_id": b.broker_id, "host": e.host, "port": e.port, "rack": b.rack,
             "is_fenced": False}
            for b in store.brokers()
            for e in [b.endpoint(ctx.listener)]  # the addresses on the request's listener
            if e is not None
        ],
    }


def _endpoint_refused(endpoint_type: int) -> dict[str, Any] | None:
    """Kafka's answer to a request for other than a broker's endpoints, or None."""
    if endpoint_type == BROKER_ENDPOINT:
        return None
    if endpoint_type not in _ENDPOINT_NAMES:
        code, message = (ErrorCode.unsupported_endpoint_type,
                         f"Unsupported endpoint type {endpoint_type}")
    else:
        code, message = (ErrorCode.mismatched_endpoint_type,
                         "The request was sent to an endpoint of type BROKER, but we wanted an "
                         f"endpoint of type {_ENDPOINT_NAMES[endpoint_type]}")
    return {"throttle_time": 0, "error_code": code, "error_message": message,
            "cluster_id": "", "controller_id": -1, "brokers": []}
