"""A consumer group's target assignment (Kafka's TargetAssignmentBuilder): the assignor the
members prefer, run over their subscriptions when the group epoch has moved past the
assignment epoch, and the records of what changed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from .assignors import assign
from .model import Assignment, ConsumerGroup, ConsumerMember, TopicsMetadata
from .records import Records, target_epoch_record, target_member_record

log = logging.getLogger("samsa.coordinator.group.coordinator")


def preferred_assignor(members: list[ConsumerMember], default: str) -> str:
    """The assignor most members ask for (ties by name); the default when none asks."""
    votes: dict[str, int] = {}
    for m in members:
        if m.server_assignor:
            votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
    if not votes:
        return default
    return max(sorted(votes), key=lambda n: votes[n])


def replaced_target(group: ConsumerGroup, member_id: str, replaced: ConsumerMember | None,
                    swapped: bool, records: Records) -> dict[str, Assignment]:
    """The group's target with a static member's replacement (`member_id`) in the place of
    the member it replaces; its record goes to `records` unless the replacement's records
    (`swapped`) already carry it."""
    target = group.target
    if replaced is None:
        return target
    target = {(member_id if m == replaced.member_id else m): a for m, a in target.items()}
    if member_id in target and not swapped:
        records.append(target_member_record(group.group_id, member_id, target[member_id]))
    return target


def new_target(group_id: str, group_epoch: int, assignor: str,
               members: Mapping[str, ConsumerMember],
               member_topics: Callable[[ConsumerMember], set[str]],
               topics: TopicsMetadata, previous: dict[str, Assignment],
               records: Records) -> dict[str, Assignment]:
    """The target assignment `assignor` computes for `members` at `group_epoch`: a record
    for each member whose target changed, then the target's epoch, go to `records`."""
    subs = {m.member_id: member_topics(m) for m in members.values()}
    target = assign(assignor, subs, topics, previous)
    for mid, a in sorted(target.items()):
        if mid not in previous or previous[mid] != a:
            records.append(target_member_record(group_id, mid, a))
    records.append(target_epoch_record(group_id, group_epoch))
    log.info("group %s: epoch %d, target assignment computed by %s for %d members",
             group_id, group_epoch, assignor, len(members))
    return target
