"""A partition as this broker sees it: its log plus leadership state (leader epoch, HW, ISR).

All appends and reads of a partition go through this class, so that leadership checks,
high-watermark movement and waking of long-polling fetches live in one place.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from storage.log import FetchDataInfo, Log

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(slots=True)
class PartitionRead:
    records: bytes | memoryview
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None  # (producer_id, first_offset); None for read_uncommitted
    error_code: int = 0


class Partition:
    """Leader or follower replica of one partition.

    As leader it tracks each follower's log end offset (from its fetches), keeps the ISR
    (members caught up within `replica.lag.time.max.ms`) and moves the high watermark to the
    smallest log end offset in the ISR. With one replica this is "HW = LEO after each append".
    ISR changes go through `isr_writer` (ZooKeeper, conditional on the partition state), and
    are applied here only once written; without a writer (single broker) they apply at once.
    """

    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID,
        log: Log,
        leader_epoch: int,
        replicas: list[int],
        broker_id: int,
        leader_id: int | None = None,
        isr: list[int] | None = None,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.broker_id = broker_id
        self.leader_id = (replicas[0] if replicas else -1) if leader_id is None else leader_id
        self.isr = list(replicas if isr is None else isr)
        self.min_insync_replicas = 1
        self.isr_writer: Callable[[Partition, list[int]], Awaitable[bool]] | None = None
        self.leader_epoch_start_offset = log.log_end_offset
        self._follower_leo: dict[int, int] = {}
        self._caught_up_at: dict[int, float] = {}
        # The ISR being written to ZooKeeper (None: no change in flight).
        self._isr_in_flight: list[int] | None = None
        self._waiters: set[asyncio.Future[None]] = set()

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    # ---- leadership changes (from the metadata store) -------------------------------------
    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int]) -> None:
        # First: a failing disk (KafkaStorageError) leaves the partition as it was.
        self.log.assign_leader_epoch(leader_epoch, self.log.log_end_offset)
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.leader_epoch_start_offset = self.log.log_end_offset
        now = time.monotonic()
        self._follower_leo = {}
        self._caught_up_at = {r: now for r in replicas if r != self.broker_id}
        self._isr_in_flight = None
        self._advance_high_watermark()
        self.notify_waiters()

    def make_follower(
        self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int]
    ) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self._follower_leo = {}
        self.notify_waiters()  # long-polls parked here must answer NOT_LEADER_OR_FOLLOWER

    def update_isr(self, isr: list[int]) -> None:
        """The ISR as stored (the controller removes dead brokers)."""
        self.isr = list(isr)
        if self.is_leader:
            self._advance_high_watermark()

    # ---- leader side -------------------------------------------------------------------
    def append_as_leader(self, records: bytes, origin: str = "client"):  # -> storage.log.AppendInfo
        info = self.log.append_as_leader(records, self.leader_epoch, origin=origin)
        if not info.duplicate:
            self._advance_high_watermark()
            self.notify_waiters()  # followers long-poll on the log end offset
        return info

    def record_follower_fetch(self, replica_id: int, fetch_offset: int) -> None:
        """A follower fetching from `fetch_offset` has everything before it."""
        if replica_id not in self.replicas:
            return
        leo = self.log.log_end_offset
        self._follower_leo[replica_id] = fetch_offset
        if fetch_offset >= leo:
            self._caught_up_at[replica_id] = time.monotonic()
        if (
            replica_id not in self.isr
            and fetch_offset >= self.log.high_watermark
            and fetch_offset >= self.leader_epoch_start_offset
        ):
            self._change_isr([*self.isr, replica_id])
        self._advance_high_watermark()

    def shrink_isr_if_lagging(self, lag_ms: int) -> None:
        if not self.is_leader or len(self.isr) <= 1:
            return
        now = time.monotonic()
        leo = self.log.log_end_offset
        lagging = [
            r
            for r in self.isr
            if r != self.broker_id
            and self._follower_leo.get(r, -1) < leo
            and now - self._caught_up_at.get(r, now) > lag_ms / 1000
        ]
        if lagging:
            self._change_isr([r for r in self.isr if r not in lagging])

    def _change_isr(self, isr: list[int]) -> None:
        if self.isr_writer is None:
            self.isr = isr
            return
        if self._isr_in_flight is not None:
            return
        # Kafka's "maximal ISR": while the change is being written, the HW counts the union
        # of the old and the new ISR, so a joining follower is never left below the HW (a
        # later leader from the new ISR would otherwise lack acknowledged records).
        self._isr_in_flight = isr

        async def write() -> None:
            try:
                assert self.isr_writer is not None
                if await self.isr_writer(self, isr):
                    self.isr = isr
            finally:
                self._isr_in_flight = None
                self._advance_high_watermark()

        asyncio.get_running_loop().create_task(write())

    def _advance_high_watermark(self) -> None:
        """HW = smallest log end offset in the ISR; it never moves back."""
        if not self.is_leader:
            return
        new_hw = self.log.log_end_offset
        for r in self.isr:
            if r != self.broker_id:
                new_hw = min(new_hw, self._follower_leo.get(r, -1))
        for r in self._isr_in_flight or ():
            if r != self.broker_id:
                new_hw = min(new_hw, self._follower_leo.get(r, -1))
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            self.notify_waiters()

    async def wait_for_high_watermark(self, offset: int, timeout_s: float) -> bool:
        """acks=all: wait until everything before `offset` is replicated to the ISR."""
        deadline = time.monotonic() + timeout_s
        while self.log.high_watermark < offset:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.is_leader:
                return False
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.add(fut)
            try:
                await asyncio.wait_for(asyncio.shield(fut), remaining)
            except TimeoutError:
                pass
            finally:
                self._waiters.discard(fut)
        return True

    # ---- waiters (fetch long-polls, acks=all) ------------------------------------------
    def notify_waiters(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def discard_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    # ---- follower side -----------------------------------------------------------------
    def append_as_follower(self, records: bytes, leader_hw: int, leader_log_start: int) -> None:
        if records:
            self.log.append_as_follower(records)
        if leader_log_start > self.log.log_start_offset:
            try:
                self.log.delete_records_before(min(leader_log_start, self.log.high_watermark))
            except Exception:  # the next fetch brings the HW that allows it
                pass
        hw = min(leader_hw, self.log.log_end_offset)
        if hw > self.log.high_watermark:
            self.log.update_high_watermark(hw)
            self.notify_waiters()

    def read_for_follower(self, fetch_offset: int, max_bytes: int) -> PartitionRead:
        """Followers read up to the log end offset, not the high watermark."""
        data = self.log.read(fetch_offset, max_bytes, None, True)
        log = self.log
        return PartitionRead(
            data.records, log.high_watermark, log.last_stable_offset, log.log_start_offset, None
        )

    def read(
        self, fetch_offset: int, max_bytes: int, isolation_level: int, min_one_message: bool
    ) -> PartitionRead:
        log = self.log
        hw = log.high_watermark
        lso = log.last_stable_offset
        max_offset = lso if isolation_level == READ_COMMITTED else hw
        data = log.read(fetch_offset, max_bytes, max_offset, min_one_message)
        records = data.records
        aborted: list[tuple[int, int]] | None = None
        if isolation_level == READ_COMMITTED:
            aborted = []
            if records:
                upper = data.next_offset  # the offset after the last batch returned
                aborted = [
                    (t.producer_id, t.first_offset)
                    for t in log.collect_aborted_transactions(fetch_offset, upper)
                ]
        return PartitionRead(records, hw, lso, log.log_start_offset, aborted)

    # ---- the coordinators' view of an internal-topic partition (coordinator.ports) -------
    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def read_records(self, offset: int, max_bytes: int, max_offset: int) -> FetchDataInfo:
        """At least one batch from `offset` on, below `max_offset` whatever the high watermark
        (a coordinator replays its partition up to the log end)."""
        return self.log.read(offset, max_bytes, max_offset, True)
