"""What one append does to its producers' state (Kafka's ProducerAppendInfo): the batches it
carries (`BatchInfo`), the checks of epoch, sequence and transaction each must pass
(`AppendValidator`, on copies of the entries, so a refused append leaves no trace), and the
outcome `ProducerStateManager.apply` commits once the batches are on disk (`AppendPlan`)."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from samsa.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    HEADER_SIZE,
    BatchHeader,
    Buf,
    parse_control_record,
)
from samsa.storage.errors import (
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTxnState,
    OutOfOrderSequence,
    StorageError,
    TransactionCoordinatorFenced,
)
from samsa.storage.producer_entry import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    BatchMetadata,
    ProducerStateEntry,
    in_sequence,
)
from samsa.storage.verification_state import VerificationState

log = logging.getLogger(__name__)

Origin = Literal["client", "replication", "coordinator"]
ORIGINS = ("client", "replication", "coordinator")


class BatchInfo(NamedTuple):
    """One batch about to be appended, offsets already assigned. A tuple: made for every
    batch appended, and a frozen dataclass costs five times as much to build."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool
    control_commit: bool | None = None  # control batches: True commit, False abort, None empty
    coordinator_epoch: int = -1  # control batches

    @classmethod
    def of_batch(cls, h: BatchHeader, buf: Buf, pos: int) -> BatchInfo:
        """The batch at `pos` of `buf` whose header is `h` (a control batch's record is read
        for its type and coordinator epoch)."""
        commit: bool | None = None
        coord_epoch = -1
        if h.is_control:
            ctype, coord_epoch = control_record(buf, pos, h)
            if ctype in (CONTROL_ABORT, CONTROL_COMMIT):
                commit = ctype == CONTROL_COMMIT
        return cls(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence,
                   h.base_offset, h.last_offset, h.max_timestamp, h.is_transactional,
                   h.is_control, commit, coord_epoch)


# A transaction marker's one record as this broker (and Kafka) writes it: length 16, no
# attributes, zero timestamp and offset deltas, a 4-byte key of version 0, then the type, a
# 6-byte value of version 0, then the coordinator epoch, and no headers.
_MARKER_HEAD = b"\x20\x00\x00\x00\x08\x00\x00"
_MARKER_VALUE_HEAD = b"\x0c\x00\x00"
_MARKER_RECORD_SIZE = 17
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def control_record(buf: Buf, pos: int, h: BatchHeader) -> tuple[int, int]:
    """`parse_control_record`: (control type, coordinator epoch) of the control batch at `pos`,
    read from fixed places when its record is laid out as a marker always is (a transaction's
    markers are appended to every partition it wrote: issue 47), else decoded."""
    r = pos + HEADER_SIZE
    if (h.records_count == 1 and h.size == HEADER_SIZE + _MARKER_RECORD_SIZE
            and not h.compression and buf[r:r + 7] == _MARKER_HEAD
            and buf[r + 9:r + 12] == _MARKER_VALUE_HEAD and buf[r + 16] == 0):
        (ctype,) = _I16.unpack_from(buf, r + 7)
        if ctype in (CONTROL_ABORT, CONTROL_COMMIT):
            return ctype, _I32.unpack_from(buf, r + 12)[0]
    return parse_control_record(buf, pos, h)


class CompletedTxn(NamedTuple):
    """A transaction an append completed. A tuple, as BatchInfo: one is made, and hashed to
    key its LSO, for each marker that ends a transaction (one per partition it wrote)."""

    producer_id: int
    first_offset: int
    last_offset: int  # offset of the COMMIT/ABORT marker
    is_aborted: bool


def takes_marker(e: ProducerStateEntry, epoch: int, coordinator_epoch: int,
                 transaction_version: int) -> bool:
    """Whether `AppendValidator` takes a COMMIT/ABORT marker of `e`'s producer without a word:
    its producer epoch and coordinator epoch not older than the entry's, and under transactions
    v2 not the epoch of a transaction open (that is a late marker of the one before)."""
    return (epoch >= e.epoch and coordinator_epoch >= e.coordinator_epoch
            and not (transaction_version >= 2 and epoch == e.epoch
                     and e.txn_first_offset is not None))


