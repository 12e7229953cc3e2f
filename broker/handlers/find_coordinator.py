"""FindCoordinator (10): which broker coordinates a group (key_type 0), a transactional id (1)
or a share-partition (2, "groupId:topicId:partition": its share coordinator, KIP-932).

The coordinator of a key is the leader of its partition of the internal topic
(`__consumer_offsets` / `__transaction_state` / `__share_group_state`),
`abs(javaHash(key)) % partitions`. The topic is created on first use. v4+ batches keys
(`coordinator_keys`). Share keys are for brokers (CLUSTER_ACTION on the cluster, as in Kafka) and
answered only while `share.version` is at least 1 (INVALID_REQUEST otherwise).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samsa.coordinator.internal_log import partition_for
from samsa.coordinator.share.coordinator import parse_coordinator_key
from samsa.protocol.errors import ErrorCode

from ..context import CoordinatorLookupContext, RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .common import field
from .declare import api
from .share_groups import _enabled

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from .requests import FindCoordinatorRequest, FindCoordinatorRequestBatched

log = logging.getLogger(__name__)

GROUP, TRANSACTION, SHARE = 0, 1, 2


def _batched(request: FindCoordinatorRequest) -> TypeIs[FindCoordinatorRequestBatched]:
    """v4+ look up several keys at once (KIP-699)."""
    return request.__version__ >= 4


@api(10, "FindCoordinator", (0, 6), families={"FindCoordinatorRequestBatched": (4, 6)})
async def handle_find_coordinator(
    ctx: RequestContext, request: FindCoordinatorRequest
) -> dict[str, Any]:
    key_type: int = field(request, "key_type", GROUP)
    if _batched(request):
        coordinators = [
            {"key": key, **await _find(ctx, key_type, key)} for key in request.coordinator_keys
        ]
        return {"throttle_time": 0, "coordinators": coordinators}
    return {"throttle_time": 0, **await _find(ctx, key_type, request.key)}


def _error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}


async def _find(ctx: CoordinatorLookupContext, key_type: int, key: str) -> dict[str, Any]:
    unavailable = ErrorCode.coordinator_not_available
    # Kafka: DESCRIBE on the group or the transactional id.
    if key_type == GROUP and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, key):
        return _error(ErrorCode.group_authorization_failed, "Group authorization failed.")
    if key_type == TRANSACTION and not ctx.authorize(AclOperation.DESCRIBE,
                                                     ResourceType.TRANSACTIONAL_ID, key):
        return _error(ErrorCode.transactional_id_authorization_failed,
                      "Transactional Id authorization failed.")
    if key_type == SHARE and not ctx.authorize(AclOperation.CLUSTER_ACTION,
                                                ResourceType.CLUSTER):
        return _error(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
    try:
        if key_type == GROUP:
            groups = ctx.groups
            await groups.ensure_topic()
            topic, partition = groups.topic.name, groups.partition_for(key)
        elif key_type == SHARE:
            share_state = ctx.share_state
            parsed = parse_coordinator_key(key)
            if share_state is None or not _enabled(ctx):
                return _error(ErrorCode.invalid_request, "Share groups are not enabled.")
            if parsed is None:
                return _error(ErrorCode.invalid_request, f"Invalid share coordinator key {key!r}")
            await share_state.ensure_topic()
            topic, partition = share_state.topic.name, share_state.partition_for(*parsed)
        elif key_type == TRANSACTION:
            txn_topic = ctx.txn_topic
            await txn_topic.ensure_created()
            topic = txn_topic.name
            partition = partition_for(key, ctx.config["transaction.state.log.num.partitions"])
        else:
            return _error(ErrorCode.invalid_request, f"unsupported coordinator key type {key_type}")
    except Exception as exc:
        log.warning("FindCoordinator(%d, %r): %r", key_type, key, exc)
        return _error(unavailable, "the coordinator topic is not available")
    state = ctx.store.topic(topic)
    pstate = state.partitions.get(partition) if state is not None else None
    # a leadership of its leader's previous life: none until the controller elects it again
    if pstate is None or pstate.leader < 0 or ctx.store.leader_in_previous_life(pstate):
        return _error(unavailable, f"{topic}-{partition} has no leader")
    for b in ctx.store.brokers():
        e = b.endpoint(ctx.listener)  # its address on the listener the request came in on
        if b.broker_id == pstate.leader and e is not None:
            return {"error_code": ErrorCode.none, "error_message": None, "node_id": b.broker_id,
                    "host": e.host, "port": e.port}
    return _error(unavailable, f"leader {pstate.leader} of {topic}-{partition} is not alive")
