"""A streams group's state (KIP-1071), as Kafka's StreamsGroup, StreamsGroupMember,
StreamsTopology and TasksTuple keep it: the topology the group runs, its members, the target
assignment of tasks and each member's current assignment. Nothing here writes: the state
changes only by replaying records (records.py), at load and after each write."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# A set of tasks: subtopology id -> the partitions (task numbers) of it.
TaskMap = dict[str, frozenset[int]]


def task_map(pairs: dict[str, set[int]] | dict[str, frozenset[int]]) -> TaskMap:
    """`pairs` without empty subtopologies."""
    return {s: frozenset(ps) for s, ps in pairs.items() if ps}


def minus(a: TaskMap, b: TaskMap) -> TaskMap:
    return task_map({s: ps - b.get(s, frozenset()) for s, ps in a.items()})


def union(a: TaskMap, b: TaskMap) -> TaskMap:
    return task_map({s: a.get(s, frozenset()) | b.get(s, frozenset()) for s in {*a, *b}})


def intersect(a: TaskMap, b: TaskMap) -> TaskMap:
    return task_map({s: ps & b.get(s, frozenset()) for s, ps in a.items()})


def count(a: TaskMap) -> int:
    return sum(len(ps) for ps in a.values())


@dataclass(frozen=True, slots=True)
class Tasks:
    """Kafka's TasksTuple: a member's active, standby and warm-up tasks."""

    active: TaskMap = field(default_factory=dict)
    standby: TaskMap = field(default_factory=dict)
    warmup: TaskMap = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def minus(self, other: Tasks) -> Tasks:
        return Tasks(minus(self.active, other.active), minus(self.standby, other.standby),
                     minus(self.warmup, other.warmup))

    def intersect(self, other: Tasks) -> Tasks:
        return Tasks(intersect(self.active, other.active),
                     intersect(self.standby, other.standby),
                     intersect(self.warmup, other.warmup))


EMPTY = Tasks()


class MemberState(enum.IntEnum):
    """Kafka's streams MemberState (the byte StreamsGroupCurrentMemberAssignmentValue stores)."""

    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2
    UNKNOWN = 127


class GroupState(enum.Enum):
    """Kafka's StreamsGroup.StreamsGroupState, as ListGroups and the describe APIs name it."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic the topology declares: partitions and replication 0 mean "derive"
    (changelogs always) and "the broker's default"."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    # each group: indexes into source_topics, source_topic_regex, repartition_source_topics
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(slots=True)
class StreamsMember:
    member_id: str
    process_id: str = ""  # the Streams instance: its threads are members of one process
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    # the current assignment (StreamsGroupCurrentMemberAssignmentValue)
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Tasks = EMPTY
    pending_revocation: Tasks = EMPTY
    # the epoch each active task it holds (assigned or pending revocation) was given at, as
    # Kafka 4.4's AssignmentEpochs (none listed: the member epoch)
    task_epochs: dict[tuple[str, int], int] = field(default_factory=dict)

    def task_epoch(self, subtopology: str, partition: int) -> int | None:
        """The epoch the member was given an active task it holds at; None if it holds no
        such task (Kafka's assignment epoch, then its pending-revocation epoch)."""
        if partition not in self.assigned.active.get(subtopology, ()) and \
                partition not in self.pending_revocation.active.get(subtopology, ()):
            return None
        return self.task_epochs.get((subtopology, partition), max(self.member_epoch, 0))

    def metadata(self) -> tuple[object, ...]:
        """What StreamsGroupMemberMetadataValue holds (a change is written as a new one)."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                self.rebalance_timeout_ms, self.topology_epoch, self.process_id,
                self.user_endpoint, self.client_tags)


@dataclass(slots=True)
class StreamsGroup:
    group_id: str
    partition: int
    epoch: int = 0
    metadata_hash: int = 0
    validated_topology_epoch: int = -1
    topology: Topology | None = None
    members: dict[str, StreamsMember] = field(default_factory=dict)
    target: dict[str, Tasks] = field(default_factory=dict)
    assignment_epoch: int = 0
    assignment_ms: int = 0  # when the target assignment was computed (0: never)
    # bumped when the members' endpoints or their active tasks change (Interactive Queries)
    endpoint_epoch: int = 0
    # a member asked the whole application to shut down (kept in memory only, as in Kafka)
    shutdown_requested_by: str | None = None

    def state(self, configured: bool = True) -> GroupState:
        """Kafka's StreamsGroup.maybeUpdateGroupState; `configured`: its topology has all its
        topics (NOT_READY otherwise)."""
        if not self.members:
            return GroupState.EMPTY
        if self.topology is None or not configured:
            return GroupState.NOT_READY
        if self.assignment_epoch != self.epoch:
            return GroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE
               for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE

    def owner_of_active(self, member_id: str) -> TaskMap:
        """Every active task another member has or is still revoking: a task a member may
        be given only once it is free (Kafka's currentActiveTaskToProcessId)."""
        held: dict[str, set[int]] = {}
        for m in self.members.values():
            if m.member_id == member_id:
                continue
            for tasks in (m.assigned.active, m.pending_revocation.active):
                for s, ps in tasks.items():
                    held.setdefault(s, set()).update(ps)
        return task_map(held)
