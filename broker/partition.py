"""A partition as this broker sees it: its log plus leadership state (leader epoch, HW, ISR).

All appends and reads of a partition go through this class, so that leadership checks,
high-watermark movement and waking of long-polling fetches live in one place.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from protocol.records import iter_batches
from storage.log import Log

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(slots=True)
class PartitionRead:
    records: bytes
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None  # (producer_id, first_offset); None for read_uncommitted
    error_code: int = 0


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID,
        log: Log,
        leader_epoch: int,
        replicas: list[int],
        broker_id: int,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.broker_id = broker_id
        self.isr = list(replicas)
        self._waiters: set[asyncio.Future[None]] = set()

    @property
    def is_leader(self) -> bool:
        return self.replicas[0] == self.broker_id if self.replicas else False

    def append_as_leader(self, records: bytes, origin: str = "client"):  # -> storage.log.AppendInfo
        info = self.log.append_as_leader(records, self.leader_epoch, origin=origin)
        if not info.duplicate:
            self._advance_high_watermark()
        return info

    def _advance_high_watermark(self) -> None:
        # Single replica: everything written is replicated. The cluster issue replaces this
        # with min(LEO over the ISR).
        self.log.update_high_watermark(self.log.log_end_offset)
        self.log.producer_state.on_high_watermark(self.log.high_watermark)
        self.notify_waiters()

    def notify_waiters(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def discard_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

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
                upper = _offset_after(records)
                aborted = [
                    (t.producer_id, t.first_offset)
                    for t in log.collect_aborted_transactions(fetch_offset, upper)
                ]
        return PartitionRead(records, hw, lso, log.log_start_offset, aborted)


def _offset_after(records: bytes) -> int:
    last = -1
    for _pos, header in iter_batches(records):
        last = header.last_offset
    return last + 1
