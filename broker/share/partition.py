"""The state of one share-partition (KIP-932): which of a partition's records a share group
has delivered, to whom, and what became of them. The partition's leader keeps one per
(share group, partition) it serves.

Records from the share-partition start offset (SPSO) up to the end offset are in flight; each
is AVAILABLE (may be delivered), ACQUIRED (delivered to one member, under an acquisition lock
that expires after `group.share.record.lock.duration.ms`), ACKNOWLEDGED (accepted) or ARCHIVED
(rejected, past the delivery-count limit, aborted, or no record at that offset). Every
acquisition counts a delivery; a record released, or whose lock expired, with
`group.share.delivery.count.limit` deliveries behind it is archived instead of made available
again. The start offset moves past the leading ACKNOWLEDGED/ARCHIVED records.

Pure: the caller gives the time and the offsets its log read found; nothing here does I/O.
`state_batches` / `from_state_batches` are what a persister writes and reads back (as Kafka's
WriteShareGroupState/ReadShareGroupState state batches: an acquired record is stored as
available with its delivery count, so a crashed leader's successor redelivers it).
"""

from __future__ import annotations

import enum
from collections.abc import Container, Iterable
from dataclasses import dataclass

from samsa.protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState (its ids are the DeliveryState of a persisted state batch)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareAcknowledge/ShareFetch AcknowledgeTypes (0 marks a gap: no record there; 4, v2+,
    renews the acquisition lock, KIP-1222)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class InFlight:
    state: RecordState
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


