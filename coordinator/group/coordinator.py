"""The group coordinator: classic consumer groups and committed offsets in __consumer_offsets.

One `GroupCoordinator` per broker owns every `ClassicGroup` of the `__consumer_offsets`
partitions this broker leads. Group state changes happen synchronously on the event loop (no
locks needed); JoinGroup/SyncGroup requests that must wait are parked as futures, completed
by a state transition or by a timer (`loop.call_later`: initial/rebalance delays, session
timeouts, pending-sync timeouts). State is persisted as Kafka's records (records.py) and
rebuilt by replaying each partition when it becomes available (COORDINATOR_LOAD_IN_PROGRESS
is answered meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coordinator.internal_log import InternalTopic, ReplayedMarker

from .classic import ClassicGroup, CommittedOffset, GroupState, Member
from .records import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
)

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

# Kafka error codes
NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNSTABLE_OFFSET_COMMIT = 88

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
OFFSET_METADATA_MAX_BYTES = 4096
_LOAD_YIELD_EVERY = 500


class GroupError(Exception):
    def __init__(self, error_code: int, message: str | None = None) -> None:
        super().__init__(message or str(error_code))
        self.error_code = error_code


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


class _Done:
    """An already-finished awaitable: lets callers either ignore or `await` a sync call."""

    def __await__(self):  # noqa: ANN204
        return iter(())


class GroupCoordinator:
    def __init__(self, broker: Any) -> None:
        cfg = broker.config
        self.broker = broker
        self.topic = InternalTopic(
            broker,
            OFFSETS_TOPIC,
            cfg["offsets.topic.num.partitions"],
            cfg["offsets.topic.replication.factor"],
            cfg["offsets.topic.segment.bytes"],
        )
        self.initial_rebalance_delay_ms: int = cfg["group.initial.rebalance.delay.ms"]
        self.min_session_ms: int = cfg["group.min.session.timeout.ms"]
        self.max_session_ms: int = cfg["group.max.session.timeout.ms"]
        self.max_group_size: int = cfg["group.max.size"]
        self.retention_ms: int = cfg["offsets.retention.minutes"] * 60_000
        self.retention_check_ms: int = cfg["offsets.retention.check.interval.ms"]
        self.groups: dict[str, ClassicGroup] = {}
        self.loaded: set[int] = set()
        self.loading: dict[int, asyncio.Task[None]] = {}
        # offsets partition -> producer id -> group ids with pending transactional offsets
        self._txn_groups: dict[int, dict[int, set[str]]] = {}
        # completions that arrived for a partition while it was loading
        self._deferred: dict[int, list[tuple[int, bool]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.broker.store.topic(OFFSETS_TOPIC) is not None:
            self._load_led_partitions()
        self._tasks.append(asyncio.create_task(self._retention_loop()))

    async def stop(self) -> None:
        self._stopped = True
        for task in [*self._tasks, *self.loading.values()]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self.loading.values(), return_exceptions=True)
        for group in self.groups.values():
            self._cancel_timers(group)
            for m in group.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.set_result(_error_join(NOT_COORDINATOR, m.member_id))

    async def ensure_topic(self) -> None:
        """Create __consumer_offsets on first use and load the partitions led here."""
        await self.topic.ensure_created()
        self._load_led_partitions()

    def _load_led_partitions(self) -> None:
        state = self.broker.store.topic(OFFSETS_TOPIC)
        if state is None:
            return
        for p in state.partitions:
            if p in self.loaded or p in self.loading:
                continue
            part = self.broker.replicas.get(OFFSETS_TOPIC, p)
            if part is None or not part.is_leader:
                continue
            if part.log.log_end_offset == part.log.log_start_offset:
                self.loaded.add(p)  # nothing to replay
                continue
            self.loading[p] = asyncio.get_running_loop().create_task(self._load(p))

    def on_leadership(self, p: int, is_leader: bool) -> None:
        """Leadership of `__consumer_offsets`-p moved here (load it) or away (unload it)."""
        if is_leader:
            self._load_led_partitions()
            return
        task = self.loading.pop(p, None)
        if task is not None:
            task.cancel()
        self.loaded.discard(p)
        self._txn_groups.pop(p, None)
        self._deferred.pop(p, None)
        for group in [g for g in self.groups.values() if g.partition == p]:
            self._cancel_timers(group)
            for m in group.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.set_result(_error_join(NOT_COORDINATOR, m.member_id))
            del self.groups[group.group_id]

    def partition_for(self, group_id: str) -> int:
        return self.topic.partition_for(group_id)

    def coordinator_partition(self, group_id: str) -> int:
        """The offsets partition of `group_id`, if this broker may serve it now."""
        p = self.topic.partition_for(group_id)
        if p in self.loaded:
            return p
        if p in self.loading:
            raise GroupError(COORDINATOR_LOAD_IN_PROGRESS)
        part = self.broker.replicas.get(OFFSETS_TOPIC, p)
        if part is None or not part.is_leader:
            raise GroupError(NOT_COORDINATOR)
        self._load_led_partitions()
        if p in self.loaded:
            return p
        raise GroupError(COORDINATOR_LOAD_IN_PROGRESS)

    def is_loading(self) -> bool:
        return bool(self.loading)

    # ------------------------------------------------------------------ loading
    async def _load(self, p: int) -> None:
        started = time.monotonic()
        count = 0
        try:
            for entry in self.topic.replay(p):
                count += 1
                if count % _LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                if isinstance(entry, ReplayedMarker):
                    self._complete_txn(p, entry.producer_id, entry.commit)
                    continue
                if entry.key is None:
                    continue
                try:
                    self._replay_record(p, entry.offset, entry.key, entry.value,
                                        entry.producer_id if entry.transactional else -1)
                except (RecordFormatError, UnicodeDecodeError) as exc:
                    log.warning("%s-%d offset %d: skipping undecodable record: %s",
                                OFFSETS_TOPIC, p, entry.offset, exc)
            for pid, commit in self._deferred.pop(p, []):
                self._complete_txn(p, pid, commit)
            now = now_ms()
            for group in [g for g in self.groups.values() if g.partition == p]:
                if not group.members and not group.offsets and not group.pending_txn_offsets \
                        and group.protocol_type is None:
                    del self.groups[group.group_id]
                    continue
                if group.members:
                    group.transition(GroupState.STABLE, group.state_timestamp)
                    for m in group.members.values():
                        self._schedule_heartbeat(group, m, m.session_timeout_ms)
                elif group.state_timestamp < 0:
                    group.state_timestamp = now
            self.loaded.add(p)
            log.info("loaded %s-%d (%d records) in %.0f ms", OFFSETS_TOPIC, p, count,
                     (time.monotonic() - started) * 1000)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, p)
        finally:
            self.loading.pop(p, None)

    def _replay_record(self, p: int, offset: int, key: bytes, value: bytes | None,
                       txn_pid: int) -> None:
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            group = self._group_for_replay(k.group, p)
            tp = (k.topic, k.partition)
            if txn_pid >= 0:
                if value is not None:
                    co = CommittedOffset(decode_offset_value(value), offset)
                    group.pending_txn_offsets.setdefault(txn_pid, {})[tp] = co
                    self._txn_groups.setdefault(p, {}).setdefault(txn_pid, set()).add(k.group)
            elif value is None:
                group.offsets.pop(tp, None)
            else:
                group.offsets[tp] = CommittedOffset(decode_offset_value(value), offset)
        elif isinstance(k, GroupKey):
            if value is None:
                group = self.groups.pop(k.group, None)
                if group is not None:
                    # offsets written after the tombstone start a new (simple) group
                    group.state = GroupState.DEAD
                return
            group = self._group_for_replay(k.group, p)
            group.load_value(decode_group_value(value))

    def _group_for_replay(self, group_id: str, p: int) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, p)
            self.groups[group_id] = group
        return group

    # ------------------------------------------------------------------ transactions
    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> _Done:
        """Called after a COMMIT/ABORT marker for `producer_id` was written to
        `__consumer_offsets-<offsets_partition>`: its pending offsets become committed or
        are dropped. Synchronous; the returned object may be awaited (no-op)."""
        if offsets_partition in self.loading:
            self._deferred.setdefault(offsets_partition, []).append((producer_id, commit))
        else:
            self._complete_txn(offsets_partition, producer_id, commit)
        return _Done()

    def _complete_txn(self, p: int, pid: int, commit: bool) -> None:
        for group_id in self._txn_groups.get(p, {}).pop(pid, set()):
            group = self.groups.get(group_id)
            if group is None:
                continue
            pending = group.pending_txn_offsets.pop(pid, {})
            if not commit:
                continue
            for tp, co in pending.items():
                current = group.offsets.get(tp)
                if current is None or current.record_offset < co.record_offset:
                    group.offsets[tp] = co

    def has_pending_txn(self, group: ClassicGroup, tp: tuple[str, int]) -> bool:
        return any(tp in pending for pending in group.pending_txn_offsets.values())

    # ------------------------------------------------------------------ persistence
    def _append(self, p: int, records: list[tuple[bytes, bytes | None]], **kw: Any) -> int:
        """Write records to the offsets partition; returns the last offset. Raises GroupError."""
        from broker.replica_manager import PartitionError

        try:
            return self.topic.append(p, records, timestamp_ms=now_ms(), **kw)
        except PartitionError as exc:
            code = exc.error_code
            raise GroupError(NOT_COORDINATOR if code == 6 else COORDINATOR_NOT_AVAILABLE) from exc
        except Exception as exc:
            code = int(getattr(exc, "error_code", UNKNOWN_SERVER_ERROR))
            if code in (10, 18):  # MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE
                raise GroupError(INVALID_COMMIT_OFFSET_SIZE) from exc
            if code in (47, 90, 45):  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, OUT_OF_ORDER
                raise GroupError(code) from exc
            log.exception("append to %s-%d failed", OFFSETS_TOPIC, p)
            raise GroupError(UNKNOWN_SERVER_ERROR) from exc

    def _store_group(self, group: ClassicGroup) -> None:
        value = group_metadata_value(group.to_value(now_ms()))
        self._append(group.partition, [(group_metadata_key(group.group_id), value)])

    # ------------------------------------------------------------------ timers
    def _cancel_timers(self, group: ClassicGroup) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        for m in group.members.values():
            if m.heartbeat_timer is not None:
                m.heartbeat_timer.cancel()
                m.heartbeat_timer = None
        timer = group.sync_timer
        if timer is not None:
            timer.cancel()
            group.sync_timer = None

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        loop = asyncio.get_running_loop()
        member.heartbeat_timer = loop.call_later(
            timeout_ms / 1000, self._on_heartbeat_expired, group, member.member_id
        )

    def _on_heartbeat_expired(self, group: ClassicGroup, member_id: str) -> None:
        if self.groups.get(group.group_id) is not group:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        member.heartbeat_timer = None
        awaiting_sync = member.sync_future is not None and not member.sync_future.done()
        if (member.awaiting_join and not member.is_new) or awaiting_sync:
            # parked in JoinGroup/SyncGroup: the rebalance / pending-sync timeouts decide
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return
        log.info("member %s of group %s has failed (session timeout)", member_id, group.group_id)
        self._remove_member_and_update(group, member, "session timeout")

    def _on_pending_member_expired(self, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join(group)
            elif not group.members and not group.offsets and group.state_timestamp < 0 \
                    and self.groups.get(group.group_id) is group and not group.pending_members:
                del self.groups[group.group_id]

    # ------------------------------------------------------------------ rebalance
    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        log.info("preparing to rebalance group %s in state %s with old generation %d (%s)",
                 group.group_id, group.state.value, group.generation, reason)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_fail_syncs(group, REBALANCE_IN_PROGRESS)
        timer = group.sync_timer
        if timer is not None:
            timer.cancel()
            group.sync_timer = None
        if group.join_timer is not None:
            group.join_timer.cancel()
        loop = asyncio.get_running_loop()
        was_empty = group.is_in(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, now_ms())
        if was_empty:
            group.initial_join = True
            delay = self.initial_rebalance_delay_ms
            group.join_remaining_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_timer = loop.call_later(delay / 1000, self._on_initial_join_delay, group)
        else:
            group.initial_join = False
            group.join_timer = loop.call_later(
                group.max_rebalance_timeout_ms() / 1000, self._complete_join, group
            )
            self._maybe_complete_join(group)

    def _on_initial_join_delay(self, group: ClassicGroup) -> None:
        group.join_timer = None
        remaining = group.join_remaining_ms
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.initial_rebalance_delay_ms, remaining)
            group.join_remaining_ms = remaining - delay
            group.join_timer = asyncio.get_running_loop().call_later(
                delay / 1000, self._on_initial_join_delay, group
            )
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.initial_join
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not group.is_in(GroupState.PREPARING_REBALANCE) or self.groups.get(group.group_id) \
                is not group:
            return
        for m in list(group.members.values()):
            if not m.awaiting_join:
                log.info("removing member %s of group %s: it did not rejoin", m.member_id,
                         group.group_id)
                group.remove(m.member_id)
        now = now_ms()
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, now)
            try:
                self._store_group(group)
            except GroupError as exc:
                log.warning("could not store empty group %s: %d", group.group_id, exc.error_code)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info("group %s: generation %d (%d members, protocol %s)", group.group_id,
                 group.generation, len(group.members), group.protocol_name)
        for m in group.members.values():
            fut, m.join_future = m.join_future, None
            m.is_new = False
            if fut is not None and not fut.done():
                fut.set_result(self._join_response(group, m, m.member_id == group.leader_id))
            self._schedule_heartbeat(group, m, m.session_timeout_ms)
        generation = group.generation
        group.sync_timer = asyncio.get_running_loop().call_later(
            group.max_rebalance_timeout_ms() / 1000, self._on_sync_expired, group, generation
        )

    def _on_sync_expired(self, group: ClassicGroup, generation: int) -> None:
        group.sync_timer = None
        if group.generation != generation or not group.is_in(GroupState.COMPLETING_REBALANCE):
            return
        missing = [m for m in group.members.values()
                   if m.sync_future is None or m.sync_future.done()]
        for m in missing:
            log.info("removing member %s of group %s: no SyncGroup in time", m.member_id,
                     group.group_id)
            group.remove(m.member_id)
        if missing:
            self._prepare_rebalance(group, "members did not sync in time")

    def _join_response(self, group: ClassicGroup, member: Member, with_members: bool,
                       leader: str | None = None, skip: bool = False) -> dict[str, Any]:
        return {
            "error_code": NONE,
            "generation_id": group.generation,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": leader if leader is not None else (group.leader_id or ""),
            "skip_assignment": skip,
            "member_id": member.member_id,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(group.protocol_name)}
                for m in group.members.values()
            ] if with_members else [],
        }

    def _reset_and_fail_syncs(self, group: ClassicGroup, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            fut, m.sync_future = m.sync_future, None
            if fut is not None and not fut.done():
                fut.set_result({"error_code": error, "assignment": b""})

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        group.remove(member.member_id)
        for fut in (member.join_future, member.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(_error_join(UNKNOWN_MEMBER_ID, member.member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
            if not group.members and not group.pending_members:
                self._complete_join(group)
        elif group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member.member_id}: {reason}")

    # ------------------------------------------------------------------ JoinGroup
    async def join_group(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        version: int,
    ) -> dict[str, Any]:
        if not group_id:
            return _error_join(INVALID_GROUP_ID, member_id)
        try:
            p = self.coordinator_partition(group_id)
        except GroupError as exc:
            return _error_join(exc.error_code, member_id)
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return _error_join(INVALID_SESSION_TIMEOUT, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return _error_join(UNKNOWN_MEMBER_ID, member_id)
            group = ClassicGroup(group_id, p)
        elif group.is_in(GroupState.DEAD):
            return _error_join(COORDINATOR_NOT_AVAILABLE, member_id)
        if (
            not group.has_member(member_id)
            and group.static_member_id(instance_id) is None
            and len(group.members) + len(group.pending_members) >= self.max_group_size
        ):
            return _error_join(GROUP_MAX_SIZE_REACHED, member_id)
        member_args = (instance_id, protocol_type, protocols, session_timeout_ms,
                       rebalance_timeout_ms, client_id, client_host)
        if not member_id:
            return await self._join_unknown(group, version, *member_args)
        return await self._join_existing(group, member_id, *member_args)

    async def _join_unknown(self, group: ClassicGroup, version: int, instance_id: str | None,
                            protocol_type: str, protocols: list[tuple[str, bytes]],
                            session_ms: int, rebalance_ms: int, client_id: str,
                            client_host: str) -> dict[str, Any]:
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return _error_join(INCONSISTENT_GROUP_PROTOCOL, "")
        new_id = f"{client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None and old_id in group.members:
                return await self._replace_static_member(
                    group, old_id, new_id, protocols, session_ms, rebalance_ms, version
                )
        elif version >= 4:
            group.pending_members.add(new_id)
            self.groups.setdefault(group.group_id, group)
            asyncio.get_running_loop().call_later(
                session_ms / 1000, self._on_pending_member_expired, group, new_id
            )
            return _error_join(MEMBER_ID_REQUIRED, new_id)
        member = Member(new_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                        protocol_type, protocols)
        return await self._add_member_and_rebalance(group, member)

    async def _add_member_and_rebalance(self, group: ClassicGroup,
                                        member: Member) -> dict[str, Any]:
        self.groups.setdefault(group.group_id, group)
        member.is_new = True
        fut = asyncio.get_running_loop().create_future()
        member.join_future = fut
        group.pending_members.discard(member.member_id)
        group.add(member)
        group.new_member_added = True
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"adding new member {member.member_id}")
        return await fut

    async def _replace_static_member(self, group: ClassicGroup, old_id: str, new_id: str,
                                     protocols: list[tuple[str, bytes]], session_ms: int,
                                     rebalance_ms: int, version: int) -> dict[str, Any]:
        member = group.members.pop(old_id)
        for fut in (member.join_future, member.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(_error_join(FENCED_INSTANCE_ID, old_id))
        member.join_future = member.sync_future = None
        current_leader = group.leader_id
        member.member_id = new_id
        group.members[new_id] = member
        assert member.group_instance_id is not None
        group.static_members[member.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        old_protocols = member.protocols
        member.protocols = protocols
        member.session_timeout_ms = session_ms
        member.rebalance_timeout_ms = rebalance_ms
        self._schedule_heartbeat(group, member, session_ms)
        fut = asyncio.get_running_loop().create_future()
        member.join_future = fut
        if group.is_in(GroupState.STABLE):
            if group.select_protocol() == group.protocol_name:
                member.join_future = None
                try:
                    self._store_group(group)
                except GroupError as exc:
                    member.protocols = old_protocols
                    del group.members[new_id]
                    member.member_id = old_id
                    group.members[old_id] = member
                    group.static_members[member.group_instance_id] = old_id
                    if group.leader_id == new_id:
                        group.leader_id = old_id
                    return _error_join(exc.error_code, "")
                is_leader = group.leader_id == new_id
                if version >= 9:
                    return self._join_response(group, member, is_leader, skip=is_leader)
                return self._join_response(group, member, False, leader=current_leader)
            self._prepare_rebalance(group, f"static member {new_id} changed protocols")
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"static member {new_id} rejoined")
        else:
            self._maybe_complete_join(group)
        return await fut

    async def _join_existing(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                             protocol_type: str, protocols: list[tuple[str, bytes]],
                             session_ms: int, rebalance_ms: int, client_id: str,
                             client_host: str) -> dict[str, Any]:
        if group.is_pending(member_id):
            if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
                return _error_join(INCONSISTENT_GROUP_PROTOCOL, member_id)
            member = Member(member_id, instance_id, client_id, client_host, rebalance_ms,
                            session_ms, protocol_type, protocols)
            return await self._add_member_and_rebalance(group, member)
        try:
            member = self._validate_member(group, member_id, instance_id)
        except GroupError as exc:
            return _error_join(exc.error_code, member_id)
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return _error_join(INCONSISTENT_GROUP_PROTOCOL, member_id)
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return _error_join(UNKNOWN_MEMBER_ID, member_id)
        if group.is_in(GroupState.COMPLETING_REBALANCE) and member.matches(protocols):
            return self._join_response(group, member, member_id == group.leader_id)
        if (
            group.is_in(GroupState.STABLE)
            and member_id != group.leader_id
            and member.matches(protocols)
        ):
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return self._join_response(group, member, False)
        # update the member and (re)join the rebalance
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(_error_join(UNKNOWN_MEMBER_ID, member_id))
        member.protocols = protocols
        member.session_timeout_ms = session_ms
        member.rebalance_timeout_ms = rebalance_ms
        fut = asyncio.get_running_loop().create_future()
        member.join_future = fut
        self._schedule_heartbeat(group, member, session_ms)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member_id} rejoined")
        return await fut

    def _validate_member(self, group: ClassicGroup, member_id: str,
                         instance_id: str | None) -> Member:
        if instance_id is not None:
            static_id = group.static_member_id(instance_id)
            if static_id is None:
                raise GroupError(UNKNOWN_MEMBER_ID)
            if static_id != member_id:
                raise GroupError(FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(UNKNOWN_MEMBER_ID)
        return member

    # ------------------------------------------------------------------ SyncGroup
    async def sync_group(self, group_id: str, generation: int, member_id: str,
                         instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None,
                         assignments: list[tuple[str, bytes]]) -> dict[str, Any]:
        try:
            self.coordinator_partition(group_id)
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                raise GroupError(UNKNOWN_MEMBER_ID)
            member = self._validate_member(group, member_id, instance_id)
            if generation != group.generation:
                raise GroupError(ILLEGAL_GENERATION)
            if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                raise GroupError(INCONSISTENT_GROUP_PROTOCOL)
            if group.is_in(GroupState.EMPTY):
                raise GroupError(UNKNOWN_MEMBER_ID)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                raise GroupError(REBALANCE_IN_PROGRESS)
        except GroupError as exc:
            return {"error_code": exc.error_code, "assignment": b""}
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(GroupState.STABLE):
            return self._sync_response(group, member)
        # CompletingRebalance
        fut = asyncio.get_running_loop().create_future()
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result({"error_code": REBALANCE_IN_PROGRESS,
                                           "assignment": b""})
        member.sync_future = fut
        if member_id == group.leader_id:
            given = dict(assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            try:
                self._store_group(group)
            except GroupError as exc:
                self._reset_and_fail_syncs(group, exc.error_code)
                self._prepare_rebalance(group, "storing the group failed")
                return await fut
            timer = group.sync_timer
            if timer is not None:
                timer.cancel()
                group.sync_timer = None
            group.transition(GroupState.STABLE, now_ms())
            for m in group.members.values():
                f, m.sync_future = m.sync_future, None
                if f is not None and not f.done():
                    f.set_result(self._sync_response(group, m))
        return await fut

    @staticmethod
    def _sync_response(group: ClassicGroup, member: Member) -> dict[str, Any]:
        return {"error_code": NONE, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name, "assignment": member.assignment}

    # ------------------------------------------------------------------ Heartbeat
    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> int:
        try:
            self.coordinator_partition(group_id)
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD, GroupState.EMPTY):
                raise GroupError(UNKNOWN_MEMBER_ID)
            member = self._validate_member(group, member_id, instance_id)
            if generation != group.generation:
                raise GroupError(ILLEGAL_GENERATION)
        except GroupError as exc:
            return exc.error_code
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return REBALANCE_IN_PROGRESS
        return NONE

    # ------------------------------------------------------------------ LeaveGroup
    def leave_group(self, group_id: str,
                    members: list[tuple[str, str | None]]) -> tuple[int, list[dict[str, Any]]]:
        """(top-level error, per-member results) for (member_id, group_instance_id) pairs."""
        try:
            self.coordinator_partition(group_id)
        except GroupError as exc:
            return exc.error_code, []
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return UNKNOWN_MEMBER_ID, []
        results = []
        for member_id, instance_id in members:
            out = {"member_id": member_id, "group_instance_id": instance_id, "error_code": NONE}
            results.append(out)
            if instance_id is None and group.is_pending(member_id):
                group.pending_members.discard(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE):
                    self._maybe_complete_join(group)
                continue
            try:
                if instance_id is not None:
                    static_id = group.static_member_id(instance_id)
                    if static_id is None:
                        raise GroupError(UNKNOWN_MEMBER_ID)
                    if member_id and member_id != static_id:
                        raise GroupError(FENCED_INSTANCE_ID)
                    member_id = static_id
                member = group.members.get(member_id)
                if member is None:
                    raise GroupError(UNKNOWN_MEMBER_ID)
            except GroupError as exc:
                out["error_code"] = exc.error_code
                continue
            log.info("member %s leaves group %s", member_id, group_id)
            self._remove_member_and_update(group, member, "the member left the group")
        return NONE, results

    # ------------------------------------------------------------------ offsets
    def _offset_commit_group(self, group_id: str, generation: int, member_id: str,
                             instance_id: str | None, version: int,
                             transactional: bool) -> tuple[int, ClassicGroup]:
        p = self.coordinator_partition(group_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                raise GroupError(GROUP_ID_NOT_FOUND if version >= 9 and not transactional
                                 else ILLEGAL_GENERATION)
            group = ClassicGroup(group_id, p)
            return p, group
        if group.is_in(GroupState.DEAD):
            raise GroupError(COORDINATOR_NOT_AVAILABLE)
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return p, group
        if generation >= 0 or member_id or instance_id is not None:
            member = self._validate_member(group, member_id, instance_id)
            if generation != group.generation:
                raise GroupError(ILLEGAL_GENERATION)
            if not transactional:
                self._schedule_heartbeat(group, member, member.session_timeout_ms)
        elif not transactional and not group.is_in(GroupState.EMPTY):
            raise GroupError(UNKNOWN_MEMBER_ID)
        if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
            raise GroupError(REBALANCE_IN_PROGRESS)
        return p, group

    def commit_offsets(
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
    ) -> dict[tuple[str, int], int]:
        """Commit offsets (transactionally when producer_id >= 0); error code per partition."""
        transactional = producer_id >= 0
        try:
            p, group = self._offset_commit_group(group_id, generation, member_id, instance_id,
                                                 version, transactional)
        except GroupError as exc:
            return {(e.topic, e.partition): exc.error_code for e in entries}
        now = now_ms()
        expire = now + retention_ms if retention_ms >= 0 else -1
        result: dict[tuple[str, int], int] = {}
        to_write: list[tuple[tuple[str, int], OffsetValue]] = []
        for e in entries:
            tp = (e.topic, e.partition)
            metadata = e.metadata or ""
            if len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                result[tp] = OFFSET_METADATA_TOO_LARGE
                continue
            result[tp] = NONE
            to_write.append((tp, OffsetValue(e.offset, e.leader_epoch, metadata, now, expire)))
        if not to_write:
            return result
        records = [(offset_commit_key(group_id, t, pn), offset_commit_value(v))
                   for (t, pn), v in to_write]
        try:
            last = self._append(p, records, producer_id=producer_id,
                                producer_epoch=producer_epoch, transactional=transactional)
        except GroupError as exc:
            for tp, _ in to_write:
                result[tp] = exc.error_code
            return result
        self.groups.setdefault(group_id, group)
        first = last - len(records) + 1
        for i, (tp, v) in enumerate(to_write):
            co = CommittedOffset(v, first + i)
            if transactional:
                group.pending_txn_offsets.setdefault(producer_id, {})[tp] = co
            else:
                group.offsets[tp] = co
        if transactional:
            self._txn_groups.setdefault(p, {}).setdefault(producer_id, set()).add(group_id)
        return result

    def fetch_offsets(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool
    ) -> list[dict[str, Any]]:
        """Committed offsets as OffsetFetch topic entries. Raises GroupError (group level)."""
        self.coordinator_partition(group_id)
        group = self.groups.get(group_id)
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
                                         "error_code": NONE}
                if group is not None and require_stable and self.has_pending_txn(group,
                                                                                 (name, pn)):
                    entry["error_code"] = UNSTABLE_OFFSET_COMMIT
                else:
                    co = offsets.get((name, pn))
                    if co is not None:
                        entry.update(committed_offset=co.value.offset,
                                     committed_leader_epoch=co.value.leader_epoch,
                                     metadata=co.value.metadata)
                parts.append(entry)
            out.append({"name": name, "partitions": parts})
        return out

    def delete_offsets(self, group_id: str,
                       partitions: list[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        try:
            p = self.coordinator_partition(group_id)
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                raise GroupError(GROUP_ID_NOT_FOUND)
            subscribed: set[str] = set()
            if not group.is_in(GroupState.EMPTY):
                if group.protocol_type != "consumer":
                    raise GroupError(NON_EMPTY_GROUP)
                subscribed = group.subscribed_topics() or set()
        except GroupError as exc:
            return exc.error_code, {}
        result: dict[tuple[str, int], int] = {}
        tombstones = []
        for tp in partitions:
            if tp[0] in subscribed:
                result[tp] = GROUP_SUBSCRIBED_TO_TOPIC
                continue
            result[tp] = NONE
            if tp in group.offsets:
                tombstones.append(tp)
        if tombstones:
            try:
                self._append(p, [(offset_commit_key(group_id, t, pn), None)
                                 for t, pn in tombstones])
            except GroupError as exc:
                return exc.error_code, {}
            for tp in tombstones:
                group.offsets.pop(tp, None)
        return NONE, result

    # ------------------------------------------------------------------ admin
    def list_groups(self, states: Iterable[str] = (),
                    types: Iterable[str] = ()) -> tuple[int, list[dict[str, Any]]]:
        states_l = {s.lower() for s in states}
        types_l = {t.lower() for t in types}
        if types_l and "classic" not in types_l:
            return NONE, []
        out = []
        for group in self.groups.values():
            if group.partition not in self.loaded or group.is_in(GroupState.DEAD):
                continue
            if states_l and group.state.value.lower() not in states_l:
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                        "group_state": group.state.value, "group_type": "classic"})
        return (COORDINATOR_LOAD_IN_PROGRESS if self.loading else NONE), out

    def describe_group(self, group_id: str) -> dict[str, Any]:
        try:
            self.coordinator_partition(group_id)
        except GroupError as exc:
            return {"error_code": exc.error_code, "group_id": group_id, "group_state": "",
                    "protocol_type": "", "protocol_data": "", "members": []}
        group = self.groups.get(group_id)
        if group is None:
            return {"error_code": NONE, "group_id": group_id, "group_state": "Dead",
                    "protocol_type": "", "protocol_data": "", "members": []}
        stable = group.is_in(GroupState.STABLE)
        return {
            "error_code": NONE,
            "group_id": group_id,
            "group_state": group.state.value,
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "client_id": m.client_id, "client_host": m.client_host,
                 "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                 "member_assignment": m.assignment if stable else b""}
                for m in group.members.values()
            ],
        }

    def delete_group(self, group_id: str) -> int:
        try:
            p = self.coordinator_partition(group_id)
        except GroupError as exc:
            return exc.error_code
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return GROUP_ID_NOT_FOUND
        if not group.is_in(GroupState.EMPTY):
            return NON_EMPTY_GROUP
        records: list[tuple[bytes, bytes | None]] = [
            (offset_commit_key(group_id, t, pn), None) for t, pn in group.offsets
        ]
        records.append((group_metadata_key(group_id), None))
        try:
            self._append(p, records)
        except GroupError as exc:
            return exc.error_code
        self._cancel_timers(group)
        group.transition(GroupState.DEAD, now_ms())
        group.offsets.clear()
        del self.groups[group_id]
        return NONE

    # ------------------------------------------------------------------ retention
    async def _retention_loop(self) -> None:
        while not self._stopped:
            await asyncio.sleep(self.retention_check_ms / 1000)
            try:
                self.expire_offsets(now_ms())
            except Exception:
                log.exception("offset expiration failed")

    def expire_offsets(self, now: int) -> int:
        """Remove offsets past retention from empty groups; returns how many were removed."""
        removed = 0
        for group in list(self.groups.values()):
            if group.partition not in self.loaded or not group.is_in(GroupState.EMPTY):
                continue
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
                self._append(group.partition, records)
            except GroupError:
                continue
            for tp in expired:
                del group.offsets[tp]
            removed += len(expired)
            if drop_group:
                group.transition(GroupState.DEAD, now)
                del self.groups[group.group_id]
            log.info("removed %d expired offsets of group %s", len(expired), group.group_id)
        return removed


def _error_join(code: int, member_id: str) -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "member_id": member_id, "members": [],
            "assignment": b""}
