"""ElectLeaders (43): preferred and unclean leader elections asked for by an admin client.

The controller does the election (broker/cluster/controller.py, Kafka's ZooKeeper-era
processReplicaLeaderElection). Any broker serves the request: the controller's own broker
runs it, another broker forwards it unchanged to the controller it knows from ZooKeeper over an
inter-broker connection and relays the answer, as Kafka 4's brokers forward it to theirs (the
Java admin client sends it to the `controller_id` of Metadata and does not retry a
NOT_CONTROLLER answer). A forwarded request is not forwarded again: a broker that got one and is
no longer the controller answers NOT_CONTROLLER.

As in Kafka's DelayedElectLeader, the answer waits (up to the request's timeout) until this
broker's metadata shows each elected leader; a partition still not showing it then gets
REQUEST_TIMED_OUT. With all partitions asked for (topic_partitions null), those already led by
the replica the election would pick (ELECTION_NOT_NEEDED) are left out of the answer. Without
ZooKeeper the one broker is its own controller and every replica is its own, so there is never
anyone else to elect.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..cluster.controller import NO_SUCH_PARTITION, ElectionResult, TopicPartition, partition_state
from ..cluster.leader_election import PREFERRED, UNCLEAN
from ..context import ControllerContext, RequestContext
from ..network.interbroker import BrokerConnection, BrokerUnavailable
from ..security.authorizer import AclOperation, ResourceType
from .declare import api

if TYPE_CHECKING:
    from .requests import ElectLeadersRequest

log = logging.getLogger(__name__)

FORWARD_CLIENT_ID = "samsa-elect-leaders-forward"
API_KEY = 43


@api(43, "ElectLeaders", (0, 2))
async def handle_elect_leaders(
    ctx: RequestContext, request: ElectLeadersRequest
) -> dict[str, Any]:
    election_type = int(getattr(request, "election_type", PREFERRED))  # v0: preferred only
    wanted: list[TopicPartition] | None = None
    if request.topic_partitions is not None:
        wanted = list(dict.fromkeys(
            (str(t.topic), int(p)) for t in request.topic_partitions for p in t.partitions))
    if election_type not in (PREFERRED, UNCLEAN):
        log.info("ElectLeaders from %s: unknown election type %d", ctx.peer, election_type)
        return _response(ErrorCode.invalid_request,
                         {tp: (ErrorCode.invalid_request,
                               f"Unknown election type {election_type}", -1)
                          for tp in wanted or ()})
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        return _response(ErrorCode.cluster_authorization_failed,
                         {tp: (ErrorCode.cluster_authorization_failed, None, -1)
                          for tp in wanted or ()})
    timeout_s = max(0.0, request.timeout.total_seconds())
    controller = ctx.controller
    if controller is None:
        results = _single_broker(ctx, election_type, wanted)
    elif controller.active:
        results = await controller.elect_leaders(election_type, wanted)
        results = await _await_leaders(ctx, results, timeout_s)
    elif ctx.client_id == FORWARD_CLIENT_ID:
        results = {tp: (ErrorCode.not_controller, None, -1) for tp in wanted or ()}
        return _response(ErrorCode.not_controller, results)
    else:
        return await _forward(ctx, request, election_type, timeout_s)
    if wanted is None:
        results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.election_not_needed}
    return _response(ErrorCode.none, results)


def _single_broker(
    ctx: ControllerContext, election_type: int, wanted: list[TopicPartition] | None
) -> dict[TopicPartition, ElectionResult]:
    if wanted is None:
        wanted = [(t.name, p) for t in ctx.store.topics().values() for p in sorted(t.partitions)]
    results: dict[TopicPartition, ElectionResult] = {}
    for topic, index in wanted:
        p = partition_state(ctx.store, topic, index)
        if p is None:
            results[(topic, index)] = NO_SUCH_PARTITION
            continue
        if (p.leader == p.replicas[0]) if election_type == PREFERRED else (p.leader >= 0):
            results[(topic, index)] = (ErrorCode.election_not_needed, None, -1)
        else:
            results[(topic, index)] = (
                ErrorCode.preferred_leader_not_available if election_type == PREFERRED
                else ErrorCode.eligible_leaders_not_available, None, -1)
    return results


async def _await_leaders(
    ctx: ControllerContext, results: dict[TopicPartition, ElectionResult], timeout_s: float
) -> dict[TopicPartition, ElectionResult]:
    """Kafka's DelayedElectLeader: done once this broker's metadata shows every new leader."""
    def seen(tp: TopicPartition, leader: int) -> bool:
        topic = ctx.store.topic(tp[0])
        return topic is not None and tp[1] in topic.partitions and (
            topic.partitions[tp[1]].leader == leader)

    waiting = {tp: r[2] for tp, r in results.items() if r[0] == ErrorCode.none}
    deadline = time.monotonic() + timeout_s
    while waiting:
        waiting = {tp: leader for tp, leader in waiting.items() if not seen(tp, leader)}
        if not waiting or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.02)
    for tp in waiting:
        results[tp] = (ErrorCode.request_timed_out, None, -1)
    return results


async def _forward(
    ctx: ControllerContext, request: ElectLeadersRequest, election_type: int, timeout_s: float
) -> dict[str, Any]:
    target = ctx.store.controller_id()
    body: dict[str, Any] = {
        "topic_partitions": None if request.topic_partitions is None else [
            {"topic": t.topic, "partitions": list(t.partitions)} for t in request.topic_partitions
        ],
        "timeout": int(timeout_s * 1000),
    }
    if ctx.version >= 1:
        body["election_type"] = election_type
    conn = BrokerConnection(ctx.store, target, FORWARD_CLIENT_ID, timeout_s=timeout_s + 10)
    try:
        if target < 0 or target == ctx.broker_id:
            raise BrokerUnavailable("no controller to forward to")
        resp = await conn.request(API_KEY, ctx.version, body)
    except BrokerUnavailable as exc:
        log.info("ElectLeaders: forwarding to controller %d failed: %s", target, exc)
        wanted = [(t.topic, p) for t in request.topic_partitions or () for p in t.partitions]
        return _response(ErrorCode.not_controller,
                         {tp: (ErrorCode.not_controller, None, -1) for tp in wanted})
    finally:
        conn.close()
    return {
        "throttle_time": 0,
        "error_code": getattr(resp, "error_code", ErrorCode.none),
        "replica_election_results": [
            {"topic": r.topic, "partition_result": [
                {"partition_id": p.partition_id, "error_code": p.error_code,
                 "error_message": p.error_message} for p in r.partition_result]}
            for r in resp.replica_election_results
        ],
    }


def _response(
    error: ErrorCode, results: dict[TopicPartition, ElectionResult]
) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), (code, message, _) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_id": index, "error_code": code, "error_message": message})
    return {
        "throttle_time": 0,
        "error_code": error,
        "replica_election_results": [
            {"topic": topic, "partition_result": parts} for topic, parts in by_topic.items()
        ],
    }
