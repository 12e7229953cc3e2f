"""A consumer-protocol (KIP-848) consumer group and its members (Kafka's ConsumerGroup and
ConsumerGroupMember): epochs, subscriptions, target and current assignments.

Epochs, as Kafka keeps them: the group epoch is bumped by every change of the group's
members, subscriptions or subscribed topics' metadata; the target assignment is recomputed
when the group epoch is ahead of its epoch (the assignment epoch); a member's epoch follows
the target assignment epoch once the member has revoked what the target took from it. A
partition goes to its new owner only after its previous owner revoked it (the member waits in
UNRELEASED_PARTITIONS meanwhile): `partition_epochs` says who still holds what.

Timers are the coordinator's (groups.py); this module holds no asyncio state besides the
handles it stores for it.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# topic id -> partitions
Assignment = dict[uuid.UUID, set[int]]
# (topic id, partition) -> the member epoch at which the member was given the partition
AssignmentEpochs = dict[tuple[uuid.UUID, int], int]
# topic name -> (topic id, partition count)
TopicsMetadata = dict[str, tuple[uuid.UUID, int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState (its byte values are what ConsumerGroupCurrentMemberAssignmentValue
    stores)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    @property
    def label(self) -> str:
        return {0: "stable", 1: "unrevoked_partitions", 2: "unreleased_partitions"}.get(
            int(self), "unknown")


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def copy_assignment(a: Mapping[uuid.UUID, Iterable[int]]) -> Assignment:
    return {t: set(ps) for t, ps in a.items() if ps}


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # KIP-1251: when each partition of `assigned` and `pending_revocation` came to the member
    # (none listed: the member epoch, as Kafka reads a record written without them)
    assignment_epochs: AssignmentEpochs = field(default_factory=dict)
    # a member of the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a consumer group,
    # after an online upgrade: its session timeout and its (name, metadata) protocols
    classic_session_ms: int = -1
    classic_protocols: list[tuple[str, bytes]] | None = None
    session_timer: asyncio.TimerHandle | None = field(default=None, compare=False)
    rebalance_timer: asyncio.TimerHandle | None = field(default=None, compare=False)
    # a classic member's JoinGroup and SyncGroup deadlines (its rebalance timeout)
    join_timer: asyncio.TimerHandle | None = field(default=None, compare=False)
    sync_timer: asyncio.TimerHandle | None = field(default=None, compare=False)

    def metadata_key(self) -> tuple[Any, ...]:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                self.subscribed_topic_names, self.subscribed_topic_regex,
                self.rebalance_timeout_ms, self.server_assignor, self.classic_session_ms,
                self.classic_protocols)

    def assignment_key(self) -> tuple[Any, ...]:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned,
                self.pending_revocation, self.held_epochs())

    def held_epochs(self) -> AssignmentEpochs:
        """The assignment epoch of every partition the member holds."""
        return {(t, p): self.assignment_epochs.get((t, p), max(self.member_epoch, 0))
                for a in (self.assigned, self.pending_revocation) for t, ps in a.items()
                for p in ps}

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch the member was given a partition it holds (assigned or pending
        revocation) at; None if it holds no such partition (Kafka's assignmentEpoch, then
        pendingRevocationEpoch)."""
        if partition not in self.assigned.get(topic_id, ()) and \
                partition not in self.pending_revocation.get(topic_id, ()):
            return None
        return self.assignment_epochs.get((topic_id, partition), max(self.member_epoch, 0))

    def timers(self) -> tuple[asyncio.TimerHandle | None, ...]:
        return self.session_timer, self.rebalance_timer, self.join_timer, self.sync_timer

    def cancel_timers(self) -> None:
        for t in self.timers():
            if t is not None:
                t.cancel()
        self.session_timer = self.rebalance_timer = self.join_timer = self.sync_timer = None


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    partition: int  # its __consumer_offsets partition
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> assignment
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    # the subscribed topics' metadata the target assignment was computed from
    subscription_metadata: TopicsMetadata | None = None
    session_ms: int = -1  # the group's session timeout (-1: the broker's default)
    dead: bool = False

    # ---- snapshots (Kafka's timeline: a change whose records are not written is undone) --
    def save(self) -> dict[str, Any]:
        """The group's state, to `restore` it. Members are replaced on change, never changed
        in place (but for their timers), so shallow copies suffice."""
        return {"group_epoch": self.group_epoch, "assignment_epoch": self.assignment_epoch,
                "members": dict(self.members), "static_members": dict(self.static_members),
                "target": dict(self.target), "partition_epochs": dict(self.partition_epochs),
                "subscription_metadata": self.subscription_metadata,
                "session_ms": self.session_ms, "dead": self.dead}

    def restore(self, saved: dict[str, Any]) -> None:
        for name, value in saved.items():
            setattr(self, name, value)

    # ---- queries ---------------------------------------------------------------------
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """Kafka's ConsumerGroup.waitingOnUnreleasedPartition: a partition of the member's
        target that it does not have yet is still owned by another member."""
        if member.state != MemberState.UNRELEASED_PARTITIONS:
            return False
        for tid, ps in self.target.get(member.member_id, {}).items():
            have = member.assigned.get(tid, set())
            if any(p not in have and self.current_partition_epoch(tid, p) != -1 for p in ps):
                return True
        return False

    # ---- partition epochs ------------------------------------------------------------
    def remove_partition_epochs(self, member: ConsumerMember) -> None:
        for a in (member.assigned, member.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    self.partition_epochs.pop((t, p), None)

    def add_partition_epochs(self, member: ConsumerMember) -> None:
        for a in (member.assigned, member.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    self.partition_epochs[(t, p)] = member.member_epoch

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        """The member that holds static instance `instance_id`, if any."""
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def update_member(self, old: ConsumerMember | None, new: ConsumerMember) -> None:
        """Install `new` (replacing `old`, the same member id) and its partition epochs."""
        if old is not None:
            self.remove_partition_epochs(old)
            if old.instance_id is not None and \
                    self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[new.member_id] = new
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id
        self.add_partition_epochs(new)

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        member.cancel_timers()
        self.remove_partition_epochs(member)
        if member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def rebuild_partition_epochs(self) -> None:
        self.partition_epochs.clear()
        for m in self.members.values():
            self.add_partition_epochs(m)


# ---- subscriptions -------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def compile_regex(regex: str) -> re.Pattern[str] | None:
    """A member's SubscribedTopicRegex compiled (None if it is not a valid one)."""
    try:
        return re.compile(regex)
    except re.error:
        return None


def subscribed_topics(member: ConsumerMember, all_topics: Iterable[str],
                      regex: Callable[[str], Any] | None = None) -> set[str]:
    """The topic names `member` subscribes to: its names, plus the topics its regex matches
    (in full, as Kafka's RE2J `matches`)."""
    topics = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex and regex is not None:
        pattern = regex(member.subscribed_topic_regex)
        if pattern is not None:
            topics |= {t for t in all_topics if pattern.fullmatch(t)}
    return topics
