"""Committed offsets of consumer groups: OffsetCommit (plain and transactional), OffsetFetch,
OffsetDelete, the transactional offsets a marker commits or aborts, and retention of expired
offsets. A part of `GroupCoordinator` (coordinator.py); the offsets are kept in the groups of
`ClassicGroups` (classic/groups.py), and a consumer group's member checks are `ConsumerGroups`'."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samsa.config.schema import BrokerConfig
from samsa.protocol.errors import ErrorCode

from .classic.model import ClassicGroup, CommittedOffset, GroupState
from .common import (
    Done,
    GroupError,
    OffsetCommitEntry,
    new_commit_errors,
    now_ms,
)
from .partitions import GroupPartitions
from .records import (
    OffsetKey,
    OffsetValue,
    decode_offset_value,
    group_metadata_key,
    offset_commit_key,
    offset_commit_value,
)

if TYPE_CHECKING:
    from samsa.storage.verification_state import VerificationState

    from .classic.groups import ClassicGroups
    from .consumer.groups import ConsumerGroups
    from .streams.groups import StreamsGroups

# The coordinator's logger: one name for all of its parts (log configs select by it).
log = logging.getLogger("samsa.coordinator.group.coordinator")


class GroupOffsets:
    """Offset commit/fetch/delete, transactional offsets and retention."""

    def __init__(self, partitions: GroupPartitions, cfg: BrokerConfig, classic: ClassicGroups,
                 consumer: ConsumerGroups) -> None:
        self.partitions = partitions
        self.classic = classic
        self.consumer = consumer
        self.streams: StreamsGroups | None = None  # the coordinator's, set after
        self.retention_ms: int = cfg["offsets.retention.minutes"] * 60_000
        self.retention_check_ms: int = cfg["offsets.retention.check.interval.ms"]
        self.offset_metadata_max_bytes: int = cfg["offset.metadata.max.bytes"]
        # offsets partition -> producer id -> group ids with pending transactional offsets
        self.txn_groups: dict[int, dict[int, set[str]]] = {}
        # completions that arrived for a partition while it was loading
        self.deferred: dict[int, list[tuple[int, bool]]] = {}

    # ------------------------------------------------------------------ transactions
    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> Done:
        """Called after a COMMIT/ABORT marker for `producer_id` was written to
        `__consumer_offsets-<offsets_partition>`: its pending offsets become committed or
        are dropped. Synchronous; the returned object may be awaited (no-op)."""
        if offsets_partition in self.partitions.loading:
            self.deferred.setdefault(offsets_partition, []).append((producer_id, commit))
        else:
            self.complete_txn(offsets_partition, producer_id, commit)
        return Done()

    def complete_txn(self, p: int, pid: int, commit: bool) -> None:
        for group_id in self.txn_groups.get(p, {}).pop(pid, set()):
            group = self.classic.groups.get(group_id)
            if group is None:
                continue
            pending = group.pending_txn_offsets.pop(pid, {})
            if not commit:
                continue
            for tp, co in pending.items():
                current = group.offsets.get(tp)
                if current is None or current.record_offset < co.record_offset:
                    group.offsets[tp] = co

    def complete_deferred(self, p: int) -> None:
        """Apply the markers that arrived while partition p was loading."""
        for pid, commit in self.deferred.pop(p, []):
            self.complete_txn(p, pid, commit)

    def unload(self, p: int) -> None:
        self.forget_transactions(p)
        self.deferred.pop(p, None)

    def forget_transactions(self, p: int) -> None:
        """The pending transactional offsets of partition p are unloaded (the completions
        deferred while it loads are kept)."""
        self.txn_groups.pop(p, None)

    def has_pending_txn(self, group: ClassicGroup, tp: tuple[str, int]) -> bool:
        return any(tp in pending for pending in group.pending_txn_offsets.values())

    def replay(self, p: int, offset: int, k: OffsetKey, value: bytes | None,
               txn_pid: int) -> None:
        """An offset commit record (transactional when `txn_pid` >= 0) read at load."""
        group = self.classic.group_for_replay(k.group, p)
        tp = (k.topic, k.partition)
        if txn_pid >= 0:
            if value is not None:
                co = CommittedOffset(decode_offset_value(value), offset)
                group.pending_txn_offsets.setdefault(txn_pid, {})[tp] = co
                self.txn_groups.setdefault(p, {}).setdefault(txn_pid, set()).add(k.group)
        elif value is None:
            group.offsets.pop(tp, None)
        else:
            group.offsets[tp] = CommittedOffset(decode_offset_value(value), offset)

    # ------------------------------------------------------------------ offsets
    def _offset_commit_group(self, group_id: str, generation: int, member_id: str,
                             instance_id: str | None, version: int, transactional: bool,
                             partitions: list[tuple[str, int]]) -> tuple[int, ClassicGroup]:
        p = self.partitions.coordinator_partition(group_id)
        group = self.classic.groups.get(group_id)
        streams_group = self.streams.groups.get(group_id) if self.streams else None
        if streams_group is not None and self.streams is not None:
            self.streams.validate_offset_commit(streams_group, member_id, generation,
                                               transactional, version, partitions)
            return p, group if group is not None else ClassicGroup(group_id, p)
        consumer_group = self.consumer.consumer_groups.get(group_id)
        if consumer_group is not None:
            # the member epoch is in the generation field
            self.consumer.validate_consumer_offset_commit(
                consumer_group, member_id, generation, transactional, version, partitions,
                instance_id)
            return p, group if group is not None else ClassicGroup(group_id, p)
        if group is None:
            if generation >= 0:
                raise GroupError(ErrorCode.group_id_not_found
                                 if new_commit_errors(version, transactional)
                                 else ErrorCode.illegal_generation)
            group = ClassicGroup(group_id, p)
            return p, group
        if group.is_in(GroupState.DEAD):
            raise GroupError(ErrorCode.coordinator_not_available)
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return p, group
        if generation >= 0 or member_id or instance_id is not None:
            member = self.classic.validate_member(group, member_id, instance_id)
            if generation != group.generation:
                raise GroupError(ErrorCode.illegal_generation)
            if not transactional:
                self.classic.rebalance.schedule_heartbeat(group, member, member.session_timeout_ms)
        elif not transactional and not group.is_in(GroupState.EMPTY):
            raise GroupError(ErrorCode.unknown_member_id)
        if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
            raise GroupError(ErrorCode.rebalance_in_progress)
        return p, group

    async def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        entries: list[OffsetCommitEntry],
        *,
        version: int,
        retention_ms: int = -1,
        producer_id: int = -1,
        producer_epoch: int = -1,
        verify: bool = False,
        guard: VerificationState | None = None,
    ) -> dict[tuple[str, int], int]:
        """Commit offsets (transactionally when producer_id >= 0); error code per partition.
        Answered, and applied, once the ISR of the group's offsets partition has them.
        `verify`, `guard`: KIP-890, as the log checks a transaction's first batch (the
        TxnOffsetCommit handler verified the offsets partition with the transaction
        coordinator, `guard` the verification state made before it asked)."""
        transactional = producer_id >= 0
        try:
            p, group = self._offset_commit_group(group_id, generation, member_id, instance_id,
                                                 version, transactional,
                                                 [(e.topic, e.partition) for e in entries])
        except GroupError as exc:
            return {(e.topic, e.partition): exc.error_code for e in entries}
        now = now_ms()
        expire = now + retention_ms if retention_ms >= 0 else -1
        result: dict[tuple[str, int], int] = {}
        to_write: list[tuple[tuple[str, int], OffsetValue]] = []
        for e in entries:
            tp = (e.topic, e.partition)
            metadata = e.metadata or ""
            # Kafka compares String.length(): UTF-16 code units, not bytes.
            if len(metadata.encode("utf-16-le")) // 2 > self.offset_metadata_max_bytes:
                result[tp] = ErrorCode.offset_metadata_too_large
                continue
            result[tp] = ErrorCode.none
            to_write.append((tp, OffsetValue(e.offset, e.leader_epoch, metadata, now, expire)))
        if not to_write:
            return result
        records: list[tuple[bytes, bytes | None]] = [
            (offset_commit_key(group_id, t, pn), offset_commit_value(v)) for (t, pn), v in to_write
        ]
        try:
            last = await self.partitions.append_replicated(
                p, records, producer_id=producer_id, producer_epoch=producer_epoch,
                transactional=transactional, verify=verify, guard=guard)
        except GroupError as exc:
            for tp, _ in to_write:
                result[tp] = exc.error_code
            return result
        if p not in self.partitions.loaded:
            # The partition moved away while the commit was replicated; its new coordinator
            # loads the commit from the log. The client retries there.
            for tp, _ in to_write:
                result[tp] = ErrorCode.not_coordinator
            return result
        group = self.classic.groups.setdefault(group_id, group)
        first = last - len(records) + 1
        for i, (tp, v) in enumerate(to_write):
            co = CommittedOffset(v, first + i)
            if transactional:
                group.pending_txn_offsets.setdefault(producer_id, {})[tp] = co
                continue
            current = group.offsets.get(tp)
            # Commits replicated out of order: the later record wins, as on replay.
            if current is None or current.record_offset < co.record_offset:
                group.offsets[tp] = co
        if transactional:
            self.txn_groups.setdefault(p, {}).setdefault(producer_id, set()).add(group_id)
        return result

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool,
        member_id: str | None = None, member_epoch: int = -1,
    ) -> list[dict[str, Any]]:
        """Committed offsets as OffsetFetch topic entries. Raises GroupError (group level).
        A member of a consumer group (OffsetFetch v9+) is checked as Kafka checks it."""
        self.partitions.coordinator_partition(group_id)
        if member_id is not None and group_id in self.consumer.consumer_groups:
            self.consumer.validate_consumer_offset_fetch(group_id, member_id, member_epoch)
        elif member_id is not None and self.streams is not None:
            self.streams.validate_offset_fetch(group_id, member_id, member_epoch)
        group = self.classic.groups.get(group_id)
        offsets = group.offsets if group is not None else {}
        if topics is None:
            by_topic: dict[str, list[int]] = {}
            for t, pn in sorted(offsets):
                by_topic.setdefault(t, []).append(pn)
            topics = list(by_topic.items())
        out = []
        for name, partitions in topics:
            parts = []
            for pn in partitions:
                entry: dict[str, Any] = {"partition_index": pn, "committed_offset": -1,
                                         "committed_leader_epoch": -1, "metadata": "",
                                         "error_code": ErrorCode.none}
                if group is not None and require_stable and self.has_pending_txn(group,
                                                                                 (name, pn)):
                    entry["error_code"] = ErrorCode.unstable_offset_commit
                else:
                    co = offsets.get((name, pn))
                    if co is not None:
                        entry.update(committed_offset=co.value.offset,
                                     committed_leader_epoch=co.value.leader_epoch,
                                     metadata=co.value.metadata)
                parts.append(entry)
            out.append({"name": name, "partitions": parts})
        return out

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        try:
            p = self.partitions.coordinator_partition(group_id)
            group = self.classic.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                raise GroupError(ErrorCode.group_id_not_found)
            subscribed: set[str] = set()
            consumer_group = self.consumer.consumer_groups.get(group_id)
            if consumer_group is not None:
                # Kafka: the topics its members subscribe to keep their offsets
                subscribed = self.consumer.consumer_subscribed_topics(consumer_group)
            elif not group.is_in(GroupState.EMPTY):
                if group.protocol_type != "consumer":
                    raise GroupError(ErrorCode.non_empty_group)
                subscribed = group.subscribed_topics() or set()
        except GroupError as exc:
            return exc.error_code, {}
        result: dict[tuple[str, int], ErrorCode] = {}
        tombstones = []
        for tp in partitions:
            if tp[0] in subscribed:
                result[tp] = ErrorCode.group_subscribed_to_topic
                continue
            result[tp] = ErrorCode.none
            if tp in group.offsets:
                tombstones.append(tp)
        if tombstones:
            try:
                await self.partitions.append_replicated(
                    p, [(offset_commit_key(group_id, t, pn), None) for t, pn in tombstones])
            except GroupError as exc:
                return exc.error_code, {}
            if p not in self.partitions.loaded:
                return ErrorCode.not_coordinator, {}
            for tp in tombstones:
                group.offsets.pop(tp, None)
        return ErrorCode.none, result


    # ------------------------------------------------------------------ retention
    def expire_offsets(self, now: int) -> int:
        """Remove offsets past retention from empty groups; returns how many were removed."""
        removed = 0
        for group in list(self.classic.groups.values()):
            if group.partition not in self.partitions.loaded or not group.is_in(GroupState.EMPTY):
                continue
            consumer_group = self.consumer.consumer_groups.get(group.group_id)
            if consumer_group is not None and consumer_group.members:
                continue  # the offsets of a consumer group expire once it is empty
            streams_group = self.streams.groups.get(group.group_id) if self.streams else None
            if streams_group is not None and streams_group.members:
                continue  # and those of a streams group
            expired = []
            for tp, co in group.offsets.items():
                v = co.value
                if v.expire_timestamp >= 0:
                    deadline = v.expire_timestamp
                else:
                    base = (group.state_timestamp
                            if group.protocol_type and group.state_timestamp >= 0
                            else v.commit_timestamp)
                    deadline = base + self.retention_ms
                if now >= deadline:
                    expired.append(tp)
            records: list[tuple[bytes, bytes | None]] = [
                (offset_commit_key(group.group_id, t, pn), None) for t, pn in expired
            ]
            drop_group = len(expired) == len(group.offsets) and not group.pending_txn_offsets \
                and not group.pending_members
            if drop_group:
                records.append((group_metadata_key(group.group_id), None))
            if not expired and not drop_group:
                continue
            try:
                self.partitions.append(group.partition, records)
            except GroupError:
                continue
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if drop_group:
                group.transition(GroupState.DEAD, now)
                del self.classic.groups[group.group_id]
            log.info("removed %d expired offsets of group %s", len(expired), group.group_id)
        return removed

