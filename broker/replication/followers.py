"""A leader's view of its followers, and the ISR changes it makes from it (Kafka's Partition
with its Replica objects and its pending AlterPartition): each follower's log end offset and
when it last caught up, from its fetches; a caught-up follower joins the ISR, one lagging more
than replica.lag.time.max.ms leaves it. A change is written through the partition's
`isr_writer` (ZooKeeper, conditional on the partition state) and applied only once written;
without a writer (a single broker) it applies at once."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .partition import Partition


class Followers:
    __slots__ = ("_partition", "_leo", "_caught_up_at", "_last_fetch", "in_flight",
                 "_change_from")

    def __init__(self, partition: Partition) -> None:
        self._partition = partition
        self._leo: dict[int, int] = {}
        self._caught_up_at: dict[int, float] = {}
        # Per follower: (leader log end, time) at its previous fetch (Kafka's
        # lastFetchLeaderLogEndOffset / lastFetchTimeMs).
        self._last_fetch: dict[int, tuple[int, float]] = {}
        # The ISR being written (None: no change in flight), and the ISR it was made from:
        # the write must find that one still stored (see change_from).
        self.in_flight: list[int] | None = None
        self._change_from: list[int] = []

    # ---- leadership changes ----------------------------------------------------------------
    def lead(self, replicas: list[int]) -> None:
        """This broker became the leader: every follower counts as caught up now."""
        now = time.monotonic()
        self._leo = {}
        self._last_fetch = {}
        self._caught_up_at = {r: now for r in replicas if r != self._partition.broker_id}
        self.in_flight = None

    def follow(self) -> None:
        """This broker follows: the followers' offsets are another leader's to know."""
        self._leo = {}

    def track(self, replicas: list[int]) -> None:
        """The assigned replicas become `replicas` under the same leadership (a
        reassignment): a new follower's lag is measured from now."""
        now = time.monotonic()
        partition = self._partition
        for r in replicas:
            if r != partition.broker_id and r not in partition.replicas:
                self._caught_up_at[r] = now

    # ---- fetches -----------------------------------------------------------------------------
    def log_end_offset(self, replica_id: int) -> int:
        """A follower's log end offset as its last fetch told us (-1: not known)."""
        return self._leo.get(replica_id, -1)

    def record_fetch(self, replica_id: int, fetch_offset: int, broker_epoch: int) -> bool:
        """A follower fetching from `fetch_offset` has everything before it; once caught up to
        the high watermark (and the start of this leader's epoch) it joins the ISR. True if
        its log end offset changed (an ISR change looks at the high watermark itself)."""
        partition = self._partition
        leo = partition.log_end_offset
        now = time.monotonic()
        known = self._leo
        moved = known.get(replica_id) != fetch_offset
        known[replica_id] = fetch_offset
        # Caught up now if at the log end; otherwise caught up as of its previous fetch if it
        # has reached the log end of that moment (Kafka's Replica.updateFetchStateOrThrow):
        # under a steady produce rate a follower that keeps up is rarely exactly at the end.
        previous_leo, previous_at = self._last_fetch.get(replica_id, (-1, 0.0))
        if fetch_offset >= leo:
            self._caught_up_at[replica_id] = now
        elif fetch_offset >= previous_leo >= 0:
            caught = max(self._caught_up_at.get(replica_id, previous_at), previous_at)
            self._caught_up_at[replica_id] = caught
        self._last_fetch[replica_id] = (leo, now)
        if (
            replica_id not in partition.isr
            and fetch_offset >= partition.high_watermark
            and fetch_offset >= partition.leader_epoch_start_offset
            and self._eligible(replica_id, broker_epoch)
        ):
            self._change([*partition.isr, replica_id])
        return moved

    def _eligible(self, replica_id: int, broker_epoch: int) -> bool:
        """A caught-up follower joins the ISR only if its broker is registered, and in the
        life its fetch names: one cut off from ZooKeeper may fetch again before it has
        registered again, and a controller would then treat its place in the ISR as a
        previous life's and take it out (shrinking the ISR below min.insync.replicas)."""
        eligible = self._partition.replica_eligible
        return eligible is None or eligible(replica_id, broker_epoch)

    def shrink_if_lagging(self, lag_ms: int) -> None:
        """Take out of the ISR the followers behind the log end that have not caught up for
        more than `lag_ms`."""
        partition = self._partition
        now = time.monotonic()
        leo = partition.log_end_offset
        lagging = [
            r
            for r in partition.isr
            if r != partition.broker_id
            and self._leo.get(r, -1) < leo
            and now - self._caught_up_at.get(r, now) > lag_ms / 1000
        ]
        if lagging:
            self._change([r for r in partition.isr if r not in lagging])

    def high_watermark_bound(self, isr: list[int], leo: int) -> int:
        """The smallest log end offset of the ISR's followers and of those joining it (Kafka's
        "maximal ISR": while a change is written, the HW counts the union of the old and the
        new ISR, so a joining follower is never left below the HW, which a later leader from
        the new ISR would otherwise lack acknowledged records of)."""
        me, known = self._partition.broker_id, self._leo
        bound = leo
        for r in isr:
            if r != me:
                bound = min(bound, known.get(r, -1))
        for r in self.in_flight or ():
            if r != me:
                bound = min(bound, known.get(r, -1))
        return bound

    # ---- ISR changes -------------------------------------------------------------------------
    @property
    def change_from(self) -> list[int]:
        """The ISR the change being written was made from: if the stored ISR is another (the
        controller changed it meanwhile, e.g. took a dead broker out), the change is stale and
        must not be written over it (as Kafka's AlterPartition carries the partition epoch it
        was made at, and ZooKeeper-era leaders wrote conditional on the zkVersion they knew)."""
        return list(self._change_from)

    def _change(self, isr: list[int]) -> None:
        partition = self._partition
        writer = partition.isr_writer
        if writer is None:
            partition.isr = isr
            partition.advance_high_watermark()  # as a written change does
            return
        if self.in_flight is not None:
            return
        self.in_flight = isr
        self._change_from = list(partition.isr)

        async def write() -> None:
            try:
                if await writer(partition, isr):
                    partition.isr = isr
            finally:
                self.in_flight = None
                partition.advance_high_watermark()

        asyncio.get_running_loop().create_task(write())
