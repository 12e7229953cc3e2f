"""Metadata (3): brokers, topics, partition leaders; creates topics on first use.

Versions: v0-v13. v10+ answer each topic's id and v12+ ask by it (a name of null); v13 adds a
top-level error code.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from functools import cache as memoize
from functools import partial
from typing import TYPE_CHECKING, Any

from samsa.protocol.codec import response_type
from samsa.protocol.encoder import Encoded, encode_entity
from samsa.protocol.errors import ErrorCode
from samsa.protocol.kio_adapter import Entity, schema_fields

from ..cluster.metadata_store import OfflineReplicas, PartitionState, TopicState
from ..cluster.topic_admin import INTERNAL_TOPICS, TopicError, validate_topic_name
from ..context import MetadataContext, RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .common import field, topic_name_by_id
from .declare import api

if TYPE_CHECKING:
    from .requests import MetadataRequest

log = logging.getLogger(__name__)

METADATA_KEY = 3


@api(3, "Metadata", (0, 13))
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> dict[str, Any]:
    store = ctx.store
    version = ctx.version
    requested = request.topics
    # v0: an empty list means all topics; v1+: null means all, empty means none.
    all_topics = requested is None or (version == 0 and not requested)
    allow_create = (
        field(request, "allow_auto_topic_creation", True)
        and ctx.config["auto.create.topics.enable"]
    )
    if version in (10, 11) and requested and any(
        t.name is None or field(t, "topic_id", None) is not None for t in requested
    ):
        # Kafka's KafkaApis: v10-11 have the topic id field but not the lookup by id; such a
        # request fails whole (MetadataRequest.getErrorResponse).
        log.info("Metadata v%d from %s names a topic by id: INVALID_REQUEST", version, ctx.peer)
        return {"throttle_time": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
                "topics": [{"error_code": ErrorCode.invalid_request, "name": t.name or "",
                            "topic_id": field(t, "topic_id", None), "partitions": []}
                           for t in requested]}
    topics_out: list[dict[str, Any]] = []
    names: list[str | None] = []  # None: neither a name nor a topic id
    by_id: dict[str, uuid.UUID] = {}  # the topics asked for by id
    if all_topics or requested is None:
        # Kafka's authorization: the topics the principal may not describe are left out.
        names.extend(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    sorted(store.topics()), log_denied=False))
    else:
        for t in requested:
            name: str | None = t.name
            topic_id: uuid.UUID | None = field(t, "topic_id", None)
            if name is None and topic_id is not None:
                name = topic_name_by_id(store, topic_id)
                if name is None:
                    topics_out.append(
                        {"error_code": ErrorCode.unknown_topic_id, "name": None,
                         "topic_id": topic_id, "partitions": []}
                    )
                    continue
                by_id[name] = topic_id
            names.append(name)
    describable = set(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                     {n for n in names if n is not None}))
    online = replica_online(ctx)
    leads = leader_online(ctx, online)
    # The brokers with an endpoint on the listener this request came in on.
    reachable = listener_brokers(ctx)
    # Kafka (MetadataCache): a live leader without that listener is LISTENER_NOT_FOUND from
    # v6 on (a configuration error to diagnose), LEADER_NOT_AVAILABLE before.
    no_listener = ErrorCode.listener_not_found if version >= 6 else ErrorCode.leader_not_available
    with_operations = bool(field(request, "include_topic_authorized_operations", False))
    # Topic entries encoded before, for this version and listener
    # (broker/cluster/metadata_cache.py).
    cache = ctx.metadata_cache
    if cache is not None:
        cache.check_offline(ctx.replicas.offline)
    topic_entity = _topic_entity(version)
    for name in names:
        if name is not None and name not in describable:
            # Not even whether it exists is told (a topic id is no secret: it is echoed).
            denied: dict[str, Any] = {"error_code": ErrorCode.topic_authorization_failed,
                                      "name": name, "partitions": []}
            if name in by_id:
                denied.update(name=None, topic_id=by_id[name])
            topics_out.append(denied)
            continue
        topic = store.topic(name) if name is not None else None
        if topic is None:
            if allow_create and name is not None and not _may_create(ctx, name):
                topics_out.append({"error_code": ErrorCode.topic_authorization_failed,
                                   "name": name, "partitions": []})
                continue
            topics_out.append(await _missing_topic(ctx, name, allow_create))
            continue
        if with_operations:  # KIP-430: the principal's own, so not from the cache
            out = _topic(topic, online, leads, reachable, no_listener)
            out["topic_authorized_operations"] = ctx.authorized_operations(ResourceType.TOPIC,
                                                                           topic.name)
            topics_out.append(out)
            continue
        if cache is None:
            topics_out.append(_topic(topic, online, leads, reachable, no_listener))
            continue
        topics_out.append(cache.entry(topic.name, version, ctx.listener, partial(
            _encoded_topic, topic_entity, topic, online, leads, reachable, no_listener)))
    cluster: dict[str, Any] = {}
    if field(request, "include_cluster_authorized_operations", False):  # v8-10 (KIP-430)
        cluster["cluster_authorized_operations"] = (
            ctx.authorized_operations(ResourceType.CLUSTER)
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER) else 0)
    return cluster | {
        "throttle_time": 0,
        # Each broker's address on the listener this request came in on; brokers without
        # that listener are left out (Kafka's MetadataCache.getAliveBrokerNodes).
        "brokers": [
            {"node_id": b.broker_id, "host": e.host, "port": e.port, "rack": b.rack}
            for b in store.brokers()
            for e in [b.endpoint(ctx.listener)]
            if e is not None
        ],
        "cluster_id": store.cluster_id,
        "controller_id": store.controller_id(),
        "topics": topics_out,
        "error_code": ErrorCode.none,  # v13+: a top-level error (none here)
    }


@memoize
def _topic_entity(version: int) -> type[Entity]:
    """The Metadata response's topic entity at `version`."""
    for f in schema_fields(response_type(METADATA_KEY, version)):
        if f.name == "topics" and f.entity is not None:
            return f.entity
    raise LookupError(f"Metadata v{version} has no topics")


