"""One producer's state in one partition (Kafka's ProducerStateEntry and BatchMetadata): its
epoch, coordinator epoch, open transaction and the last batches it wrote, kept to find a
retried batch's duplicate and to check the next batch's sequence."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1
NUM_BATCHES_TO_RETAIN = 5  # matches the client's max.in.flight.requests.per.connection limit


def decrement_sequence(seq: int, decrement: int) -> int:
    # Sequences wrap from INT32_MAX to 0.
    if seq < decrement:
        return INT32_MAX - (decrement - seq) + 1
    return seq - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    """Read-only view of one producer's state (DescribeProducers)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 when no transaction is open
    last_offset: int  # -1 when no batch is retained


class BatchMetadata(NamedTuple):  # a tuple: one is made for every batch appended
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.txn_first_offset,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
        )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def set_epoch(self, epoch: int) -> None:
        # Sequence numbers restart with a new epoch, so old batches can no longer be duplicates.
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def view(self) -> ProducerEntry:
        last = self.batches[-1] if self.batches else None
        return ProducerEntry(
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            last_sequence=last.last_seq if last else NO_SEQUENCE,
            last_timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_start_offset=(
                self.txn_first_offset if self.txn_first_offset is not None else -1
            ),
            last_offset=last.last_offset if last else -1,
        )
