"""Produce (0): validate, append to each partition's leader log, answer per partition.

acks=0 gets no response at all (Kafka closes the connection on error instead).
"""

from __future__ import annotations

import logging
from typing import Any

from storage.errors import StorageError

from .. import metrics
from ..replica_manager import PartitionError
from ..server import CloseConnection
from ..topic_admin import INTERNAL_TOPICS
from .common import INVALID_TOPIC_EXCEPTION, error_code_of, field
from .transactions import verify_transactional_produce

log = logging.getLogger(__name__)

INVALID_REQUIRED_ACKS = 21


async def handle_produce(ctx: Any, request: Any) -> dict[str, Any] | None:
    broker = ctx.broker
    acks = request.acks
    responses = []
    failed = False
    for topic in request.topic_data:
        partitions = []
        for pdata in topic.partition_data:
            code, base_offset, append_time, start = _append(
                broker, acks, topic.name, pdata, field(request, "transactional_id"), ctx.version
            )
            failed |= code != 0
            partitions.append(
                {
                    "index": pdata.index,
                    "error_code": code,
                    "base_offset": base_offset,
                    "log_append_time": None if append_time < 0 else append_time,
                    "log_start_offset": start,
                }
            )
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return None
    return {"responses": responses, "throttle_time": 0}


def _append(
    broker: Any, acks: int, topic: str, pdata: Any, transactional_id: str | None, version: int
) -> tuple[int, int, int, int]:
    if acks not in (-1, 0, 1):
        return INVALID_REQUIRED_ACKS, -1, -1, -1
    if topic in INTERNAL_TOPICS:
        return INVALID_TOPIC_EXCEPTION, -1, -1, -1
    try:
        partition = broker.replicas.leader_partition(topic, pdata.index)
        code = verify_transactional_produce(
            broker, partition, pdata.records, transactional_id, version
        )
        if code:
            return code, -1, -1, -1
        info = partition.append_as_leader(pdata.records or b"")
    except PartitionError as exc:
        return exc.error_code, -1, -1, -1
    except StorageError as exc:
        log.info("produce to %s-%d rejected: %s (%s)", topic, pdata.index, type(exc).__name__, exc)
        return error_code_of(exc), -1, -1, -1
    if not info.duplicate:
        metrics.BYTES_IN.labels(topic).inc(len(pdata.records))
        metrics.MESSAGES_IN.labels(topic).inc(info.record_count)
    return 0, info.first_offset, info.log_append_time, info.log_start_offset
