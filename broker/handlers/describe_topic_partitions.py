"""DescribeTopicPartitions (75): topics' partitions a page at a time (KIP-966), what
`kafka-topics --describe` of Kafka 3.8+ asks for instead of Metadata.

As Kafka's DescribeTopicPartitionsRequestHandler: topics in name order from the cursor's topic
on (no topics named: every topic), at most min(response_partition_limit,
max.request.partition.size.limit) partitions (at least one), and `next_cursor` where the next
page starts. No topic is created.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..cluster.topic_admin import INTERNAL_TOPICS, TopicError, validate_topic_name
from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .declare import api
from .metadata import leader_online, listener_brokers, replica_online

if TYPE_CHECKING:
    from .requests import DescribeTopicPartitionsRequest

log = logging.getLogger(__name__)


@api(75, "DescribeTopicPartitions", (0, 0))
async def handle_describe_topic_partitions(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> dict[str, Any]:
    store = ctx.store
    cursor = request.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    all_topics = not request.topics
    requested = store.topics().keys() if all_topics else (t.name for t in request.topics)
    names = {n for n in requested if n >= start_topic}
    # Kafka: topics the principal may not describe are left out of "all topics", and answer
    # TOPIC_AUTHORIZATION_FAILED when named.
    describable = set(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names,
                                     log_denied=not all_topics))
    if all_topics:
        names = describable
    refusal = None
    if cursor is not None and not all_topics and cursor.topic_name not in names:
        refusal = ("DescribeTopicPartitionsRequest topic list should contain the cursor topic: "
                   f"{cursor.topic_name}")
    elif cursor is not None and cursor.partition_index < 0:
        refusal = f"DescribeTopicPartitionsRequest cursor partition must be valid: {cursor}"
    if refusal is not None:
        log.info("DescribeTopicPartitions from %s refused: %s", ctx.peer, refusal)
        return {"throttle_time": 0, "next_cursor": None, "topics": [
            {"error_code": ErrorCode.invalid_request, "name": t.name, "topic_id": None,
             "is_internal": False, "partitions": []}
            for t in request.topics
        ]}
    limit = max(min(ctx.config["max.request.partition.size.limit"],
                    request.response_partition_limit), 1)
    online = replica_online(ctx)
    leads = leader_online(ctx, online)
    reachable = listener_brokers(ctx)  # a leader without the request's listener: no leader
    remaining = limit
    topics_out: list[dict[str, Any]] = []
    next_cursor = None
    for name in sorted(names):
        if remaining == 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        if name not in describable:
            topics_out.append({"error_code": ErrorCode.topic_authorization_failed, "name": name,
                               "topic_id": None, "is_internal": False, "partitions": []})
            continue
        topic = store.topic(name)
        if topic is None:
            if not all_topics:
                code = ErrorCode.unknown_topic_or_partition
                try:
                    validate_topic_name(name)
                except TopicError as exc:
                    code = exc.error_code
                topics_out.append({"error_code": code, "name": name, "topic_id": None,
                                   "is_internal": name in INTERNAL_TOPICS, "partitions": []})
            continue
        first = cursor.partition_index if cursor is not None and name == start_topic else 0
        count = len(topic.partitions)
        upper = min(count, first + remaining)
        partitions = []
        for index in range(first, upper):
            state = topic.partitions.get(index)
            if state is None:
                continue
            has_leader = leads(state, (name, index)) and state.leader in reachable
            partitions.append({
                "error_code": ErrorCode.none,
                "partition_index": index,
                "leader_id": state.leader if has_leader else -1,
                "leader_epoch": state.leader_epoch,
                "replica_nodes": state.replicas,
                "isr_nodes": state.isr,
                "eligible_leader_replicas": [],
                "last_known_elr": [],
                "offline_replicas": [r for r in state.replicas if not online(r, (name, index))],
            })
        topics_out.append({"error_code": ErrorCode.none, "name": name,
                           "topic_authorized_operations": ctx.authorized_operations(
                               ResourceType.TOPIC, name),
                           "topic_id": topic.topic_id, "is_internal": topic.internal,
                           "partitions": partitions})
        if upper < count:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(partitions)
    return {"throttle_time": 0, "topics": topics_out, "next_cursor": next_cursor}
