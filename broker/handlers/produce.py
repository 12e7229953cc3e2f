"""Produce (0): validate, append to each partition's leader log, answer per partition.

acks=0 gets no response at all (Kafka closes the connection on error instead).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from protocol.errors import KafkaError
from protocol.records import decode_records, iter_batches
from storage.config import LONG_MAX, LogConfig
from storage.errors import InvalidTimestamp, KafkaStorageError

from .. import metrics
from ..replica_manager import PartitionError
from ..server import CloseConnection
from ..topic_admin import INTERNAL_TOPICS
from .common import INVALID_TOPIC_EXCEPTION, error_code_of, field
from .transactions import verify_transactional_produce

log = logging.getLogger(__name__)

INVALID_REQUIRED_ACKS = 21
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20


async def handle_produce(ctx: Any, request: Any) -> dict[str, Any] | None:
    broker = ctx.broker
    acks = request.acks
    responses = []
    failed = False
    waits: list[tuple[dict[str, Any], Any, int]] = []
    for topic in request.topic_data:
        partitions = []
        for pdata in topic.partition_data:
            code, base_offset, append_time, start, last = _append(
                broker, acks, topic.name, pdata, field(request, "transactional_id"), ctx.version
            )
            failed |= code != 0
            out = {
                "index": pdata.index,
                "error_code": code,
                "base_offset": base_offset,
                "log_append_time": None if append_time < 0 else append_time,
                "log_start_offset": start,
            }
            partitions.append(out)
            if code == 0 and acks == -1:
                partition = broker.replicas.get(topic.name, pdata.index)
                if partition is not None and partition.log.high_watermark <= last:
                    waits.append((out, partition, last + 1))
        responses.append({"name": topic.name, "partition_responses": partitions})
    if waits:
        timeout_s = max(0.0, request.timeout.total_seconds())
        await _await_replication(waits, timeout_s)
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return None
    return {"responses": responses, "throttle_time": 0}


async def _await_replication(waits: list[tuple[dict[str, Any], Any, int]], timeout_s: float):
    """acks=all: answer once the ISR has each partition's batch (Kafka's delayed produce)."""
    done = await asyncio.gather(
        *(partition.wait_for_high_watermark(offset, timeout_s) for _, partition, offset in waits)
    )
    for (out, partition, _), ok in zip(waits, done, strict=True):
        if not ok:
            code = REQUEST_TIMED_OUT if partition.is_leader else NOT_LEADER_OR_FOLLOWER
        elif len(partition.isr) < partition.min_insync_replicas:
            code = NOT_ENOUGH_REPLICAS_AFTER_APPEND
        else:
            continue
        out.update(error_code=code, base_offset=-1, log_append_time=None)


def _append(
    broker: Any, acks: int, topic: str, pdata: Any, transactional_id: str | None, version: int
) -> tuple[int, int, int, int, int]:
    """(error code, base offset, log append time, log start offset, last offset)."""
    if acks not in (-1, 0, 1):
        return INVALID_REQUIRED_ACKS, -1, -1, -1, -1
    if topic in INTERNAL_TOPICS:
        return INVALID_TOPIC_EXCEPTION, -1, -1, -1, -1
    try:
        partition = broker.replicas.leader_partition(topic, pdata.index)
        if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
            return NOT_ENOUGH_REPLICAS, -1, -1, -1, -1
        code = verify_transactional_produce(
            broker, partition, pdata.records, transactional_id, version
        )
        if code:
            return code, -1, -1, -1, -1
        check_timestamp_bounds(partition.log.config, pdata.records)
        info = partition.append_as_leader(pdata.records or b"")
    except PartitionError as exc:
        return exc.error_code, -1, -1, -1, -1
    except KafkaError as exc:  # a StorageError or a record-format error
        # Per request and usually the client's doing (sequence, epoch, size): DEBUG; a
        # failing disk is the operator's business.
        level = logging.WARNING if isinstance(exc, KafkaStorageError) else logging.DEBUG
        log.log(level, "produce to %s-%d rejected: %s (%s)", topic, pdata.index,
                type(exc).__name__, exc)
        return error_code_of(exc), -1, -1, -1, -1
    if not info.duplicate:
        metrics.produced(topic, len(pdata.records), info.record_count)
    return 0, info.first_offset, info.log_append_time, info.log_start_offset, info.last_offset


def check_timestamp_bounds(config: LogConfig, records: bytes | None) -> None:
    """message.timestamp.before/after.max.ms: a CreateTime record timestamp too far from the
    broker clock fails its batch with INVALID_TIMESTAMP (Kafka's LogValidator). Records are
    decoded only when a bound is set; malformed ones are left to the append's checks."""
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    if config.log_append_time or not records or (before == after == LONG_MAX):
        return
    now = int(time.time() * 1000)
    try:
        for pos, header in iter_batches(records):
            for record in decode_records(records, pos, header):
                ts = record.timestamp
                if ts != -1 and (now - ts > before or ts - now > after):
                    raise InvalidTimestamp(
                        f"Timestamp {ts} of message with offset {record.offset} is out of "
                        f"range. The timestamp should be within [{now - before}, {now + after}]")
    except InvalidTimestamp:
        raise
    except KafkaError:
        return
