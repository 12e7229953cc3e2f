"""A partition's replication state (broker/replication/partition.py) in-process, on real logs:
the high watermark as the minimum log end offset over the ISR, ISR shrink and expansion, the
effect of a leader epoch change, and the waiters (acks=all, fetch long polls) woken when the HW
moves.

Followers are driven the way the fetch handler drives the leader: `record_follower_fetch`
with the follower's fetch offset (everything before it is acknowledged), and, where a real
follower replica is wanted, a second Partition on its own log that appends what the leader's
`read_for_follower` returns. The only stand-in is the ISR writer, which in a cluster is the
conditional ZooKeeper write of the partition state (`RecordingIsrWriter` below)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker.replication.partition import READ_COMMITTED, READ_UNCOMMITTED, Partition
from samsa.protocol.records import build_batch
from samsa.storage.config import LogConfig
from samsa.storage.log import Log

LEADER, F2, F3 = 1, 2, 3
REPLICAS = [LEADER, F2, F3]
TOPIC_ID = uuid.UUID(int=7)


class RecordingIsrWriter:
    """Stand-in for the ZooKeeper write of an ISR change (broker/cluster/member.py
    `ClusterMember.write_isr`): records each requested ISR and answers `accept`; while `gate`
    is clear the write stays in flight."""

    def __init__(self, accept: bool = True) -> None:
        self.requests: list[list[int]] = []
        self.accept = accept
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, partition: Partition, isr: list[int]) -> bool:
        self.requests.append(list(isr))
        await self.gate.wait()
        return self.accept


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[dict[str, Log]]:
    opened: dict[str, Log] = {}
    yield opened
    for lg in opened.values():
        lg.close()


def _log(logs: dict[str, Log], tmp_path: Path, name: str) -> Log:
    lg = Log.open(tmp_path / name, LogConfig.from_properties({}), recover=False)
    logs[name] = lg
    return lg


def _leader(
    logs: dict[str, Log],
    tmp_path: Path,
    *,
    isr: list[int] | None = None,
    replicas: list[int] | None = None,
    epoch: int = 0,
    name: str = "t-0",
) -> Partition:
    """A partition this broker (1) leads, made leader the way the replica manager does in a
    cluster: opened with no leader, then `make_leader`."""
    replicas = list(REPLICAS if replicas is None else replicas)
    p = Partition("t", 0, TOPIC_ID, _log(logs, tmp_path, name), epoch, replicas, LEADER,
                  leader_id=-1)
    p.make_leader(epoch, list(replicas if isr is None else isr), replicas)
    return p


def _follower(logs: dict[str, Log], tmp_path: Path, broker_id: int, epoch: int = 0) -> Partition:
    p = Partition("t", 0, TOPIC_ID, _log(logs, tmp_path, f"replica-{broker_id}"), epoch,
                  list(REPLICAS), broker_id, leader_id=-1)
    p.make_follower(LEADER, epoch, list(REPLICAS), list(REPLICAS))
    return p


def _records(n: int = 1, tag: str = "v") -> bytes:
    return build_batch([(None, f"{tag}{i}".encode(), [], 1_700_000_000_000 + i) for i in range(n)])


def _append(p: Partition, batches: int) -> None:
    for i in range(batches):
        p.append_as_leader(_records(1, f"b{i}-"))


def _replicate(leader: Partition, follower: Partition) -> None:
    """One fetch of `follower` from `leader`, as the fetch handler and the replica fetcher do
    it: the fetch offset acknowledges, then the follower appends what it got."""
    offset = follower.log.log_end_offset
    leader.record_follower_fetch(follower.broker_id, offset)
    read = leader.read_for_follower(offset, 1 << 20)
    follower.append_as_follower(bytes(read.records), read.high_watermark, read.log_start_offset)


async def _settle() -> None:
    """Let the ISR writes scheduled on the loop run."""
    for _ in range(5):
        await asyncio.sleep(0)


# ---- the high watermark ---------------------------------------------------------------


def test_a_single_replica_commits_each_append_at_once(logs: dict[str, Log],
                                                      tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, replicas=[LEADER])
    assert p.is_leader and p.log.high_watermark == 0
    p.append_as_leader(_records(3))
    assert p.log.log_end_offset == 3 and p.log.high_watermark == 3


def test_hw_is_the_smallest_log_end_offset_in_the_isr(logs: dict[str, Log],
                                                      tmp_path: Path) -> None:
    p = _leader(logs, tmp_path)
    _append(p, 3)
    assert p.log.log_end_offset == 3
    assert p.log.high_watermark == 0  # no follower has acknowledged anything yet

    p.record_follower_fetch(F2, 3)
    assert p.log.high_watermark == 0  # F3 has nothing
    p.record_follower_fetch(F3, 1)
    assert p.log.high_watermark == 1
    p.record_follower_fetch(F3, 3)
    assert p.log.high_watermark == 3

    _append(p, 1)
    assert p.log.high_watermark == 3  # the leader alone does not commit
    p.record_follower_fetch(F3, 4)
    assert p.log.high_watermark == 3
    p.record_follower_fetch(F2, 4)
    assert p.log.high_watermark == 4


def test_hw_never_goes_backwards(logs: dict[str, Log], tmp_path: Path) -> None:
    p = _leader(logs, tmp_path)
    _append(p, 3)
    p.record_follower_fetch(F2, 3)
    p.record_follower_fetch(F3, 3)
    assert p.log.high_watermark == 3
    p.record_follower_fetch(F2, 1)  # e.g. a follower that truncated and fetches again
    assert p.log.high_watermark == 3
    p.update_isr([LEADER, F2, F3])
    assert p.log.high_watermark == 3
    p.make_leader(1, [LEADER, F2, F3], REPLICAS)  # a new epoch forgets what followers have
    assert p.log.high_watermark == 3


def test_a_fetch_from_a_broker_that_is_no_replica_is_ignored(logs: dict[str, Log],
                                                             tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    _append(p, 2)
    p.record_follower_fetch(9, 2)
    assert p.log.high_watermark == 0 and p.isr == [LEADER, F2]


def test_reads_stop_at_the_hw_and_followers_read_to_the_log_end(logs: dict[str, Log],
                                                                tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    _append(p, 2)
    assert not p.read(0, 1 << 20, READ_UNCOMMITTED, True).records  # nothing is committed
    assert not p.read(0, 1 << 20, READ_COMMITTED, True).records
    assert p.read_for_follower(0, 1 << 20).records
    p.record_follower_fetch(F2, 2)
    read = p.read(0, 1 << 20, READ_UNCOMMITTED, True)
    assert read.records and read.high_watermark == 2 and read.aborted is None
    assert p.read(0, 1 << 20, READ_COMMITTED, True).aborted == []


def test_followers_learn_the_hw_from_the_leader(logs: dict[str, Log], tmp_path: Path) -> None:
    leader = _leader(logs, tmp_path)
    f2, f3 = _follower(logs, tmp_path, F2), _follower(logs, tmp_path, F3)
    _append(leader, 2)
    _replicate(leader, f2)
    _replicate(leader, f3)
    assert (f2.log.log_end_offset, f3.log.log_end_offset) == (2, 2)
    assert leader.log.high_watermark == 0  # the fetch acknowledges 0: the data comes after
    assert f2.log.high_watermark == 0
    _replicate(leader, f2)
    assert leader.log.high_watermark == 0  # F3 has not acknowledged yet
    _replicate(leader, f3)
    assert leader.log.high_watermark == 2
    assert f3.log.high_watermark == 2  # F3's fetch moved it and brought it back
    assert f2.log.high_watermark == 0
    _replicate(leader, f2)
    assert f2.log.high_watermark == 2
    # A follower's HW is never above its own log end, and does not go back.
    f2.append_as_follower(b"", 1, 0)
    assert f2.log.high_watermark == 2


def test_a_follower_hw_is_capped_at_its_own_log_end(logs: dict[str, Log],
                                                    tmp_path: Path) -> None:
    leader = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    f2 = _follower(logs, tmp_path, F2)
    _append(leader, 4)
    read = leader.read_for_follower(0, 1 << 20)
    f2.append_as_follower(bytes(read.records), 10, 0)
    assert f2.log.log_end_offset == 4 and f2.log.high_watermark == 4


def test_a_follower_follows_the_leaders_log_start_up_to_its_own_hw(
    logs: dict[str, Log], tmp_path: Path
) -> None:
    # DeleteRecords on the leader reaches the followers with their fetches; a follower never
    # deletes beyond what it knows is committed.
    leader = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    f2 = _follower(logs, tmp_path, F2)
    _append(leader, 4)
    _replicate(leader, f2)
    _replicate(leader, f2)
    assert leader.log.high_watermark == 4 and f2.log.high_watermark == 4
    _append(leader, 2)
    _replicate(leader, f2)  # F2 has 6 records, knows HW 4
    leader.record_follower_fetch(F2, 6)
    assert leader.log.high_watermark == 6 and f2.log.high_watermark == 4
    assert leader.log.delete_records_before(5) == 5
    f2.append_as_follower(b"", 6, leader.log.log_start_offset)  # deletes before taking HW 6
    assert f2.log.log_start_offset == 4
    _replicate(leader, f2)
    assert f2.log.high_watermark == 6 and f2.log.log_start_offset == 5


# ---- the ISR ---------------------------------------------------------------------------


async def test_a_lagging_follower_leaves_the_isr_after_the_lag_time(
    logs: dict[str, Log], tmp_path: Path
) -> None:
    p = _leader(logs, tmp_path)
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    _append(p, 3)
    p.record_follower_fetch(F2, 3)  # F2 is caught up, F3 never fetches
    p.shrink_isr_if_lagging(lag_ms=60_000)
    await _settle()
    assert writer.requests == [] and p.isr == REPLICAS
    assert p.log.high_watermark == 0  # F3 holds it back

    time.sleep(0.03)
    p.shrink_isr_if_lagging(lag_ms=10)
    await _settle()
    assert writer.requests == [[LEADER, F2]]
    assert p.isr == [LEADER, F2]
    assert p.log.high_watermark == 3  # without F3 everything is replicated


async def test_a_follower_that_keeps_fetching_to_the_end_stays(logs: dict[str, Log],
                                                               tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    for _ in range(3):
        _append(p, 1)
        time.sleep(0.02)
        p.record_follower_fetch(F2, p.log.log_end_offset)
        p.shrink_isr_if_lagging(lag_ms=10)
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER, F2]


async def test_a_follower_at_the_log_end_stays_however_long_nothing_is_written(
    logs: dict[str, Log], tmp_path: Path
) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    _append(p, 2)
    p.record_follower_fetch(F2, 2)
    time.sleep(0.03)  # an idle partition: the follower's fetches bring nothing
    p.shrink_isr_if_lagging(lag_ms=10)
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER, F2]


async def test_a_follower_behind_the_end_but_recently_caught_up_stays(
    logs: dict[str, Log], tmp_path: Path
) -> None:
    # Kafka's rule: lagging means not caught up to the log end for longer than the lag time,
    # not merely being behind it right now.
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    _append(p, 1)
    p.record_follower_fetch(F2, 1)
    _append(p, 1)  # F2 is behind, for a moment
    p.shrink_isr_if_lagging(lag_ms=5_000)
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER, F2]


# Kafka's Replica.updateFetchStateOrThrow: a follower that reaches the leader's log end of its
# previous fetch counts as caught up as of that fetch.
async def test_a_follower_keeping_up_with_a_steady_produce_rate_stays(
    logs: dict[str, Log], tmp_path: Path
) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    started = time.monotonic()
    fetched_to = 0
    while time.monotonic() - started < 0.5:
        _append(p, 1)  # a producer appends between any two fetches
        p.record_follower_fetch(F2, fetched_to)  # F2 has what the leader had at its last fetch
        fetched_to = p.log.log_end_offset
        time.sleep(0.01)
    assert p.log.high_watermark >= fetched_to - 2  # F2 acknowledges all but the newest
    p.shrink_isr_if_lagging(lag_ms=200)  # F2 was caught up ~10 ms ago (as of its last fetch)
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER, F2]


async def test_the_leader_alone_is_never_shrunk(logs: dict[str, Log], tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER])
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    _append(p, 2)
    time.sleep(0.02)
    p.shrink_isr_if_lagging(lag_ms=1)
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER]


async def test_a_follower_joins_the_isr_once_caught_up_to_the_hw(logs: dict[str, Log],
                                                                 tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2])
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    _append(p, 3)
    p.record_follower_fetch(F2, 3)
    assert p.log.high_watermark == 3
    p.record_follower_fetch(F3, 2)  # below the HW: not yet
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER, F2]
    p.record_follower_fetch(F3, 3)
    await _settle()
    assert writer.requests == [[LEADER, F2, F3]]
    assert p.isr == [LEADER, F2, F3]


async def test_joining_needs_the_current_leader_epoch_start(logs: dict[str, Log],
                                                           tmp_path: Path) -> None:
    # Kafka's isFollowerInSync: caught up to the HW *and* to the offset the leader's epoch
    # started at; a follower that has only the old leader's committed records must first get
    # what this leader had when it was elected.
    lg = _log(logs, tmp_path, "t-0")
    lg.append_as_leader(_records(3), leader_epoch=0)
    lg.update_high_watermark(1)  # elected with records beyond the HW
    p = Partition("t", 0, TOPIC_ID, lg, 0, list(REPLICAS), LEADER, leader_id=-1)
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    p.make_leader(1, [LEADER, F3], list(REPLICAS))
    assert p.leader_epoch_start_offset == 3 and lg.latest_epoch == 1
    assert lg.high_watermark == 1  # F3 has acknowledged nothing yet
    p.record_follower_fetch(F2, 2)  # at or above the HW, below the epoch start
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER, F3]
    p.record_follower_fetch(F2, 3)
    await _settle()
    assert writer.requests == [[LEADER, F3, F2]] and p.isr == [LEADER, F3, F2]


async def test_while_a_join_is_written_the_joining_follower_counts_for_the_hw(
    logs: dict[str, Log], tmp_path: Path
) -> None:
    # Kafka's maximal ISR: until the new ISR is stored, the HW counts the old and the new
    # members, so no record is committed that the joining follower lacks.
    p = _leader(logs, tmp_path, isr=[LEADER, F2])
    writer = RecordingIsrWriter()
    writer.gate.clear()
    p.isr_writer = writer
    _append(p, 2)
    p.record_follower_fetch(F2, 2)
    p.record_follower_fetch(F3, 2)  # joins
    await _settle()
    assert writer.requests == [[LEADER, F2, F3]] and p.isr == [LEADER, F2]  # in flight
    _append(p, 2)
    p.record_follower_fetch(F2, 4)
    assert p.log.high_watermark == 2  # F3 is counted although not yet in the stored ISR
    p.record_follower_fetch(F3, 3)
    assert p.log.high_watermark == 3
    # One change at a time: a shrink while the join is in flight is not requested.
    time.sleep(0.02)
    p.shrink_isr_if_lagging(lag_ms=1)
    await _settle()
    assert writer.requests == [[LEADER, F2, F3]]
    writer.gate.set()
    await _settle()
    assert p.isr == [LEADER, F2, F3]


async def test_a_refused_isr_write_leaves_the_isr_and_allows_the_next_try(
    logs: dict[str, Log], tmp_path: Path
) -> None:
    # The ZooKeeper write is conditional on the partition state the leader led at; when it
    # fails the ISR stays what it was here too.
    p = _leader(logs, tmp_path, isr=[LEADER, F2])
    writer = RecordingIsrWriter(accept=False)
    p.isr_writer = writer
    _append(p, 1)
    p.record_follower_fetch(F2, 1)
    p.record_follower_fetch(F3, 1)
    await _settle()
    assert writer.requests == [[LEADER, F2, F3]] and p.isr == [LEADER, F2]
    writer.accept = True
    p.record_follower_fetch(F3, 1)
    await _settle()
    assert writer.requests == [[LEADER, F2, F3]] * 2 and p.isr == [LEADER, F2, F3]


def test_without_a_writer_isr_changes_apply_at_once(logs: dict[str, Log],
                                                    tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2])
    assert p.isr_writer is None
    _append(p, 1)
    p.record_follower_fetch(F2, 1)
    p.record_follower_fetch(F3, 1)
    assert p.isr == [LEADER, F2, F3]


# ---- leadership changes ------------------------------------------------------------------


async def test_a_new_leader_forgets_what_followers_had_under_the_old_one(
    logs: dict[str, Log], tmp_path: Path
) -> None:
    # Kafka's Replica.resetReplicaState for a new leader: follower positions unknown, the lag
    # clock of ISR members restarted at the election.
    p = _leader(logs, tmp_path)
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    _append(p, 3)
    p.record_follower_fetch(F2, 3)
    p.record_follower_fetch(F3, 2)
    assert p.log.high_watermark == 2
    p.make_follower(F2, 1, list(REPLICAS), list(REPLICAS))  # another broker leads epoch 1
    time.sleep(0.3)

    p.make_leader(2, [LEADER, F2], list(REPLICAS))  # and this one again, without F3
    assert p.leader_epoch == 2 and p.log.latest_epoch == 2
    assert p.leader_epoch_start_offset == 3
    assert p.log.high_watermark == 2  # F2's position from epoch 0 does not count
    p.shrink_isr_if_lagging(lag_ms=150)  # F2 last caught up 0.3 s ago, but under epoch 0
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER, F2]
    p.record_follower_fetch(F2, 3)
    assert p.log.high_watermark == 3


def test_leader_appends_carry_the_leader_epoch(logs: dict[str, Log], tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, replicas=[LEADER], epoch=4)
    p.append_as_leader(_records(1))
    assert p.log.latest_epoch == 4
    p.make_leader(5, [LEADER], [LEADER])
    p.append_as_leader(_records(1))
    assert p.log.latest_epoch == 5
    assert p.log.end_offset_for_epoch(4) == (4, 1)  # epoch 4 ended where 5 started


def test_becoming_follower_stops_committing(logs: dict[str, Log], tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    _append(p, 2)
    p.make_follower(F2, 1, [F2], [LEADER, F2])
    assert not p.is_leader and p.leader_id == F2 and p.leader_epoch == 1 and p.isr == [F2]
    p.record_follower_fetch(F2, 2)  # whatever arrives late is no acknowledgement any more
    assert p.log.high_watermark == 0
    p.update_isr([F2, LEADER])
    assert p.isr == [F2, LEADER] and p.log.high_watermark == 0


# ---- waiters -----------------------------------------------------------------------------


async def test_long_polls_wake_when_the_hw_moves(logs: dict[str, Log], tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    _append(p, 2)
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    p.add_waiter(fut)
    p.record_follower_fetch(F2, 0)  # acknowledges nothing new
    assert not fut.done()
    p.record_follower_fetch(F2, 1)
    assert fut.done()
    # A waiter that left is not woken (and not kept).
    gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    p.add_waiter(gone)
    p.discard_waiter(gone)
    p.record_follower_fetch(F2, 2)
    assert not gone.done()


async def test_followers_long_polls_wait_for_appends_not_hw_moves(logs: dict[str, Log],
                                                                  tmp_path: Path) -> None:
    """A follower's parked fetch reads up to the log end: an HW advance has nothing for it
    (Kafka's DelayedFetch counts the bytes it could read), an append or a change of
    leadership does; consumers' parked fetches wake on the HW."""
    p = _leader(logs, tmp_path)
    _append(p, 1)
    loop = asyncio.get_running_loop()
    consumer: asyncio.Future[None] = loop.create_future()
    follower: asyncio.Future[None] = loop.create_future()
    p.add_waiter(consumer)
    p.add_waiter(follower, follower=True)
    p.record_follower_fetch(F2, 1)
    p.record_follower_fetch(F3, 1)  # the HW moves to 1
    assert p.high_watermark == 1
    assert consumer.done() and not follower.done()
    _append(p, 1)
    assert follower.done()
    # a follower's waiter that left is not woken; leadership changes wake the rest
    gone: asyncio.Future[None] = loop.create_future()
    parked: asyncio.Future[None] = loop.create_future()
    p.add_waiter(gone, follower=True)
    p.discard_waiter(gone, follower=True)
    p.add_waiter(parked, follower=True)
    p.make_follower(F2, 1, list(REPLICAS), list(REPLICAS))
    assert parked.done() and not gone.done()


async def test_an_append_tells_whether_it_woke_parked_fetches(logs: dict[str, Log],
                                                              tmp_path: Path) -> None:
    """The produce handler lets the fetches an append woke answer before its own response:
    the partition says whether its latest append woke any (a consumer's by the HW, a
    follower's by the log end)."""
    p = _leader(logs, tmp_path, isr=[LEADER], replicas=[LEADER])  # each append moves the HW
    loop = asyncio.get_running_loop()
    _append(p, 1)
    assert not p.append_woke_fetches  # nobody parked
    consumer: asyncio.Future[None] = loop.create_future()
    p.add_waiter(consumer)
    _append(p, 1)
    assert consumer.done() and p.append_woke_fetches
    _append(p, 1)
    assert not p.append_woke_fetches  # the waiter went with the previous append
    follower: asyncio.Future[None] = loop.create_future()
    p.add_waiter(follower, follower=True)
    _append(p, 1)
    assert follower.done() and p.append_woke_fetches
    gone: asyncio.Future[None] = loop.create_future()
    gone.cancel()  # its fetch ended meanwhile: nothing to let go first
    p.add_waiter(gone)
    _append(p, 1)
    assert not p.append_woke_fetches


async def test_a_follower_append_wakes_its_long_polls(logs: dict[str, Log],
                                                      tmp_path: Path) -> None:
    leader = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    f2 = _follower(logs, tmp_path, F2)
    _append(leader, 1)
    _replicate(leader, f2)
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    f2.add_waiter(fut)
    _replicate(leader, f2)  # brings HW 1
    assert f2.log.high_watermark == 1 and fut.done()


async def test_acks_all_returns_once_the_isr_has_the_records(logs: dict[str, Log],
                                                             tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    _append(p, 3)
    waiting = asyncio.create_task(p.wait_for_high_watermark(3, timeout_s=10))
    await asyncio.sleep(0)
    p.record_follower_fetch(F2, 2)
    await asyncio.sleep(0)
    assert not waiting.done()  # HW 2 < 3
    p.record_follower_fetch(F2, 3)
    assert await asyncio.wait_for(waiting, 1) is True


async def test_acks_all_times_out_without_the_isr(logs: dict[str, Log], tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    _append(p, 1)
    started = time.monotonic()
    assert await p.wait_for_high_watermark(1, timeout_s=0.05) is False
    assert time.monotonic() - started < 1


async def test_acks_all_gives_up_when_leadership_is_lost(logs: dict[str, Log],
                                                         tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2], replicas=[LEADER, F2])
    _append(p, 1)
    waiting = asyncio.create_task(p.wait_for_high_watermark(1, timeout_s=10))
    await asyncio.sleep(0)
    p.make_follower(F2, 1, [F2], [LEADER, F2])
    assert await asyncio.wait_for(waiting, 1) is False


async def test_acks_all_for_committed_records_returns_at_once(logs: dict[str, Log],
                                                              tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, replicas=[LEADER])
    _append(p, 2)
    assert await p.wait_for_high_watermark(2, timeout_s=0) is True


# ---- min.insync.replicas and who may join the ISR (issue 45) ------------------------------


async def test_the_hw_waits_while_the_isr_is_below_min_insync_replicas(
        logs: dict[str, Log], tmp_path: Path) -> None:
    """An acks=all append made with the ISR full, whose ISR then shrinks to the leader alone
    (below min.insync.replicas=2) for a moment: as Kafka's leader (KIP-966) the HW does not
    move meanwhile, so the append is not answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (which
    a client retries as a record that may not be written, and librdkafka re-sends under a new
    producer epoch if a later batch is refused meanwhile); once the ISR is back and has the
    records, it succeeds."""
    from samsa.broker.replication.produce_appends import AppendResult, _await_replication
    from samsa.protocol.errors import ErrorCode

    p = _leader(logs, tmp_path)
    p.min_insync_replicas = 2
    _append(p, 2)
    out = AppendResult(ErrorCode.none, base_offset=0, last_offset=1)
    answered = asyncio.create_task(_await_replication([(out, p, None)], timeout_s=10))
    await asyncio.sleep(0)
    p.update_isr([LEADER])  # the controller took both followers out
    await _settle()
    assert p.log.high_watermark == 0 and not answered.done()
    p.update_isr([LEADER, F2, F3])  # back a moment later
    p.record_follower_fetch(F2, 2)
    p.record_follower_fetch(F3, 2)
    await asyncio.wait_for(answered, 1)
    assert out.error_code == ErrorCode.none and p.log.high_watermark == 2


async def test_the_hw_moves_below_min_insync_replicas_larger_than_the_replicas(
        logs: dict[str, Log], tmp_path: Path) -> None:
    """The min.insync.replicas that holds the HW is at most the replication factor (Kafka's
    effectiveMinIsr): a single replica with min.insync.replicas=2 still commits."""
    p = _leader(logs, tmp_path, replicas=[LEADER])
    p.min_insync_replicas = 2
    _append(p, 1)
    assert p.log.high_watermark == 1


# A follower's fetch from the offset of its previous one acknowledges nothing new: whatever
# else lets the HW move must not wait for a fetch that changes it.


def test_the_hw_moves_once_min_insync_replicas_is_lowered(logs: dict[str, Log],
                                                          tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2])
    p.reconfigure(p.config, 3)
    _append(p, 2)
    p.record_follower_fetch(F2, 2)
    assert p.log.high_watermark == 0  # an ISR of 2, below 3
    p.reconfigure(p.config, 2)
    p.record_follower_fetch(F2, 2)  # nothing new
    assert p.log.high_watermark == 2


def test_the_hw_moves_once_a_reassignment_lowers_the_effective_min_isr(
        logs: dict[str, Log], tmp_path: Path) -> None:
    p = _leader(logs, tmp_path, isr=[LEADER, F2])
    p.reconfigure(p.config, 3)
    _append(p, 2)
    p.record_follower_fetch(F2, 2)
    assert p.log.high_watermark == 0
    p.update_replicas([LEADER, F2])  # F3 moved away: at most 2 replicas can be in sync
    p.record_follower_fetch(F2, 2)
    assert p.log.high_watermark == 2


def test_the_hw_moves_once_a_lagging_follower_leaves_the_isr_without_a_writer(
        logs: dict[str, Log], tmp_path: Path) -> None:
    p = _leader(logs, tmp_path)
    assert p.isr_writer is None
    _append(p, 2)
    p.record_follower_fetch(F2, 2)  # F3 never fetches
    assert p.log.high_watermark == 0
    time.sleep(0.03)
    p.shrink_isr_if_lagging(lag_ms=10)
    assert p.isr == [LEADER, F2]
    p.record_follower_fetch(F2, 2)
    assert p.log.high_watermark == 2


async def test_a_follower_joins_the_isr_only_in_its_registered_life(
        logs: dict[str, Log], tmp_path: Path) -> None:
    """A caught-up follower whose broker is not registered (cut off from ZooKeeper, its
    session expired, fetching again before it registered again) or whose fetch carries
    another broker epoch than its registration does not join the ISR (Kafka's
    isReplicaIsrEligible, KIP-903); registered in the life its fetch names, it does."""
    p = _leader(logs, tmp_path, isr=[LEADER, F2])
    writer = RecordingIsrWriter()
    p.isr_writer = writer
    registered: dict[int, int] = {LEADER: 10, F2: 20}

    def eligible(replica: int, epoch: int) -> bool:
        known = registered.get(replica)
        return known is not None and epoch in (-1, known)

    p.replica_eligible = eligible
    _append(p, 2)
    p.record_follower_fetch(F2, 2)
    p.record_follower_fetch(F3, 2, 30)  # F3 not registered
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER, F2]
    registered[F3] = 40
    p.record_follower_fetch(F3, 2, 30)  # its fetch names an older life
    await _settle()
    assert writer.requests == [] and p.isr == [LEADER, F2]
    p.record_follower_fetch(F3, 2, 40)
    await _settle()
    assert writer.requests == [[LEADER, F2, F3]] and p.isr == [LEADER, F2, F3]


