"""A classic group's Heartbeat, SyncGroup and LeaveGroup, as a spec
(coordinator/group/classic/transitions.py): which requests are answered at once and with what,
and what the leader's SyncGroup writes and changes, decided without I/O. Nothing changes until
the leader's step is applied, which the coordinator does once its record is in the log."""

from __future__ import annotations

import pytest

from samsa.coordinator.group.classic import transitions
from samsa.coordinator.group.classic.model import ClassicGroup, GroupState, Member
from samsa.coordinator.group.common import GroupError
from samsa.coordinator.group.records import GroupKey, decode_group_value, decode_key
from samsa.protocol.errors import ErrorCode

GROUP = "g"


def _member(member_id: str, instance_id: str | None = None) -> Member:
    return Member(member_id, instance_id, "client", "/10.0.0.1", 60_000, 10_000, "consumer",
                  [("range", b"meta-" + member_id.encode())])


def _group(state: GroupState = GroupState.STABLE) -> ClassicGroup:
    """Generation 3 of protocol range: a (the leader), b, and c static as instance ic; d is
    still joining (handed a member id, not in the group yet)."""
    group = ClassicGroup(GROUP, 0, state=state, state_timestamp=1000, protocol_type="consumer",
                         protocol_name="range", generation=3, leader_id="a")
    for m in (_member("a"), _member("b"), _member("c", "ic")):
        group.members[m.member_id] = m
    group.static_members["ic"] = "c"
    group.pending_members.add("d")
    return group


def _error(call: object) -> ErrorCode:
    assert callable(call)
    with pytest.raises(GroupError) as err:
        call()
    return err.value.error_code


# ---- Heartbeat --------------------------------------------------------------------------------
def test_a_member_of_the_generation_heartbeats() -> None:
    group = _group()
    member, answer = transitions.heartbeat(group, 3, "b", None)
    assert member is group.members["b"] and answer == ErrorCode.none


def test_a_heartbeat_during_a_rebalance_tells_the_member_to_rejoin() -> None:
    member, answer = transitions.heartbeat(_group(GroupState.PREPARING_REBALANCE), 3, "b", None)
    assert member.member_id == "b" and answer == ErrorCode.rebalance_in_progress


@pytest.mark.parametrize(("state", "generation", "member_id", "instance_id", "answer"), [
    (GroupState.STABLE, 2, "b", None, ErrorCode.illegal_generation),
    (GroupState.STABLE, 3, "x", None, ErrorCode.unknown_member_id),
    (GroupState.STABLE, 3, "d", None, ErrorCode.unknown_member_id),  # still joining
    (GroupState.STABLE, 3, "b", "ic", ErrorCode.fenced_instance_id),  # c's instance
    (GroupState.STABLE, 3, "c", "ix", ErrorCode.unknown_member_id),
    (GroupState.EMPTY, 3, "b", None, ErrorCode.unknown_member_id),
    (GroupState.DEAD, 3, "b", None, ErrorCode.unknown_member_id),
])
def test_a_heartbeat_is_refused(state: GroupState, generation: int, member_id: str,
                                instance_id: str | None, answer: ErrorCode) -> None:
    group = _group(state)
    assert _error(lambda: transitions.heartbeat(group, generation, member_id,
                                                instance_id)) == answer


# ---- SyncGroup --------------------------------------------------------------------------------
@pytest.mark.parametrize(("state", "generation", "protocol", "answer"), [
    (GroupState.COMPLETING_REBALANCE, 2, ("consumer", "range"), ErrorCode.illegal_generation),
    (GroupState.COMPLETING_REBALANCE, 3, ("connect", "range"),
     ErrorCode.inconsistent_group_protocol),
    (GroupState.COMPLETING_REBALANCE, 3, ("consumer", "roundrobin"),
     ErrorCode.inconsistent_group_protocol),
    (GroupState.PREPARING_REBALANCE, 3, ("consumer", "range"), ErrorCode.rebalance_in_progress),
    (GroupState.EMPTY, 3, ("consumer", "range"), ErrorCode.unknown_member_id),
    (GroupState.DEAD, 3, ("consumer", "range"), ErrorCode.unknown_member_id),
])
def test_a_sync_is_refused(state: GroupState, generation: int, protocol: tuple[str, str],
                           answer: ErrorCode) -> None:
    group = _group(state)
    assert _error(lambda: transitions.sync(group, generation, "b", None, *protocol)) == answer


def test_a_sync_that_names_no_protocol_goes_on() -> None:
    group = _group(GroupState.COMPLETING_REBALANCE)
    assert transitions.sync(group, 3, "c", "ic", None, None) is group.members["c"]


def test_the_leaders_assignment_is_written_then_applied_and_the_group_is_stable() -> None:
    group = _group(GroupState.COMPLETING_REBALANCE)
    step = transitions.assign(group, [("a", b"to-a"), ("b", b"to-b")], 2000)
    [(key, value)] = step.records
    assert decode_key(key) == GroupKey(GROUP)
    assert value is not None
    written = decode_group_value(value)
    assert (written.generation, written.protocol, written.leader) == (3, "range", "a")
    assert [(m.member_id, m.assignment) for m in written.members] == [
        ("a", b"to-a"), ("b", b"to-b"), ("c", b"")]  # c was given nothing
    # nothing changes before the record is written
    assert group.is_in(GroupState.COMPLETING_REBALANCE)
    assert [m.assignment for m in group.members.values()] == [b"", b"", b""]
    for action in step.apply:
        action()
    assert group.is_in(GroupState.STABLE) and group.state_timestamp == 2000
    assert {m.member_id: m.assignment for m in group.members.values()} == {
        "a": b"to-a", "b": b"to-b", "c": b""}


# ---- LeaveGroup -------------------------------------------------------------------------------
def test_a_leave_names_the_member_to_remove() -> None:
    group = _group()
    assert transitions.leave(group, "b", None) is group.members["b"]
    assert transitions.leave(group, "c", "ic") is group.members["c"]
    assert transitions.leave(group, "", "ic") is group.members["c"], "the instance is enough"


def test_a_member_still_joining_is_only_forgotten() -> None:
    assert transitions.leave(_group(), "d", None) is None


@pytest.mark.parametrize(("member_id", "instance_id", "answer"), [
    ("x", None, ErrorCode.unknown_member_id),
    ("b", "ic", ErrorCode.fenced_instance_id),
    ("c", "ix", ErrorCode.unknown_member_id),
])
def test_a_leave_is_refused(member_id: str, instance_id: str | None,
                            answer: ErrorCode) -> None:
    group = _group()
    assert _error(lambda: transitions.leave(group, member_id, instance_id)) == answer
