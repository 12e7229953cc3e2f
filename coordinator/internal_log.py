"""Internal compacted topics (__consumer_offsets, __transaction_state): placement, append, replay.

Coordinators keep their state as key/value records in a partition of an internal topic; the
leader of that partition is the coordinator. State is rebuilt by replaying the partition.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from protocol.records import (
    BatchHeader,
    build_batch,
    decode_records,
    iter_batches,
    parse_control_record,
)

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20
TOPIC_ALREADY_EXISTS = 36
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(key.hashCode()) % n` (abs(MIN_VALUE) is 0 there)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclass(frozen=True, slots=True)
class ReplayedRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    transactional: bool


@dataclass(frozen=True, slots=True)
class ReplayedMarker:
    offset: int
    producer_id: int
    commit: bool
    coordinator_epoch: int


class InternalTopic:
    def __init__(
        self,
        broker: Any,
        name: str,
        num_partitions: int,
        replication_factor: int,
        segment_bytes: int,
        *,
        compression: int = 0,
        load_buffer_size: int = _READ_CHUNK,
    ) -> None:
        self.broker = broker
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.segment_bytes = segment_bytes
        self.compression = compression  # codec id of the batches written (e.g. 1 = gzip)
        self.load_buffer_size = load_buffer_size  # bytes per read when replaying

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    async def ensure_created(self) -> None:
        if self.broker.store.topic(self.name) is not None:
            return
        brokers = len(self.broker.store.brokers())
        try:
            await self._create(brokers)
        except Exception as exc:  # a concurrent creation (another broker) is fine
            if getattr(exc, "error_code", None) != TOPIC_ALREADY_EXISTS:
                raise

    async def _create(self, brokers: int) -> None:
        await self.broker.topics.create(
            self.name,
            self.num_partitions,
            min(self.replication_factor, brokers),
            configs={
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(self.segment_bytes),
            },
            internal=True,
        )

    def append(
        self,
        partition: int,
        records: list[tuple[bytes, bytes | None]],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        transactional: bool = False,
        timestamp_ms: int = 0,
    ) -> int:
        """Append key/value records as one batch; returns the offset of the last one."""
        leader = self.broker.replicas.leader_partition(self.name, partition)
        batch = build_batch(
            [(k, v, [], timestamp_ms) for k, v in records],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=transactional,
            compression=self.compression,
        )
        info = leader.append_as_leader(batch, origin="coordinator")
        return info.last_offset

    async def await_replication(self, partition: int, timeout_s: float = 15.0) -> int:
        """Wait until the ISR has everything appended to `partition` (Kafka writes coordinator
        state with acks=all). 0, or the coordinator error the request should answer."""
        hosted = self.broker.replicas.get(self.name, partition)
        if hosted is None or not hosted.is_leader:
            return NOT_COORDINATOR
        if await hosted.wait_for_high_watermark(hosted.log.log_end_offset, timeout_s):
            return 0
        return COORDINATOR_NOT_AVAILABLE if hosted.is_leader else NOT_COORDINATOR

    def replay(self, partition: int) -> Iterator[ReplayedRecord | ReplayedMarker]:
        """Every record and transaction marker of the partition, from the log start to its end."""
        plog = self.broker.replicas.leader_partition(self.name, partition).log
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            data = plog.read(offset, self.load_buffer_size, end, True)  # >= 1 batch
            if not data.records:
                break
            records = bytes(data.records)  # keys and values are sliced from it: bytes, not views
            for pos, header in iter_batches(records):
                yield from _batch_entries(records, pos, header, offset)
            offset = max(offset + 1, data.next_offset)


def _batch_entries(
    buf: bytes, pos: int, header: BatchHeader, from_offset: int
) -> Iterator[ReplayedRecord | ReplayedMarker]:
    if header.is_control:
        kind, coordinator_epoch = parse_control_record(buf, pos, header)
        if kind in (0, 1) and header.last_offset >= from_offset:
            yield ReplayedMarker(
                header.base_offset, header.producer_id, kind == 1, coordinator_epoch
            )
        return
    for record in decode_records(buf, pos, header):
        if record.offset >= from_offset:
            yield ReplayedRecord(
                record.offset, record.key, record.value, header.producer_id, header.is_transactional
            )
