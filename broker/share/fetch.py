"""The share-partition leader (KIP-932): share sessions and the share-partitions led here.

`ShareFetcher` is the partition leader's side of share groups, as Kafka's SharePartitionManager
and ShareSessionCache: a share session per (group, member) names the partitions the member
fetches (ShareFetch's session epoch 0 opens it, -1 closes it, other epochs must follow the
session's own; incremental requests add and forget partitions), and one `SharePartitionState`
(broker/share/partition.py) per (group, partition led here) hands each record to one member at
a time. A read acquires records at `fetch_offset()` for the member (control records, records of
aborted transactions under read_committed, and offsets with no record are archived, never
delivered); acquisition locks expire on a timer, waking long-polling fetches.

The state is durable through the persister (broker/share/persister.py, the share coordinator
of `__share_group_state`): on first use at a leader epoch the share-partition is read back
(ReadShareGroupState, which also fences the writes of earlier leaders; one never initialized is
initialized at `share.auto.offset.reset` first), and every acknowledgement is written
(WriteShareGroupState: the start offset and the in-flight records whose state or delivery
count changed since the last write, an acquired record as available) before it is answered.
So after a leader change or a crash acknowledged records are never delivered again and records
that were in flight are delivered again, their delivery counts kept. A write that fails drops
the share-partition from memory (the acknowledgement is answered with the error): the next use
reads the persisted state. Lock expiries and released members' records are written in the
background; the share-partitions of a group whose last share session here closed are
forgotten once written (the next session reads them back, with what an admin changed).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samsa.config.group import by_duration_ms
from samsa.coordinator.share.coordinator import ShareStateError
from samsa.coordinator.share.records import StateBatch as PersistedBatch
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.records import CONTROL_ABORT, iter_batches, parse_control_record
from samsa.storage.file_region import FileRegion

from .. import metrics
from ..replication.partition import READ_COMMITTED, READ_UNCOMMITTED, Partition
from .partition import AcknowledgeType, RecordState, SharePartitionState, StateBatch

if TYPE_CHECKING:
    from .persister import SharePersister

log = logging.getLogger(__name__)

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_READS = 8  # log reads one acquisition may take past records that are not available

TopicPartition = tuple[uuid.UUID, int]


class ShareSessionError(KafkaError, code=ErrorCode.share_session_not_found): ...


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    connection: str = ""  # the client connection that opened it
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set


@dataclass(slots=True)
class LedSharePartition:
    state: SharePartitionState
    topic_id: uuid.UUID
    leader_epoch: int
    group_id: str = ""
    index: int = 0
    state_epoch: int = 0
    timer: asyncio.TimerHandle | None = None
    timer_at: int = 0
    version: int = 0  # bumped by every change to persist
    persisted: int = 0  # the version the persister has
    failed: ErrorCode | None = None  # a write failed: this state is no longer used
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # what the persister has of each in-flight offset: (delivery state, delivery count)
    written: dict[int, tuple[int, int]] = field(default_factory=dict)
    # the state's lock timeouts and archivals at the limit already counted in the metrics
    reported: tuple[int, int] = (0, 0)


class SharePartitionUnavailable(KafkaError):
    """The share-partition's persisted state could not be read (or written): `error_code` is
    what the client is told for the partition (Kafka's SharePartition.fetchPersisterError)."""


def _persister_error(exc: ShareStateError) -> ErrorCode:
    code = exc.error_code
    if code in (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                ErrorCode.coordinator_load_in_progress):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.group_id_not_found, ErrorCode.unknown_topic_or_partition):
        return code
    if code in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch):
        return ErrorCode.not_leader_or_follower
    return ErrorCode.unknown_server_error


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareFetcher:
    """The share sessions and share-partitions of this broker (as partition leader)."""

    def __init__(self, lock_ms: int, delivery_limit: int, wake: Callable[[str, int], None],
                 max_in_flight: int = 2000, persister: SharePersister | None = None) -> None:
        self.persister = persister  # None: the state is kept in memory only
        self._loading: dict[tuple[str, str, int], asyncio.Task[LedSharePartition]] = {}
        self._background: set[asyncio.Task[ErrorCode]] = set()
        self._wake = wake  # wakes the fetches waiting on a partition (records available)
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_in_flight = max_in_flight
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self.partitions: dict[tuple[str, str, int], LedSharePartition] = {}
        self.by_connection: dict[str, set[tuple[str, str]]] = {}

    # ------------------------------------------------------------------ sessions
    def open_session(self, group_id: str, member_id: str, partitions: Iterable[TopicPartition],
                     connection: str) -> ShareSession:
        """Epoch 0: a new session, on `connection`, replaces the member's old one (whose
        records are kept: they are released on close, when the connection that opened the
        session closes, or when their locks expire)."""
        key = (group_id, member_id)
        old = self.sessions.get(key)
        if old is not None:
            self.by_connection.get(old.connection, set()).discard(key)
        session = ShareSession(group_id, member_id, connection=connection)
        session.partitions.update(dict.fromkeys(partitions))
        self.sessions[key] = session
        self.by_connection.setdefault(connection, set()).add(key)
        return session

    def connection_closed(self, listener: str, peer: str) -> None:
        """A client connection closed: as Kafka, the share sessions it opened end and their
        members' records are released."""
        for group_id, member_id in self.by_connection.pop(f"{listener} {peer}", ()):
            log.info("share session of %s in group %s ends with its connection", member_id,
                     group_id)
            self.close_session(group_id, member_id)

    def session(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """The session a request with `epoch` (not 0) continues; -1 matches any epoch."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(f"Share session for member {member_id} not found.")
        if epoch != FINAL_EPOCH:
            if epoch != session.epoch:
                raise ShareSessionError(
                    f"Share session epoch {epoch} is not the expected {session.epoch}.",
                    ErrorCode.invalid_share_session_epoch)
            session.epoch = _next_epoch(session.epoch)
        return session

    def close_session(self, group_id: str, member_id: str) -> None:
        """Epoch -1, or the member left its group: the session ends and its records are
        released at once."""
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None:
            keys = self.by_connection.get(session.connection)
            if keys is not None:
                keys.discard((group_id, member_id))
                if not keys:
                    del self.by_connection[session.connection]
        for (group, topic, index), led in self.partitions.items():
            if group == group_id and led.state.release_member(member_id):
                self._report(led, topic)
                led.version += 1
                self._persist_later(led)
                self._wake(topic, index)
        if self.persister is not None and not any(g == group_id for g, _ in self.sessions):
            task = asyncio.get_running_loop().create_task(self._unload_idle(group_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _unload_idle(self, group_id: str) -> ErrorCode:
        """The group's last share session here closed: once written, its share-partitions are
        forgotten, so the next session reads them back (and sees what an admin changed
        meanwhile: AlterShareGroupOffsets, DeleteShareGroupOffsets)."""
        for key, led in list(self.partitions.items()):
            if key[0] != group_id or await self.persist(led, key[1]) != ErrorCode.none:
                continue
            if any(g == group_id for g, _ in self.sessions):
                break
            if self.partitions.get(key) is led and not led.state.acquired_count() and \
                    led.persisted >= led.version:
                self._drop(key, led)
        return ErrorCode.none

    # ------------------------------------------------------------------ share-partitions
    async def share_partition(self, group_id: str, partition: Partition,
                              reset: str) -> LedSharePartition:
        """The group's share-partition of `partition` (led here). At a new leader epoch it is
        read back from the persister (one read at a time per share-partition), or, never
        initialized, started at `reset` (earliest/latest). Raises SharePartitionUnavailable
        when the persister cannot be reached."""
        key = (group_id, partition.topic, partition.index)
        while True:
            led = self.partitions.get(key)
            if led is not None and (led.leader_epoch != partition.leader_epoch
                                    or led.topic_id != partition.topic_id):
                self._drop(key, led)
                led = None
            if led is not None:
                break
            task = self._loading.get(key)
            if task is None:
                task = self._loading[key] = asyncio.get_running_loop().create_task(
                    self._load(key, group_id, partition, reset))
                task.add_done_callback(functools.partial(self._loaded, key))
            led = await asyncio.shield(task)
            if self.partitions.get(key) is led:
                break
        if led.state.start_offset < partition.log_start_offset:
            led.state.move_start(partition.log_start_offset)
            led.version += 1
        return led

    def _loaded(self, key: tuple[str, str, int], task: asyncio.Task[LedSharePartition]) -> None:
        if self._loading.get(key) is task:
            del self._loading[key]

    async def _load(self, key: tuple[str, str, int], group_id: str, partition: Partition,
                    reset: str) -> LedSharePartition:
        epoch, topic_id = partition.leader_epoch, partition.topic_id
        default = _reset_offset(partition, reset)
        state_epoch, start = 0, default
        batches: tuple[StateBatch, ...] = ()
        if self.persister is not None:
            try:
                try:
                    read = await self.persister.read(group_id, topic_id, partition.index, epoch)
                except ShareStateError as exc:
                    if exc.error_code != ErrorCode.invalid_request:  # not "uninitialized"
                        raise
                    await self.persister.initialize(group_id, topic_id, partition.index, 0,
                                                    default)
                    read = await self.persister.read(group_id, topic_id, partition.index, epoch)
            except ShareStateError as exc:
                log.warning("reading the state of share-partition %s-%d of group %s failed: %r",
                            partition.topic, partition.index, group_id, exc)
                raise SharePartitionUnavailable(str(exc), _persister_error(exc)) from None
            state_epoch = read.state_epoch
            start = read.start_offset if read.start_offset >= 0 else default
            batches = tuple(StateBatch(b.first_offset, b.last_offset,
                                       RecordState(b.delivery_state), b.delivery_count)
                            for b in read.batches if b.delivery_state in (0, 2, 4))
        if partition.leader_epoch != epoch or partition.topic_id != topic_id:
            raise SharePartitionUnavailable("leadership moved while loading",
                                            ErrorCode.not_leader_or_follower)
        state = SharePartitionState.from_state_batches(
            start, batches, lock_ms=self.lock_ms, delivery_limit=self.delivery_limit,
            max_in_flight=self.max_in_flight)
        led = LedSharePartition(state, topic_id, epoch, group_id, partition.index, state_epoch)
        led.written = _persisted_view(state)
        self.partitions[key] = led
        log.info("share-partition %s-%d of group %s starts at offset %d (%d in flight)",
                 partition.topic, partition.index, group_id, state.start_offset,
                 len(state.records))
        return led

    def leadership_lost(self, topic: str, index: int) -> None:
        """The partition is no longer led here: its share-partitions are forgotten (a new
        leadership reads them back from the persister)."""
        for key, led in list(self.partitions.items()):
            if key[1] == topic and key[2] == index:
                self._drop(key, led)

    def _drop(self, key: tuple[str, str, int], led: LedSharePartition) -> None:
        if led.timer is not None:
            led.timer.cancel()
            led.timer = None
        if self.partitions.get(key) is led:
            del self.partitions[key]

    async def persist(self, led: LedSharePartition, topic: str) -> ErrorCode:
        """Write the share-partition's state if it changed since the last write (one write at a
        time; a write carries every change made before it started). NONE once the persister
        has every change made before this call; else the error, and the state is dropped."""
        if self.persister is None:
            return ErrorCode.none
        target = led.version
        async with led.lock:
            if led.failed is not None:
                return led.failed
            if led.persisted >= target:
                return ErrorCode.none
            version = led.version
            view = _persisted_view(led.state)
            batches = _changed_batches(view, led.written)
            try:
                await self.persister.write(led.group_id, led.topic_id, led.index,
                                           led.state_epoch, led.leader_epoch,
                                           led.state.start_offset, batches,
                                           led.state.delivery_complete_count())
            except ShareStateError as exc:
                led.failed = _persister_error(exc)
                log.warning("writing the state of share-partition %s-%d of group %s failed "
                            "(%r): it is read back on next use", topic, led.index,
                            led.group_id, exc)
                self._drop((led.group_id, topic, led.index), led)
                self._wake(topic, led.index)
                return led.failed
            led.persisted = max(led.persisted, version)
            led.written = view
            return ErrorCode.none

    def _persist_later(self, led: LedSharePartition) -> None:
        if self.persister is None:
            return
        topic = next((k[1] for k, v in self.partitions.items() if v is led), None)
        if topic is None:
            return
        task = asyncio.get_running_loop().create_task(self.persist(led, topic))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def acquire(self, led: LedSharePartition, partition: Partition, member_id: str,
                max_records: int, max_bytes: int, isolation: int,
                ) -> tuple[bytes, list[dict[str, int]]]:
        """Acquire up to `max_records` records of `partition` for `member_id`: the batches
        holding them and their (first offset, last offset, delivery count) ranges."""
        sp = led.state
        offset = sp.fetch_offset()
        now = _now_ms()
        kept: list[bytes] = []
        acquired: list[tuple[int, int]] = []
        for _ in range(MAX_READS):
            read = partition.read(offset, max_bytes, isolation, True)
            buf = read.records
            assert not isinstance(buf, FileRegion)  # read without zero_copy: the bytes
            batches = list(iter_batches(buf))
            if not batches:
                break
            aborted_txns = sorted(read.aborted or [], key=lambda a: a[1])
            aborting: set[int] = set()
            skip: set[int] = set()
            offsets: list[int] = []
            for pos, h in batches:
                while aborted_txns and aborted_txns[0][1] <= h.last_offset:
                    aborting.add(aborted_txns.pop(0)[0])
                if h.is_control:
                    if isolation == READ_COMMITTED and h.producer_id in aborting:
                        try:
                            if parse_control_record(buf, pos, h)[0] == CONTROL_ABORT:
                                aborting.discard(h.producer_id)
                        except KafkaError:
                            aborting.discard(h.producer_id)
                    skip.update(range(h.base_offset, h.next_offset))
                elif h.is_transactional and h.producer_id in aborting:
                    skip.update(range(h.base_offset, h.next_offset))
                offsets.extend(range(max(h.base_offset, offset), h.next_offset))
            got = sp.acquire(member_id, offsets, max_records - len(acquired), now, skip)
            if got:
                taken = {o for o, _ in got}
                for pos, h in batches:
                    if any(h.base_offset <= o <= h.last_offset for o in taken):
                        kept.append(bytes(buf[pos:pos + h.size]))
                acquired.extend(got)
            if acquired or len(acquired) >= max_records:
                break
            offset = max(batches[-1][1].next_offset, sp.fetch_offset())
        ranges = _ranges(acquired)
        if acquired:
            self._schedule(led, partition)
            metrics.share_acquired(led.group_id, partition.topic, partition.index, ranges)
        return b"".join(kept), ranges

    def acknowledge(self, led: LedSharePartition, partition: Partition, member_id: str,
                    batches: Iterable[Any], renew: bool = False) -> ErrorCode:
        """Apply ShareFetch/ShareAcknowledge acknowledgement batches (RENEW ones only with
        `renew`: a v2 request with IsRenewAck); the first failing one's error (its offsets
        unchanged)."""
        error = ErrorCode.none
        now = _now_ms()
        top = AcknowledgeType.RENEW if renew else AcknowledgeType.REJECT
        for b in batches:
            types = list(b.acknowledge_types)
            span = b.last_offset - b.first_offset + 1
            if span <= 0 or not types or (len(types) != 1 and len(types) != span) or \
                    any(t < 0 or t > top for t in types):
                error = error or ErrorCode.invalid_request
                continue
            if len(types) == 1:
                runs = [(b.first_offset, b.last_offset, types[0])]
            else:
                runs = []
                for i, t in enumerate(types):
                    o = b.first_offset + i
                    if runs and runs[-1][2] == t and runs[-1][1] == o - 1:
                        runs[-1] = (runs[-1][0], o, t)
                    else:
                        runs.append((o, o, t))
            for first, last, t in runs:
                code = led.state.acknowledge(member_id, first, last, AcknowledgeType(t), now)
                if code != ErrorCode.none:
                    error = error or code
                elif t != AcknowledgeType.RENEW:
                    led.version += 1
                    metrics.share_acknowledged(led.group_id, t, last - first + 1)
        self._report(led, partition.topic)
        self._wake(partition.topic, partition.index)
        if renew:
            self._schedule(led, partition)
        return error

    @staticmethod
    def _report(led: LedSharePartition, topic: str) -> None:
        """Count the state's lock timeouts and archivals at the limit since the last report."""
        now = (led.state.lock_timeouts, led.state.archived_at_limit)
        if now != led.reported:
            metrics.share_released(led.group_id, topic, led.index, now[0] - led.reported[0],
                                   now[1] - led.reported[1])
            led.reported = now

    def _schedule(self, led: LedSharePartition, partition: Partition) -> None:
        deadline = min((r.lock_deadline_ms for r in led.state.records.values()
                        if r.lock_deadline_ms), default=None)
        if deadline is None or (led.timer is not None and led.timer_at <= deadline):
            return
        if led.timer is not None:
            led.timer.cancel()
        delay = max(0, deadline - _now_ms()) / 1000
        led.timer_at = deadline
        led.timer = asyncio.get_running_loop().call_later(delay, self._expire, led, partition)

    def _expire(self, led: LedSharePartition, partition: Partition) -> None:
        led.timer = None
        if not partition.is_leader or partition.leader_epoch != led.leader_epoch:
            self._drop((led.group_id, partition.topic, partition.index), led)
            return  # led elsewhere now: the new leader owns (and writes) the state
        held = led.state.acquired_count()
        nxt = led.state.expire_locks(_now_ms())
        self._report(led, partition.topic)
        if led.state.acquired_count() != held:
            led.version += 1
            self._persist_later(led)
            self._wake(partition.topic, partition.index)
        if nxt is not None:
            self._schedule(led, partition)

    def stop(self) -> None:
        for task in [*self._loading.values(), *self._background]:
            task.cancel()
        for led in self.partitions.values():
            if led.timer is not None:
                led.timer.cancel()
        self.partitions.clear()
        self.sessions.clear()


