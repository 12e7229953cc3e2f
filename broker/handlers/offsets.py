"""Offsets: ListOffsets (2), OffsetForLeaderEpoch (23), DeleteRecords (21).

Versions: ListOffsets v1-v11 (v0's list of offsets is not served; v10+ carry a timeout),
OffsetForLeaderEpoch v2-v4, DeleteRecords v0-v2.

A partition is looked at as Kafka's ReplicaManager and Partition do: not hosted here
(UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR), then the client's
current leader epoch (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), then whether it is led here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, TypeVar

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext
from ..replication.partition import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from ..replication.replica_manager import PartitionError
from ..security.authorizer import AclOperation, ResourceType
from .common import PARTITION_ERRORS, error_code_of, field
from .declare import api

P = TypeVar("P")

if TYPE_CHECKING:
    from .requests import (
        DeleteRecordsPartition,
        DeleteRecordsRequest,
        ListOffsetsPartition,
        ListOffsetsRequest,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderPartition,
    )

# The first ListOffsets version that may ask for each special timestamp (Kafka's
# ReplicaManager.timestampMinSupportedVersion); other negative timestamps are unsupported.
SPECIAL_TIMESTAMP_MIN_VERSION = {
    LATEST_TIMESTAMP: 1,
    EARLIEST_TIMESTAMP: 1,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2


@api(2, "ListOffsets", (1, 11), structs={"ListOffsetsPartition": "ListOffsetsPartition"})
async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> dict[str, Any]:
    # Only consumers (replica id -1) are bound by the isolation level; Kafka's debugging and
    # follower callers see up to the log end offset.
    from_client = request.replica_id == CONSUMER_REPLICA_ID
    isolation: int | None = field(request, "isolation_level", 0) if from_client else None
    # Kafka's debugging replica id may read a follower's replica (up to its log end offset).
    leader_only = request.replica_id != DEBUGGING_REPLICA_ID
    asked: Counter[tuple[str, int]] = Counter(
        (t.name, p.partition_index) for t in request.topics for p in t.partitions)
    describable = set(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                     {t.name for t in request.topics}))

    def answer(topic: str, p: ListOffsetsPartition) -> dict[str, Any]:
        if asked[(topic, p.partition_index)] > 1:
            raise PartitionError(ErrorCode.invalid_request)
        if not timestamp_supported(p.timestamp, ctx.version):
            raise PartitionError(ErrorCode.unsupported_version)
        partition = ctx.replicas.hosted_partition(topic, p.partition_index)
        partition.check_local(field(p, "current_leader_epoch", -1), leader_only)
        offset, timestamp, epoch = partition.fetch_offset_for_timestamp(p.timestamp, isolation)
        return {"offset": offset, "timestamp": timestamp, "leader_epoch": epoch}

    def code_of(exc: BaseException) -> int:
        code = error_code_of(exc)
        if code == ErrorCode.offset_not_available and ctx.version < 5:
            return ErrorCode.leader_not_available  # older clients do not know the code
        return code

    return _each_partition(request.topics, "name", "partition_index", describable, answer,
                           {"offset": -1, "timestamp": -1, "leader_epoch": -1}, code_of)


def timestamp_supported(ts: int, version: int) -> bool:
    return ts >= 0 or version >= SPECIAL_TIMESTAMP_MIN_VERSION.get(ts, 1 << 15)


@api(23, "OffsetForLeaderEpoch", (2, 4),
     structs={"OffsetForLeaderPartition": "OffsetForLeaderPartition"})
async def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> dict[str, Any]:
    # A follower has CLUSTER_ACTION; a consumer (KIP-320) needs DESCRIBE on the topic.
    names = {t.topic for t in request.topics}
    allowed = names if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                     log_denied=False) \
        else set(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names))

    def answer(topic: str, p: OffsetForLeaderPartition) -> dict[str, Any]:
        partition = ctx.replicas.leader_partition(topic, p.partition,
                                                  field(p, "current_leader_epoch", -1))
        epoch, end = partition.end_offset_for_epoch(p.leader_epoch)
        return {"leader_epoch": epoch, "end_offset": end}

    return _each_partition(request.topics, "topic", "partition", allowed, answer, {})


@api(21, "DeleteRecords", (0, 2), structs={"DeleteRecordsPartition": "DeleteRecordsPartition"})
async def handle_delete_records(
    ctx: RequestContext, request: DeleteRecordsRequest
) -> dict[str, Any]:
    deletable = set(ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC,
                                   {t.name for t in request.topics}))

    def answer(topic: str, p: DeleteRecordsPartition) -> dict[str, Any]:
        partition = ctx.replicas.leader_partition(topic, p.partition_index)
        # p.offset -1: up to the high watermark (Partition.HIGH_WATERMARK)
        return {"low_watermark": partition.delete_records_before(p.offset)}

    return _each_partition(request.topics, "name", "partition_index", deletable, answer,
                           {"low_watermark": -1})


def _each_partition(topics: Iterable[Any], topic_key: str, index_key: str,
                    allowed: AbstractSet[str], answer: Callable[[str, P], dict[str, Any]],
                    failed: dict[str, Any],
                    code_of: Callable[[BaseException], int] = error_code_of) -> dict[str, Any]:
    """The response of these APIs: per partition of each topic (named by the request's
    `topic_key` field, the partition by its `index_key`), `answer(topic, partition)`'s fields;
    TOPIC_AUTHORIZATION_FAILED for a topic not `allowed`; a partition error's code (by
    `code_of`) and the `failed` fields when answering raises one."""
    out = []
    for topic in topics:
        name = getattr(topic, topic_key)
        parts = []
        for p in topic.partitions:
            code: int = ErrorCode.none
            try:
                if name not in allowed:
                    raise PartitionError(ErrorCode.topic_authorization_failed)
                fields = answer(name, p)
            except PARTITION_ERRORS as exc:
                code, fields = code_of(exc), failed
            parts.append({index_key: getattr(p, index_key), "error_code": code, **fields})
        out.append({topic_key: name, "partitions": parts})
    return {"throttle_time": 0, "topics": out}
