"""The share coordinator (Kafka's ShareCoordinatorService/Shard): the durable state of share-
partitions, kept in the compacted internal topic `__share_group_state`.

A share-partition (group id, topic id, partition) belongs to partition
`abs(javaHash("groupId:topicId:partition")) % share.coordinator.state.topic.num.partitions` of the
state topic (the topic id in Kafka's base64 form); the leader of that partition is the
share-partition's coordinator (FindCoordinator key type 2 names it). Its state is the last
ShareSnapshot record with the ShareUpdate records after it: a write becomes an update record (the
state batches it carries override the offsets they name) and every
`share.coordinator.snapshot.update.records.per.snapshot` updates a snapshot of the whole state
is written instead; a delete writes a tombstone.

The persister semantics of Kafka's Initialize/Read/Write/DeleteShareGroupState (and
ReadShareGroupStateSummary): a read or write of a share-partition never initialized is
INVALID_REQUEST; a read with a newer leader epoch records that epoch (writing it) before it
answers, so writes of the share-partition's earlier leaders are fenced (FENCED_LEADER_EPOCH)
from then on; a write or initialize with an older state epoch is FENCED_STATE_EPOCH.
Every change is appended with acks=all and applied (and answered) only once the state
partition's ISR has it; the state of a partition is loaded by replaying it when this broker
becomes its leader (requests meanwhile answer COORDINATOR_LOAD_IN_PROGRESS).

As in Kafka the topic is not compacted (a compaction would keep only the last update record of a
share-partition) but pruned: every `share.coordinator.state.topic.prune.interval.ms` the records
before the oldest latest snapshot of the partition's share-partitions are deleted, and a
share-partition whose last snapshot is older than
`share.coordinator.cold.partition.snapshot.interval.ms` is snapshotted again first so that it
does not hold the log back (Kafka's ShareCoordinatorOffsetsManager and cold snapshots).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace

from samsa.coordinator.internal_log import InternalTopic, ReplayedRecord, partition_for
from samsa.coordinator.ports import TopicsView
from samsa.coordinator.runtime import Loaded, Loads, Tasks, WriteFailed, write
from samsa.coordinator.runtime import replay as replay_records
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.uuids import kafka_uuid_string, parse_kafka_uuid

from .records import (
    SNAPSHOT,
    UNKNOWN_DELIVERY_COMPLETE_COUNT,
    UPDATE,
    CorruptShareRecord,
    ShareSnapshot,
    ShareUpdate,
    StateBatch,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
)
from .state import ShareState, combine

log = logging.getLogger(__name__)

Key = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)
# a state partition as read: its share-partitions, their latest snapshots' offsets, its end
Replayed = tuple[dict[Key, ShareState], dict[Key, int], int]



UNINITIALIZED_START_OFFSET = -1


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey(): the FindCoordinator key (type 2)."""
    return f"{group_id}:{kafka_uuid_string(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> Key | None:
    """(group id, topic id, partition) of a "groupId:topicId:partition" key; None if it is
    not one."""
    parts = key.rsplit(":", 2)
    if len(parts) != 3 or not parts[0].strip():
        return None
    try:
        return parts[0], parse_kafka_uuid(parts[1]), int(parts[2])
    except ValueError:
        return None