def _persisted_view(state: SharePartitionState) -> dict[int, tuple[int, int]]:
    """Each in-flight offset as the persister keeps it: (delivery state, delivery count), an
    acquired record as available."""
    return {o: (int(RecordState.AVAILABLE if r.state == RecordState.ACQUIRED else r.state),
                r.delivery_count) for o, r in state.records.items()}


def _changed_batches(view: dict[int, tuple[int, int]],
                     written: dict[int, tuple[int, int]]) -> list[PersistedBatch]:
    """The state batches a write needs: the offsets whose persisted state changed since the
    last write (the share coordinator combines them over what it has, as Kafka's writes of
    only the batches that changed)."""
    out: list[PersistedBatch] = []
    for o in sorted(o for o, v in view.items() if written.get(o) != v):
        state, count = view[o]
        last = out[-1] if out else None
        if last is not None and last.last_offset == o - 1 and \
                (last.delivery_state, last.delivery_count) == (state, count):
            out[-1] = PersistedBatch(last.first_offset, o, state, count)
        else:
            out.append(PersistedBatch(o, o, state, count))
    return out


def _ranges(acquired: list[tuple[int, int]]) -> list[dict[str, int]]:
    """(offset, delivery count) pairs as AcquiredRecords: runs of consecutive offsets with
    one delivery count."""
    out: list[dict[str, int]] = []
    for offset, count in sorted(acquired):
        last = out[-1] if out else None
        if last is not None and last["last_offset"] == offset - 1 and \
                last["delivery_count"] == count:
            last["last_offset"] = offset
        else:
            out.append({"first_offset": offset, "last_offset": offset, "delivery_count": count})
    return out


def _reset_offset(partition: Partition, reset: str) -> int:
    """Where a share-partition never initialized starts (share.auto.offset.reset): the log
    start, or, by_duration, the first record at most that old (Kafka's SharePartition reads
    it as a READ_UNCOMMITTED ListOffsets would), else the high watermark."""
    if reset == "earliest":
        return partition.log_start_offset
    try:
        duration = by_duration_ms(reset)
    except ValueError:  # stored values were validated; a bad one reads as latest
        duration = None
    if duration is not None:
        offset = partition.fetch_offset_for_timestamp(int(time.time() * 1000) - duration,
                                                      READ_UNCOMMITTED)[0]
        if offset >= 0:
            return offset
    return partition.high_watermark
