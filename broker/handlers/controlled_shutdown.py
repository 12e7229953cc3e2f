"""ControlledShutdown (7): a stopping broker asks the controller to move its leaderships away.

Only brokers send it (to the controller they know from ZooKeeper, broker/app.py), so it is
served but not listed in ApiVersions: Kafka 4 has no such API, and Kafka 3.x's ZooKeeper
brokers served v0-v3 (Samsa serves v1-v3, protocol/controlled_shutdown.py). As in Kafka's
KafkaApis.handleControlledShutdownRequest the sender needs CLUSTER_ACTION on the cluster; the
controller (broker/cluster/controller.py, Kafka's doControlledShutdown) answers STALE_BROKER_EPOCH
to a request from a previous life of the broker (v2+ carry its broker epoch, KIP-380),
BROKER_NOT_AVAILABLE for a broker not registered, NOT_CONTROLLER unless it is the controller,
and otherwise the partitions the broker still leads.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext
from ..network.policy import THROTTLE_EXEMPT
from ..security.authorizer import AclOperation, ResourceType
from .declare import api

if TYPE_CHECKING:
    from .requests import ControlledShutdownRequest

log = logging.getLogger(__name__)


@api(7, "ControlledShutdown", (1, 3), advertised=False, policy=THROTTLE_EXEMPT)
async def handle_controlled_shutdown(
    ctx: RequestContext, request: ControlledShutdownRequest
) -> dict[str, Any]:
    broker_id = int(request.broker_id)
    broker_epoch = int(getattr(request, "broker_epoch", -1))  # v1: no epoch, not checked
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        log.info("ControlledShutdown of broker %d from %s: not authorized", broker_id, ctx.peer)
        return {"error_code": ErrorCode.cluster_authorization_failed, "remaining_partitions": []}
    controller = ctx.controller
    if controller is None:
        return {"error_code": ErrorCode.not_controller, "remaining_partitions": []}
    log.info("ControlledShutdown of broker %d (broker epoch %d) from %s", broker_id,
             broker_epoch, ctx.peer)
    error, remaining = await controller.controlled_shutdown(broker_id, broker_epoch)
    return {
        "error_code": error,
        "remaining_partitions": [{"topic_name": t, "partition_index": p} for t, p in remaining],
    }
