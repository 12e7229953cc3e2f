"""Metadata (3): brokers, topics, partition leaders; creates topics on first use."""

from __future__ import annotations

from typing import Any

from ..topic_admin import TopicError, validate_topic_name
from .common import UNKNOWN_TOPIC_OR_PARTITION, field

NOT_LEADER_OR_FOLLOWER = 6
LEADER_NOT_AVAILABLE = 5


async def handle_metadata(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    store = broker.store
    version = ctx.version
    requested = request.topics
    # v0: an empty list means all topics; v1+: null means all, empty means none.
    all_topics = requested is None or (version == 0 and not requested)
    allow_create = (
        field(request, "allow_auto_topic_creation", True)
        and broker.config["auto.create.topics.enable"]
    )
    topics_out = []
    if all_topics:
        names = sorted(store.topics())
    else:
        names = []
        for t in requested:
            name = t.name
            if name is None and field(t, "topic_id") is not None:
                name = broker.topic_name_by_id(t.topic_id)
                if name is None:
                    topics_out.append(
                        {"error_code": 100, "name": None, "topic_id": t.topic_id, "partitions": []}
                    )  # UNKNOWN_TOPIC_ID
                    continue
            names.append(name)
    live = {b.broker_id for b in store.brokers()}
    # Replicas in failed log dirs: every broker's (ZooKeeper), and ours in any case.
    offline = dict(getattr(store, "offline_replicas", dict)())
    offline[broker.broker_id] = broker.replicas.offline

    def online(r: int, tp: tuple[str, int]) -> bool:
        return r in live and tp not in offline.get(r, ())

    for name in names:
        topic = store.topic(name)
        if topic is None:
            code = UNKNOWN_TOPIC_OR_PARTITION
            if allow_create:
                try:
                    validate_topic_name(name)
                    topic = await broker.topics.create(name)
                except TopicError as exc:
                    code = exc.error_code
            if topic is None:
                topics_out.append({"error_code": code, "name": name, "partitions": []})
                continue
        topics_out.append(
            {
                "error_code": 0,
                "name": topic.name,
                "topic_id": topic.topic_id,
                "is_internal": topic.internal,
                "partitions": [
                    {
                        "error_code": 0 if has_leader else LEADER_NOT_AVAILABLE,
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
        )
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in store.brokers()
        ],
        "cluster_id": store.cluster_id,
        "controller_id": broker.controller_id(),
        "topics": topics_out,
    }
