"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455.

The controller moves the replicas (broker/cluster/controller.py: the target and original replica
sets, the adding/removing replicas kept in the topic znode, completion once the target is in the
ISR). As in Kafka's ZooKeeper-era brokers, only the controller serves these: another broker
answers NOT_CONTROLLER, on which the Java admin client refreshes its metadata and sends the
request again to the controller Metadata names. Without ZooKeeper the one broker is the
cluster: a target of its own id is already where the partition is, any other id is not a live
broker, and nothing is ever in progress.

Version 1 adds AllowReplicationFactorChange (KIP-860): when false, a target whose length
differs from the replica count the partition has (or is headed for) gets
INVALID_REPLICATION_FACTOR.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..cluster.controller import ReassignmentResult, TopicPartition
from ..context import ControllerContext, RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .declare import api

if TYPE_CHECKING:
    from .requests import AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest

log = logging.getLogger(__name__)


@api(45, "AlterPartitionReassignments", (0, 1))
async def handle_alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> dict[str, Any]:
    wanted: dict[TopicPartition, list[int] | None] = {}
    for t in request.topics:
        for p in t.partitions:
            wanted[(str(t.name), int(p.partition_index))] = (
                None if p.replicas is None else [int(r) for r in p.replicas])
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        error = ErrorCode.cluster_authorization_failed
        return _alter_response(ctx, error, None,
                               {tp: (error, None) for tp in wanted}, allow_rf_change)
    controller = ctx.controller
    if controller is None:
        results = _single_broker(ctx, wanted, allow_rf_change)
    else:
        answered = await controller.alter_reassignments(wanted, allow_rf_change)
        if answered is None:
            log.info("AlterPartitionReassignments from %s: broker %d is not the controller",
                     ctx.peer, ctx.broker_id)
            return _alter_response(ctx, ErrorCode.not_controller, None, {}, allow_rf_change)
        results = answered
    for (topic, index), (code, message) in results.items():
        if code != ErrorCode.none:
            log.info("AlterPartitionReassignments of %s-%d from %s: %s %s", topic, index,
                     ctx.peer, code.name, message or "")
    return _alter_response(ctx, ErrorCode.none, None, results, allow_rf_change)


def _single_broker(
    ctx: ControllerContext, wanted: dict[TopicPartition, list[int] | None], allow_rf_change: bool
) -> dict[TopicPartition, ReassignmentResult]:
    results: dict[TopicPartition, ReassignmentResult] = {}
    for (topic, index), target in wanted.items():
        state = ctx.store.topic(topic)
        if state is None or index not in state.partitions:
            results[(topic, index)] = (ErrorCode.unknown_topic_or_partition,
                                       "The partition does not exist.")
        elif target is None:
            results[(topic, index)] = (
                ErrorCode.no_reassignment_in_progress,
                "No partition reassignment is in progress for this partition.")
        elif not target or len(set(target)) != len(target) or any(r < 0 for r in target):
            results[(topic, index)] = (ErrorCode.invalid_replica_assignment,
                                       f"Invalid replica list in partition reassignment: {target}")
        elif any(r != ctx.broker_id for r in target):
            results[(topic, index)] = (
                ErrorCode.invalid_replica_assignment,
                f"Replica assignment has brokers that are not alive. Replica list: {target}, "
                f"live broker list: [{ctx.broker_id}]")
        elif not allow_rf_change and len(state.partitions[index].replicas) != len(target):
            results[(topic, index)] = (
                ErrorCode.invalid_replication_factor,
                f"The replication factor is changed from "
                f"{len(state.partitions[index].replicas)} to {len(target)}")
        else:
            results[(topic, index)] = (ErrorCode.none, None)
    return results


def _alter_response(
    ctx: ControllerContext, error: ErrorCode, message: str | None,
    results: dict[TopicPartition, ReassignmentResult], allow_rf_change: bool,
) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), (code, text) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": index, "error_code": code, "error_message": text})
    out: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": error,
        "error_message": message,
        "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
    if ctx.version >= 1:
        out["allow_replication_factor_change"] = allow_rf_change
    return out


@api(46, "ListPartitionReassignments", (0, 0))
async def handle_list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> dict[str, Any]:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return _list_response(ErrorCode.cluster_authorization_failed, {})
    wanted: list[TopicPartition] | None = None
    if request.topics is not None:
        wanted = [(str(t.name), int(p)) for t in request.topics for p in t.partition_indexes]
    controller = ctx.controller
    if controller is None:
        return _list_response(ErrorCode.none, {})
    ongoing = controller.list_reassignments(wanted)
    if ongoing is None:
        return _list_response(ErrorCode.not_controller, {})
    return _list_response(ErrorCode.none, ongoing)


def _list_response(
    error: ErrorCode, ongoing: dict[TopicPartition, tuple[list[int], list[int], list[int]]]
) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append({
            "partition_index": index, "replicas": replicas, "adding_replicas": adding,
            "removing_replicas": removing})
    return {
        "throttle_time": 0,
        "error_code": error,
        "error_message": None,
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
