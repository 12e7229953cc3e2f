"""What the coordinators need from the broker that hosts them: small interfaces, handed in.

The coordinators sit below the broker layer and import nothing from it. The broker
(broker/app.py) builds an implementation of each interface and passes it to the coordinator
that needs it, as Kafka's transaction-coordinator module owns its marker channel and knows
nothing of KafkaApis:

- `InternalLogHost`: the cluster metadata and the replicas an `InternalTopic` lives on
  (samsa.broker.coordinator_host.BrokerLogHost);
- `CoordinatorReplica`: one replica of an internal-topic partition hosted by this broker
  (samsa.broker.replication.partition.Partition);
- `TxnMarkerSender`: writes a transaction's COMMIT/ABORT markers to its partitions
  (samsa.broker.txn.markers.TxnMarkerChannel);
- `TransactionalOffsets`: settles a producer's transactional offset commits once its marker
  is on `__consumer_offsets` (the group coordinator; used by samsa.broker.txn.markers);
- `TxnMetrics`: the transaction coordinator's event counters (the samsa.broker.metrics module);
- `ProducerIdSource`: fresh producer ids (samsa.coordinator.producer_ids' allocators);
- `TopicsView`: the topics' ids and partition counts (the consumer groups' assignors, the
  share coordinator's check of a share-partition's topic).

Errors cross these interfaces as `samsa.protocol.errors.KafkaError`: a replica that is not led here
is answered with one carrying NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION or
KAFKA_STORAGE_ERROR; a topic that already exists with TOPIC_ALREADY_EXISTS.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Protocol

from samsa.storage.log import AppendInfo, FetchDataInfo
from samsa.storage.verification_state import VerificationState


class CoordinatorReplica(Protocol):
    """A replica of an internal-topic partition hosted by this broker."""

    @property
    def is_leader(self) -> bool: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def isr(self) -> list[int]: ...

    @property
    def min_insync_replicas(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def append_as_leader(self, records: bytes, origin: str = ..., *, verify: bool = ...,
                         guard: VerificationState | None = ...) -> AppendInfo:
        """Append one batch to the local log at the current leader epoch (no ISR wait);
        `verify`, `guard`: KIP-890's check of a transaction's first batch (the log's)."""
        ...

    async def wait_for_high_watermark(self, offset: int, timeout_s: float) -> bool:
        """Wait until everything before `offset` is replicated to the ISR; False when the
        timeout passed or leadership was lost first."""
        ...

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset` (at most the high watermark); returns the
        new log start offset."""
        ...

    def read_records(self, offset: int, max_bytes: int, max_offset: int) -> FetchDataInfo:
        """At least one batch from `offset` on, none at or past `max_offset` (which may be
        above the high watermark: coordinators replay up to the log end)."""
        ...


class InternalLogHost(Protocol):
    """What an `InternalTopic` needs from the broker: metadata, topic creation, replicas."""

    def topic_partitions(self, topic: str) -> Collection[int] | None:
        """The partition indexes of `topic` in the cluster metadata; None if it does not
        exist."""
        ...

    def broker_count(self) -> int:
        """How many brokers are registered in the cluster."""
        ...

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        """Create `name` as an internal topic; raises KafkaError (TOPIC_ALREADY_EXISTS if
        another broker created it first)."""
        ...

    def replica(self, topic: str, partition: int) -> CoordinatorReplica | None:
        """The replica hosted here, led or followed; None if none is."""
        ...

    def leader(self, topic: str, partition: int) -> CoordinatorReplica:
        """The replica hosted here if this broker leads it; raises KafkaError otherwise
        (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR)."""
        ...


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """What a transaction marker says, whichever partitions it is written to."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    # the transaction's version (WriteTxnMarkers v2): at 2 the leaders check the marker's
    # epoch as transactions v2 has it (storage/producer_append.py)
    transaction_version: int = 0


class TxnMarkerSender(Protocol):
    """Kafka's TransactionMarkerChannelManager: the way the transaction coordinator's markers
    reach the partitions of a transaction, wherever they are led."""

    async def write_markers(self, marker: TxnMarker,
                            partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Write the marker to every partition; an error code per partition (NONE once the
        partition's ISR has it)."""
        ...


class TransactionalOffsets(Protocol):
    """Kafka's GroupCoordinator.onTransactionCompleted: what the marker writer tells the group
    coordinator once a marker on `__consumer_offsets` is replicated."""

    def complete_transaction(self, offsets_partition: int, producer_id: int,
                             commit: bool) -> object:
        """The producer's pending offsets on that partition become committed (`commit`) or
        are dropped."""
        ...


class TxnMetrics(Protocol):
    """The transaction coordinator's counters."""

    def transaction_completed(self, committed: bool, markers_started_ms: int) -> None:
        """CompleteCommit/CompleteAbort was logged; the markers were started at
        `markers_started_ms` (wall clock)."""
        ...

    def transaction_timed_out(self, abort_started: bool) -> None:
        """An ongoing transaction outlived its timeout (and its abort started, or not)."""
        ...


class ProducerIdSource(Protocol):
    def next_id(self) -> int:
        """A producer id never handed out before; raises KafkaError (e.g.
        COORDINATOR_LOAD_IN_PROGRESS) when none is available right now."""
        ...


class TopicsView(Protocol):
    """The cluster's topics as the group coordinator's assignors and the share coordinator see
    them."""

    def topic_info(self, name: str) -> tuple[uuid.UUID, int] | None:
        """(topic id, partition count) of `name`; None if it does not exist."""
        ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        ...

    def topic_names(self) -> Iterable[str]:
        """Every topic's name."""
        ...
