"""Produce (0): the batches a leader refuses, each with Kafka's error and nothing appended
(UnifiedLog.analyzeAndValidateRecords, LogValidator, ProducerAppendInfo, and the replica
manager's check of internal topics)."""

from __future__ import annotations

import struct
import time
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch

from .harness import Handlers

CRC_AT = 17  # a v2 batch: baseOffset 8, length 4, leaderEpoch 4, magic 1, then the CRC


async def _produce_raw(h: Handlers, topic: str, records: bytes, version: int = 9) -> Any:
    r = await h.call("Produce", version, {"acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return r.responses[0].partition_responses[0]


async def _log_end(h: Handlers, topic: str) -> int:
    return int((await h.fetch(topic, 0)).high_watermark)


async def test_a_batch_over_max_message_bytes_is_message_too_large(handlers):
    await handlers.create_topic("t", configs={"max.message.bytes": "1000"})
    p = await _produce_raw(handlers, "t", build_batch([(None, b"x" * 2000)]))
    assert p.error_code == ErrorCode.message_too_large
    assert await _log_end(handlers, "t") == 0


async def test_a_batch_whose_crc_does_not_match_is_corrupt(handlers):
    await handlers.create_topic("t")
    batch = bytearray(build_batch([(None, b"x")]))
    (crc,) = struct.unpack_from(">I", batch, CRC_AT)
    struct.pack_into(">I", batch, CRC_AT, crc ^ 1)
    p = await _produce_raw(handlers, "t", bytes(batch))
    assert p.error_code == ErrorCode.corrupt_message
    assert await _log_end(handlers, "t") == 0


async def test_a_timestamp_too_far_ahead_is_invalid(handlers):
    await handlers.create_topic("t", configs={"message.timestamp.after.max.ms": "60000"})
    ahead = int(time.time() * 1000) + 3_600_000
    p = await _produce_raw(handlers, "t", build_batch([(None, b"x", None, ahead)]))
    assert p.error_code == ErrorCode.invalid_timestamp
    assert await _log_end(handlers, "t") == 0


async def test_a_client_cannot_write_to_an_internal_topic(handlers):
    await handlers.find_coordinator("g")  # creates __consumer_offsets
    p = await _produce_raw(handlers, "__consumer_offsets", build_batch([(None, b"x")]))
    assert p.error_code == ErrorCode.invalid_topic_exception


async def test_an_older_producer_epoch_is_fenced(handlers):
    await handlers.create_topic("t")
    init = await handlers.retry_call("InitProducerId", 4, {
        "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1})
    pid = init.producer_id

    def batch(epoch: int, sequence: int) -> bytes:
        return build_batch([(None, b"x")], producer_id=pid, producer_epoch=epoch,
                           base_sequence=sequence)
    newer = await _produce_raw(handlers, "t", batch(init.producer_epoch + 1, 0))
    older = await _produce_raw(handlers, "t", batch(init.producer_epoch, 1))
    assert newer.error_code == ErrorCode.none
    assert older.error_code == ErrorCode.invalid_producer_epoch
    assert await _log_end(handlers, "t") == 1
