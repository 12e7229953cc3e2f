"""The share-partition leader (KIP-932): share sessions and the share-partitions led here.

`ShareFetcher` is the partition leader's side of share groups, as Kafka's SharePartitionManager
and ShareSessionCache: a share session per (group, member) names the partitions the member
fetches (ShareFetch's session epoch 0 opens it, -1 closes it, other epochs must follow the
session's own; incremental requests add and forget partitions), and one `SharePartitionState`
(broker/share_partition.py) per (group, partition led here) hands each record to one member at
a time. A read acquires records at `fetch_offset()` for the member (control records, records of
aborted transactions under read_committed, and offsets with no record are archived, never
delivered); acquisition locks expire on a timer, waking long-polling fetches.

The state is in memory only: a leader change (a new leader epoch) or a restart starts the
share-partition again at `share.auto.offset.reset`, so acknowledgements are lost then.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.records import CONTROL_ABORT, iter_batches, parse_control_record
from samsa.storage.file_region import FileRegion

from .partition import READ_COMMITTED, Partition
from .share_partition import AcknowledgeType, SharePartitionState

log = logging.getLogger(__name__)

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_READS = 8  # log reads one acquisition may take past records that are not available

TopicPartition = tuple[uuid.UUID, int]


class ShareSessionError(KafkaError):
    error_code = ErrorCode.share_session_not_found


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
    timer: asyncio.TimerHandle | None = None
    timer_at: int = 0


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareFetcher:
    """The share sessions and share-partitions of this broker (as partition leader)."""

    def __init__(self, lock_ms: int, delivery_limit: int, wake: Callable[[str, int], None],
                 max_in_flight: int = 2000) -> None:
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
                self._wake(topic, index)

    # ------------------------------------------------------------------ share-partitions
    def share_partition(self, group_id: str, partition: Partition,
                        reset: str) -> LedSharePartition:
        """The group's share-partition of `partition` (led here), started at `reset`
        (earliest/latest) when this leader has none for the current leader epoch."""
        key = (group_id, partition.topic, partition.index)
        led = self.partitions.get(key)
        if led is not None and (led.leader_epoch != partition.leader_epoch
                                or led.topic_id != partition.topic_id):
            if led.timer is not None:
                led.timer.cancel()
            led = None
        if led is None:
            start = (partition.log_start_offset if reset == "earliest"
                     else partition.high_watermark)
            state = SharePartitionState(start, lock_ms=self.lock_ms,
                                        delivery_limit=self.delivery_limit,
                                        max_in_flight=self.max_in_flight)
            led = self.partitions[key] = LedSharePartition(state, partition.topic_id,
                                                           partition.leader_epoch)
            log.info("share-partition %s-%d of group %s starts at offset %d", partition.topic,
                     partition.index, group_id, start)
        if led.state.start_offset < partition.log_start_offset:
            led.state.move_start(partition.log_start_offset)
        return led

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
        if acquired:
            self._schedule(led, partition)
        return b"".join(kept), _ranges(acquired)

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
        self._wake(partition.topic, partition.index)
        if renew:
            self._schedule(led, partition)
        return error

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
        held = led.state.acquired_count()
        nxt = led.state.expire_locks(_now_ms())
        if led.state.acquired_count() != held:
            self._wake(partition.topic, partition.index)
        if nxt is not None:
            self._schedule(led, partition)

    def stop(self) -> None:
        for led in self.partitions.values():
            if led.timer is not None:
                led.timer.cancel()
        self.partitions.clear()
        self.sessions.clear()


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