class ShareStateError(KafkaError):
    """A persister request answered with `error_code` (and `message`)."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or error_code.name, error_code)
        self.message = message


@dataclass(frozen=True, slots=True)
class StateRead:
    """ReadShareGroupState's answer (`batches`), and ReadShareGroupStateSummary's (its
    `leader_epoch`, no batches)."""

    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    leader_epoch: int = -1
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT


def _now() -> int:
    return int(time.time() * 1000)


class ShareStateCoordinator:
    def __init__(self, topic: InternalTopic, topics: TopicsView, *,
                 updates_per_snapshot: int = 500, write_timeout_ms: int = 5000,
                 prune_interval_ms: int = 300_000,
                 cold_snapshot_interval_ms: int = 300_000) -> None:
        self.topic = topic
        self.topics = topics
        self.updates_per_snapshot = updates_per_snapshot
        self.write_timeout_s = write_timeout_ms / 1000
        self.prune_interval_s = prune_interval_ms / 1000
        self.cold_snapshot_interval_ms = cold_snapshot_interval_ms
        self.states: dict[Key, ShareState] = {}
        # per state partition: the offset of each share-partition's latest snapshot, and the
        # offset after the last record replayed or written
        self.snapshot_offsets: dict[int, dict[Key, int]] = {}
        self.end_offsets: dict[int, int] = {}
        self.loaded: dict[int, int] = {}  # state partition -> leader epoch it was loaded at
        self._locks: dict[Key, asyncio.Lock] = {}
        self._tasks = Tasks("share coordinator")
        self._stopping = False
        self.loading = Loads(topic, self._tasks, self._replay, self._install,
                             stopping=lambda: self._stopping, serving="share-partitions")

    # ================================================================ routing, lifecycle
    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(coordinator_key(group_id, topic_id, partition),
                             self.topic.num_partitions)

    async def ensure_topic(self) -> None:
        """Create `__share_group_state` on first use (FindCoordinator, the persister)."""
        await self.topic.ensure_created()

    async def start(self) -> None:
        if self.topic.exists():
            for p in self.topic.partitions():
                if self.topic.is_led_here(p):
                    self.loading.start(p)
        self._tasks.every(self.prune_interval_s, self.maintain, f"pruning {self.topic.name}")

    async def stop(self) -> None:
        self._stopping = True
        await self._tasks.cancel_all()

    def on_leadership(self, p: int, is_leader: bool) -> None:
        """This broker became (or stopped being) the leader of state partition p."""
        self.loading.cancel(p)
        self.loaded.pop(p, None)
        self.snapshot_offsets.pop(p, None)
        self.end_offsets.pop(p, None)
        gone = [k for k in self.states if self.partition_for(*k) == p]
        for k in gone:
            del self.states[k]
        if gone:
            log.info("%s-%d moved: unloaded %d share-partitions", self.topic.name, p, len(gone))
        if is_leader:
            self.loading.start(p)

    def _install(self, p: int, loaded: Loaded[Replayed]) -> None:
        """State partition p is read: its share-partitions are served."""
        found, snapshots, end = loaded.state
        for k in [k for k in self.states if self.partition_for(*k) == p]:
            del self.states[k]
        self.states.update(found)
        self.snapshot_offsets[p] = snapshots
        self.end_offsets[p] = end
        self.loaded[p] = loaded.epoch
        log.info("loaded %d share-partitions from %s-%d in %.0f ms", len(found),
                 self.topic.name, p, loaded.took_ms())

    async def _replay(self, p: int) -> Replayed:
        found: dict[Key, ShareState] = {}
        snapshots: dict[Key, int] = {}
        end = 0
        async for entry in replay_records(self.topic, p):
            end = max(end, entry.offset + 1)
            if not isinstance(entry, ReplayedRecord) or entry.key is None:
                continue
            try:
                replay(found, entry.key, entry.value, snapshots, entry.offset)
            except (CorruptShareRecord, ValueError) as exc:
                log.warning("skipping unreadable record at %s-%d offset %d: %s",
                            self.topic.name, p, entry.offset, exc)
        return found, snapshots, end

    def _check(self, key: Key) -> int:
        """The state partition's leader epoch if this broker serves `key` now; raises
        ShareStateError otherwise."""
        group_id, topic_id, partition = key
        if not group_id or partition < 0:
            raise ShareStateError(ErrorCode.invalid_request, "Invalid share-partition key.")
        if not self.topic.exists():
            raise ShareStateError(ErrorCode.coordinator_not_available)
        p = self.partition_for(*key)
        if p in self.loading:
            raise ShareStateError(ErrorCode.coordinator_load_in_progress)
        try:
            epoch = self.topic.leader_epoch(p)
        except KafkaError as exc:
            code = (ErrorCode.coordinator_not_available
                    if exc.error_code == ErrorCode.unknown_topic_or_partition
                    else ErrorCode.not_coordinator)
            raise ShareStateError(code) from None
        if self.loaded.get(p) != epoch:
            self.loading.start(p)
            raise ShareStateError(ErrorCode.coordinator_load_in_progress)
        return epoch

    def _initialized(self, key: Key, operation: str) -> tuple[int, ShareState]:
        """`_check`'s epoch and the share-partition's state; INVALID_REQUEST for a
        share-partition never initialized."""
        epoch = self._check(key)
        current = self.states.get(key)
        if current is None:
            raise ShareStateError(ErrorCode.invalid_request, f"{operation} operation on "
                                  "uninitialized share partition not allowed.")
        return epoch, current

    def _check_topic(self, topic_id: uuid.UUID, partition: int) -> None:
        name = self.topics.topic_name(topic_id)
        info = self.topics.topic_info(name) if name is not None else None
        if info is None or info[1] <= partition:
            raise ShareStateError(ErrorCode.unknown_topic_or_partition,
                                  "Topic or partition not found.")

    async def _append(self, key: Key, epoch: int, record_type: int,
                      value: bytes | None) -> None:
        group_id, topic_id, partition = key
        p = self.partition_for(*key)
        raw_key = encode_key(record_type, group_id, topic_id, partition)
        try:
            offset = await write(self.topic, p, [(raw_key, value)], leader_epoch=epoch,
                                 timeout_s=self.write_timeout_s,
                                 what=f"the share state of {key}")
        except WriteFailed as exc:
            raise ShareStateError(exc.error_code) from None
        if self.loaded.get(p) != epoch:
            raise ShareStateError(ErrorCode.not_coordinator)
        replay(self.states, raw_key, value, self.snapshot_offsets.setdefault(p, {}), offset)
        self.end_offsets[p] = max(self.end_offsets.get(p, 0), offset + 1)

    def _lock(self, key: Key) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            if len(self._locks) > 100_000:
                self._locks = {k: v for k, v in self._locks.items() if v.locked()}
            lock = self._locks[key] = asyncio.Lock()
        return lock

    # ================================================================ pruning
    async def maintain(self) -> None:
        """Snapshot the cold share-partitions, then delete what no state needs any more."""
        for p, epoch in list(self.loaded.items()):
            await self._snapshot_cold(p, epoch)
            if self.loaded.get(p) != epoch:
                continue
            redundant = self.redundant_offset(p)
            try:
                replica = self.topic.replica(p)
                if replica is None or redundant <= replica.log_start_offset:
                    continue
                start = self.topic.prune(p, redundant)
            except KafkaError as exc:
                log.info("pruning %s-%d skipped: %r", self.topic.name, p, exc)
                continue
            log.info("pruned %s-%d: its log starts at offset %d", self.topic.name, p, start)

    def redundant_offset(self, p: int) -> int:
        """The offset before which partition p holds nothing a share-partition's state needs
        (Kafka's lastRedundantOffset): its oldest latest snapshot, else its end."""
        snapshots = self.snapshot_offsets.get(p)
        if snapshots:
            return min(snapshots.values())
        return self.end_offsets.get(p, 0)

    async def _snapshot_cold(self, p: int, epoch: int) -> None:
        now = _now()
        keys = [k for k in self.states if self.partition_for(*k) == p]
        if all(self.states[k].create_timestamp != self.states[k].write_timestamp for k in keys):
            return  # all snapshotted cold already: nothing is being written
        for key in keys:
            async with self._lock(key):
                current = self.states.get(key)
                if current is None or self.loaded.get(p) != epoch or \
                        now - current.write_timestamp < self.cold_snapshot_interval_ms:
                    continue
                snapshot = current.snapshot(now)
                cold = replace(snapshot, create_timestamp=current.create_timestamp)
                try:
                    await self._append(key, epoch, SNAPSHOT, encode_snapshot(cold))
                except ShareStateError as exc:
                    log.info("snapshotting share-partition %s failed: %r", key, exc)
                    return

    # ================================================================ the persister APIs
    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> None:
        """InitializeShareGroupState: a fresh snapshot (no state batches)."""
        async with self._lock(key):
            epoch = self._check(key)
            current = self.states.get(key)
            if state_epoch != -1 and current is not None and current.state_epoch > state_epoch:
                raise ShareStateError(ErrorCode.fenced_state_epoch)
            self._check_topic(key[1], key[2])
            now = _now()
            # Kafka: no count (no lag) until the share-partition has a start offset
            count = UNKNOWN_DELIVERY_COMPLETE_COUNT if start_offset == -1 else 0
            snapshot = ShareSnapshot(current.snapshot_epoch + 1 if current else 0, state_epoch,
                                     -1, start_offset, now, now, (), count)
            await self._append(key, epoch, SNAPSHOT, encode_snapshot(snapshot))

    async def read(self, key: Key, leader_epoch: int) -> StateRead:
        """ReadShareGroupState; a newer `leader_epoch` is recorded before the answer."""
        async with self._lock(key):
            epoch, current = self._initialized(key, "Read")
            if current.leader_epoch > leader_epoch:
                raise ShareStateError(ErrorCode.fenced_leader_epoch)
            self._check_topic(key[1], key[2])
            result = StateRead(current.state_epoch, current.start_offset, current.batches)
            if leader_epoch != -1 and leader_epoch != current.leader_epoch:
                log.info("share-partition %s read by leader epoch %d", key, leader_epoch)
                await self._write_record(key, epoch, current, leader_epoch,
                                         current.start_offset, (),
                                         current.delivery_complete_count)
            return result

    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Iterable[StateBatch],
                    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT) -> None:
        """WriteShareGroupState (v1 carries the delivery-complete count, KIP-1226)."""
        async with self._lock(key):
            epoch, current = self._initialized(key, "Write")
            if leader_epoch != -1 and current.leader_epoch > leader_epoch:
                raise ShareStateError(ErrorCode.fenced_leader_epoch)
            if state_epoch != -1 and current.state_epoch > state_epoch:
                raise ShareStateError(ErrorCode.fenced_state_epoch)
            self._check_topic(key[1], key[2])
            await self._write_record(key, epoch, current, current.leader_epoch, start_offset,
                                     tuple(batches), delivery_complete_count)

    async def _write_record(self, key: Key, epoch: int, current: ShareState, leader_epoch: int,
                            start_offset: int, batches: tuple[StateBatch, ...],
                            delivery_complete_count: int) -> None:
        count = _settled_count(current, start_offset, delivery_complete_count)
        if current.updates >= self.updates_per_snapshot:
            start = current.start_offset if start_offset == -1 else start_offset
            now = _now()
            snapshot = ShareSnapshot(current.snapshot_epoch + 1, current.state_epoch,
                                     leader_epoch, start, now, now,
                                     combine(current.batches, batches, start), count)
            await self._append(key, epoch, SNAPSHOT, encode_snapshot(snapshot))
        else:
            update = ShareUpdate(current.snapshot_epoch, leader_epoch, start_offset,
                                 combine((), batches, start_offset), count)
            await self._append(key, epoch, UPDATE, encode_update(update))

    async def delete(self, key: Key) -> None:
        """DeleteShareGroupState: a tombstone (nothing to do for a share-partition never
        initialized)."""
        async with self._lock(key):
            epoch = self._check(key)
            self._check_topic(key[1], key[2])
            if key in self.states:
                await self._append(key, epoch, SNAPSHOT, None)

    def summary(self, key: Key) -> StateRead:
        """ReadShareGroupStateSummary: start offset -1 for a share-partition never
        initialized."""
        self._check(key)
        self._check_topic(key[1], key[2])
        current = self.states.get(key)
        if current is None:
            return StateRead(0, UNINITIALIZED_START_OFFSET)
        return StateRead(current.state_epoch, current.start_offset,
                         leader_epoch=current.leader_epoch,
                         delivery_complete_count=current.delivery_complete_count)


