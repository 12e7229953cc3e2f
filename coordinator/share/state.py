"""A share-partition's persisted state as the share coordinator keeps it (Kafka's
ShareGroupOffset), and the combination of state batches (its PersisterStateBatchCombiner):
batches written later override the offsets they name in earlier ones, offsets before the
start offset are dropped, and adjacent batches of one state and delivery count are joined."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .records import ShareSnapshot, ShareUpdate, StateBatch


def _normalized(batches: Iterable[StateBatch]) -> list[StateBatch]:
    """Non-overlapping and sorted, a later batch winning where batches overlap."""
    out: list[StateBatch] = []
    for b in batches:
        if b.first_offset > b.last_offset:
            continue
        if not out or out[-1].last_offset < b.first_offset:
            out.append(b)
        else:
            out = _overlay(out, [b])
    return out


def _overlay(base: Sequence[StateBatch], new: Sequence[StateBatch]) -> list[StateBatch]:
    """`base` and `new` sorted and non-overlapping each: `new` over `base`."""
    out: list[StateBatch] = []
    j = 0
    for b in base:
        first = b.first_offset
        while j < len(new) and new[j].last_offset < first:
            j += 1
        k = j
        while first <= b.last_offset:
            if k >= len(new) or new[k].first_offset > b.last_offset:
                out.append(StateBatch(first, b.last_offset, b.delivery_state, b.delivery_count))
                break
            n = new[k]
            if n.first_offset > first:
                out.append(StateBatch(first, n.first_offset - 1, b.delivery_state,
                                      b.delivery_count))
            first = max(first, n.last_offset + 1)
            k += 1
    out.extend(new)
    out.sort(key=lambda x: x.first_offset)
    return out


def combine(base: Iterable[StateBatch], new: Iterable[StateBatch],
            start_offset: int) -> tuple[StateBatch, ...]:
    """`new` over `base`, from `start_offset` on, adjacent equal batches joined."""
    merged = _overlay(_normalized(base), _normalized(new))
    out: list[StateBatch] = []
    for b in merged:
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = StateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count)
        last = out[-1] if out else None
        if (last is not None and last.last_offset + 1 == b.first_offset
                and last.delivery_state == b.delivery_state
                and last.delivery_count == b.delivery_count):
            out[-1] = StateBatch(last.first_offset, b.last_offset, b.delivery_state,
                                 b.delivery_count)
        else:
            out.append(b)
    return tuple(out)


@dataclass(slots=True)
class ShareState(ShareSnapshot):
    """What the share coordinator knows of one share-partition (group, topic id, partition):
    the last snapshot with the updates since applied."""

    updates: int = 0  # update records since the snapshot

    @classmethod
    def from_snapshot(cls, v: ShareSnapshot) -> ShareState:
        return cls(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                   v.create_timestamp, v.write_timestamp,
                   combine((), v.batches, v.start_offset), v.delivery_complete_count)

    def apply_snapshot(self, v: ShareSnapshot) -> None:
        leader_epoch = max(self.leader_epoch, v.leader_epoch)
        state_epoch = max(self.state_epoch, v.state_epoch)
        fresh = ShareState.from_snapshot(v)
        self.snapshot_epoch, self.start_offset = fresh.snapshot_epoch, fresh.start_offset
        self.create_timestamp = fresh.create_timestamp
        self.write_timestamp = fresh.write_timestamp
        self.batches = fresh.batches
        self.delivery_complete_count = fresh.delivery_complete_count
        self.leader_epoch, self.state_epoch = leader_epoch, state_epoch
        self.updates = 0

    def apply_update(self, v: ShareUpdate) -> None:
        if v.start_offset != -1:
            self.start_offset = v.start_offset
        if v.leader_epoch != -1:
            self.leader_epoch = max(self.leader_epoch, v.leader_epoch)
        self.batches = combine(self.batches, v.batches, self.start_offset)
        # as Kafka's merge: an update's count is the count (the writer settled it, see
        # ShareStateCoordinator.write)
        self.delivery_complete_count = v.delivery_complete_count
        self.updates += 1

    def snapshot(self, now_ms: int) -> ShareSnapshot:
        """This state as a new snapshot (the next snapshot epoch)."""
        return ShareSnapshot(self.snapshot_epoch + 1, self.state_epoch, self.leader_epoch,
                             self.start_offset, now_ms, now_ms, self.batches,
                             self.delivery_complete_count)
