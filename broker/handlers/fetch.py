"""Fetch (1): read from leaders up to HW (read_uncommitted) or LSO (read_committed).

Long poll: if fewer than min_bytes are ready, wait until new data arrives on any requested
partition or max_wait passes. No fetch sessions: answering session_id=0 tells clients to keep
sending full fetch requests, which Kafka's protocol allows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode

from .. import metrics
from ..context import RequestContext
from ..partition import Partition
from .common import PARTITION_ERRORS, error_code_of, field

if TYPE_CHECKING:
    from .requests import FetchRequest


# read_one(partition, fetch offset, last fetched epoch (-1: none), byte limit, is the first
# partition read) -> the partition's response entry
ReadOne = Callable[[Partition, int, int, int, bool], dict[str, Any]]


async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> dict[str, Any]:
    max_wait_s = max(0.0, request.max_wait.total_seconds())
    deadline = time.monotonic() + max_wait_s
    isolation = request.isolation_level
    # Kafka caps every fetch, a follower's too, at the broker's fetch.max.bytes.
    max_bytes: int = min(request.max_bytes, ctx.config["fetch.max.bytes"])
    min_bytes = min(request.min_bytes, max_bytes)
    replica_id = request.replica_id
    read_one = _follower_reader(replica_id) if replica_id >= 0 else _consumer_reader(isolation)
    while True:
        responses, total, leaders, had_error = _read_all(ctx, request, max_bytes, read_one)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or had_error or remaining <= 0 or not leaders:
            return {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0,
                    "responses": responses}
        await ctx.replicas.wait_for_data(leaders, remaining)


def _read_all(
    ctx: RequestContext, request: FetchRequest, max_bytes: int, read_one: ReadOne
) -> tuple[list[dict[str, Any]], int, list[Partition], bool]:
    """Look up each requested partition as leader (checking the leader epoch the fetcher
    knows), read it with `read_one`, and
    turn errors into per-partition error codes."""
    replicas = ctx.replicas
    total = 0
    leaders: list[Partition] = []
    had_error = False
    responses = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            out: dict[str, Any] = {"partition_index": p.partition, "records": b""}
            try:
                partition = replicas.leader_partition(topic.topic, p.partition)
                partition.check_leader_epoch(field(p, "current_leader_epoch", -1))
                leaders.append(partition)
                limit = max(min(p.partition_max_bytes, max_bytes - total), 0)
                last_epoch: int = field(p, "last_fetched_epoch", -1)
                out.update(read_one(partition, p.fetch_offset, last_epoch, limit, total == 0))
                total += len(out["records"])
                had_error |= "diverging_epoch" in out  # answer now: the follower truncates
            except PARTITION_ERRORS as exc:
                had_error = True
                out.update(error_code=error_code_of(exc), high_watermark=-1, last_stable_offset=-1)
                if (hosted := replicas.get(topic.topic, p.partition)) is not None:
                    out.update(
                        high_watermark=hosted.high_watermark,
                        last_stable_offset=hosted.last_stable_offset,
                        log_start_offset=hosted.log_start_offset,
                    )
            parts.append(out)
        responses.append({"topic": topic.topic, "partitions": parts})
    return responses, total, leaders, had_error


def _consumer_reader(isolation: int) -> ReadOne:
    def read_one(
        partition: Partition, fetch_offset: int, _last_epoch: int, limit: int, first: bool
    ) -> dict[str, Any]:
        read = partition.read(fetch_offset, limit, isolation, first)
        if read.records:
            metrics.fetched(partition.topic, len(read.records))
        return {
            "error_code": ErrorCode.none,
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

    def read_one(
        partition: Partition, fetch_offset: int, last_epoch: int, limit: int, _first: bool
    ) -> dict[str, Any]:
        diverging = partition.diverging_epoch(last_epoch, fetch_offset)
        if diverging is not None:
            epoch, end = diverging
            return {
                "error_code": ErrorCode.none,
                "high_watermark": partition.high_watermark,
                "last_stable_offset": partition.last_stable_offset,
                "log_start_offset": partition.log_start_offset,
                "diverging_epoch": {"epoch": epoch, "end_offset": end},
            }
        partition.record_follower_fetch(replica_id, fetch_offset)
        read = partition.read_for_follower(fetch_offset, limit)
        return {
            "error_code": ErrorCode.none,
            "high_watermark": read.high_watermark,
            "last_stable_offset": read.last_stable_offset,
            "log_start_offset": read.log_start_offset,
            "records": read.records,
        }

    return read_one
