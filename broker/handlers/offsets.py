"""Offsets: ListOffsets (2), OffsetForLeaderEpoch (23), DeleteRecords (21)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from protocol.errors import KafkaError

from ..partition import READ_COMMITTED
from ..replica_manager import PartitionError
from .common import INVALID_REQUEST, UNSUPPORTED_VERSION, error_code_of, field

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
# The first ListOffsets version that may ask for each special timestamp (Kafka's
# ReplicaManager.timestampMinSupportedVersion); other negative timestamps are unsupported.
SPECIAL_TIMESTAMP_MIN_VERSION = {
    LATEST: 1, EARLIEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
}
CONSUMER_REPLICA_ID = -1
LEADER_NOT_AVAILABLE = 5
OFFSET_NOT_AVAILABLE = 78
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
NOT_FOUND = (-1, -1, -1)  # offset, timestamp, leader epoch of an empty answer


async def handle_list_offsets(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    # Only consumers (replica id -1) are bound by the isolation level; Kafka's debugging and
    # follower callers see up to the log end offset.
    from_client = field(request, "replica_id", CONSUMER_REPLICA_ID) == CONSUMER_REPLICA_ID
    isolation = field(request, "isolation_level", 0) if from_client else None
    asked = Counter((t.name, p.partition_index) for t in request.topics for p in t.partitions)
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition_index": p.partition_index, "error_code": 0,
                                   "offset": -1, "timestamp": -1, "leader_epoch": -1}
            try:
                if asked[(topic.name, p.partition_index)] > 1:
                    raise PartitionError(INVALID_REQUEST)
                if not timestamp_supported(p.timestamp, ctx.version):
                    raise PartitionError(UNSUPPORTED_VERSION)
                partition = broker.replicas.leader_partition(topic.name, p.partition_index)
                check_leader_epoch(partition, field(p, "current_leader_epoch", -1))
                offset, timestamp, epoch = _lookup(partition, p.timestamp, isolation)
                out.update(offset=offset, timestamp=timestamp, leader_epoch=epoch)
            except (PartitionError, KafkaError) as exc:
                code = error_code_of(exc)
                if code == OFFSET_NOT_AVAILABLE and ctx.version < 5:
                    code = LEADER_NOT_AVAILABLE  # older clients do not know the code
                out.update(error_code=code)
            parts.append(out)
        topics.append({"name": topic.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def timestamp_supported(ts: int, version: int) -> bool:
    return ts >= 0 or version >= SPECIAL_TIMESTAMP_MIN_VERSION.get(ts, 1 << 15)


def check_leader_epoch(partition: Any, current: int) -> None:
    """Fence a caller whose idea of the leader epoch differs from ours (-1: not checked)."""
    if current != -1 and current != partition.leader_epoch:
        raise PartitionError(
            FENCED_LEADER_EPOCH if current < partition.leader_epoch else UNKNOWN_LEADER_EPOCH
        )


def _lookup(partition: Any, ts: int, isolation: int | None) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for one partition, as Kafka's Partition and
    UnifiedLog.fetchOffsetByTimestamp answer it (no tiered storage here)."""
    log = partition.log
    if isolation is None:
        fetchable = log.log_end_offset
    elif isolation == READ_COMMITTED:
        fetchable = log.last_stable_offset
    else:
        fetchable = log.high_watermark
    # A new leader whose high watermark has not yet reached the start of its epoch cannot
    # tell a client where the committed end is.
    lagging = isolation is not None and partition.leader_epoch_start_offset > log.high_watermark
    if ts == LATEST:
        if lagging:
            raise PartitionError(OFFSET_NOT_AVAILABLE)
        return fetchable, -1, partition.leader_epoch
    if ts in (EARLIEST, EARLIEST_LOCAL):  # without tiered storage the local log is all of it
        first = log.leader_epoch_cache.earliest_entry()
        epoch = first[0] if first is not None and first[1] <= log.log_start_offset else -1
        return log.log_start_offset, -1, epoch
    if ts == LATEST_TIERED:
        return NOT_FOUND  # nothing is tiered
    found = log.max_timestamp_and_offset() if ts == MAX_TIMESTAMP else (
        log.fetch_offset_for_timestamp(ts))
    if found is None:
        if lagging:
            raise PartitionError(OFFSET_NOT_AVAILABLE)
        return NOT_FOUND
    offset, timestamp, epoch = found
    if offset >= fetchable:  # not visible to this caller yet
        if lagging:
            raise PartitionError(OFFSET_NOT_AVAILABLE)
        return NOT_FOUND
    return offset, timestamp, epoch


async def handle_offset_for_leader_epoch(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition": p.partition, "error_code": 0}
            try:
                partition = broker.replicas.leader_partition(topic.topic, p.partition)
                check_leader_epoch(partition, field(p, "current_leader_epoch", -1))
                epoch, end = partition.log.end_offset_for_epoch(p.leader_epoch)
                out.update(leader_epoch=epoch, end_offset=end)
            except (PartitionError, KafkaError) as exc:
                out.update(error_code=error_code_of(exc))
            parts.append(out)
        topics.append({"topic": topic.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


async def handle_delete_records(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition_index": p.partition_index, "error_code": 0}
            try:
                partition = broker.replicas.leader_partition(topic.name, p.partition_index)
                # -1 means "up to the high watermark" (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
                offset = partition.log.high_watermark if p.offset == -1 else p.offset
                out["low_watermark"] = partition.log.delete_records_before(offset)
            except (PartitionError, KafkaError) as exc:
                out.update(error_code=error_code_of(exc), low_watermark=-1)
            parts.append(out)
        topics.append({"name": topic.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
