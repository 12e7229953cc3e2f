"""A Produce request's compressed batches inflated before their appends, the large ones off the
event loop.

The log checks a producer's compressed batch on its records, decompressed (as Kafka's
LogValidator does); a small batch may inflate to a great deal (32 KB of zstd to 1 GiB), so
inflating it where the append runs would stall every client. Here each compressed batch is
first inflated and checked on the event loop if its records take at most INLINE_RECORDS_MAX
bytes (what an uncompressed batch of the default max.message.bytes costs to check); one whose
records are larger, or whose compressed bytes alone are large, is inflated (to at most the
log's limit, see compression.records_limit) and checked in a worker thread while other
requests are served. The outcome is held for the appends that follow at once
(records.hold_inflated), so no batch is inflated twice; an error found is raised there, in
the order the log's checks run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from samsa.protocol.compression import InflatedTooLarge, records_limit
from samsa.protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTRIBUTES_LOW,
    HEADER_SIZE,
    MAGIC,
    BatchHeader,
    InflatedAhead,
    compute_crc,
    hold_inflated,
    inflate_ahead,
)
from samsa.storage.config import LogConfig
from samsa.storage.errors import RecordValidationError
from samsa.storage.record_validation import validate_records

if TYPE_CHECKING:
    from ..context import ReplicaContext

# A producer's usual batch inflates to less (librdkafka's batch.size is 1,000,000 bytes of
# records; the Java producer's 16 KiB batch.size is compressed bytes): inflating it in a worker
# thread cost ~20 % more broker CPU per 1 MB batch (zstd) than on the event loop.
INLINE_RECORDS_MAX = 1 << 20
# Compressed batches above this go to the worker at once (their records are larger still).
INLINE_COMPRESSED_MAX = INLINE_RECORDS_MAX

# One thread: the inflations it runs hold at most one batch's records at a time, whatever the
# number of clients sending large batches. cramjam releases the GIL while it decompresses.
_worker: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _worker
    if _worker is None:
        _worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="samsa-inflate")
    return _worker


def _single_compressed_batch(records: bytes | None) -> BatchHeader | None:
    """The header of `records` if they are one compressed v2 batch (a producer's batch); None
    for anything else, which the log checks (and refuses) as it always has."""
    if (records is None or len(records) < HEADER_SIZE
            or not records[ATTRIBUTES_LOW] & ATTR_COMPRESSION_MASK):
        return None
    h = BatchHeader.parse(records)
    if h.magic != MAGIC or not h.compression or h.size != len(records):
        return None
    return h


def has_compressed(named: Iterable[tuple[str | None, Any]]) -> bool:
    """Whether any partition's data here may be a compressed batch for `inflate_produce`
    (the first test of `_single_compressed_batch`): most Produce requests have none."""
    for name, topic in named:
        if name is not None:
            for pdata in topic.partition_data:
                records = pdata.records
                if (records is not None and len(records) >= HEADER_SIZE
                        and records[ATTRIBUTES_LOW] & ATTR_COMPRESSION_MASK):
                    return True
    return False


async def inflate_produce(ctx: ReplicaContext, named: Iterable[tuple[str | None, Any]]) -> None:
    """Inflate the compressed batches of these (topic name, topic data) entries that go to a
    leader here, and hold what came out for the appends that follow (no pause of the event
    loop may come between this and them)."""
    held: list[tuple[str, BatchHeader, InflatedAhead]] = []
    for name, topic in named:
        if name is None:
            continue
        for pdata in topic.partition_data:
            records = pdata.records
            h = _single_compressed_batch(records)
            if h is None:
                continue
            partition = ctx.replicas.get(name, pdata.index)
            if partition is None or not partition.is_leader:
                continue
            config = partition.log.config
            if h.size > config.max_message_bytes:
                continue  # refused as too large before anything is inflated
            topic_partition = f"{name}-{pdata.index}"  # as the log names itself
            ahead = await _inflate(records, h, config, topic_partition)
            if ahead is not None:
                held.append((topic_partition, h, ahead))
    hold_inflated(held)


async def _inflate(records: bytes, h: BatchHeader, config: LogConfig,
                   topic_partition: str) -> InflatedAhead | None:
    limit = records_limit(config.max_message_bytes)
    if h.size <= INLINE_COMPRESSED_MAX:
        ahead = _checked(records, h, min(limit, INLINE_RECORDS_MAX), config, topic_partition)
        larger = ahead is not None and isinstance(ahead.error, InflatedTooLarge)
        if not larger or limit <= INLINE_RECORDS_MAX:
            return ahead
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(), _checked, records, h, limit, config,
                                      topic_partition, True)


def _checked(records: bytes, h: BatchHeader, limit: int, config: LogConfig,
             topic_partition: str, crc_first: bool = False) -> InflatedAhead | None:
    """The log's checks of the batch's records (validate_batch's walk, then validate_records'
    rules): their outcome, kept for the append without the records themselves (the batches
    of every partition of a request are held at once). With `crc_first` (in the worker),
    nothing for a batch whose CRC is wrong: the log refuses it before its records."""
    if crc_first and compute_crc(records, 0, h.size) != h.crc:
        return None
    ahead = inflate_ahead(records, 0, h, limit, check=True)
    if ahead.error is None:
        try:
            validate_records(records, 0, h, config, topic_partition, int(time.time() * 1000),
                             ahead.records)
        except RecordValidationError as e:
            ahead.rules_error = e.with_traceback(None)  # holding no frame
        ahead.rules_checked = True
    ahead.records = b""
    return ahead
