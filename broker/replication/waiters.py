"""The requests parked on a partition, and what wakes them (per partition, as Kafka's delayed
fetch and delayed produce purgatories are keyed by partition): consumers' and followers' fetch
long-polls, woken by new data, and acks=all appends, each woken by the high-watermark advance
that reaches its offset or by a change of leadership."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class PartitionWaiters:
    __slots__ = ("_fetches", "_follower_fetches", "_replicated", "_sequence")

    def __init__(self) -> None:
        # Consumers' fetches read up to the HW or the LSO; followers' up to the log end
        # offset, so an HW advance gives them nothing: as in Kafka, it does not wake them.
        self._fetches: set[asyncio.Future[None]] = set()
        self._follower_fetches: set[asyncio.Future[None]] = set()
        # acks=all waits: a heap of (offset the HW must reach, sequence, future). An advance
        # of the HW wakes only the waits it satisfies; an append does not wake them at all.
        self._replicated: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._sequence = itertools.count()

    def add_fetch(self, fut: asyncio.Future[None], follower: bool) -> None:
        (self._follower_fetches if follower else self._fetches).add(fut)

    def discard_fetch(self, fut: asyncio.Future[None], follower: bool) -> bool:
        """Forget a parked fetch; False if this partition had woken it (and forgotten it)."""
        parked = self._follower_fetches if follower else self._fetches
        if fut in parked:
            parked.remove(fut)
            return True
        return False

    def wake_fetches(self, followers: bool = False) -> bool:
        """Wake consumers' fetch long-polls, and with `followers` the followers' too. True if
        any was woken."""
        if not self._fetches and not (followers and self._follower_fetches):
            return False  # nobody parked: the usual case after an append
        woke = False
        for parked in (self._fetches, self._follower_fetches) if followers else (self._fetches,):
            for fut in parked:
                if not fut.done():
                    fut.set_result(None)
                    woke = True
            parked.clear()
        return woke

    async def replicated(self, offset: int, timeout_s: float) -> None:
        """Park until the high watermark reaches `offset` (`wake_replicated`), everything is
        woken (`wake_all`) or `timeout_s` passes: one future and one timer (not
        asyncio.wait_for around a shield)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        entry = (offset, next(self._sequence), fut)
        heapq.heappush(self._replicated, entry)
        timer = loop.call_later(timeout_s, _time_out, fut)
        try:
            await fut
        finally:
            timer.cancel()
            if fut.cancelled() or not fut.result():  # not woken: still in the heap
                self._forget(entry)

    def wake_replicated(self, hw: int) -> None:
        """The high watermark reached `hw`: wake the acks=all waits it satisfies."""
        heap = self._replicated
        while heap and heap[0][0] <= hw:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(True)

    def wake_all(self) -> None:
        """Wake every waiter: fetch long-polls and acks=all waits (which look again at the
        HW and the leadership)."""
        self.wake_fetches(followers=True)
        heap, self._replicated = self._replicated, []
        for _, _, fut in heap:
            if not fut.done():
                fut.set_result(True)

    def _forget(self, entry: tuple[int, int, asyncio.Future[bool]]) -> None:
        try:
            self._replicated.remove(entry)
        except ValueError:
            return
        heapq.heapify(self._replicated)


def _time_out(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)
