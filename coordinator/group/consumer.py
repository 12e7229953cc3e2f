"""A consumer-protocol (KIP-848) consumer group: members, epochs, target assignment, and the
pure parts of Kafka's group coordinator for it: the server-side assignors (`uniform`,
`range`) and the member reconciliation (Kafka's `CurrentAssignmentBuilder`).

Epochs, as Kafka keeps them: the group epoch is bumped by every change of the group's
members, subscriptions or subscribed topics' metadata; the target assignment is recomputed
when the group epoch is ahead of its epoch (the assignment epoch); a member's epoch follows
the target assignment epoch once the member has revoked what the target took from it. A
partition goes to its new owner only after its previous owner revoked it (the member waits in
UNRELEASED_PARTITIONS meanwhile): `partition_epochs` says who still holds what.

Timers are the coordinator's (consumer_groups.py); this module holds no asyncio state
besides the handles it stores for it.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

# topic id -> partitions
Assignment = dict[uuid.UUID, set[int]]
# (topic id, partition) -> the member epoch at which the member was given the partition
AssignmentEpochs = dict[tuple[uuid.UUID, int], int]
# topic name -> (topic id, partition count)
TopicsMetadata = dict[str, tuple[uuid.UUID, int]]

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

UNIFORM = "uniform"
RANGE = "range"
# Kafka's class names of the two built-in assignors (group.consumer.assignors accepts either).
ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


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


# ---- assignors ----------------------------------------------------------------------------
def assign(assignor: str, subscriptions: Mapping[str, set[str]], topics: TopicsMetadata,
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """The target assignment: member id -> assignment, for members subscribed to topic names
    (`subscriptions`), over the topics that exist (`topics`)."""
    if assignor == RANGE:
        return range_assign(subscriptions, topics)
    return uniform_assign(subscriptions, topics, previous)


def range_assign(subscriptions: Mapping[str, set[str]],
                 topics: TopicsMetadata) -> dict[str, Assignment]:
    """Kafka's RangeAssignor: per topic, its subscribers (by member id) get consecutive ranges
    of its partitions, the first `partitions % subscribers` one more."""
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    for name in sorted({t for s in subscriptions.values() for t in s}):
        meta = topics.get(name)
        if meta is None:
            continue
        topic_id, count = meta
        members = sorted(m for m, s in subscriptions.items() if name in s)
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                out[m][topic_id] = set(range(start, start + n))
            start += n
    return out


def uniform_assign(subscriptions: Mapping[str, set[str]], topics: TopicsMetadata,
                   previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's UniformAssignor goals: every partition of a subscribed topic to one of its
    subscribers, partition counts as even as the subscriptions allow, and as few moves from
    the previous target assignment as that needs (sticky)."""
    members = sorted(subscriptions)
    out: dict[str, Assignment] = {m: {} for m in members}
    count: dict[str, int] = dict.fromkeys(members, 0)
    by_id = {tid: (name, n) for name, (tid, n) in topics.items()}
    subscribers: dict[uuid.UUID, list[str]] = {}
    for name, (tid, _) in topics.items():
        subs = [m for m in members if name in subscriptions[m]]
        if subs:
            subscribers[tid] = subs
    all_partitions = sorted(
        ((tid, p) for tid in subscribers for p in range(by_id[tid][1])),
        key=lambda tp: (by_id[tp[0]][0], tp[1]))
    total_members = len([m for m in members if subscriptions[m]])
    # In a homogeneous group nobody needs more than the ceiling of the average: cap the
    # partitions a member keeps so that the rest can be spread.
    cap = -(-len(all_partitions) // total_members) if total_members else 0
    taken: set[tuple[uuid.UUID, int]] = set()
    for m in members:
        for tid, ps in sorted(previous.get(m, {}).items(), key=lambda kv: str(kv[0])):
            if tid not in subscribers or m not in subscribers[tid]:
                continue
            for p in sorted(ps):
                tp = (tid, p)
                if p >= by_id[tid][1] or tp in taken or count[m] >= cap:
                    continue
                out[m].setdefault(tid, set()).add(p)
                taken.add(tp)
                count[m] += 1
    for tp in all_partitions:
        if tp in taken:
            continue
        m = min(subscribers[tp[0]], key=lambda x: (count[x], x))
        out[m].setdefault(tp[0], set()).add(tp[1])
        count[m] += 1
    # Balance what the subscriptions allow: move a partition from a member to a subscriber
    # of its topic with at least two fewer, until no such move is left.
    moved = True
    rounds = 0
    while moved and rounds < 10 * max(len(all_partitions), 1):
        moved = False
        rounds += 1
        for m in sorted(members, key=lambda x: (-count[x], x)):
            for tid, ps in sorted(out[m].items(), key=lambda kv: str(kv[0])):
                target = min(subscribers[tid], key=lambda x: (count[x], x))
                if count[target] + 2 > count[m] or not ps:
                    continue
                p = max(ps)
                ps.discard(p)
                out[target].setdefault(tid, set()).add(p)
                count[m] -= 1
                count[target] += 1
                moved = True
                break
            if moved:
                break
    return {m: {t: ps for t, ps in a.items() if ps} for m, a in out.items()}


# ---- reconciliation (Kafka's CurrentAssignmentBuilder) --------------------------------------
class FencedMemberEpoch(Exception):
    pass


def reconcile(member: ConsumerMember, target_epoch: int, target: Assignment,
              partition_epoch: Callable[[uuid.UUID, int], int],
              owned: list[tuple[uuid.UUID, list[int]]] | None) -> ConsumerMember:
    """The member's next state towards `target` (a copy; `member` is not changed). `owned` is
    what the member reported owning in this heartbeat (None: not reported)."""

    def owns_revoked(pending: Assignment) -> bool:
        if owned is None:
            return True
        return any(p in pending.get(tid, ()) for tid, ps in owned for p in ps)

    def next_assignment(epoch: int, current: Assignment) -> ConsumerMember:
        unreleased = False
        assigned: Assignment = {}
        revoking: Assignment = {}
        pending_assign: Assignment = {}
        for tid in set(target) | set(current):
            want = target.get(tid, set())
            have = current.get(tid, set())
            keep = have & want
            revoke = have - keep
            add = want - keep
            free = {p for p in add if partition_epoch(tid, p) == -1}
            if free != add:
                unreleased = True
            if keep:
                assigned[tid] = set(keep)
            if revoke:
                revoking[tid] = revoke
            if free:
                pending_assign[tid] = free
        if revoking and owns_revoked(revoking):
            return _with(member, MemberState.UNREVOKED_PARTITIONS, epoch, assigned, revoking)
        for tid, ps in pending_assign.items():
            assigned.setdefault(tid, set()).update(ps)
        state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
        return _with(member, state, target_epoch, assigned, {})

    if member.state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return next_assignment(member.member_epoch, member.assigned)
        return member
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if owns_revoked(member.pending_revocation):
            return member
        return next_assignment(member.member_epoch + 1, member.assigned)
    if member.state == MemberState.UNRELEASED_PARTITIONS:
        return next_assignment(member.member_epoch, member.assigned)
    if owned is None or owned:
        raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return next_assignment(target_epoch, member.assigned)


def _with(member: ConsumerMember, state: MemberState, epoch: int, assigned: Assignment,
          revoking: Assignment) -> ConsumerMember:
    """Kafka's Builder.updateMemberEpoch: the previous epoch becomes the current one. A
    partition kept from the member's assigned ones keeps its assignment epoch; one new to them
    (one pending revocation given back included) gets `epoch`."""
    epochs: AssignmentEpochs = {}
    for a in (assigned, revoking):
        for tid, ps in a.items():
            for p in ps:
                held = (member.assignment_epoch(tid, p) if p in member.assigned.get(tid, ())
                        else None)
                epochs[(tid, p)] = epoch if held is None else held
    return replace(member, state=state, member_epoch=epoch,
                   previous_member_epoch=member.member_epoch,
                   assigned=copy_assignment(assigned), pending_revocation=copy_assignment(revoking),
                   assignment_epochs=epochs,
                   session_timer=member.session_timer, rebalance_timer=member.rebalance_timer)