def _settled_count(current: ShareState, start_offset: int, written: int) -> int:
    """The delivery-complete count a write leaves (Kafka's ShareCoordinatorShard): the
    written one when it moves the start offset on; the larger of the two at the same start
    offset (writes of one leader may cross); the current one when the write names an earlier
    start offset or none (-1)."""
    if start_offset == current.start_offset:
        return max(written, current.delivery_complete_count)
    if start_offset < current.start_offset:
        return current.delivery_complete_count
    return written


def replay(states: dict[Key, ShareState], raw_key: bytes, raw_value: bytes | None,
           snapshots: dict[Key, int] | None = None, offset: int = -1) -> None:
    """Apply one record of the state topic to `states` (Kafka's ShareCoordinatorShard.replay):
    a snapshot replaces the state, an update is combined with it, a tombstone deletes it.
    `snapshots`, if given, keeps the offset of each share-partition's latest snapshot."""
    k = decode_key(raw_key)
    if k is None:
        return
    key = (k.group_id, k.topic_id, k.partition)
    current = states.get(key)
    if raw_value is None:
        states.pop(key, None)
        if snapshots is not None:
            snapshots.pop(key, None)
    elif k.record_type == SNAPSHOT:
        snapshot = decode_snapshot(raw_value)
        if current is None:
            states[key] = ShareState.from_snapshot(snapshot)
        else:
            current.apply_snapshot(snapshot)
        if snapshots is not None:
            snapshots[key] = offset
    else:
        update = decode_update(raw_value)
        if current is None:  # an update with no snapshot before it (Kafka keeps it as state)
            states[key] = ShareState(update.snapshot_epoch, 0, update.leader_epoch,
                                     update.start_offset, 0, 0,
                                     combine((), update.batches, update.start_offset),
                                     update.delivery_complete_count)
            if snapshots is not None:
                snapshots[key] = offset
        else:
            current.apply_update(update)
