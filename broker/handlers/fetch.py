"""Fetch (1): read from leaders up to HW (read_uncommitted) or LSO (read_committed).

Long poll: if fewer than min_bytes are ready, wait until new data arrives on any requested
partition or max_wait passes. No fetch sessions: answering session_id=0 tells clients to keep
sending full fetch requests, which Kafka's protocol allows.
"""

from __future__ import annotations

import time
from typing import Any

from storage.errors import StorageError

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
    max_bytes = field(request, "max_bytes", 0x7FFFFFFF)
    while True:
        responses, total, leaders, had_error = _read_all(broker, request, isolation, max_bytes)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or had_error or remaining <= 0 or not leaders:
            return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": responses}
        await broker.replicas.wait_for_data(leaders, remaining)


def _read_all(
    broker: Any, request: Any, isolation: int, max_bytes: int
) -> tuple[list[dict[str, Any]], int, list[Partition], bool]:
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
                    code = (
                        FENCED_LEADER_EPOCH
                        if epoch < partition.leader_epoch
                        else UNKNOWN_LEADER_EPOCH
                    )
                    raise PartitionError(code)
                leaders.append(partition)
                limit = min(p.partition_max_bytes, max_bytes - total)
                read = partition.read(p.fetch_offset, max(limit, 0), isolation, total == 0)
                total += len(read.records)
                if read.records:
                    metrics.BYTES_OUT.labels(topic.topic).inc(len(read.records))
                out.update(
                    error_code=0,
                    high_watermark=read.high_watermark,
                    last_stable_offset=read.last_stable_offset,
                    log_start_offset=read.log_start_offset,
                    aborted_transactions=(
                        None
                        if read.aborted is None
                        else [
                            {"producer_id": pid, "first_offset": first}
                            for pid, first in read.aborted
                        ]
                    ),
                    records=read.records,
                )
            except (PartitionError, StorageError) as exc:
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
