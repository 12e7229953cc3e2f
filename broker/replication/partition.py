"""A partition as this broker sees it: its log plus leadership state (leader epoch, HW, ISR).

All appends and reads of a partition go through this class, so that leadership checks,
high-watermark movement and waking of long-polling fetches live in one place. Request
handlers never touch `partition.log`: what they need of the log (offsets, the leader epoch
cache, producer state, deleting records) is a method here.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from samsa.config.forward import Forward
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.storage.config import LogConfig
from samsa.storage.errors import OffsetOutOfRange
from samsa.storage.file_region import FileRegion
from samsa.storage.log import AppendInfo, FetchDataInfo, Log
from samsa.storage.producer_entry import ProducerEntry
from samsa.storage.verification_state import VerificationState

from .followers import Followers
from .waiters import PartitionWaiters

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6  # ListOffsets v11 (KIP-1023)
NOT_FOUND = (-1, -1, -1)  # offset, timestamp, leader epoch of an empty ListOffsets answer
HIGH_WATERMARK = -1  # DeleteRecords: "up to the high watermark" (DeleteRecordsRequest)


class FencedLeaderEpoch(KafkaError):
    """The caller's leader epoch is older than ours."""

    error_code = ErrorCode.fenced_leader_epoch


class UnknownLeaderEpoch(KafkaError):
    """The caller's leader epoch is newer than ours (we have not learned of it yet)."""

    error_code = ErrorCode.unknown_leader_epoch


class PartitionError(KafkaError):
    """A partition request this broker cannot serve (not hosted, not led, offline, or a
    handler's per-partition refusal), answered with `error_code`."""

    def __init__(self, error_code: ErrorCode | int, message: str = "") -> None:
        code = ErrorCode(error_code)
        super().__init__(message or code.name, code)


class OffsetNotAvailable(KafkaError):
    """A new leader whose high watermark has not reached the start of its epoch cannot yet
    tell where the committed end is."""

    error_code = ErrorCode.offset_not_available


@dataclass(slots=True)
class PartitionRead:
    records: bytes | memoryview | FileRegion  # a FileRegion: read with zero_copy
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None  # (producer_id, first_offset); None for read_uncommitted


