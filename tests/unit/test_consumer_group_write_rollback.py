"""A consumer-group change whose records do not replicate is undone: the heartbeat is answered
with an error and the group stays as it was before it (Kafka's coordinator runtime reverts its
timeline to the offset before a failed write). In-process, on the fake host of
test_coordinator_ports.py: a follower in the ISR that never fetches keeps the high watermark
below the heartbeat's records until the write times out."""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.replication.partition import Partition
from samsa.config.schema import BrokerConfig
from samsa.coordinator.group import GroupCoordinator
from samsa.protocol.errors import ErrorCode
from tests.unit.test_coordinator_ports import BROKER_ID, FakeHost

GROUP = "g"
TOPIC_ID = uuid.UUID(int=7)


class OneTopic:
    def topic_info(self, name: str) -> tuple[uuid.UUID, int] | None:
        return (TOPIC_ID, 4) if name == "t" else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return "t" if topic_id == TOPIC_ID else None

    def topic_names(self) -> list[str]:
        return ["t"]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[FakeHost]:
    h = FakeHost(tmp_path)
    yield h
    h.close()


@pytest.fixture
async def coord(host: FakeHost) -> AsyncIterator[GroupCoordinator]:
    c = GroupCoordinator(host, BrokerConfig({"offsets.topic.num.partitions": 1,
                                             "offsets.topic.replication.factor": 1,
                                             "offsets.commit.timeout.ms": 200}), OneTopic())
    await c.topic.ensure_created()
    c.on_leadership(0, True)
    for _ in range(100):
        if 0 in c.loaded:
            break
        await asyncio.sleep(0.01)
    assert 0 in c.loaded
    yield c
    await c.stop()


async def _heartbeat(coord: GroupCoordinator, member_id: str, epoch: int) -> dict[str, Any]:
    return await coord.consumer_group_heartbeat(
        GROUP, member_id, epoch, None, None, 30000, ["t"], None, None,
        [] if epoch == 0 else None, "client", "/127.0.0.1", 0)


def _state(coord: GroupCoordinator) -> tuple[Any, ...]:
    group = coord.consumer_groups[GROUP]
    members = {mid: (m.member_epoch, m.state, m.assigned, m.session_timer is not None)
               for mid, m in group.members.items()}
    return copy.deepcopy((group.group_epoch, group.assignment_epoch, group.target,
                          group.subscription_metadata, members))


def _stall_replication(host: FakeHost) -> None:
    """A follower joins the ISR and never fetches: appends stay local and time out."""
    part = host.replica("__consumer_offsets", 0)
    assert isinstance(part, Partition)
    part.isr = [BROKER_ID, 2]


async def test_a_joining_member_whose_records_time_out_leaves_the_group_as_it_was(
        coord: GroupCoordinator, host: FakeHost) -> None:
    first = await _heartbeat(coord, "m1", 0)
    assert first["error_code"] == ErrorCode.none
    before = _state(coord)
    _stall_replication(host)
    answer = await _heartbeat(coord, "m2", 0)
    assert answer["error_code"] == ErrorCode.coordinator_not_available
    assert _state(coord) == before
    assert coord.describe_consumer_group(GROUP)["group_epoch"] == before[0]


async def test_a_leave_whose_records_time_out_keeps_the_member(
        coord: GroupCoordinator, host: FakeHost) -> None:
    joined = await _heartbeat(coord, "m1", 0)
    before = _state(coord)
    _stall_replication(host)
    answer = await _heartbeat(coord, "m1", -1)
    assert answer["error_code"] == ErrorCode.coordinator_not_available
    assert _state(coord) == before
    assert joined["member_epoch"] == coord.consumer_groups[GROUP].members["m1"].member_epoch


async def test_a_later_change_built_on_a_failed_one_is_undone_with_it(
        coord: GroupCoordinator, host: FakeHost) -> None:
    await _heartbeat(coord, "m1", 0)
    before = _state(coord)
    _stall_replication(host)
    # m2 joins while m3's join is still waiting for the ISR: both fail, in either order
    answers = await asyncio.gather(_heartbeat(coord, "m2", 0), _heartbeat(coord, "m3", 0))
    assert [a["error_code"] for a in answers] == [ErrorCode.coordinator_not_available] * 2
    assert _state(coord) == before
