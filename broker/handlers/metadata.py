"""Metadata (3): brokers, topics, partition leaders; creates topics on first use."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode

from ..context import RequestContext
from ..metadata_store import TopicState
from ..topic_admin import TopicError, validate_topic_name
from .common import field, topic_name_by_id

if TYPE_CHECKING:
    from .requests import MetadataRequest

OfflineReplicas = dict[int, set[tuple[str, int]]]  # broker id -> its replicas in failed dirs


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
    topics_out: list[dict[str, Any]] = []
    names: list[str | None] = []  # None: neither a name nor a topic id
    if all_topics or requested is None:
        names.extend(sorted(store.topics()))
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
            names.append(name)
    live = {b.broker_id for b in store.brokers()}
    # Replicas in failed log dirs: every broker's (the ZooKeeper store knows), ours in any case.
    offline_of: Callable[[], OfflineReplicas] | None = getattr(store, "offline_replicas", None)
    offline: OfflineReplicas = dict(offline_of()) if offline_of is not None else {}
    offline[ctx.broker_id] = ctx.replicas.offline

    def online(r: int, tp: tuple[str, int]) -> bool:
        return r in live and tp not in offline.get(r, ())

    for name in names:
        topic = store.topic(name) if name is not None else None
        if topic is None:
            code: int = ErrorCode.unknown_topic_or_partition
            if allow_create:
                try:
                    validate_topic_name(name)  # refuses None and ""
                    topic = await ctx.topics.create(name or "")
                except TopicError as exc:
                    code = exc.error_code
            if topic is None:
                topics_out.append({"error_code": code, "name": name, "partitions": []})
                continue
        topics_out.append(_topic(topic, online))
    return {
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
    }


def _topic(topic: TopicState, online: Callable[[int, tuple[str, int]], bool]) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.internal,
        "partitions": [
            {
                "error_code": ErrorCode.none if has_leader else ErrorCode.leader_not_available,
                "partition_index": index,
                "leader_id": state.leader if has_leader else -1,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": state.replicas,
                "isr_nodes": state.isr,
                "offline_replicas": [
                    r for r in state.replicas if not online(r, (topic.name, index))
                ],
            }
            for index, state in sorted(topic.partitions.items())
            for has_leader in [online(state.leader, (topic.name, index))]
        ],
    }
