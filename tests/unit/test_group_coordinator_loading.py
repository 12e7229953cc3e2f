"""The group coordinator's load of an `__consumer_offsets` partition across leadership moves:
a load cancelled by a move away must not drop the bookkeeping of the load that replaced it,
or a later move away leaves that load running and it marks the partition loaded on a broker
that no longer leads it (stale groups served, and skipped when the leadership comes back)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker.replication.partition import Partition
from samsa.config.schema import BrokerConfig
from samsa.coordinator.group import GroupCoordinator
from samsa.coordinator.group.common import GroupError
from samsa.coordinator.group.records import OffsetValue, offset_commit_key, offset_commit_value
from samsa.protocol.errors import ErrorCode
from tests.unit.test_coordinator_ports import BROKER_ID, FakeHost

GROUP = "g"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[FakeHost]:
    h = FakeHost(tmp_path)
    yield h
    h.close()


async def _coordinator_with_a_long_partition(host: FakeHost) -> GroupCoordinator:
    coord = GroupCoordinator(host, BrokerConfig({"offsets.topic.num.partitions": 1,
                                                 "offsets.topic.replication.factor": 1}))
    await coord.topic.ensure_created()
    # enough records that the load yields to the loop several times on its way
    for batch in range(6):
        coord.topic.append(0, [(offset_commit_key(GROUP, "t", batch * 500 + i),
                                offset_commit_value(OffsetValue(i))) for i in range(500)])
    return coord


def _move(coord: GroupCoordinator, host: FakeHost, *, here: bool) -> None:
    """The leadership of __consumer_offsets-0 moves here or to another broker, as the
    replica manager does it: the partition changes role, then the listener is told."""
    part = host.replica("__consumer_offsets", 0)
    assert isinstance(part, Partition)
    epoch = part.leader_epoch + 1
    if here:
        part.make_leader(epoch, [BROKER_ID], [BROKER_ID])
    else:
        part.make_follower(2, epoch, [BROKER_ID, 2], [BROKER_ID, 2])
    coord.on_leadership(0, here)


async def test_a_load_cancelled_by_a_move_away_keeps_its_successor_tracked(
        host: FakeHost) -> None:
    coord = await _coordinator_with_a_long_partition(host)
    _move(coord, host, here=True)  # the first load starts
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # ... and is under way
    assert 0 in coord.loading
    _move(coord, host, here=False)  # cancels it
    _move(coord, host, here=True)  # a second load starts before the first has ended
    for _ in range(3):
        await asyncio.sleep(0)  # the first load ends (cancelled)
    assert 0 in coord.loading, "the second load is no longer tracked"
    _move(coord, host, here=False)  # must stop the second load
    for _ in range(50):
        await asyncio.sleep(0)
    assert 0 not in coord.loaded
    with pytest.raises(GroupError) as err:
        coord.coordinator_partition(GROUP)
    assert err.value.error_code == ErrorCode.not_coordinator
    _move(coord, host, here=True)  # back here: loaded afresh, then served
    for _ in range(50):
        await asyncio.sleep(0)
    assert coord.coordinator_partition(GROUP) == 0
    await coord.stop()


async def test_a_failed_load_is_tried_again_afresh_and_then_served(
        host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime's load: a read that fails is retried (not left for a request to restart),
    from the partition's start, with what the failed attempt replayed forgotten."""
    coord = await _coordinator_with_a_long_partition(host)
    replay_record = coord._replay_record
    calls = 0

    def fails_once_halfway(*args: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 1000:
            raise OSError("a read error")
        replay_record(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(coord, "_replay_record", fails_once_halfway)
    forgotten: list[int] = []
    unload = coord._unload_groups
    monkeypatch.setattr(coord, "_unload_groups",
                        lambda p: (forgotten.append(p), unload(p)))
    _move(coord, host, here=True)
    for _ in range(100):
        if 0 in coord.loaded:
            break
        await asyncio.sleep(0.02)
    assert 0 in coord.loaded, "the failed load was not tried again"
    assert forgotten == [0, 0], "each attempt starts from a partition with no groups"
    assert len(coord.groups[GROUP].offsets) == 3000
    assert coord.coordinator_partition(GROUP) == 0
    await coord.stop()