def _may_create(ctx: MetadataContext, name: str) -> bool:
    """Kafka: creating a topic needs CREATE on the cluster or on the topic."""
    return (ctx.authorize(AclOperation.CREATE, ResourceType.CLUSTER, log_denied=False)
            or ctx.authorize(AclOperation.CREATE, ResourceType.TOPIC, name))


def listener_brokers(ctx: MetadataContext) -> set[int]:
    """The live brokers that have an endpoint on the request's listener."""
    return {b.broker_id for b in ctx.store.brokers() if b.endpoint(ctx.listener) is not None}


def replica_online(ctx: MetadataContext) -> Callable[[int, tuple[str, int]], bool]:
    """online(broker id, (topic, partition)): whether that replica is on a live broker and
    not in one of its failed log dirs."""
    store = ctx.store
    live = {b.broker_id for b in store.brokers()}
    # Replicas in failed log dirs: every broker's (the ZooKeeper store knows), ours in any case.
    offline: OfflineReplicas = dict(store.offline_replicas())
    offline[ctx.broker_id] = ctx.replicas.offline

    def online(r: int, tp: tuple[str, int]) -> bool:
        return r in live and tp not in offline.get(r, ())

    return online


# leads(state, (topic, partition)): whether the partition's leader is one to name
LeaderOnline = Callable[[PartitionState, tuple[str, int]], bool]


def leader_online(ctx: MetadataContext,
                  online: Callable[[int, tuple[str, int]], bool]) -> LeaderOnline:
    """Whether a partition's leader is one to name: its replica `online`, and the leadership
    of its current life. A broker restarted is its previous life's leader until the controller
    writes the leadership again at the next leader epoch; Kafka's controller handles it as
    failed meanwhile, so Metadata names no leader rather than an epoch the leader fences."""
    previous_life = ctx.store.leader_in_previous_life

    def leads(state: PartitionState, tp: tuple[str, int]) -> bool:
        return online(state.leader, tp) and not previous_life(state)

    return leads


async def _missing_topic(ctx: MetadataContext, name: str | None, allow_create: bool
                         ) -> dict[str, Any]:
    """A requested topic that does not exist. Like Kafka's KafkaApis.getTopicMetadata: an
    illegal name is INVALID_TOPIC_EXCEPTION; with auto-creation the topic is created and this
    answer is LEADER_NOT_AVAILABLE with no partitions (AutoTopicCreationManager: the client
    asks again once the creation went through), whether or not the creation succeeded (a
    failure is only logged); without it UNKNOWN_TOPIC_OR_PARTITION."""
    try:
        validate_topic_name(name)  # refuses None and ""
    except TopicError as exc:
        return {"error_code": exc.error_code, "name": name, "partitions": []}
    assert name is not None
    if not allow_create:
        return {"error_code": ErrorCode.unknown_topic_or_partition, "name": name,
                "partitions": []}
    try:
        await ctx.topics.create(name)
    except TopicError as exc:
        if exc.error_code != ErrorCode.topic_already_exists:
            log.warning("auto-creation of topic %s failed: %s", name, exc.message)
    return {"error_code": ErrorCode.leader_not_available, "name": name,
            "is_internal": name in INTERNAL_TOPICS, "partitions": []}


def _encoded_topic(entity: type[Entity], topic: TopicState,
                   online: Callable[[int, tuple[str, int]], bool], leads: LeaderOnline,
                   reachable: set[int], no_listener: ErrorCode) -> Encoded:
    return encode_entity(entity, _topic(topic, online, leads, reachable, no_listener))


def _topic(topic: TopicState, online: Callable[[int, tuple[str, int]], bool],
           leads: LeaderOnline, reachable: set[int], no_listener: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": [
            {
                "error_code": (ErrorCode.none if has_leader and state.leader in reachable
                               else no_listener if has_leader
                               else ErrorCode.leader_not_available),
                "partition_index": index,
                "leader_id": state.leader if has_leader and state.leader in reachable else -1,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": state.replicas,
                "isr_nodes": state.isr,
                "offline_replicas": [
                    r for r in state.replicas if not online(r, (topic.name, index))
                ],
            }
            for index, state in sorted(topic.partitions.items())
            for has_leader in [leads(state, (topic.name, index))]
        ],
    }
