"""Internal topics (__consumer_offsets, __transaction_state, __share_group_state): placement,
append, replay.

Coordinators keep their state as key/value records in a partition of an internal topic; the
leader of that partition is the coordinator. State is rebuilt by replaying the partition. The
topics are compacted, except where the coordinator says otherwise (`__share_group_state`, as in
Kafka, deletes what its coordinator prunes: `prune`).

Coordinator state acts only once replicated: `append_replicated` appends with Kafka's acks=all
rules (the ISR must have min.insync.replicas members before and after the append) and returns
only when the high watermark has passed the batch, at the leader epoch it was appended in.
Callers apply the state change after it returns and leave their state as it was when it raises.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Coroutine, Iterator
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, TypedDict, Unpack

from samsa.config.schema import BrokerConfig
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.records import (
    BatchHeader,
    build_batch,
    decode_records,
    iter_batches,
    parse_control_record,
)
from samsa.storage.file_region import FileRegion
from samsa.storage.verification_state import VerificationState

from .ports import CoordinatorReplica, InternalLogHost

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20
# Kafka's offsets.commit.timeout.ms / the transaction log append timeout (both 5 s).
APPEND_TIMEOUT_S = 5.0


class InternalAppendError(KafkaError):
    """An append to an internal topic that did not become durable; `error_code` is Kafka's
    Produce error for it (the coordinators map it to their own answer)."""

    def __init__(self, error_code: ErrorCode, message: str = "") -> None:
        super().__init__(message, error_code)


class ReplicatedAppend(TypedDict, total=False):
    """The options of `InternalTopic.append_replicated` (its `begin_append_replicated`'s)."""

    leader_epoch: int | None
    producer_id: int
    producer_epoch: int
    transactional: bool
    timestamp_ms: int
    timeout_s: float
    verify: bool  # KIP-890: a transaction's first batch presents `guard` (the log's check)
    guard: VerificationState | None


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



# The properties InternalTopic.configured reads after a coordinator's prefix (Kafka names them
# alike for the offsets, transaction and share-state topics; the last two where they exist).
CONFIGURED_SUFFIXES = ("num.partitions", "replication.factor", "segment.bytes", "min.isr",
                       "compression.codec")

@dataclass(eq=False)
class InternalTopic:
    """An internal topic of a coordinator, as it is created, and its partitions on this
    broker (through `host`)."""

    host: InternalLogHost
    name: str
    num_partitions: int
    replication_factor: int
    segment_bytes: int
    # min.insync.replicas the topic is created with (None: the broker's default applies, as
    # for Kafka's __consumer_offsets)
    min_isr: int | None = None
    _: KW_ONLY
    compression: int = 0  # codec id of the batches written (e.g. 1 = gzip)
    load_buffer_size: int = _READ_CHUNK  # bytes per read when replaying
    # topic configs that replace the defaults below (e.g. a cleanup.policy other than compact)
    configs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def configured(cls, host: InternalLogHost, name: str, config: BrokerConfig,
                   prefix: str, load_buffer_key: str,
                   configs: dict[str, str] | None = None) -> InternalTopic:
        """A coordinator's topic as its properties set it, which Kafka names alike for each:
        `<prefix>.num.partitions`, `.replication.factor` and `.segment.bytes`, and where the
        coordinator has them `.min.isr` and `.compression.codec`."""
        parts, sizes, segment, min_isr, codec = (f"{prefix}.{s}" for s in CONFIGURED_SUFFIXES)
        return cls(host, name, config[parts], config[sizes], config[segment],
                   config[min_isr] if min_isr in config else None,
                   compression=config[codec] if codec in config else 0,
                   load_buffer_size=config[load_buffer_key], configs=configs or {})

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    # ---- the topic and its replicas on this broker -------------------------------------
    def exists(self) -> bool:
        return self.host.topic_partitions(self.name) is not None

    def partitions(self) -> Collection[int]:
        """The topic's partition indexes (none before it is created)."""
        return self.host.topic_partitions(self.name) or ()

    def replica(self, partition: int) -> CoordinatorReplica | None:
        """The partition's replica on this broker, led or followed (None if not hosted)."""
        return self.host.replica(self.name, partition)

    def is_led_here(self, partition: int) -> bool:
        hosted = self.host.replica(self.name, partition)
        return hosted is not None and hosted.is_leader

    def leader(self, partition: int) -> CoordinatorReplica:
        """The partition's replica if this broker leads it; raises KafkaError otherwise."""
        return self.host.leader(self.name, partition)

    def leader_epoch(self, partition: int) -> int:
        """The leader epoch this broker leads the partition at; raises KafkaError if it does
        not lead it."""
        return self.host.leader(self.name, partition).leader_epoch

    async def ensure_created(self) -> None:
        if self.exists():
            return
        brokers = self.host.broker_count()
        try:
            await self._create(min(self.replication_factor, brokers))
        except KafkaError as exc:  # a concurrent creation (another broker) is fine
            if exc.error_code != ErrorCode.topic_already_exists:
                raise

    async def _create(self, replication_factor: int) -> None:
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.segment_bytes),
            **self.configs,
        }
        if self.min_isr is not None:
            # Capped at the replication factor the topic gets: a single broker (factor 1)
            # would otherwise refuse every coordinator write.
            configs["min.insync.replicas"] = str(max(1, min(self.min_isr, replication_factor)))
        await self.host.create_topic(self.name, self.num_partitions, replication_factor, configs)

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
        """Append key/value records as one batch to the local log, without waiting for the
        ISR; returns the offset of the last one. Only for state that may be lost with this
        leader (use `append_replicated` for everything a client is told about)."""
        leader = self.leader(partition)
        info = leader.append_as_leader(
            _batch(records, producer_id, producer_epoch, transactional, timestamp_ms,
                   self.compression),
            origin="coordinator",
        )
        return info.last_offset

    async def append_replicated(
        self,
        partition: int,
        records: list[tuple[bytes, bytes | None]],
        **options: Unpack[ReplicatedAppend],
    ) -> int:
        """Append as one batch with acks=all and wait until the ISR has it; returns the offset
        of the last record. Raises InternalAppendError (or the partition/storage error of the
        append) when the batch is not known to be replicated at the leader epoch it was
        appended in (`leader_epoch`, if given, must also be that epoch): NOT_ENOUGH_REPLICAS
        before the append, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
        return await self.begin_append_replicated(partition, records, **options)

    def begin_append_replicated(
        self,
        partition: int,
        records: list[tuple[bytes, bytes | None]],
        *,
        leader_epoch: int | None = None,
        producer_id: int = -1,
        producer_epoch: int = -1,
        transactional: bool = False,
        timestamp_ms: int = 0,
        timeout_s: float = APPEND_TIMEOUT_S,
        verify: bool = False,
        guard: VerificationState | None = None,
    ) -> Coroutine[Any, Any, int]:
        """`append_replicated` in two halves: the checks and the append to the local log
        happen now (raising what `append_replicated` raises before its append), and the wait
        for the ISR is the coroutine returned, which the caller must await. Lets a caller
        change its in-memory state only once the records are in the log, with nothing else
        running in between."""
        leader = self.leader(partition)
        epoch = leader.leader_epoch
        if leader_epoch is not None and leader_epoch != epoch:
            raise InternalAppendError(ErrorCode.not_leader_or_follower, "leader epoch changed")
        if len(leader.isr) < leader.min_insync_replicas:
            raise InternalAppendError(
                ErrorCode.not_enough_replicas,
                f"ISR {leader.isr} is smaller than min.insync.replicas "
                f"{leader.min_insync_replicas}",
            )
        info = leader.append_as_leader(
            _batch(records, producer_id, producer_epoch, transactional, timestamp_ms,
                   self.compression),
            origin="coordinator", verify=verify, guard=guard,
        )
        return self._replicated(partition, leader, epoch, info.last_offset, timeout_s)

    async def _replicated(self, partition: int, leader: CoordinatorReplica, epoch: int,
                          last_offset: int, timeout_s: float) -> int:
        replicated = await leader.wait_for_high_watermark(last_offset + 1, timeout_s)
        if self.replica(partition) is not leader:
            raise InternalAppendError(ErrorCode.not_leader_or_follower, "partition was removed")
        if not leader.is_leader or leader.leader_epoch != epoch:
            # A batch appended in an earlier epoch may still be truncated by the new leader.
            raise InternalAppendError(ErrorCode.not_leader_or_follower, "leadership moved")
        if not replicated:
            raise InternalAppendError(
                ErrorCode.request_timed_out, "the ISR did not catch up in time"
            )
        if len(leader.isr) < leader.min_insync_replicas:
            raise InternalAppendError(
                ErrorCode.not_enough_replicas_after_append, f"ISR shrank to {leader.isr}"
            )
        return last_offset

    def prune(self, partition: int, offset: int) -> int:
        """Delete the partition's records before `offset` (its leader's DeleteRecords); returns
        the new log start offset. Raises KafkaError if this broker does not lead it."""
        return self.leader(partition).delete_records_before(offset)

    def replay(self, partition: int) -> Iterator[ReplayedRecord | ReplayedMarker]:
        """Every record and transaction marker of the partition, from the log start to its end."""
        leader = self.leader(partition)
        offset = leader.log_start_offset
        end = leader.log_end_offset
        while offset < end:
            data = leader.read_records(offset, self.load_buffer_size, end)  # >= 1 batch
            if not data.records:
                break
            assert not isinstance(data.records, FileRegion)  # read without zero_copy
            records = bytes(data.records)  # keys and values are sliced from it: bytes, not views
            for pos, header in iter_batches(records):
                yield from _batch_entries(records, pos, header, offset)
            offset = max(offset + 1, data.next_offset)


def _batch(
    records: list[tuple[bytes, bytes | None]],
    producer_id: int,
    producer_epoch: int,
    transactional: bool,
    timestamp_ms: int,
    compression: int,
) -> bytes:
    return build_batch(
        [(k, v, [], timestamp_ms) for k, v in records],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=transactional,
        compression=compression,
    )


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
