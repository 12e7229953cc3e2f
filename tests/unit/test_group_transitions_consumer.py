"""A consumer group member's leaving, as a spec (coordinator/group/consumer/transitions.py):
what a leave heartbeat (epoch -1 or -2) and a fenced member (session or rebalance timeout, a
classic member's LeaveGroup) write, answer and change, decided without I/O. Nothing changes
until the step is applied, which the coordinator does once the records are in the log."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from samsa.coordinator.group.common import GroupError, Records, Step
from samsa.coordinator.group.consumer import transitions
from samsa.coordinator.group.consumer.model import (
    ConsumerGroup,
    ConsumerMember,
    TopicsMetadata,
)
from samsa.coordinator.group.consumer.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    decode_consumer_key,
    decode_current_assignment,
    decode_epoch_value,
)
from samsa.protocol.errors import ErrorCode

GROUP = "g"
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def _group() -> ConsumerGroup:
    """Epoch 5: m1 (t1, partitions 0-1), m2 (t2, partition 0), m3 static as instance i3."""
    group = ConsumerGroup(GROUP, 0, group_epoch=5, assignment_epoch=5)
    for member in (ConsumerMember("m1", subscribed_topic_names=["t1"], member_epoch=5,
                                  previous_member_epoch=4, assigned={T1: {0, 1}}),
                   ConsumerMember("m2", subscribed_topic_names=["t2"], member_epoch=5,
                                  previous_member_epoch=4, assigned={T2: {0}}),
                   ConsumerMember("m3", instance_id="i3", subscribed_topic_names=["t2"],
                                  member_epoch=5, previous_member_epoch=4)):
        group.update_member(None, member)
        group.target[member.member_id] = dict(member.assigned)
    group.subscription_metadata = {"t1": (T1, 2), "t2": (T2, 1)}
    return group


def _metadata(members: list[ConsumerMember]) -> TopicsMetadata:
    known = {"t1": (T1, 2), "t2": (T2, 1)}
    return {t: known[t] for m in members for t in m.subscribed_topic_names}


def _no_downgrade(group: ConsumerGroup, member_id: str) -> None:
    return None


def _leave(group: ConsumerGroup | None, member_id: str, epoch: int,
           instance_id: str | None = None,
           downgrade: Callable[[ConsumerGroup, str], Any] = _no_downgrade) -> Step:
    return transitions.leave(GROUP, group, member_id, epoch, instance_id, downgrade, _metadata)


def _written(records: Records) -> list[tuple[str, str | None, Any]]:
    """Each record as (type, member, what its value says)."""
    names = {GROUP_METADATA: "group epoch", MEMBER_METADATA: "member",
             TARGET_ASSIGNMENT_MEMBER: "target", CURRENT_MEMBER_ASSIGNMENT: "assignment"}
    out: list[tuple[str, str | None, Any]] = []
    for key, value in records:
        k = decode_consumer_key(key)
        assert k is not None and k.group == GROUP
        said: Any = value
        if value is not None and k.type == GROUP_METADATA:
            said = decode_epoch_value(value)
        elif value is not None and k.type == CURRENT_MEMBER_ASSIGNMENT:
            m = ConsumerMember(k.member or "")
            decode_current_assignment(value, m)
            said = (m.member_epoch, m.previous_member_epoch, m.assigned)
        out.append((names[k.type], k.member, said))
    return out


def _apply(step: Step) -> None:
    for action in step.apply:
        action()


# ---- a member leaves (epoch -1) ---------------------------------------------------------------
def test_a_leaving_member_writes_its_tombstones_and_the_next_group_epoch() -> None:
    group = _group()
    step = _leave(group, "m1", -1)
    assert _written(step.records) == [("assignment", "m1", None), ("target", "m1", None),
                                      ("member", "m1", None), ("group epoch", None, 6)]
    assert step.answer["error_code"] == ErrorCode.none
    assert (step.answer["member_id"], step.answer["member_epoch"]) == ("m1", -1)


def test_a_leave_changes_nothing_until_it_is_applied() -> None:
    group = _group()
    before = copy.deepcopy(group.save())
    step = _leave(group, "m1", -1)
    assert group.save() == before
    _apply(step)
    assert "m1" not in group.members and "m1" not in group.target
    assert group.group_epoch == 6 and group.assignment_epoch == 5
    # the others' partitions stay held; m1's are free for the next target assignment
    assert group.current_partition_epoch(T1, 0) == -1
    assert group.current_partition_epoch(T2, 0) == 5
    assert group.subscription_metadata == {"t2": (T2, 1)}, "t1 is no one's subscription now"


def test_a_member_that_is_not_in_the_group_cannot_leave_it() -> None:
    with pytest.raises(GroupError) as err:
        _leave(_group(), "nobody", -1)
    assert err.value.error_code == ErrorCode.unknown_member_id
    with pytest.raises(GroupError) as err:
        _leave(None, "m1", -1)
    assert err.value.error_code == ErrorCode.group_id_not_found


def test_the_last_consumer_member_of_classic_members_turns_the_group_classic() -> None:
    """When the downgrade applies, only the conversion is written (Kafka's
    consumerGroupFenceMember), and its install is the change."""
    installed: list[str] = []
    conversion: Records = [(b"classic", b"group")]

    def downgrade(group: ConsumerGroup, member_id: str) -> tuple[Records, Callable[[], None]]:
        return conversion, lambda: installed.append(member_id)

    group = _group()
    step = _leave(group, "m1", -1, downgrade=downgrade)
    assert step.records == conversion and step.answer["member_epoch"] == -1
    assert installed == []
    _apply(step)
    assert installed == ["m1"] and "m1" in group.members, "the install replaces the group"


# ---- a static member leaves for now (epoch -2) ------------------------------------------------
def test_a_static_member_leaving_for_now_keeps_its_place_and_partitions() -> None:
    group = _group()
    group.members["m3"].assigned = {T2: {1}}
    step = _leave(group, "m3", -2, instance_id="i3")
    assert _written(step.records) == [("assignment", "m3", (-2, 5, {T2: {1}}))]
    assert (step.answer["member_id"], step.answer["member_epoch"]) == ("m3", -2)
    assert group.members["m3"].member_epoch == 5
    _apply(step)
    kept = group.members["m3"]
    assert (kept.member_epoch, kept.previous_member_epoch, kept.assigned) == (-2, 5, {T2: {1}})
    assert group.static_members == {"i3": "m3"} and group.group_epoch == 5


@pytest.mark.parametrize(("instance_id", "member_id", "answer"), [
    ("i9", "m3", ErrorCode.unknown_member_id),  # no member holds the instance
    ("i3", "m2", ErrorCode.fenced_instance_id),  # another member holds it
])
def test_a_static_leave_must_name_the_member_holding_the_instance(
        instance_id: str, member_id: str, answer: ErrorCode) -> None:
    with pytest.raises(GroupError) as err:
        _leave(_group(), member_id, -2, instance_id=instance_id)
    assert err.value.error_code == answer


# ---- a member is fenced (its session or rebalance timed out) -----------------------------------
def test_a_fenced_member_is_removed_as_a_leaving_one_with_no_answer() -> None:
    group = _group()
    step = transitions.fence_member(group, group.members["m2"], _no_downgrade, _metadata)
    assert _written(step.records) == [("assignment", "m2", None), ("target", "m2", None),
                                      ("member", "m2", None), ("group epoch", None, 6)]
    assert step.answer == {}
    _apply(step)
    assert set(group.members) == {"m1", "m3"} and group.group_epoch == 6
    # m3 still subscribes to t2
    assert group.subscription_metadata == {"t1": (T1, 2), "t2": (T2, 1)}


# ---- the request's checks ----------------------------------------------------------------------
ASSIGNORS = ["uniform", "range"]


def _check(member_epoch: int, *, member_id: str = "m1", instance_id: str | None = None,
           rebalance_timeout_ms: int = 30_000, names: list[str] | None = None,
           regex: str | None = None, assignor: str | None = None,
           owned: transitions.Owned | None = None, version: int = 1) -> ErrorCode:
    try:
        transitions.validate_request(GROUP, member_id, member_epoch, instance_id, None,
                                     rebalance_timeout_ms, names, regex, assignor, owned,
                                     version, ASSIGNORS)
    except GroupError as exc:
        return exc.error_code
    return ErrorCode.none


def test_a_joining_member_sends_its_rebalance_timeout_a_subscription_and_no_partitions() -> None:
    assert _check(0, names=["t1"], owned=[]) == ErrorCode.none
    assert _check(0, regex="t.*", owned=[]) == ErrorCode.none
    assert _check(0, names=["t1"], owned=[], rebalance_timeout_ms=-1) == ErrorCode.invalid_request
    assert _check(0, names=["t1"], owned=None) == ErrorCode.invalid_request
    assert _check(0, names=["t1"], owned=[(T1, [0])]) == ErrorCode.invalid_request
    assert _check(0, owned=[]) == ErrorCode.invalid_request  # neither names nor regex


def test_the_member_id_the_epoch_and_the_instance_are_checked() -> None:
    assert _check(5, member_id="") == ErrorCode.invalid_request
    assert _check(0, member_id="", names=["t1"], owned=[], version=0) == ErrorCode.none
    assert _check(0, member_id="", names=["t1"], owned=[]) == ErrorCode.invalid_request  # v1+
    assert _check(-2) == ErrorCode.invalid_request, "a static leave names its instance"
    assert _check(-2, instance_id="i1") == ErrorCode.none
    assert _check(-3) == ErrorCode.invalid_request


def test_an_unknown_assignor_and_a_bad_regex_are_refused() -> None:
    assert _check(5, assignor="range") == ErrorCode.none
    assert _check(5, assignor="sticky") == ErrorCode.unsupported_assignor
    assert _check(5, regex="t[") == ErrorCode.invalid_regular_expression


def _epoch_error(received: int, owned: transitions.Owned | None) -> ErrorCode:
    member = ConsumerMember("m1", member_epoch=7, previous_member_epoch=6,
                            assigned={T1: {0, 1}})
    try:
        transitions.validate_epoch(member, received, owned)
    except GroupError as exc:
        return exc.error_code
    return ErrorCode.none


def test_a_member_epoch_ahead_of_the_coordinators_is_fenced() -> None:
    assert _epoch_error(7, None) == ErrorCode.none
    assert _epoch_error(8, None) == ErrorCode.fenced_member_epoch


def test_the_previous_epoch_passes_only_with_partitions_the_member_still_has() -> None:
    """A heartbeat sent before the member heard of its new epoch (Kafka: the previous epoch,
    owning a subset of the current assignment) is not fenced."""
    assert _epoch_error(6, [(T1, [0])]) == ErrorCode.none
    assert _epoch_error(6, [(T1, [2])]) == ErrorCode.fenced_member_epoch
    assert _epoch_error(6, None) == ErrorCode.fenced_member_epoch
    assert _epoch_error(5, [(T1, [0])]) == ErrorCode.fenced_member_epoch