class Partition:
    """Leader or follower replica of one partition.

    As leader it moves the high watermark to the smallest log end offset in the ISR, which
    `followers` (followers.py) keeps from the followers' fetches. With one replica this is
    "HW = LEO after each append". The requests parked here are `waiters` (waiters.py).
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
        # fn(replica id, the broker epoch its fetch carried, -1 none) -> may it join the ISR
        # (Kafka's isReplicaIsrEligible: registered, in the life its fetch names; KIP-903).
        # None: every replica may (a single broker).
        self.replica_eligible: Callable[[int, int], bool] | None = None
        self.leader_epoch_start_offset = log.log_end_offset
        self.followers = Followers(self)
        self.waiters = PartitionWaiters()
        # Whether the latest append_as_leader woke parked fetches: the replica manager reads
        # it right after a Produce's appends and lets those fetches answer before it goes on.
        self.append_woke_fetches = False

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
        self.followers.lead(replicas)
        self.advance_high_watermark()
        self.notify_waiters()

    def make_follower(
        self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int]
    ) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.followers.follow()
        self.notify_waiters()  # long-polls parked here must answer NOT_LEADER_OR_FOLLOWER

    def update_replicas(self, replicas: list[int]) -> None:
        """The assigned replicas changed under the same leadership (a reassignment); a new
        follower's lag is measured from now."""
        self.followers.track(replicas)
        before = self.effective_min_isr
        self.replicas = list(replicas)
        self._min_isr_lowered(before)

    def update_isr(self, isr: list[int]) -> None:
        """The ISR as stored (the controller removes dead brokers)."""
        self.isr = list(isr)
        if self.is_leader:
            self.advance_high_watermark()

    # ---- leader side -------------------------------------------------------------------
    def append_as_leader(self, records: bytes, origin: str = "client",
                         transaction_version: int = 0, verify: bool = False,
                         guard: VerificationState | None = None) -> AppendInfo:
        """`verify`, `guard`: KIP-890's check of a transaction's first batch (Log's)."""
        info: AppendInfo = self.log.append_as_leader(records, self.leader_epoch, origin=origin,
                                                     transaction_version=transaction_version,
                                                     verify=verify, guard=guard)
        woke = False
        if not info.duplicate:
            woke = self.advance_high_watermark()
            # followers long-poll on the log end offset
            woke = self.waiters.wake_fetches(followers=True) or woke
        self.append_woke_fetches = woke
        return info

    def record_follower_fetch(self, replica_id: int, fetch_offset: int,
                              broker_epoch: int = -1) -> None:
        """A follower fetching from `fetch_offset` has everything before it; `broker_epoch`:
        the fetching broker's epoch as its fetch carried it (-1: not carried)."""
        if replica_id not in self.replicas:
            return
        # As Kafka's updateFollowerFetchState: the HW is looked at again only if the
        # follower's log end offset changed; everything else that may move it (appends, ISR
        # and leadership changes, a lower min ISR) looks at it itself. A caught-up follower
        # of many idle partitions changes nothing.
        if self.followers.record_fetch(replica_id, fetch_offset, broker_epoch):
            self.advance_high_watermark()

    def shrink_isr_if_lagging(self, lag_ms: int) -> None:
        if self.is_leader and len(self.isr) > 1:
            self.followers.shrink_if_lagging(lag_ms)

    @property
    def effective_min_isr(self) -> int:
        """min.insync.replicas, at most the replication factor (Kafka's effectiveMinIsr)."""
        return min(self.min_insync_replicas, max(len(self.replicas), 1))

    def advance_high_watermark(self) -> bool:
        """HW = smallest log end offset in the ISR; it never moves back, and not at all while
        the ISR is below min.insync.replicas (Kafka's maybeIncrementLeaderHW, KIP-966): an
        acks=all append made before the ISR shrank then waits for it to grow back instead of
        being answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, which a client retries as a record
        that may not be written. True if an advance woke parked consumer fetches."""
        isr, me = self.isr, self.broker_id
        # (is_leader and effective_min_isr inline: this runs after every append)
        if (self.leader_id != me
                or len(isr) < min(self.min_insync_replicas, max(len(self.replicas), 1))):
            return False
        log = self.log
        new_hw = log.log_end_offset
        followers = self.followers
        if len(isr) > 1 or isr[0] != me or followers.in_flight is not None:
            new_hw = followers.high_watermark_bound(isr, new_hw)
        if new_hw <= log.high_watermark:
            return False
        log.update_high_watermark(new_hw)
        waiters = self.waiters
        woke = waiters.wake_fetches()
        waiters.wake_replicated(new_hw)
        return woke

    async def wait_for_high_watermark(self, offset: int, timeout_s: float) -> bool:
        """acks=all: wait until everything before `offset` is replicated to the ISR.

        One future and one timer per wait (not asyncio.wait_for around a shield), woken by
        the HW advance that reaches `offset` or by a change of leadership (notify_waiters),
        not by every append or HW step before it: with several produce requests in flight
        to a replicated partition, each used to wake up, look and park again on each."""
        if self.log.high_watermark >= offset:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.log.high_watermark < offset:
            remaining = deadline - loop.time()
            if remaining <= 0 or not self.is_leader:
                return False
            await self.waiters.replicated(offset, remaining)
        return True

    # ---- waiters (fetch long-polls, acks=all) ------------------------------------------
    def notify_waiters(self) -> None:
        """Wake every waiter: fetch long-polls and acks=all waits (which look again at the
        HW and the leadership)."""
        self.waiters.wake_all()

    def add_waiter(self, fut: asyncio.Future[None], follower: bool = False) -> None:
        self.waiters.add_fetch(fut, follower)

    def discard_waiter(self, fut: asyncio.Future[None], follower: bool = False) -> bool:
        """False if this partition woke the fetch (`add_waiter`)."""
        return self.waiters.discard_fetch(fut, follower)

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

    def truncate_to(self, offset: int) -> None:
        """Follower: drop everything from `offset` on (a diverging epoch, or ahead of the
        leader's high watermark)."""
        self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Follower behind the leader's log start: empty the log and start at `offset`."""
        self.log.truncate_fully_and_start_at(offset)

    @property
    def latest_epoch(self) -> int | None:
        """The leader epoch of the last batch in the log (None: no epoch yet)."""
        epoch: int | None = self.log.latest_epoch
        return epoch

    def read_for_follower(self, fetch_offset: int, max_bytes: int,
                          zero_copy: bool = False) -> PartitionRead:
        """Followers read up to the log end offset, not the high watermark."""
        log = self.log
        start = log.log_start_offset
        if fetch_offset == log.log_end_offset and fetch_offset >= start and not log.offline:
            # Caught up (a follower of many idle partitions: most of them, in most fetches):
            # nothing to read, and no segment to look at (what log.read answers).
            return PartitionRead(b"", log.high_watermark, log.last_stable_offset, start, None)
        data = log.read(fetch_offset, max_bytes, None, True, zero_copy)
        return PartitionRead(
            data.records, log.high_watermark, log.last_stable_offset, log.log_start_offset, None
        )

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """A follower's fetch from `fetch_offset` after records of `last_fetched_epoch`: None
        if our log agrees, else (epoch, end offset) of ours it must truncate to first (Kafka's
        diverging epoch). OffsetOutOfRange if we have no epoch at or below its epoch."""
        if last_fetched_epoch < 0:
            return None
        found_epoch, end = self.end_offset_for_epoch(last_fetched_epoch)
        if found_epoch < 0 or end < 0:
            raise OffsetOutOfRange(f"no epoch at or below {last_fetched_epoch} on the leader")
        if found_epoch < last_fetched_epoch or end < fetch_offset:
            return found_epoch, end
        return None

    def read(
        self, fetch_offset: int, max_bytes: int, isolation_level: int, min_one_message: bool,
        zero_copy: bool = False,
    ) -> PartitionRead:
        """Records for a consumer, up to the high watermark (the last stable offset with
        read_committed). With `zero_copy` large records are a FileRegion of the segment for the
        socket layer to send from the file (storage/file_region.py)."""
        log = self.log
        hw = log.high_watermark
        lso = log.last_stable_offset
        committed = isolation_level == READ_COMMITTED
        max_offset = lso if committed else hw
        start = log.log_start_offset
        if fetch_offset == max_offset and fetch_offset >= start and not log.offline:
            # Caught up (a consumer of many partitions at a low rate: most of them, in most
            # fetches): nothing to read, and no segment to look at (what log.read answers).
            return PartitionRead(b"", hw, lso, start, [] if committed else None)
        data = log.read(fetch_offset, max_bytes, max_offset, min_one_message, zero_copy)
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


    # ---- the log's state, for requests ----------------------------------------------------
    high_watermark = Forward[int]("log.high_watermark")
    last_stable_offset = Forward[int]("log.last_stable_offset")
    log_start_offset = Forward[int]("log.log_start_offset")
    log_end_offset = Forward[int]("log.log_end_offset")
    config = Forward[LogConfig]("log.config")
    log_dir = Forward[str]("log.parent_dir", "The log directory holding this partition's log.")

    def reconfigure(self, config: LogConfig, min_insync_replicas: int) -> None:
        """A topic config change (AlterConfigs, or seen in the metadata store)."""
        self.log.config = config
        before = self.effective_min_isr
        self.min_insync_replicas = min_insync_replicas
        self._min_isr_lowered(before)

    def _min_isr_lowered(self, before: int) -> None:
        """The HW held back by an ISR below min.insync.replicas moves as soon as that minimum
        is lowered below `before` (not only at a follower's next fetch: one at the same
        offset does not look at the HW)."""
        if self.effective_min_isr < before and self.is_leader:
            self.advance_high_watermark()

    def replace_log(self, log: Log) -> None:
        """The replica moved to another log directory (broker/replication/log_dir_mover.py): `log`,
        the future log reopened as current with the same offsets, epochs and producer state,
        serves the partition from now on (Kafka's maybeReplaceCurrentWithFutureReplica)."""
        self.log = log

    @property
    def size_in_bytes(self) -> int:
        return self.log.size_in_bytes

    def check_leader_epoch(self, current: int) -> None:
        """Fence a caller whose idea of the leader epoch differs from ours (-1: not checked)."""
        if current != -1 and current != self.leader_epoch:
            if current < self.leader_epoch:
                raise FencedLeaderEpoch(f"epoch {current} < {self.leader_epoch}")
            raise UnknownLeaderEpoch(f"epoch {current} > {self.leader_epoch}")

    def check_local(self, current_epoch: int, leader_only: bool = True) -> None:
        """May this replica serve a request that knows `current_epoch` (-1: none): the epoch
        first, then (`leader_only`) the leadership, as Kafka's Partition.getLocalLog. A
        follower (or a restarted leader waiting to lead again) answers a client ahead of it
        UNKNOWN_LEADER_EPOCH, which it retries here, and one behind FENCED_LEADER_EPOCH;
        NOT_LEADER_OR_FOLLOWER only at the epoch it holds."""
        if current_epoch != -1 and current_epoch != self.leader_epoch:
            self.check_leader_epoch(current_epoch)
        if leader_only and self.leader_id != self.broker_id:
            raise PartitionError(ErrorCode.not_leader_or_follower)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, its end offset), (-1, -1) if there is none (Kafka's
        OffsetForLeaderEpoch answer)."""
        return self.log.end_offset_for_epoch(epoch)

    def fetch_offset_for_timestamp(
        self, timestamp: int, isolation_level: int | None
    ) -> tuple[int, int, int]:
        """ListOffsets: (offset, timestamp, leader epoch) for `timestamp` (or one of the special
        timestamps), as Kafka's Partition.fetchOffsetForTimestamp answers it (no tiered
        storage here). `isolation_level` None: the caller is no consumer, and sees up to the
        log end offset."""
        log = self.log
        if isolation_level is None:
            fetchable = log.log_end_offset
        elif isolation_level == READ_COMMITTED:
            fetchable = log.last_stable_offset
        else:
            fetchable = log.high_watermark
        # A new leader whose high watermark has not yet reached the start of its epoch cannot
        # tell a client where the committed end is.
        lagging = (
            isolation_level is not None and self.leader_epoch_start_offset > log.high_watermark
        )
        if timestamp == LATEST_TIMESTAMP:
            if lagging:
                raise OffsetNotAvailable()
            return fetchable, -1, self.leader_epoch
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            # without tiered storage the local log is all of it
            first = log.leader_epoch_cache.earliest_entry()
            epoch = first[0] if first is not None and first[1] <= log.log_start_offset else -1
            return log.log_start_offset, -1, epoch
        if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return NOT_FOUND  # nothing is tiered, nothing waits for an upload
        found: tuple[int, int, int] | None = (
            log.max_timestamp_and_offset()
            if timestamp == MAX_TIMESTAMP
            else log.fetch_offset_for_timestamp(timestamp)
        )
        if found is None:
            if lagging:
                raise OffsetNotAvailable()
            return NOT_FOUND
        offset, ts, epoch = found
        if offset >= fetchable:  # not visible to this caller yet
            if lagging:
                raise OffsetNotAvailable()
            return NOT_FOUND
        return offset, ts, epoch

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords on the leader: advance the log start offset to `offset`
        (HIGH_WATERMARK: to the high watermark); returns the new log start offset."""
        target = self.log.high_watermark if offset == HIGH_WATERMARK else offset
        start: int = self.log.delete_records_before(target)
        return start

    def active_producers(self) -> list[ProducerEntry]:
        """Producers with state retained in this partition (DescribeProducers)."""
        return self.log.producer_state.active_producers()

    def last_producer_entry(self, producer_id: int) -> ProducerEntry | None:
        """What this partition knows of `producer_id`'s last append, if anything."""
        return self.log.producer_state.last_entry(producer_id)

    def read_records(self, offset: int, max_bytes: int, max_offset: int) -> FetchDataInfo:
        """At least one batch from `offset` on, below `max_offset` whatever the high watermark
        (a coordinator replays its partition up to the log end)."""
        return self.log.read(offset, max_bytes, max_offset, True)
