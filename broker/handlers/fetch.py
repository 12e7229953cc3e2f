"""Fetch (1): read from leaders up to HW (read_uncommitted) or LSO (read_committed).

Long poll: if fewer than min_bytes are ready, wait until new data arrives on any requested
partition or max_wait passes. No fetch sessions: answering session_id=0 tells clients to keep
sending full fetch requests, which Kafka's protocol allows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from protocol.errors import KafkaError
from storage.errors import OffsetOutOfRange

from .. import metrics
from ..partition import Partition
from ..replica_manager import PartitionError
from .common import error_code_of, field

FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75


async def handle_fetch(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    max_wait_s = max(0.0, request.max_wait.total_seconds())
    deadline = time.monotonic() + max_wait_s
    isolation = field(request, "isolation_level", 0)
    # Kafka caps every fetch, a follower's too, at the broker's fetch.max.bytes.
    max_bytes = min(field(request, "max_bytes", 0x7FFFFFFF), broker.config["fetch.max.bytes"])
    min_bytes = min(request.min_bytes, max_bytes)
    replica_id = field(request, "replica_id", -1)
    read_one = _follower_reader(replica_id) if replica_id >= 0 else _consumer_reader(isolation)
    while True:
        responses, total, leaders, had_error = _read_all(broker, request, max_bytes, read_one)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or had_error or remaining <= 0 or not leaders:
            return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": responses}
        await broker.replicas.wait_for_data(leaders, remaining)


ReadOne = Callable[[Partition, Any, int, bool], dict[str, Any]]


def _read_all(
    broker: Any, request: Any, max_bytes: int, read_one: ReadOne
) -> tuple[list[dict[str, Any]], int, list[Partition], bool]:
    """Look up each requested partition as leader (checking the leader epoch the fetcher
    knows), read it with `read_one(partition, request_partition, byte_limit, is_first)`, and
    turn errors into per-partition error codes."""
    total = 0
    leaders: list[Partition] = []
    had_error = False
    responses = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition_index": p.partition, "records": b""}
            try:
                partition = broker.replicas.leader_partition(topic.topic, p.partition)
                epoch = field(p, "current_leader_epoch", -1)
                if epoch != -1 and epoch != partition.leader_epoch:
                    raise PartitionError(
                        FENCED_LEADER_EPOCH
                        if epoch < partition.leader_epoch
                        else UNKNOWN_LEADER_EPOCH
                    )
                leaders.append(partition)
                limit = max(min(p.partition_max_bytes, max_bytes - total), 0)
                out.update(read_one(partition, p, limit, total == 0))
                total += len(out["records"])
                had_error |= "diverging_epoch" in out  # answer now: the follower truncates
            except (PartitionError, KafkaError) as exc:
                had_error = True
                out.update(error_code=error_code_of(exc), high_watermark=-1, last_stable_offset=-1)
                if (partition := broker.replicas.get(topic.topic, p.partition)) is not None:
                    out.update(
                        high_watermark=partition.log.high_watermark,
                        last_stable_offset=partition.log.last_stable_offset,
                        log_start_offset=partition.log.log_start_offset,
                    )
            parts.append(out)
        responses.append({"topic": topic.topic, "partitions": parts})
    return responses, total, leaders, had_error


def _consumer_reader(isolation: int) -> ReadOne:
    def read_one(partition: Partition, p: Any, limit: int, first: bool) -> dict[str, Any]:
        read = partition.read(p.fetch_offset, limit, isolation, first)
        if read.records:
            metrics.fetched(partition.topic, len(read.records))
        return {
            "error_code": 0,
            "high_watermark": read.high_watermark,
            "last_stable_offset": read.last_stable_offset,
            "log_start_offset": read.log_start_offset,
            "aborted_transactions": (
                None
                if read.aborted is None
                else [{"producer_id": pid, "first_offset": first} for pid, first in read.aborted]
            ),
            "records": read.records,
        }

    return read_one


def _follower_reader(replica_id: int) -> ReadOne:
    """A follower's fetch: its fetch offset acknowledges what it has; read up to our LEO,
    unless its last fetched epoch ends earlier here (then it must truncate first)."""

    def read_one(partition: Partition, p: Any, limit: int, _first: bool) -> dict[str, Any]:
        plog = partition.log
        last_epoch = field(p, "last_fetched_epoch", -1)
        if last_epoch >= 0:
            found_epoch, end = plog.end_offset_for_epoch(last_epoch)
            if found_epoch < 0 or end < 0:
                raise OffsetOutOfRange(f"no epoch at or below {last_epoch} on the leader")
            if found_epoch < last_epoch or end < p.fetch_offset:
                return {
                    "error_code": 0,
                    "high_watermark": plog.high_watermark,
                    "last_stable_offset": plog.last_stable_offset,
                    "log_start_offset": plog.log_start_offset,
                    "diverging_epoch": {"epoch": found_epoch, "end_offset": end},
                }
        partition.record_follower_fetch(replica_id, p.fetch_offset)
        read = partition.read_for_follower(p.fetch_offset, limit)
        return {
            "error_code": 0,
            "high_watermark": read.high_watermark,
            "last_stable_offset": read.last_stable_offset,
            "log_start_offset": read.log_start_offset,
            "records": read.records,
        }

    return read_one