@dataclass(slots=True)
class AppendPlan:
    """The validated outcome of `prepare_append`, committed by `apply`."""

    entries: dict[int, ProducerStateEntry]  # updated copies, keyed by producer id
    started_txns: list[tuple[int, int]]  # (first_offset, producer_id), in append order
    completed_txns: list[CompletedTxn]
    end_offset: int | None  # last offset of the batches + 1
    generation: int  # manager generation the plan was validated against
    # The common append (see `_prepare_next_batch`): a batch to add to a stored entry in place.
    next_batch: tuple[ProducerStateEntry, BatchMetadata] | None = None
    # A transaction marker (see `_prepare_marker`): the stored entry it ends the transaction of.
    marker: tuple[ProducerStateEntry, BatchInfo] | None = None
    # KIP-890: producers whose transactional batch (epoch None) or marker (its epoch) the
    # append writes, whose verification state it ends
    verifications_ended: list[tuple[int, int | None]] = field(default_factory=list)


class AppendValidator:
    """Validates the batches of one append against working copies (Kafka's ProducerAppendInfo)."""

    def __init__(self, producers: dict[int, ProducerStateEntry], origin: Origin,
                 transaction_version: int = 0,
                 verifying: dict[int, VerificationState] | None = None) -> None:
        self._producers = producers
        self._verifying = verifying or {}
        self._origin = origin
        self._transaction_version = transaction_version  # of the markers (WriteTxnMarkers v2)
        self.entries: dict[int, ProducerStateEntry] = {}
        # Kafka's sequence check compares against this append's own batches (those still
        # retained in the current epoch) and, before there are any, against the stored entry.
        self._own_batches: dict[int, int] = {}
        self.started: list[tuple[int, int]] = []
        self.completed: list[CompletedTxn] = []
        self.verifications_ended: list[tuple[int, int | None]] = []

    def _entry(self, pid: int) -> ProducerStateEntry:
        e = self.entries.get(pid)
        if e is None:
            stored = self._producers.get(pid)
            e = stored.copy() if stored is not None else ProducerStateEntry(pid)
            self.entries[pid] = e
            self._own_batches[pid] = 0
        return e

    def _refuse(self, error: type[StorageError], msg: str, level: int) -> None:
        """A leader refuses a batch that breaks its producer's state; a follower takes what its
        leader wrote, and logs it at `level`."""
        if self._origin == "replication":
            log.log(level, msg)
        else:
            raise error(msg)

    def _check_epoch(self, e: ProducerStateEntry, epoch: int, offset: int) -> None:
        if epoch < e.epoch:
            msg = (
                f"epoch {epoch} of producer {e.producer_id} at offset {offset} is smaller than "
                f"the last seen epoch {e.epoch}"
            )
            self._refuse(InvalidProducerEpoch, msg, logging.WARNING)

    def _check_sequence(self, e: ProducerStateEntry, b: BatchInfo) -> None:
        pid, first_seq = b.producer_id, b.base_sequence
        verifying = self._verifying.get(pid)
        if verifying is not None:
            self._check_verified_sequence(verifying, b)
        if b.producer_epoch != e.epoch:
            if first_seq != 0 and e.epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequence(
                    f"invalid sequence {first_seq} for new epoch {b.producer_epoch} of producer "
                    f"{pid} at offset {b.first_offset} (current epoch {e.epoch})"
                )
            return
        stored = self._producers.get(pid)
        stored_epoch = stored.epoch if stored is not None else NO_PRODUCER_EPOCH
        if self._own_batches[pid]:
            current_last = e.last_seq
        elif stored is not None and b.producer_epoch == stored_epoch:
            current_last = stored.last_seq
        else:
            current_last = NO_SEQUENCE
        # A producer without state (new, expired, or its data deleted) may start anywhere.
        if stored_epoch != NO_PRODUCER_EPOCH and not in_sequence(current_last, first_seq):
            raise OutOfOrderSequence(
                f"out of order sequence for producer {pid} at offset {b.first_offset}: "
                f"{first_seq} (incoming), {current_last} (current end)"
            )

    def _check_verified_sequence(self, verifying: VerificationState, b: BatchInfo) -> None:
        """Kafka's two sequence checks against a producer's verification state (KIP-890):
        under transactions v2 a producer with no batches here starts at sequence 0, and no
        batch may pass one of a lower sequence that is still being verified."""
        pid, first_seq = b.producer_id, b.base_sequence
        stored = self._producers.get(pid)
        if verifying.supports_epoch_bump and first_seq != 0 and (
                stored is None or not stored.batches):
            raise OutOfOrderSequence(
                f"invalid sequence {first_seq} for producer {pid} at offset {b.first_offset}: "
                f"a transactions v2 producer with no state here starts at sequence 0")
        if first_seq > verifying.lowest_sequence:
            raise OutOfOrderSequence(
                f"out of order sequence for producer {pid} at offset {b.first_offset}: "
                f"{first_seq} (incoming), {verifying.lowest_sequence} (the earliest being "
                f"verified)")

    def _set_epoch(self, e: ProducerStateEntry, epoch: int) -> None:
        if epoch != e.epoch:
            self._own_batches[e.producer_id] = 0
        e.set_epoch(epoch)

    def add(self, b: BatchInfo) -> None:
        if b.is_control:
            self._add_marker(b)
        else:
            self._add_data(b)

    def _add_data(self, b: BatchInfo) -> None:
        e = self._entry(b.producer_id)
        self._check_epoch(e, b.producer_epoch, b.first_offset)
        if self._origin == "client":
            self._check_sequence(e, b)
        if e.txn_first_offset is not None and not b.is_transactional:
            raise InvalidTxnState(
                f"expected a transactional write from producer {b.producer_id} at offset "
                f"{b.first_offset}: it has a transaction open since {e.txn_first_offset}"
            )
        self._set_epoch(e, b.producer_epoch)
        e.batches.append(
            BatchMetadata(
                b.last_sequence, b.last_offset, b.last_offset - b.first_offset, b.max_timestamp
            )
        )
        e.last_timestamp = b.max_timestamp
        self._own_batches[b.producer_id] += 1
        if b.is_transactional:
            if e.txn_first_offset is None:
                e.txn_first_offset = b.first_offset
                self.started.append((b.first_offset, b.producer_id))
            if b.producer_id in self._verifying:
                self.verifications_ended.append((b.producer_id, None))

    def _add_marker(self, b: BatchInfo) -> None:
        if self._origin == "client":
            raise InvalidRecord(f"clients may not write control batches (offset {b.first_offset})")
        if b.control_commit is None:
            return  # an empty control batch: its transaction was cleaned from the log
        e = self._entry(b.producer_id)
        self._check_epoch(e, b.producer_epoch, b.first_offset)
        if self._transaction_version >= 2 and b.producer_epoch == e.epoch and \
                e.txn_first_offset is not None:
            # Kafka's checkProducerEpoch for transactions v2: a transaction ends with the epoch
            # bumped, so a marker at the epoch of an open transaction is a late one of the
            # transaction before it. The same epoch with nothing open is a retry of the marker
            # just written (KAFKA-19999).
            msg = (f"marker epoch {b.producer_epoch} of producer {b.producer_id} at offset "
                   f"{b.first_offset} is the epoch of its open transaction (transactions v2)")
            self._refuse(InvalidProducerEpoch, msg, logging.WARNING)
        if b.coordinator_epoch < e.coordinator_epoch:
            msg = (
                f"coordinator epoch {b.coordinator_epoch} for producer {b.producer_id} at offset "
                f"{b.first_offset} is older than {e.coordinator_epoch}"
            )
            self._refuse(TransactionCoordinatorFenced, msg, logging.INFO)
        # Markers of empty transactions do not affect the LSO or the transaction index.
        if e.txn_first_offset is not None:
            self.completed.append(
                CompletedTxn(
                    b.producer_id, e.txn_first_offset, b.first_offset, not b.control_commit
                )
            )
        self._set_epoch(e, b.producer_epoch)
        e.coordinator_epoch = b.coordinator_epoch
        e.txn_first_offset = None
        e.last_timestamp = b.max_timestamp
        if b.producer_id in self._verifying:
            self.verifications_ended.append((b.producer_id, b.producer_epoch))
