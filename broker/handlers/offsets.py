"""Offsets: ListOffsets (2), OffsetForLeaderEpoch (23), DeleteRecords (21).

Versions: ListOffsets v1-v11 (v0's list of offsets is not served; v10+ carry a timeout),
OffsetForLeaderEpoch v2-v4, DeleteRecords v0-v2.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from .requests import DeleteRecordsRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest

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


@api(2, "ListOffsets", (1, 11))
async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> dict[str, Any]:
    # Only consumers (replica id -1) are bound by the isolation level; Kafka's debugging and
    # follower callers see up to the log end offset.
    from_client = request.replica_id == CONSUMER_REPLICA_ID
    isolation: int | None = field(request, "isolation_level", 0) if from_client else None
    asked = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    describable = set(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                     {t.name for t in request.topics}))
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition_index": p.partition_index,
                                   "error_code": ErrorCode.none,
                                   "offset": -1, "timestamp": -1, "leader_epoch": -1}
            try:
                if topic.name not in describable:
                    raise PartitionError(ErrorCode.topic_authorization_failed)
                if asked[(topic.name, p.partition_index)] > 1:
                    raise PartitionError(ErrorCode.invalid_request)
                if not timestamp_supported(p.timestamp, ctx.version):
                    raise PartitionError(ErrorCode.unsupported_version)
                partition = ctx.replicas.leader_partition(topic.name, p.partition_index)
                partition.check_leader_epoch(field(p, "current_leader_epoch", -1))
                offset, timestamp, epoch = partition.fetch_offset_for_timestamp(
                    p.timestamp, isolation
                )
                out.update(offset=offset, timestamp=timestamp, leader_epoch=epoch)
            except PARTITION_ERRORS as exc:
                code = error_code_of(exc)
                if code == ErrorCode.offset_not_available and ctx.version < 5:
                    code = ErrorCode.leader_not_available  # older clients do not know the code
                out.update(error_code=code)
            parts.append(out)
        topics.append({"name": topic.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def timestamp_supported(ts: int, version: int) -> bool:
    return ts >= 0 or version >= SPECIAL_TIMESTAMP_MIN_VERSION.get(ts, 1 << 15)


@api(23, "OffsetForLeaderEpoch", (2, 4))
async def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> dict[str, Any]:
    # A follower has CLUSTER_ACTION; a consumer (KIP-320) needs DESCRIBE on the topic.
    names = {t.topic for t in request.topics}
    allowed = names if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                     log_denied=False) \
        else set(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names))
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition": p.partition, "error_code": ErrorCode.none}
            try:
                if topic.topic not in allowed:
                    raise PartitionError(ErrorCode.topic_authorization_failed)
                partition = ctx.replicas.leader_partition(topic.topic, p.partition)
                partition.check_leader_epoch(field(p, "current_leader_epoch", -1))
                epoch, end = partition.end_offset_for_epoch(p.leader_epoch)
                out.update(leader_epoch=epoch, end_offset=end)
            except PARTITION_ERRORS as exc:
                out.update(error_code=error_code_of(exc))
            parts.append(out)
        topics.append({"topic": topic.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


@api(21, "DeleteRecords", (0, 2))
async def handle_delete_records(
    ctx: RequestContext, request: DeleteRecordsRequest
) -> dict[str, Any]:
    deletable = set(ctx.authorized(AclOperation.DELETE, ResourceType.TOPIC,
                                   {t.name for t in request.topics}))
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition_index": p.partition_index,
                                   "error_code": ErrorCode.none}
            try:
                if topic.name not in deletable:
                    raise PartitionError(ErrorCode.topic_authorization_failed)
                partition = ctx.replicas.leader_partition(topic.name, p.partition_index)
                # p.offset -1: up to the high watermark (Partition.HIGH_WATERMARK)
                out["low_watermark"] = partition.delete_records_before(p.offset)
            except PARTITION_ERRORS as exc:
                out.update(error_code=error_code_of(exc), low_watermark=-1)
            parts.append(out)
        topics.append({"name": topic.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
