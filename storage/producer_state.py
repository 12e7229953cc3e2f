"""Per-partition idempotence/transaction state (Kafka's ProducerStateManager + ProducerAppendInfo).

Validation happens in `prepare_append`, which works on copies and mutates nothing, so a rejected
append leaves no trace; `apply` commits a plan once the batches are on disk. Snapshots
(`<20-digit offset>.snapshot`) use Kafka's `ProducerSnapshot` v1 byte format so that a data
directory stays readable by either broker.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple, cast

import crc32c

from samsa.protocol.records import (
    ATTR_TRANSACTIONAL,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    HEADER_SIZE,
    BatchHeader,
    Buf,
    parse_control_record,
)
from samsa.storage.checkpoint import fsync_if_exists, write_atomically
from samsa.storage.errors import (
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTxnState,
    OutOfOrderSequence,
    StorageError,
    TransactionCoordinatorFenced,
)
from samsa.storage.verification_state import Verifications, VerificationState

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1
NUM_BATCHES_TO_RETAIN = 5  # matches the client's max.in.flight.requests.per.connection limit

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">hIi")  # version, crc32c, entry count
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_ENTRY_SIZE = _SNAP_ENTRY.size  # 46
_CRC_START = 6  # the CRC covers everything after version + crc

Origin = Literal["client", "replication", "coordinator"]
_ORIGINS = ("client", "replication", "coordinator")


class CorruptSnapshot(Exception):
    """Internal: a snapshot file failed validation; it is deleted and an older one is tried."""


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


def _decrement_sequence(seq: int, decrement: int) -> int:
    # Sequences wrap from INT32_MAX to 0.
    if seq < decrement:
        return INT32_MAX - (decrement - seq) + 1
    return seq - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _takes_marker(e: _Entry, epoch: int, coordinator_epoch: int, transaction_version: int
                  ) -> bool:
    """Whether `_Validator` takes a COMMIT/ABORT marker of `e`'s producer without a word: its
    producer epoch and coordinator epoch not older than the entry's, and under transactions
    v2 not the epoch of a transaction open (that is a late marker of the one before)."""
    return (epoch >= e.epoch and coordinator_epoch >= e.coordinator_epoch
            and not (transaction_version >= 2 and epoch == e.epoch
                     and e.txn_first_offset is not None))


class _BatchMetadata(NamedTuple):  # a tuple for the same reason as BatchInfo
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return _decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class _Entry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    txn_first_offset: int | None = None
    batches: deque[_BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

    def copy(self) -> _Entry:
        return _Entry(
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


@dataclass(slots=True)
class AppendPlan:
    """The validated outcome of `prepare_append`, committed by `apply`."""

    entries: dict[int, _Entry]  # updated copies, keyed by producer id
    started_txns: list[tuple[int, int]]  # (first_offset, producer_id), in append order
    completed_txns: list[CompletedTxn]
    end_offset: int | None  # last offset of the batches + 1
    generation: int  # manager generation the plan was validated against
    # The common append (see `_prepare_next_batch`): a batch to add to a stored entry in place.
    next_batch: tuple[_Entry, _BatchMetadata] | None = None
    # A transaction marker (see `_prepare_marker`): the stored entry it ends the transaction of.
    marker: tuple[_Entry, BatchInfo] | None = None
    # KIP-890: producers whose transactional batch (epoch None) or marker (its epoch) the
    # append writes, whose verification state it ends
    verifications_ended: list[tuple[int, int | None]] = field(default_factory=list)


def _snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: list[_Entry]) -> bytes:
    """Kafka ProducerSnapshot v1; only the last retained batch of each producer is kept."""
    body = bytearray(struct.pack(">i", len(entries)))
    for e in entries:
        last = e.batches[-1] if e.batches else None
        body += _SNAP_ENTRY.pack(
            e.producer_id,
            e.epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            e.last_timestamp,
            e.coordinator_epoch,
            e.txn_first_offset if e.txn_first_offset is not None else -1,
        )
    crc = crc32c.crc32c(bytes(body))
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + bytes(body)


def decode_snapshot(buf: bytes) -> list[_Entry]:
    if len(buf) < _SNAP_HEADER.size:
        raise CorruptSnapshot(f"snapshot too short ({len(buf)} bytes)")
    version, crc, count = _SNAP_HEADER.unpack_from(buf, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"unknown snapshot version {version}")
    if count < 0 or len(buf) != _SNAP_HEADER.size + count * SNAPSHOT_ENTRY_SIZE:
        raise CorruptSnapshot(f"snapshot length {len(buf)} does not match {count} entries")
    computed = crc32c.crc32c(buf[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshot(f"snapshot crc mismatch: stored {crc}, computed {computed}")
    entries = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = (
            _SNAP_ENTRY.unpack_from(buf, _SNAP_HEADER.size + i * SNAPSHOT_ENTRY_SIZE)
        )
        e = _Entry(pid, epoch, coord_epoch, ts, txn_first if txn_first >= 0 else None)
        if last_offset >= 0:
            e.batches.append(_BatchMetadata(last_seq, last_offset, delta, ts))
        entries.append(e)
    return entries


class _Validator:
    """Validates the batches of one append against working copies (Kafka's ProducerAppendInfo)."""

    def __init__(self, producers: dict[int, _Entry], origin: Origin,
                 transaction_version: int = 0,
                 verifying: dict[int, VerificationState] | None = None) -> None:
        self._producers = producers
        self._verifying = verifying or {}
        self._origin = origin
        self._transaction_version = transaction_version  # of the markers (WriteTxnMarkers v2)
        self.entries: dict[int, _Entry] = {}
        # Kafka's sequence check compares against this append's own batches (those still
        # retained in the current epoch) and, before there are any, against the stored entry.
        self._own_batches: dict[int, int] = {}
        self.started: list[tuple[int, int]] = []
        self.completed: list[CompletedTxn] = []
        self.verifications_ended: list[tuple[int, int | None]] = []

    def _entry(self, pid: int) -> _Entry:
        e = self.entries.get(pid)
        if e is None:
            stored = self._producers.get(pid)
            e = stored.copy() if stored is not None else _Entry(pid)
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

    def _check_epoch(self, e: _Entry, epoch: int, offset: int) -> None:
        if epoch < e.epoch:
            msg = (
                f"epoch {epoch} of producer {e.producer_id} at offset {offset} is smaller than "
                f"the last seen epoch {e.epoch}"
            )
            self._refuse(InvalidProducerEpoch, msg, logging.WARNING)

    def _check_sequence(self, e: _Entry, b: BatchInfo) -> None:
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
        if stored_epoch != NO_PRODUCER_EPOCH and not _in_sequence(current_last, first_seq):
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

    def _set_epoch(self, e: _Entry, epoch: int) -> None:
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
            _BatchMetadata(
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


class ProducerStateManager:
    def __init__(self, partition_dir: Path, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.partition_dir = Path(partition_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, _Entry] = {}
        self._ongoing: dict[int, int] = {}  # txn first offset -> pid
        self._unreplicated: dict[int, tuple[int, int]] = {}  # first offset -> (pid, marker offset)
        self._lso_of_completed: dict[CompletedTxn, int] = {}  # from the latest apply
        # KIP-890: producers whose first transactional batch here is being verified
        self.verifications = Verifications()
        self._verifying = self.verifications.states
        self._map_end_offset = 0
        self._last_snap_offset = 0
        self._generation = 0
        # Snapshots written without fsync (at segment roll), made durable by `flush_snapshots`
        # before the log's recovery point passes them. Appended on the loop, drained by the
        # flush thread: the lock keeps the two from losing an entry.
        self._unsynced_snapshots: list[int] = []
        self._unsynced_lock = threading.Lock()

    # -- append path ---------------------------------------------------------------------------

    def find_duplicate(self, b: BatchInfo) -> tuple[int, int, int] | None:
        """(first_offset, last_offset, timestamp) of an already-appended identical batch."""
        if b.producer_id == NO_PRODUCER_ID or b.is_control:
            return None
        e = self._producers.get(b.producer_id)
        if e is None or e.epoch != b.producer_epoch:
            return None
        for m in e.batches:
            if m.last_seq == b.last_sequence and m.first_seq == b.base_sequence:
                return m.first_offset, m.last_offset, m.timestamp
        return None

    def next_batch_entry(self, h: BatchHeader) -> _Entry | None:
        """The producer's entry if a client's batch `h` is one `_Validator` takes without a
        word and no duplicate: its producer's next sequence at the same epoch, or the first
        (sequence 0) of a newer epoch (after InitProducerId; under transactions v2 also a
        transaction's first batch where the one before, which bumped it, wrote no marker);
        with a transaction open, only its next transactional batch at its epoch. (A kept batch
        starting at the next sequence would have to span nearly 2^31 sequences, and a new
        epoch keeps none.) The batches `append_next_batch` records; None for any other."""
        e = self._producers.get(h.producer_id)
        if e is None:
            return None
        if self._verifying:  # KIP-890: not past a lower sequence still being verified
            verifying = self._verifying.get(h.producer_id)
            if verifying is not None and h.base_sequence > verifying.lowest_sequence:
                return None  # (_Validator refuses it; its other check needs no state here)
        epoch = h.producer_epoch
        if epoch == e.epoch:
            if (not _in_sequence(e.last_seq, h.base_sequence) or (
                    e.txn_first_offset is not None and not h.attributes & ATTR_TRANSACTIONAL)):
                return None
        elif epoch < e.epoch or h.base_sequence != 0 or e.txn_first_offset is not None:
            return None
        return e

    def append_next_batch(self, e: _Entry | None, h: BatchHeader) -> None:
        """Record a client's or coordinator's batch written without a plan (the log's one-batch
        appends), `h` stamped with its offset: what `apply` does with `_Validator`'s plan for
        it; `e` from `next_batch_entry`, None for a batch without a producer id. Nothing may
        change the state between."""
        self._generation += 1
        first, delta = h.base_offset, h.last_offset_delta
        last = first + delta
        if e is not None:
            timestamp = h.max_timestamp
            if h.producer_epoch != e.epoch:
                e.set_epoch(h.producer_epoch)
            e.batches.append(_BatchMetadata(h.last_sequence, last, delta, timestamp))
            e.last_timestamp = timestamp
            if h.attributes & ATTR_TRANSACTIONAL:
                if e.txn_first_offset is None:
                    e.txn_first_offset = first  # the transaction starts here: the LSO holds
                    self._ongoing[first] = e.producer_id
                if self._verifying:
                    self.verifications.end(e.producer_id, None)
        if self._lso_of_completed:
            self._lso_of_completed = {}
        if last >= self._map_end_offset:
            self._map_end_offset = last + 1

    def prepare_append(self, batches: list[BatchInfo], origin: str,
                       transaction_version: int = 0) -> AppendPlan:
        if origin not in _ORIGINS:
            raise ValueError(f"unknown append origin {origin!r}")
        if len(batches) == 1:
            b = batches[0]
            plan = (self._prepare_marker(b, origin, transaction_version) if b.is_control
                    else self._prepare_next_batch(b, origin))
            if plan is not None:
                return plan
        v = _Validator(self._producers, cast(Origin, origin), transaction_version,
                       self._verifying)
        end_offset: int | None = None
        for b in batches:
            end_offset = max(end_offset or 0, b.last_offset + 1)
            if b.producer_id != NO_PRODUCER_ID:
                v.add(b)
        return AppendPlan(v.entries, v.started, v.completed, end_offset, self._generation,
                          verifications_ended=v.verifications_ended)

    def _prepare_next_batch(self, b: BatchInfo, origin: str) -> AppendPlan | None:
        """The plan for one batch that is not idempotent, or that follows on from its known
        producer's last one outside a transaction (nearly every append), without copying the
        producer's entry as `_Validator` does; None for any other batch. It accepts only what
        `_Validator` would accept with the same outcome, and leaves the rest to it."""
        end_offset = b.last_offset + 1
        pid = b.producer_id
        if pid == NO_PRODUCER_ID:
            return AppendPlan({}, [], [], end_offset, self._generation)
        if b.is_control or b.is_transactional:
            return None
        e = self._producers.get(pid)
        if (e is None or e.epoch != b.producer_epoch or e.txn_first_offset is not None
                or (origin == "client" and not _in_sequence(e.last_seq, b.base_sequence))
                or pid in self._verifying):
            return None
        batch = _BatchMetadata(b.last_sequence, b.last_offset, b.last_offset - b.first_offset,
                               b.max_timestamp)
        return AppendPlan({}, [], [], end_offset, self._generation, (e, batch))

    def _prepare_marker(self, b: BatchInfo, origin: str, transaction_version: int
                        ) -> AppendPlan | None:
        """The plan for a COMMIT/ABORT marker that `marker_entry` takes, without copying the
        entry (a follower's one-batch append, or a coordinator's the log does not write without
        a plan). None for any other control batch."""
        e = self._producers.get(b.producer_id)
        if (origin == "client" or e is None or b.control_commit is None
                or not _takes_marker(e, b.producer_epoch, b.coordinator_epoch,
                                     transaction_version)):
            return None
        completed = [] if e.txn_first_offset is None else [
            CompletedTxn(b.producer_id, e.txn_first_offset, b.first_offset, not b.control_commit)]
        return AppendPlan({}, [], completed, b.last_offset + 1, self._generation, marker=(e, b))

    def marker_entry(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     transaction_version: int) -> _Entry | None:
        """The entry of a known producer whose COMMIT/ABORT marker `_Validator` would take
        without a word (its epoch, coordinator epoch and, for transactions v2, the open
        transaction's epoch all in order): a transaction appends one to every partition it
        wrote. The markers `append_marker` records; None for any other."""
        e = self._producers.get(producer_id)
        if e is None or not _takes_marker(e, epoch, coordinator_epoch, transaction_version):
            return None
        return e

    def append_marker(self, e: _Entry, h: BatchHeader, commit: bool, coordinator_epoch: int
                      ) -> CompletedTxn | None:
        """Record a COMMIT (`commit`) or ABORT marker written without a plan, `h` stamped with
        its offset, `e` from `marker_entry` (nothing may change the state between): what
        `apply` does with `_prepare_marker`'s plan. The transaction it completes, if one was
        open; its LSO for the transaction index is then `last_stable_offset`'s."""
        self._generation += 1
        if self._verifying:
            self.verifications.end(e.producer_id, h.producer_epoch)
        first, offset = e.txn_first_offset, h.base_offset
        if h.producer_epoch != e.epoch:
            e.set_epoch(h.producer_epoch)
        e.coordinator_epoch = coordinator_epoch
        e.txn_first_offset = None
        e.last_timestamp = h.max_timestamp
        txn = None
        if first is not None:  # as apply: its LSO as the append left it, then completed
            txn = CompletedTxn(e.producer_id, first, offset, not commit)
            self._lso_of_completed = {txn: self._compute_lso(txn)}
            self._complete(txn)
        elif self._lso_of_completed:
            self._lso_of_completed = {}
        last = offset + h.last_offset_delta
        if last >= self._map_end_offset:
            self._map_end_offset = last + 1
        return txn

    def apply(self, plan: AppendPlan) -> list[CompletedTxn]:
        if plan.generation != self._generation:
            raise RuntimeError("producer state changed between prepare_append and apply")
        self._generation += 1
        if plan.next_batch is not None:  # the entry is still the stored one: same generation
            e, batch = plan.next_batch
            e.batches.append(batch)
            e.last_timestamp = batch.timestamp
        if plan.marker is not None:  # what _Validator._add_marker does to its copy
            e, marker = plan.marker
            if self._verifying:
                self.verifications.end(marker.producer_id, marker.producer_epoch)
            e.set_epoch(marker.producer_epoch)
            e.coordinator_epoch = marker.coordinator_epoch
            e.txn_first_offset = None
            e.last_timestamp = marker.max_timestamp
        for pid, marker_epoch in plan.verifications_ended:
            self.verifications.end(pid, marker_epoch)
        for pid, entry in plan.entries.items():
            self._producers[pid] = entry
        for first_offset, pid in plan.started_txns:
            self._ongoing[first_offset] = pid
        # Kafka computes each completed txn's LSO after all of the append's updates but before
        # that txn (and the ones after it) complete; remember it for last_stable_offset().
        completed = plan.completed_txns
        if completed or self._lso_of_completed:  # most appends complete none
            self._lso_of_completed = {}
            for txn in completed:
                self._lso_of_completed[txn] = self._compute_lso(txn)
                self._complete(txn)
        if plan.end_offset is not None and plan.end_offset > self._map_end_offset:
            self._map_end_offset = plan.end_offset
        return list(completed)

    def _complete(self, txn: CompletedTxn) -> None:
        if self._ongoing.pop(txn.first_offset, None) is None:
            raise ValueError(f"completed transaction {txn} was never started")
        self._unreplicated[txn.first_offset] = (txn.producer_id, txn.last_offset)

    def _compute_lso(self, txn: CompletedTxn) -> int:
        for first_offset in sorted(self._ongoing):
            if self._ongoing[first_offset] != txn.producer_id:
                return first_offset
        return txn.last_offset + 1

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO to record with `completed` in the transaction index."""
        lso = self._lso_of_completed.get(completed)
        return lso if lso is not None else self._compute_lso(completed)

    def first_unstable_offset(self) -> int | None:
        # Asked for each partition of each fetch (the LSO), almost always of neither kind.
        ongoing, unreplicated = self._ongoing, self._unreplicated
        if not unreplicated:
            return min(ongoing) if ongoing else None
        if not ongoing:
            return min(unreplicated)
        return min(min(ongoing), min(unreplicated))

    def first_undecided_offset(self) -> int | None:
        return min(self._ongoing) if self._ongoing else None

    def on_high_watermark(self, hw: int) -> None:
        self._drop_unreplicated_below(hw)

    def _drop_unreplicated_below(self, offset: int) -> None:
        if not self._unreplicated:  # the usual case, and this runs at every HW advance
            return
        for first, (_, last) in list(self._unreplicated.items()):
            if last < offset:
                del self._unreplicated[first]

    @property
    def map_end_offset(self) -> int:
        return self._map_end_offset

    def update_map_end_offset(self, offset: int) -> None:
        """For appends the manager never saw (e.g. recovery skipping non-idempotent data)."""
        self._map_end_offset = offset

    def active_producers(self) -> list[ProducerEntry]:
        return [e.view() for e in self._producers.values()]

    def txn_open_at(self, producer_id: int, epoch: int) -> bool:
        """Whether the producer has a transaction open here at `epoch` (asked of each partition
        of a transactional Produce, before its verification: no entry view made)."""
        e = self._producers.get(producer_id)
        return e is not None and e.txn_first_offset is not None and e.epoch == epoch

    def last_entry(self, producer_id: int) -> ProducerEntry | None:
        e = self._producers.get(producer_id)
        return e.view() if e is not None else None

    def remove_expired(self, now_ms: int) -> None:
        expired = [pid for pid, e in self._producers.items() if self._is_expired(e, now_ms)]
        for pid in expired:
            del self._producers[pid]
        self.verifications.expire(now_ms, self.producer_id_expiration_ms)
        if expired:
            self._generation += 1  # a plan validated against an expired entry is stale

    def _is_expired(self, e: _Entry, now_ms: int) -> bool:
        # An open transaction pins the producer: its marker must still be validated.
        return (
            e.txn_first_offset is None
            and now_ms - e.last_timestamp >= self.producer_id_expiration_ms
        )

    # -- snapshots -----------------------------------------------------------------------------

    def _snapshot_path(self, offset: int) -> Path:
        return self.partition_dir / _snapshot_name(offset)

    def snapshot_offsets(self) -> list[int]:
        out = []
        try:  # os.scandir, not Path.glob: every start-up lists every partition dir this way
            with os.scandir(self.partition_dir) as it:
                entries = list(it)
        except FileNotFoundError:
            entries = []
        for e in entries:
            if not e.name.endswith(SNAPSHOT_SUFFIX):
                continue
            stem = e.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit() and e.is_file():
                out.append(int(stem))
        return sorted(out)

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def take_snapshot(self, map_end_offset: int, *, sync: bool = True) -> None:
        """Write the state as of `map_end_offset`. With sync=False (segment roll, on the event
        loop) neither the file nor the directory is fsynced: that is left to
        `flush_snapshots`, which the log's flush calls before its recovery point reaches the
        offset, as Kafka's roll leaves it to its background flush. A crash can then only lose
        a snapshot above the recovery point, which recovery ignores (and a torn one fails its
        CRC and is skipped)."""
        if map_end_offset < self._map_end_offset:
            raise ValueError(
                f"snapshot offset {map_end_offset} is below the state's end {self._map_end_offset}"
            )
        # The caller vouches that nothing idempotent lies between our end and its offset.
        self._map_end_offset = map_end_offset
        path = self._snapshot_path(map_end_offset)
        if map_end_offset == self._last_snap_offset and path.exists():
            return
        data = encode_snapshot(sorted(self._producers.values(), key=lambda e: e.producer_id))
        write_atomically(path, data, fsync=sync, dir_errors=True)
        if not sync:
            with self._unsynced_lock:
                self._unsynced_snapshots.append(map_end_offset)
        self._last_snap_offset = map_end_offset

    def flush_snapshots(self, up_to: int) -> None:
        """fsync the snapshots written without it at offsets <= up_to (a thread; a snapshot
        deleted meanwhile is skipped), then the directory for their renames."""
        with self._unsynced_lock:
            due = [o for o in self._unsynced_snapshots if o <= up_to]
            self._unsynced_snapshots = [o for o in self._unsynced_snapshots if o > up_to]
        try:
            synced = False
            for offset in due:
                synced |= fsync_if_exists(self._snapshot_path(offset))
            if synced:
                fsync_if_exists(self.partition_dir)
        except BaseException:
            with self._unsynced_lock:  # all of them again at the next flush
                self._unsynced_snapshots.extend(due)
            raise

    def _delete_snapshot(self, offset: int) -> None:
        self._snapshot_path(offset).unlink(missing_ok=True)

    def delete_snapshots_below(self, offset: int) -> None:
        for o in self.snapshot_offsets():
            if o < offset:
                self._delete_snapshot(o)

    def remove_stray_snapshots(self, segment_base_offsets: list[int]) -> None:
        """Keep snapshots at segment bases, plus the newest stray one if it is above them all
        (the clean-shutdown snapshot at the log end)."""
        bases = set(segment_base_offsets)
        strays = [o for o in self.snapshot_offsets() if o not in bases]
        keep: int | None = None
        if strays and (not bases or strays[-1] >= max(bases)):
            keep = strays[-1]
        for o in strays:
            if o != keep:
                self._delete_snapshot(o)

    # -- loading and truncation ----------------------------------------------------------------

    def _clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._lso_of_completed = {}
        self._generation += 1

    def load(self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None) -> int:
        """Load the newest valid snapshot in range; returns the offset to replay the log from."""
        try:
            with os.scandir(self.partition_dir) as it:
                tmps = [e.path for e in it if e.name.endswith(f"{SNAPSHOT_SUFFIX}.tmp")]
        except FileNotFoundError:
            tmps = []
        for tmp in tmps:
            Path(tmp).unlink(missing_ok=True)
        self._delete_out_of_range(log_start_offset, log_end_offset)
        self._clear()
        self._load_from_snapshot(log_start_offset, now_ms)
        return self._map_end_offset

    def _delete_out_of_range(self, log_start_offset: int, log_end_offset: int) -> None:
        # Like Kafka, a snapshot at the log start is dropped too: producers whose data has all
        # been deleted lose their state (and may then restart with any sequence).
        for o in self.snapshot_offsets():
            if o > log_end_offset or o <= log_start_offset:
                self._delete_snapshot(o)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int | None) -> None:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        for offset in reversed(self.snapshot_offsets()):
            path = self._snapshot_path(offset)
            try:
                entries = decode_snapshot(path.read_bytes())
            except (CorruptSnapshot, OSError) as exc:
                log.warning("deleting unreadable producer snapshot %s: %s", path, exc)
                self._delete_snapshot(offset)
                continue
            for e in entries:
                if not self._is_expired(e, now):
                    self._producers[e.producer_id] = e
            for e in sorted(entries, key=lambda x: x.txn_first_offset or 0):
                if e.txn_first_offset is not None and e.producer_id in self._producers:
                    self._ongoing[e.txn_first_offset] = e.producer_id
            self._map_end_offset = self._last_snap_offset = offset
            return
        self._map_end_offset = self._last_snap_offset = log_start_offset

    def truncate(
        self, log_start_offset: int, log_end_offset: int, now_ms: int | None = None
    ) -> None:
        """Reconcile with the log after truncation or deletion of segments."""
        self._delete_out_of_range(log_start_offset, log_end_offset)
        if log_end_offset != self._map_end_offset:
            # The log end is assumed <= HW, so dropping unreplicated txns is safe.
            self._clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._drop_unreplicated_below(log_start_offset)
        self._map_end_offset = max(self._map_end_offset, log_start_offset)
        latest = self.latest_snapshot_offset()
        self._last_snap_offset = latest if latest is not None else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._clear()
        for o in self.snapshot_offsets():
            self._delete_snapshot(o)
        self._last_snap_offset = 0
        self._map_end_offset = offset
