"""What a consumer group member's leaving does to its group (Kafka's
GroupMetadataManager.consumerGroupLeave and consumerGroupFenceMember), without I/O: each
function returns a `Step`, the records to write, the answer and the change they say, which
the caller (heartbeat.py, groups.py's session timeout, classic_members.py's LeaveGroup)
writes through the offsets partition and applies once they are in the local log. Specs:
tests/unit/test_group_transitions_consumer.py.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import replace

from samsa.protocol.errors import ErrorCode

from ..common import GroupError, Step
from .model import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    TopicsMetadata,
)
from .records import Records, current_assignment_record, epoch_record, fence_records

log = logging.getLogger("samsa.coordinator.group.coordinator")

# The conversion to a classic group of the group `member_id` leaves (its records, and what
# installs the classic group), when the group may be downgraded; None otherwise.
Downgrade = Callable[[ConsumerGroup, str], "tuple[Records, Callable[[], None]] | None"]
# The subscribed topics' metadata of a set of members (names and regex matches).
SubscriptionMetadata = Callable[[list[ConsumerMember]], TopicsMetadata]


def leave(group_id: str, group: ConsumerGroup | None, member_id: str, member_epoch: int,
          instance_id: str | None, downgrade: Downgrade,
          subscription_metadata: SubscriptionMetadata) -> Step:
    """A heartbeat with a leave epoch: a static member leaving for now (-2) keeps its place
    and its partitions until its session ends; any other member (-1) leaves the group."""
    if group is None:
        raise GroupError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id,
                             f"Member {member_id} is not a member of group {group_id}.")
    else:
        member = static_member(group.static_member(instance_id), member_id, instance_id)
    answer = {"error_code": ErrorCode.none, "error_message": None, "member_id": member_id,
              "member_epoch": member_epoch, "heartbeat_interval": 0, "assignment": None}
    if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        # the static member will come back: it keeps its partitions until its session ends
        log.info("static member %s (instance %s) of group %s leaves temporarily",
                 member_id, instance_id, group_id)
        updated = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                          previous_member_epoch=member.member_epoch)
        return Step([current_assignment_record(group_id, updated)], answer,
                    (functools.partial(group.update_member, member, updated),))
    log.info("member %s leaves consumer group %s", member_id, group_id)
    fenced = fence_member(group, member, downgrade, subscription_metadata)
    return Step(fenced.records, answer, fenced.apply)


def fence_member(group: ConsumerGroup, member: ConsumerMember, downgrade: Downgrade,
                 subscription_metadata: SubscriptionMetadata) -> Step:
    """`member` leaves the group (it left, or its session or rebalance timed out): its
    records go and the group epoch moves, so that the others are assigned its partitions;
    or, when only members of the classic protocol stay and the group may be downgraded,
    the group turns classic instead (Kafka writes only the conversion then)."""
    converted = downgrade(group, member.member_id)
    if converted is not None:
        records, install = converted
        return Step(records, apply=(install,))
    others = [m for m in group.members.values() if m.member_id != member.member_id]
    epoch = group.group_epoch + 1
    records = fence_records(group.group_id, member.member_id)
    records.append(epoch_record(group.group_id, epoch))
    return Step(records, apply=(functools.partial(
        _fenced, group, member.member_id, epoch, subscription_metadata(others)),))


def _fenced(group: ConsumerGroup, member_id: str, epoch: int,
            subscription: TopicsMetadata) -> None:
    group.remove_member(member_id)
    group.target.pop(member_id, None)
    group.group_epoch = epoch
    group.subscription_metadata = subscription


def static_member(static: ConsumerMember | None, member_id: str,
                  instance_id: str) -> ConsumerMember:
    """`static`, the member holding `instance_id`, if the request's `member_id` is it
    (Kafka's throwIfStaticMemberIsUnknown and throwIfInstanceIdIsFenced)."""
    if static is None:
        raise GroupError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if static.member_id != member_id:
        raise GroupError(ErrorCode.fenced_instance_id,
                         f"Static member {member_id} with instance id {instance_id}"
                         f" was fenced by member {static.member_id}.")
    return static
