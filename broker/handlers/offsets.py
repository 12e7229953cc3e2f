"""Offsets: ListOffsets (2), OffsetForLeaderEpoch (23), DeleteRecords (21)."""

from __future__ import annotations

from typing import Any

from storage.errors import StorageError

from ..partition import READ_COMMITTED
from ..replica_manager import PartitionError
from .common import error_code_of, field

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


async def handle_list_offsets(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    isolation = field(request, "isolation_level", 0)
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition_index": p.partition_index, "error_code": 0}
            try:
                partition = broker.replicas.leader_partition(topic.name, p.partition_index)
                offset, timestamp, epoch = _lookup(partition, p.timestamp, isolation)
                out.update(offset=offset, timestamp=timestamp, leader_epoch=epoch)
            except (PartitionError, StorageError) as exc:
                out.update(error_code=error_code_of(exc))
            parts.append(out)
        topics.append({"name": topic.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def _lookup(partition: Any, ts: int, isolation: int) -> tuple[int, int, int]:
    log = partition.log
    epoch = partition.leader_epoch
    fetchable = log.last_stable_offset if isolation == READ_COMMITTED else log.high_watermark
    if ts == LATEST:
        return fetchable, -1, epoch
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, -1, epoch
    if ts == LATEST_TIERED:
        return -1, -1, -1  # no tiered storage
    if ts == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
        if found is None:
            return -1, -1, -1
        max_ts, offset = found
        return offset, max_ts, epoch
    found_ts = log.fetch_offset_for_timestamp(ts)
    if found_ts is None or found_ts[0] >= fetchable:
        return -1, -1, -1
    offset, timestamp, found_epoch = found_ts
    return offset, timestamp, found_epoch


async def handle_offset_for_leader_epoch(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition": p.partition, "error_code": 0}
            try:
                partition = broker.replicas.leader_partition(topic.topic, p.partition)
                current = field(p, "current_leader_epoch", -1)
                if current != -1 and current != partition.leader_epoch:
                    raise PartitionError(74 if current < partition.leader_epoch else 75)
                epoch, end = partition.log.end_offset_for_epoch(p.leader_epoch)
                out.update(leader_epoch=epoch, end_offset=end)
            except (PartitionError, StorageError) as exc:
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
            except (PartitionError, StorageError) as exc:
                out.update(error_code=error_code_of(exc), low_watermark=-1)
            parts.append(out)
        topics.append({"name": topic.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