class SharePartitionState:
    def __init__(self, start_offset: int, *, lock_ms: int = 30_000, delivery_limit: int = 5,
                 max_in_flight: int = 2000) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset  # the first offset never acquired
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self.records: dict[int, InFlight] = {}
        # events since this state was created or read back (metrics): records released
        # because their acquisition lock expired, and records archived at the limit
        self.lock_timeouts = 0
        self.archived_at_limit = 0

    # ------------------------------------------------------------------ delivery
    def fetch_offset(self) -> int:
        """Where the next log read starts: the first available in-flight record, else the
        end offset."""
        available = [o for o, r in self.records.items() if r.state == RecordState.AVAILABLE]
        return min(available) if available else self.end_offset

    def acquire(self, member_id: str, offsets: Iterable[int], max_records: int,
                now_ms: int, aborted: Container[int] = ()) -> list[tuple[int, int]]:
        """Acquire for `member_id` up to `max_records` of `offsets` (ascending: the offsets of
        the records a log read from `fetch_offset()` found). Returns (offset, delivery count)
        of each acquired record. Offsets past the end offset that the read skipped (no record
        there) and new `aborted` ones (records of aborted transactions, under
        read_committed) are archived, never delivered."""
        out: list[tuple[int, int]] = []
        for offset in offsets:
            if len(out) >= max_records:
                break
            if offset < self.start_offset:
                continue
            record = self.records.get(offset)
            if record is None:
                if offset < self.end_offset:
                    continue  # behind the end and not in flight: already settled
                if len(self.records) >= self.max_in_flight:
                    break
                for gap in range(self.end_offset, offset):
                    self.records[gap] = InFlight(RecordState.ARCHIVED)
                self.end_offset = offset + 1
                if offset in aborted:
                    self.records[offset] = InFlight(RecordState.ARCHIVED)
                    continue
                record = self.records[offset] = InFlight(RecordState.AVAILABLE)
            elif record.state != RecordState.AVAILABLE:
                continue
            record.state = RecordState.ACQUIRED
            record.delivery_count += 1
            record.member_id = member_id
            record.lock_deadline_ms = now_ms + self.lock_ms
            out.append((offset, record.delivery_count))
        self._advance()
        return out

    # ------------------------------------------------------------------ acknowledgement
    def acknowledge(self, member_id: str, first_offset: int, last_offset: int,
                    ack_type: AcknowledgeType, now_ms: int = 0) -> ErrorCode:
        """Acknowledge `first_offset..last_offset` for `member_id`: every record must be
        acquired by it (a GAP acknowledgement may also name offsets with no record), else
        INVALID_RECORD_STATE and nothing changes. RENEW keeps the records acquired, locked
        for another lock duration from `now_ms`."""
        if first_offset > last_offset:
            return ErrorCode.invalid_request
        span = range(first_offset, last_offset + 1)
        for offset in span:
            record = self.records.get(offset)
            if ack_type == AcknowledgeType.GAP and (
                    record is None or record.state == RecordState.ARCHIVED):
                continue
            if record is None or record.state != RecordState.ACQUIRED or \
                    record.member_id != member_id:
                return ErrorCode.invalid_record_state
        for offset in span:
            record = self.records.get(offset)
            if record is None or record.state != RecordState.ACQUIRED:
                continue
            if ack_type == AcknowledgeType.RENEW:
                record.lock_deadline_ms = now_ms + self.lock_ms
            elif ack_type == AcknowledgeType.ACCEPT:
                self._settle(record, RecordState.ACKNOWLEDGED)
            elif ack_type == AcknowledgeType.RELEASE:
                self._release(record)
            else:  # REJECT, or GAP on an acquired offset
                self._settle(record, RecordState.ARCHIVED)
        self._advance()
        return ErrorCode.none

    def release_member(self, member_id: str) -> int:
        """Release every record `member_id` holds (it left the group or closed its share
        session); returns how many."""
        held = [r for r in self.records.values()
                if r.state == RecordState.ACQUIRED and r.member_id == member_id]
        for record in held:
            self._release(record)
        self._advance()
        return len(held)

    def expire_locks(self, now_ms: int) -> int | None:
        """Release the records whose acquisition lock expired; returns the next deadline."""
        deadline: int | None = None
        for record in self.records.values():
            if record.state != RecordState.ACQUIRED:
                continue
            if record.lock_deadline_ms <= now_ms:
                self.lock_timeouts += 1
                self._release(record)
            elif deadline is None or record.lock_deadline_ms < deadline:
                deadline = record.lock_deadline_ms
        self._advance()
        return deadline

    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state == RecordState.ACQUIRED)

    def delivery_complete_count(self) -> int:
        """How many in-flight records (from the start offset on) are delivered for good,
        acknowledged or archived (Kafka's SharePartition deliveryCompleteCount, KIP-1226):
        the high watermark less the start offset less this is the share-partition's lag."""
        return sum(1 for r in self.records.values()
                   if r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))

    def batch_count(self) -> int:
        """The in-flight records as batches: runs of consecutive offsets in one state, with
        one delivery count (and, acquired, one holder)."""
        count, last, key = 0, -2, None
        for offset in sorted(self.records):
            r = self.records[offset]
            k = (r.state, r.delivery_count, r.member_id)
            if offset != last + 1 or k != key:
                count += 1
            last, key = offset, k
        return count

    def move_start(self, offset: int) -> None:
        """The log starts at `offset` now (retention, DeleteRecords): forget what is before."""
        if offset <= self.start_offset:
            return
        for o in [o for o in self.records if o < offset]:
            del self.records[o]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)
        self._advance()

    def _release(self, record: InFlight) -> None:
        if record.delivery_count >= self.delivery_limit:
            self.archived_at_limit += 1
            self._settle(record, RecordState.ARCHIVED)
        else:
            self._settle(record, RecordState.AVAILABLE)

    @staticmethod
    def _settle(record: InFlight, state: RecordState) -> None:
        record.state = state
        record.member_id = None
        record.lock_deadline_ms = 0

    def _advance(self) -> None:
        while self.start_offset < self.end_offset:
            record = self.records.get(self.start_offset)
            if record is None or record.state not in (RecordState.ACKNOWLEDGED,
                                                      RecordState.ARCHIVED):
                break
            del self.records[self.start_offset]
            self.start_offset += 1

    # ------------------------------------------------------------------ persistence
    def state_batches(self) -> list[StateBatch]:
        """The in-flight records as state batches (runs of one state and delivery count);
        an acquired record is stored as available."""
        out: list[StateBatch] = []
        for offset in sorted(self.records):
            record = self.records[offset]
            state = (RecordState.AVAILABLE if record.state == RecordState.ACQUIRED
                     else record.state)
            last = out[-1] if out else None
            if last is not None and last.last_offset == offset - 1 and \
                    last.state == state and last.delivery_count == record.delivery_count:
                out[-1] = StateBatch(last.first_offset, offset, state, record.delivery_count)
            else:
                out.append(StateBatch(offset, offset, state, record.delivery_count))
        return out

    @classmethod
    def from_state_batches(cls, start_offset: int, batches: Iterable[StateBatch], *,
                           lock_ms: int = 30_000, delivery_limit: int = 5,
                           max_in_flight: int = 2000) -> SharePartitionState:
        """A share-partition read back from its persisted start offset and state batches."""
        sp = cls(start_offset, lock_ms=lock_ms, delivery_limit=delivery_limit,
                 max_in_flight=max_in_flight)
        for b in batches:
            for offset in range(max(b.first_offset, start_offset), b.last_offset + 1):
                state = (RecordState.AVAILABLE if b.state == RecordState.ACQUIRED else b.state)
                sp.records[offset] = InFlight(state, b.delivery_count)
                sp.end_offset = max(sp.end_offset, offset + 1)
        for offset in range(start_offset, sp.end_offset):  # unlisted offsets: available
            sp.records.setdefault(offset, InFlight(RecordState.AVAILABLE))
        sp._advance()
        return sp
