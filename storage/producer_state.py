"""Per-partition idempotence/transaction state (Kafka's ProducerStateManager).

Validation happens in `prepare_append` (storage/producer_append.py's `AppendValidator`), which
works on copies and mutates nothing, so a rejected append leaves no trace; `apply` commits a
plan once the batches are on disk. The log's one-batch appends skip the plan where the batch is
one the validator would take without a word (`next_batch_entry`, `marker_entry`). Snapshots
are storage/producer_snapshot.py's.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import cast

from samsa.protocol.records import ATTR_TRANSACTIONAL, BatchHeader
from samsa.storage.checkpoint import fsync_if_exists, write_atomically
from samsa.storage.producer_append import (
    ORIGINS,
    AppendPlan,
    AppendValidator,
    BatchInfo,
    CompletedTxn,
    Origin,
    takes_marker,
)
from samsa.storage.producer_entry import (
    NO_PRODUCER_ID,
    BatchMetadata,
    ProducerEntry,
    ProducerStateEntry,
    in_sequence,
)
from samsa.storage.producer_snapshot import (
    SNAPSHOT_SUFFIX,
    CorruptSnapshot,
    decode_snapshot,
    encode_snapshot,
    snapshot_name,
)
from samsa.storage.verification_state import Verifications

log = logging.getLogger(__name__)


class ProducerStateManager:
    def __init__(self, partition_dir: Path, producer_id_expiration_ms: int = 86_400_000) -> None:
        self.partition_dir = Path(partition_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
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

    def next_batch_entry(self, h: BatchHeader) -> ProducerStateEntry | None:
        """The producer's entry if a client's batch `h` is one `AppendValidator` takes without a
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
                return None  # (AppendValidator refuses it; its other check needs no state here)
        epoch = h.producer_epoch
        if epoch == e.epoch:
            if (not in_sequence(e.last_seq, h.base_sequence) or (
                    e.txn_first_offset is not None and not h.attributes & ATTR_TRANSACTIONAL)):
                return None
        elif epoch < e.epoch or h.base_sequence != 0 or e.txn_first_offset is not None:
            return None
        return e

    def append_next_batch(self, e: ProducerStateEntry | None, h: BatchHeader) -> None:
        """Record a client's or coordinator's batch written without a plan (the log's one-batch
        appends), `h` stamped with its offset: what `apply` does with `AppendValidator`'s plan for
        it; `e` from `next_batch_entry`, None for a batch without a producer id. Nothing may
        change the state between."""
        self._generation += 1
        first, delta = h.base_offset, h.last_offset_delta
        last = first + delta
        if e is not None:
            timestamp = h.max_timestamp
            if h.producer_epoch != e.epoch:
                e.set_epoch(h.producer_epoch)
            e.batches.append(BatchMetadata(h.last_sequence, last, delta, timestamp))
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
        if origin not in ORIGINS:
            raise ValueError(f"unknown append origin {origin!r}")
        if len(batches) == 1:
            b = batches[0]
            plan = (self._prepare_marker(b, origin, transaction_version) if b.is_control
                    else self._prepare_next_batch(b, origin))
            if plan is not None:
                return plan
        v = AppendValidator(self._producers, cast(Origin, origin), transaction_version,
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
        producer's entry as `AppendValidator` does; None for any other batch. It accepts only what
        `AppendValidator` would accept with the same outcome, and leaves the rest to it."""
        end_offset = b.last_offset + 1
        pid = b.producer_id
        if pid == NO_PRODUCER_ID:
            return AppendPlan({}, [], [], end_offset, self._generation)
        if b.is_control or b.is_transactional:
            return None
        e = self._producers.get(pid)
        if (e is None or e.epoch != b.producer_epoch or e.txn_first_offset is not None
                or (origin == "client" and not in_sequence(e.last_seq, b.base_sequence))
                or pid in self._verifying):
            return None
        batch = BatchMetadata(b.last_sequence, b.last_offset, b.last_offset - b.first_offset,
                               b.max_timestamp)
        return AppendPlan({}, [], [], end_offset, self._generation, (e, batch))

    def _prepare_marker(self, b: BatchInfo, origin: str, transaction_version: int
                        ) -> AppendPlan | None:
        """The plan for a COMMIT/ABORT marker that `marker_entry` takes, without copying the
        entry (a follower's one-batch append, or a coordinator's the log does not write without
        a plan). None for any other control batch."""
        e = self._producers.get(b.producer_id)
        if (origin == "client" or e is None or b.control_commit is None
                or not takes_marker(e, b.producer_epoch, b.coordinator_epoch,
                                     transaction_version)):
            return None
        completed = [] if e.txn_first_offset is None else [
            CompletedTxn(b.producer_id, e.txn_first_offset, b.first_offset, not b.control_commit)]
        return AppendPlan({}, [], completed, b.last_offset + 1, self._generation, marker=(e, b))

    def marker_entry(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     transaction_version: int) -> ProducerStateEntry | None:
        """The entry of a known producer whose COMMIT/ABORT marker `AppendValidator` would take
        without a word (its epoch, coordinator epoch and, for transactions v2, the open
        transaction's epoch all in order): a transaction appends one to every partition it
        wrote. The markers `append_marker` records; None for any other."""
        e = self._producers.get(producer_id)
        if e is None or not takes_marker(e, epoch, coordinator_epoch, transaction_version):
            return None
        return e

    def append_marker(self, e: ProducerStateEntry, h: BatchHeader, commit: bool,
                      coordinator_epoch: int) -> CompletedTxn | None:
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
        if plan.marker is not None:  # what AppendValidator._add_marker does to its copy
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

    def _is_expired(self, e: ProducerStateEntry, now_ms: int) -> bool:
        # An open transaction pins the producer: its marker must still be validated.
        return (
            e.txn_first_offset is None
            and now_ms - e.last_timestamp >= self.producer_id_expiration_ms
        )

    # -- snapshots -----------------------------------------------------------------------------

    def _snapshot_path(self, offset: int) -> Path:
        return self.partition_dir / snapshot_name(offset)

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
