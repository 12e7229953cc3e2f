"""What a classic group's Heartbeat, SyncGroup and LeaveGroup do (Kafka's
GroupMetadataManager.classicGroupHeartbeat, classicGroupSync and classicGroupLeave), without
I/O: the checks that answer a request at once, and the leader's SyncGroup as a `Step` (the
group's record with the assignments, and the change it says). The caller (groups.py) writes
the step through the offsets partition, applies it once the record is in the local log, and
runs the timers and answers the parked requests. Specs:
tests/unit/test_group_transitions_classic.py.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from samsa.protocol.errors import ErrorCode

from ..common import GroupError, Step, static_member_id
from ..records import group_metadata_key, group_metadata_value
from .model import ClassicGroup, GroupState, Member


def known_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> Member:
    """The member a request names (a static one by its instance id as well): UNKNOWN_MEMBER_ID
    if the group has no such member, FENCED_INSTANCE_ID if the instance is another member's."""
    if instance_id is not None:
        static_id = group.static_member_id(instance_id)
        if static_id is None:
            raise GroupError(ErrorCode.unknown_member_id)
        if static_id != member_id:
            raise GroupError(ErrorCode.fenced_instance_id)
    member = group.members.get(member_id)
    if member is None:
        raise GroupError(ErrorCode.unknown_member_id)
    return member


def heartbeat(group: ClassicGroup, generation: int, member_id: str,
              instance_id: str | None) -> tuple[Member, ErrorCode]:
    """The member whose session starts anew, and the answer: REBALANCE_IN_PROGRESS while the
    group prepares a rebalance (the member rejoins)."""
    if group.is_in(GroupState.DEAD, GroupState.EMPTY):
        raise GroupError(ErrorCode.unknown_member_id)
    member = known_member(group, member_id, instance_id)
    if generation != group.generation:
        raise GroupError(ErrorCode.illegal_generation)
    if group.is_in(GroupState.PREPARING_REBALANCE):
        return member, ErrorCode.rebalance_in_progress
    return member, ErrorCode.none


def sync(group: ClassicGroup, generation: int, member_id: str, instance_id: str | None,
         protocol_type: str | None, protocol_name: str | None) -> Member:
    """The member a SyncGroup may go on for (its session starts anew): a known member of the
    group's generation and protocol, once the group's members are chosen."""
    if group.is_in(GroupState.DEAD):
        raise GroupError(ErrorCode.unknown_member_id)
    member = known_member(group, member_id, instance_id)
    if generation != group.generation:
        raise GroupError(ErrorCode.illegal_generation)
    if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name):
        raise GroupError(ErrorCode.inconsistent_group_protocol)
    if group.is_in(GroupState.EMPTY):
        raise GroupError(ErrorCode.unknown_member_id)
    if group.is_in(GroupState.PREPARING_REBALANCE):
        raise GroupError(ErrorCode.rebalance_in_progress)
    return member


def assign(group: ClassicGroup, assignments: list[tuple[str, bytes]], now: int) -> Step:
    """The leader's SyncGroup while the group completes its rebalance: the group's record
    with each member's assignment (empty for a member the leader gave none), and, once it
    is written, those assignments and the group Stable."""
    given = dict(assignments)
    value = group.to_value(now)
    value.members = [replace(m, assignment=given.get(m.member_id, b"")) for m in value.members]
    return Step([(group_metadata_key(group.group_id), group_metadata_value(value))],
                apply=(functools.partial(_assigned, group, given, now),))


def _assigned(group: ClassicGroup, given: dict[str, bytes], now: int) -> None:
    for m in group.members.values():
        m.assignment = given.get(m.member_id, b"")
    group.transition(GroupState.STABLE, now)


def leave(group: ClassicGroup, member_id: str, instance_id: str | None) -> Member | None:
    """The member a LeaveGroup entry removes; None for a member still joining (it is only
    forgotten: it never was in the group)."""
    if instance_id is None and group.is_pending(member_id):
        return None
    if instance_id is not None:
        member_id = static_member_id(group.static_member_id(instance_id), member_id)
    member = group.members.get(member_id)
    if member is None:
        raise GroupError(ErrorCode.unknown_member_id)
    return member
