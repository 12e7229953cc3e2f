"""What a consumer group keeps of a change whose write fails, as Kafka's coordinator runtime: an
append refused outright (here: fewer in-sync replicas than min.insync.replicas) undoes the
change (the runtime reverts its timeline to the offset before the batch); a write in the local
log whose wait for the ISR times out is answered COORDINATOR_NOT_AVAILABLE (REQUEST_TIMED_OUT,
as the group coordinator service maps it) and keeps the change, which is what the log says: a
leader loading the partition next rebuilds the same group. In-process, on the fake host of
test_coordinator_ports.py."""

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
from samsa.protocol.errors import ErrorCode, KafkaError
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


def _partition(host: FakeHost) -> Partition:
    part = host.replica("__consumer_offsets", 0)
    assert isinstance(part, Partition)
    return part


def _refuse_appends(host: FakeHost) -> None:
    """min.insync.replicas above the ISR: the leader refuses an acks=all append outright."""
    _partition(host).min_insync_replicas = 2


def _stall_replication(host: FakeHost) -> None:
    """A follower joins the ISR and never fetches: appends stay local and time out."""
    _partition(host).isr = [BROKER_ID, 2]


async def _reloaded(coord: GroupCoordinator, host: FakeHost) -> tuple[Any, ...]:
    """The group as a coordinator loading the partition from its log sees it (the ISR back to
    this broker alone, as when the silent follower is dropped from it)."""
    _partition(host).isr = [BROKER_ID]
    coord.on_leadership(0, False)
    coord.on_leadership(0, True)
    for _ in range(100):
        if 0 in coord.loaded:
            break
        await asyncio.sleep(0.01)
    return _state(coord)


async def test_a_join_whose_append_is_refused_leaves_the_group_as_it_was(
        coord: GroupCoordinator, host: FakeHost) -> None:
    assert (await _heartbeat(coord, "m1", 0))["error_code"] == ErrorCode.none
    before = _state(coord)
    end = _partition(host).log_end_offset
    _refuse_appends(host)
    answer = await _heartbeat(coord, "m2", 0)
    assert answer["error_code"] == ErrorCode.coordinator_not_available
    assert _state(coord) == before
    assert _partition(host).log_end_offset == end


async def test_a_leave_whose_append_is_refused_keeps_the_member(
        coord: GroupCoordinator, host: FakeHost) -> None:
    await _heartbeat(coord, "m1", 0)
    before = _state(coord)
    _refuse_appends(host)
    answer = await _heartbeat(coord, "m1", -1)
    assert answer["error_code"] == ErrorCode.coordinator_not_available
    assert _state(coord) == before


async def test_a_join_whose_records_time_out_is_kept_as_the_log_has_it(
        coord: GroupCoordinator, host: FakeHost) -> None:
    await _heartbeat(coord, "m1", 0)
    _stall_replication(host)
    answer = await _heartbeat(coord, "m2", 0)
    assert answer["error_code"] == ErrorCode.coordinator_not_available
    kept = _state(coord)
    assert "m2" in kept[-1]
    assert await _reloaded(coord, host) == kept


async def test_a_leave_whose_records_time_out_is_kept_as_the_log_has_it(
        coord: GroupCoordinator, host: FakeHost) -> None:
    await _heartbeat(coord, "m1", 0)
    await _heartbeat(coord, "m2", 0)
    _stall_replication(host)
    answer = await _heartbeat(coord, "m1", -1)
    assert answer["error_code"] == ErrorCode.coordinator_not_available
    kept = _state(coord)
    assert "m1" not in kept[-1]
    assert await _reloaded(coord, host) == kept


async def test_changes_made_on_a_timed_out_one_are_kept_with_it(
        coord: GroupCoordinator, host: FakeHost) -> None:
    await _heartbeat(coord, "m1", 0)
    _stall_replication(host)
    # m3 joins while m2's join is still waiting for the ISR: both time out, both stay
    answers = await asyncio.gather(_heartbeat(coord, "m2", 0), _heartbeat(coord, "m3", 0))
    assert [a["error_code"] for a in answers] == [ErrorCode.coordinator_not_available] * 2
    kept = _state(coord)
    assert {"m1", "m2", "m3"} <= set(kept[-1])
    assert await _reloaded(coord, host) == kept


async def test_a_session_timeout_whose_removal_is_refused_keeps_the_member_and_its_session(
        coord: GroupCoordinator, monkeypatch: pytest.MonkeyPatch) -> None:
    await _heartbeat(coord, "m1", 0)
    await _heartbeat(coord, "m2", 0)
    before = _state(coord)

    def refused(*args: object, **kwargs: object) -> int:
        raise KafkaError("moved", ErrorCode.not_leader_or_follower)

    monkeypatch.setattr(coord.topic, "append", refused)  # the removal is not acks=all
    group = coord.consumer_groups[GROUP]
    group.members["m1"].cancel_timers()
    coord.consumer._on_consumer_timeout(group, "m1", None, "session timeout")
    assert _state(coord) == before, "the member stays, its session running again"


async def _static_heartbeat(coord: GroupCoordinator, member_id: str,
                            epoch: int) -> dict[str, Any]:
    return await coord.consumer_group_heartbeat(
        GROUP, member_id, epoch, "i1", None, 30000, ["t"], None, None,
        [] if epoch == 0 else None, "client", "/127.0.0.1", 0)


async def test_a_heartbeat_is_decided_without_changing_the_group(
        coord: GroupCoordinator) -> None:
    """A static member back under a new member id replaces the old one only once the records
    are written: the decision leaves the old member in place, its session running."""
    assert (await _static_heartbeat(coord, "m1", 0))["error_code"] == ErrorCode.none
    assert (await _static_heartbeat(coord, "m1", -2))["member_epoch"] == -2
    before = _state(coord)
    old = coord.consumer_groups[GROUP].members["m1"]
    step = coord.consumer.heartbeat.decide(0, GROUP, "m1b", 0, "i1", None, 30000, ["t"], None,
                                           None, [], "client", "/127.0.0.1", 45000, 5000)
    assert step.records and step.answer["member_id"] == "m1b"
    assert _state(coord) == before
    assert old.session_timer is not None and not old.session_timer.cancelled()
    install = step.apply[0]
    install()
    assert set(coord.consumer_groups[GROUP].members) == {"m1b"}
    # the replaced member's partitions are the new one's at once (none is held by another)
    assert old.assigned and coord.consumer_groups[GROUP].members["m1b"].assigned == old.assigned
    assert old.session_timer is None, "the replaced member's timers stop with it"


async def test_a_static_return_whose_append_is_refused_leaves_the_group_as_it_was(
        coord: GroupCoordinator, host: FakeHost) -> None:
    await _heartbeat(coord, "m2", 0)
    await _static_heartbeat(coord, "m1", 0)
    await _static_heartbeat(coord, "m1", -2)
    before = _state(coord)
    _refuse_appends(host)
    answer = await _static_heartbeat(coord, "m1b", 0)
    assert answer["error_code"] == ErrorCode.coordinator_not_available
    assert _state(coord) == before