def _idempotent(seq: int, epoch: int = 0, pid: int = 2000) -> bytes:
    return build_batch([(None, f"s{seq}".encode(), [], 1_700_000_000_000 + seq)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


async def test_a_new_leader_answers_retries_of_the_last_five_batches_with_their_offsets(
        logs: dict[str, Log], tmp_path: Path) -> None:
    """The producer state a follower builds from the batches it copies is the leader's: once
    it leads, a retry of any of the producer's last five batches (whose answer was lost with
    the old leader) is answered with its original offsets and not written again; the next
    sequence is appended; one that skips a sequence is refused as out of order."""
    from samsa.storage.errors import OutOfOrderSequence

    old = _leader(logs, tmp_path, replicas=[LEADER, F2], isr=[LEADER, F2])
    follower = _follower(logs, tmp_path, F2)
    first_offsets = []
    for seq in range(7):
        first_offsets.append(old.append_as_leader(_idempotent(seq)).first_offset)
        _replicate(old, follower)
    follower.make_leader(1, [F2], [LEADER, F2])
    end = follower.log.log_end_offset
    for seq in range(2, 7):
        info = follower.append_as_leader(_idempotent(seq))
        assert info.duplicate and info.first_offset == first_offsets[seq]
    assert follower.log.log_end_offset == end
    with pytest.raises(OutOfOrderSequence):
        follower.append_as_leader(_idempotent(8))
    assert follower.append_as_leader(_idempotent(7)).first_offset == end


async def test_a_leader_cut_off_forgets_its_unreplicated_batches_when_it_truncates(
        logs: dict[str, Log], tmp_path: Path) -> None:
    """An old leader appended batches no follower copied (cut off from its peers); the new
    leader took the producer's retries of them. Once the old leader has truncated to where
    the logs agree and copied the new leader's, its producer state is the new leader's: it
    leads again and answers a retry of the last batch as a duplicate at the new offsets."""
    old = _leader(logs, tmp_path, replicas=[LEADER, F2], isr=[LEADER, F2])
    new = _follower(logs, tmp_path, F2)
    for seq in range(3):
        old.append_as_leader(_idempotent(seq))
        _replicate(old, new)
    new.make_leader(1, [F2], [LEADER, F2])
    old.append_as_leader(_records(2, "lost"))  # not idempotent: only the offsets matter
    old.append_as_leader(_idempotent(3))  # never copied
    offsets = {seq: new.append_as_leader(_idempotent(seq)).first_offset for seq in (3, 4)}
    old.make_follower(F2, 1, [F2], [LEADER, F2])
    epoch, end = new.diverging_epoch(old.latest_epoch or 0, old.log.log_end_offset) or (-1, -1)
    assert (epoch, end) == (0, 3)
    old.truncate_to(end)
    old.log.append_as_follower(bytes(new.read_for_follower(end, 1 << 20).records))
    old.make_leader(2, [LEADER, F2], [LEADER, F2])
    for seq in (3, 4):
        info = old.append_as_leader(_idempotent(seq))
        assert info.duplicate and info.first_offset == offsets[seq]
    assert old.append_as_leader(_idempotent(5)).first_offset == new.log.log_end_offset
