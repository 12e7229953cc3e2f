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
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from samsa.config.schema import BrokerConfig
from samsa.coordinator.internal_log import InternalTopic, ReplayedMarker
from samsa.coordinator.ports import InternalLogHost, TopicsView
from samsa.coordinator.runtime import (
    Tasks,
    WriteFailed,
    append_answer,
    begin_write,
    error_code_of,
    replay,
    write_failed,
)
from samsa.protocol.errors import ErrorCode

from .classic import ClassicGroup, CommittedOffset, GroupState
from .common import (
    OFFSETS_TOPIC,
    Done,
    GroupError,
    now_ms,
)
from .consumer import ASSIGNOR_CLASSES, ConsumerGroup
from .consumer_groups import ConsumerGroups
from .consumer_records import decode_consumer_key
from .membership import GroupMembership, error_join
from .offsets import GroupOffsets
from .records import (
    GroupKey,
    OffsetKey,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
)
from .share import ShareGroup
from .share_groups import ShareGroups
from .share_records import decode_share_key

log = logging.getLogger(__name__)


class GroupCoordinator(GroupMembership, GroupOffsets, ConsumerGroups, ShareGroups):
    def __init__(self, host: InternalLogHost, cfg: BrokerConfig,
                 topics: TopicsView | None = None) -> None:
        self.topic = InternalTopic(
            host,
            OFFSETS_TOPIC,
            cfg["offsets.topic.num.partitions"],
            cfg["offsets.topic.replication.factor"],
            cfg["offsets.topic.segment.bytes"],
            compression=cfg["offsets.topic.compression.codec"],
            load_buffer_size=cfg["offsets.load.buffer.size"],
        )
        self.initial_rebalance_delay_ms: int = cfg["group.initial.rebalance.delay.ms"]
        self.min_session_ms: int = cfg["group.min.session.timeout.ms"]
        self.max_session_ms: int = cfg["group.max.session.timeout.ms"]
        self.max_group_size: int = cfg["group.max.size"]
        self.retention_ms: int = cfg["offsets.retention.minutes"] * 60_000
        self.retention_check_ms: int = cfg["offsets.retention.check.interval.ms"]
        self.offset_metadata_max_bytes: int = cfg["offset.metadata.max.bytes"]
        self.commit_timeout_ms: int = cfg["offsets.commit.timeout.ms"]
        self.consumer_assignors: list[str] = [
            ASSIGNOR_CLASSES.get(a, a) for a in cfg["group.consumer.assignors"]]
        self.consumer_max_size: int = cfg["group.consumer.max.size"]
        self.consumer_heartbeat_ms: int = cfg["group.consumer.heartbeat.interval.ms"]
        self.consumer_session_ms: int = cfg["group.consumer.session.timeout.ms"]
        self.migration_policy: str = cfg["group.consumer.migration.policy"]
        self.share_max_size: int = cfg["group.share.max.size"]
        self.share_session_ms: int = cfg["group.share.session.timeout.ms"]
        self.share_heartbeat_ms: int = cfg["group.share.heartbeat.interval.ms"]
        self.topics_view: TopicsView = topics if topics is not None else _NoTopics()
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.share_groups: dict[str, ShareGroup] = {}
        self.share_member_removed: list[Callable[[str, str], None]] = []
        # group id -> (monotonic expiry, its consumer.* configs): kept by the request handler
        self.group_config_cache: dict[str, tuple[float, dict[str, str]]] = {}
        self.loaded: set[int] = set()
        self.loading: dict[int, asyncio.Task[None]] = {}
        # offsets partition -> producer id -> group ids with pending transactional offsets
        self._txn_groups: dict[int, dict[int, set[str]]] = {}
        # completions that arrived for a partition while it was loading
        self._deferred: dict[int, list[tuple[int, bool]]] = {}
        self._tasks = Tasks("group coordinator")

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.topic.exists():
            self._load_led_partitions()
        self._tasks.every(self.retention_check_ms / 1000, lambda: self.expire_offsets(now_ms()),
                          "offset expiration")

    async def stop(self) -> None:
        await self._tasks.cancel_all()
        for task in self.loading.values():
            task.cancel()
        await asyncio.gather(*self.loading.values(), return_exceptions=True)
        for group in self.groups.values():
            self._cancel_timers(group)
            for m in group.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.set_result(error_join(ErrorCode.not_coordinator, m.member_id))
        self._unload_consumer_groups(None)
        self._unload_share_groups(None)

    async def ensure_topic(self) -> None:
        """Create __consumer_offsets on first use and load the partitions led here."""
        await self.topic.ensure_created()
        self._load_led_partitions()

    def _load_led_partitions(self) -> None:
        for p in self.topic.partitions():
            if p in self.loaded or p in self.loading:
                continue
            part = self.topic.replica(p)
            if part is None or not part.is_leader:
                continue
            if part.log_end_offset == part.log_start_offset:
                self.loaded.add(p)  # nothing to replay
                # said as for the others: a partition missing from the log was not loaded
                log.info("loaded %s-%d (empty)", OFFSETS_TOPIC, p)
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
        self._unload_consumer_groups(p)
        self._unload_share_groups(p)
        for group in [g for g in self.groups.values() if g.partition == p]:
            self._cancel_timers(group)
            for m in group.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.set_result(error_join(ErrorCode.not_coordinator, m.member_id))
            del self.groups[group.group_id]

    def partition_for(self, group_id: str) -> int:
        return self.topic.partition_for(group_id)

    def coordinator_partition(self, group_id: str) -> int:
        """The offsets partition of `group_id`, if this broker may serve it now."""
        p = self.topic.partition_for(group_id)
        if p in self.loaded:
            return p
        if p in self.loading:
            raise GroupError(ErrorCode.coordinator_load_in_progress)
        if not self.topic.is_led_here(p):
            raise GroupError(ErrorCode.not_coordinator)
        self._load_led_partitions()
        if p in self.loaded:
            return p
        raise GroupError(ErrorCode.coordinator_load_in_progress)

    def is_loading(self) -> bool:
        return bool(self.loading)

    # ------------------------------------------------------------------ loading
    async def _load(self, p: int) -> None:
        started = time.monotonic()
        count = 0
        try:
            async for entry in replay(self.topic, p):
                count += 1
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
            self._consumer_groups_loaded(p)
            self._share_groups_loaded(p)
            self.loaded.add(p)
            log.info("loaded %s-%d (%d records) in %.0f ms", OFFSETS_TOPIC, p, count,
                     (time.monotonic() - started) * 1000)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed", OFFSETS_TOPIC, p)
        finally:
            # Only this load's own entry: a load cancelled by a move away ends after the
            # move back may have started the next one, which must stay tracked (and be
            # cancelled by the next move away).
            if self.loading.get(p) is asyncio.current_task():
                del self.loading[p]

    def _replay_record(self, p: int, offset: int, key: bytes, value: bytes | None,
                       txn_pid: int) -> None:
        k = decode_key(key)
        if k is None:
            ck = decode_consumer_key(key)
            if ck is not None:
                self._replay_consumer(p, ck, value)
                return
            sk = decode_share_key(key)
            if sk is not None:
                self._replay_share(p, sk, value)
            return
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
                removed = self.groups.pop(k.group, None)
                if removed is not None:
                    # offsets written after the tombstone start a new (simple) group
                    removed.state = GroupState.DEAD
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
    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> Done:
        """Called after a COMMIT/ABORT marker for `producer_id` was written to
        `__consumer_offsets-<offsets_partition>`: its pending offsets become committed or
        are dropped. Synchronous; the returned object may be awaited (no-op)."""
        if offsets_partition in self.loading:
            self._deferred.setdefault(offsets_partition, []).append((producer_id, commit))
        else:
            self._complete_txn(offsets_partition, producer_id, commit)
        return Done()

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
        """Write records to the offsets partition's local log (not waiting for the ISR);
        returns the last offset. Raises GroupError."""
        try:
            return self.topic.append(p, records, timestamp_ms=now_ms(), **kw)
        except Exception as exc:
            failed = write_failed(OFFSETS_TOPIC, p, _WHAT, exc, _answer)
            raise GroupError(failed.error_code) from exc

    async def _append_replicated(self, p: int, records: list[tuple[bytes, bytes | None]],
                                 **kw: Any) -> int:
        """`_append` with acks=all: returns once the ISR has the records (the caller applies
        them then); raises GroupError with Kafka's answer for a write that did not become
        durable."""
        return await self._begin_append_replicated(p, records, **kw)

    def _begin_append_replicated(self, p: int, records: list[tuple[bytes, bytes | None]],
                                 **kw: Any) -> Awaitable[int]:
        """`_append_replicated` in two halves: appends to the local log now (raising
        GroupError if it cannot), and returns the wait for the ISR (raising GroupError too)."""
        try:
            waiting = begin_write(self.topic, p, records, what=_WHAT, answer=_answer,
                                  timeout_s=self.commit_timeout_ms / 1000, **kw)
        except WriteFailed as exc:
            raise GroupError(exc.error_code) from exc.cause
        return _group_errors(waiting)

    def _store_group(self, group: ClassicGroup) -> None:
        value = group_metadata_value(group.to_value(now_ms()))
        self._append(group.partition, [(group_metadata_key(group.group_id), value)])

    # ------------------------------------------------------------------ admin
    def list_groups(self, states: Iterable[str] = (),
                    types: Iterable[str] = ()) -> tuple[ErrorCode, list[dict[str, Any]]]:
        states_l = {s.lower() for s in states}
        types_l = {t.lower() for t in types}
        out = []
        if not types_l or "consumer" in types_l:
            out += self.list_consumer_groups(states_l)
        if not types_l or "share" in types_l:
            out += self.list_share_groups(states_l)
        if types_l and "classic" not in types_l:
            return (ErrorCode.coordinator_load_in_progress if self.loading
                    else ErrorCode.none), out
        for group in self.groups.values():
            if group.partition not in self.loaded or group.is_in(GroupState.DEAD):
                continue
            if group.group_id in self.consumer_groups:
                continue  # only the offsets of a consumer group
            if states_l and group.state.value.lower() not in states_l:
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                        "group_state": group.state.value, "group_type": "classic"})
        return (ErrorCode.coordinator_load_in_progress if self.loading else ErrorCode.none), out

    def describe_group(self, group_id: str) -> dict[str, Any]:
        try:
            self.coordinator_partition(group_id)
        except GroupError as exc:
            return {"error_code": exc.error_code, "group_id": group_id, "group_state": "",
                    "protocol_type": "", "protocol_data": "", "members": []}
        group = self.groups.get(group_id)
        if group is None or group_id in self.consumer_groups:
            # Kafka (DescribeGroups before v6): a group that is not a classic one is Dead
            return {"error_code": ErrorCode.none, "group_id": group_id, "group_state": "Dead",
                    "protocol_type": "", "protocol_data": "", "members": []}
        stable = group.is_in(GroupState.STABLE)
        return {
            "error_code": ErrorCode.none,
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

    async def delete_group(self, group_id: str) -> ErrorCode:
        try:
            p = self.coordinator_partition(group_id)
        except GroupError as exc:
            return exc.error_code
        share_group = self.share_groups.get(group_id)
        if share_group is not None:
            return await self.delete_share_group(share_group)
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            code = self.delete_consumer_group(consumer_group)
            if code != ErrorCode.none or group is None:
                return code
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found
        if not group.is_in(GroupState.EMPTY):
            return ErrorCode.non_empty_group
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
        return ErrorCode.none


class _NoTopics:
    """A `TopicsView` without topics (a coordinator built without the broker's metadata)."""

    def topic_info(self, name: str) -> tuple[uuid.UUID, int] | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None

    def topic_names(self) -> Iterable[str]:
        return ()


_OFFSET_SIZE_ERRORS = frozenset({ErrorCode.message_too_large, ErrorCode.record_list_too_large})
# Answered as they are (a transactional commit by a fenced or out-of-order producer).
_PRODUCER_ERRORS = frozenset({
    ErrorCode.invalid_producer_epoch,
    ErrorCode.producer_fenced,
    ErrorCode.out_of_order_sequence_number,
})


_WHAT = "group records"


def _answer(exc: BaseException) -> ErrorCode:
    """What a group's client is told when an append to the offsets partition failed: the
    runtime's answer, and Kafka's for a commit too large or by a fenced producer."""
    code = error_code_of(exc)
    if code in _OFFSET_SIZE_ERRORS:
        return ErrorCode.invalid_commit_offset_size
    if code in _PRODUCER_ERRORS:
        return ErrorCode(code)
    return append_answer(exc)


async def _group_errors(waiting: Awaitable[int]) -> int:
    try:
        return await waiting
    except WriteFailed as exc:
        raise GroupError(exc.error_code) from exc.cause
