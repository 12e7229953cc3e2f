"""The checks of a ConsumerGroupHeartbeat (Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid
and throwIfConsumerGroupMemberEpochIsInvalid) and what a member's leaving does to its group
(Kafka's GroupMetadataManager.consumerGroupLeave and consumerGroupFenceMember), without I/O: a
leave returns a `Step`, the records to write, the answer and the change they say, which
the caller (heartbeat.py, groups.py's session timeout, classic_members.py's LeaveGroup)
writes through the offsets partition and applies once they are in the local log. Specs:
tests/unit/test_group_transitions_consumer.py.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace

from samsa.protocol.errors import ErrorCode

from ..common import GroupError, Step
from .model import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    TopicsMetadata,
    compile_regex,
)
from .records import Records, current_assignment_record, epoch_record, fence_records

log = logging.getLogger("samsa.coordinator.group.coordinator")

Owned = list[tuple[uuid.UUID, list[int]]]  # the partitions a member says it owns
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


# ---- request checks --------------------------------------------------------------------------
def validate_request(group_id: str, member_id: str, member_epoch: int,
                     instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
                     names: list[str] | None, regex: str | None, assignor: str | None,
                     owned: Owned | None, version: int, assignors: list[str]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (`assignors`: the broker's)."""
    def invalid(message: str) -> GroupError:
        return GroupError(ErrorCode.invalid_request, message)

    if not group_id:
        raise invalid("GroupId can't be empty.")
    if instance_id == "":
        raise invalid("InstanceId can't be empty.")
    if rack_id == "":
        raise invalid("RackId can't be empty.")
    if version >= 1 and not member_id:
        raise invalid("MemberId can't be empty.")
    if member_epoch > 0 or member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not member_id:
            raise invalid("MemberId can't be empty.")
    elif member_epoch == 0:
        if rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if owned is None or owned:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if names is None and regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                          "non-null when (re-)joining.")
    elif member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not member_id:
            raise invalid("MemberId can't be empty.")
        if instance_id is None:
            raise invalid("InstanceId can't be null.")
    else:
        raise invalid("MemberEpoch is invalid.")
    if assignor is not None and assignor not in assignors:
        raise GroupError(ErrorCode.unsupported_assignor,
                         f"ServerAssignor {assignor} is not supported. Supported assignors: "
                         f"{', '.join(assignors)}.")
    if regex and compile_regex(regex) is None:
        raise GroupError(ErrorCode.invalid_regular_expression,
                         f"SubscribedTopicRegex `{regex}` is not a valid regular expression.")


def validate_epoch(member: ConsumerMember, received: int, owned: Owned | None) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
    if received > member.member_epoch:
        raise GroupError(ErrorCode.fenced_member_epoch,
                         f"The consumer group member has a greater member epoch ({received})"
                         f" than the one known by the group coordinator "
                         f"({member.member_epoch}). The member must abandon all its "
                         "partitions and rejoin.")
    if received < member.member_epoch:
        subset = owned is not None and all(
            p in member.assigned.get(tid, ()) for tid, ps in owned for p in ps)
        if received != member.previous_member_epoch or not subset:
            raise GroupError(ErrorCode.fenced_member_epoch,
                             f"The consumer group member has a smaller member epoch "
                             f"({received}) than the one known by the group coordinator "
                             f"({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
