"""What a StreamsGroupHeartbeat, a leave and a session timeout do to a streams group (Kafka's
GroupMetadataManager.streamsGroupHeartbeat and its CurrentAssignmentBuilder for tasks), without
I/O: each returns the records to write and the answer. The caller (groups.py) writes the
records through the coordinator runtime and replays them into its state once they are in the
local log; the decision replays them into a scratch copy as it goes, so what it answers is what
the records say. Specs: tests/unit/test_streams_transitions.py.

The path of a heartbeat: check the request; find or create the group and the member; take the
member's topology (the first one sets the group's); write what changed of the member; bump
the group epoch when the membership, the topology or its topics changed; configure the
topology against the topics (internal topics to create, or a status saying why no tasks);
compute a new target assignment when the group epoch is ahead of it; move the member toward
its target (revoke first, unless its heartbeat shows the tasks gone, then assign tasks no
other member still holds; a role change of its own task in one step); answer.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from samsa.protocol.errors import ErrorCode

from ..common import GroupError
from . import records as rec
from .assignor import assign
from .model import (
    EMPTY,
    MemberState,
    StreamsGroup,
    StreamsMember,
    TaskMap,
    Tasks,
    TopicInfo,
    Topology,
    intersect,
    minus,
    union,
)
from .topology import Configured, PartitionCounts, Status, configure, metadata_hash

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
# Kafka 4.4's ASSIGNMENT_DELAYED details
INITIAL_DELAY = "Assignment delayed due to the configured initial rebalance delay."
INTERVAL = "Assignment delayed due to the configured assignment interval."


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A StreamsGroupHeartbeat's fields (None: unchanged since the last heartbeat)."""

    group_id: str
    member_id: str
    member_epoch: int
    client_id: str = ""
    client_host: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    active: TaskMap | None = None
    standby: TaskMap | None = None
    warmup: TaskMap | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] | None = None
    shutdown_application: bool = False
    endpoint_epoch: int = -1
    # the member's changelog offsets and their ends: (subtopology, partition, offset)
    task_offsets: tuple[tuple[str, int, int], ...] | None = None
    task_end_offsets: tuple[tuple[str, int, int], ...] | None = None


@dataclass(slots=True)
class Answer:
    member_id: str
    member_epoch: int
    tasks: Tasks | None = None  # None: unchanged since the member's last heartbeat
    status: list[tuple[int, str]] = field(default_factory=list)


@dataclass(slots=True)
class Outcome:
    records: list[rec.Record]
    answer: Answer
    to_create: tuple[TopicInfo, ...] = ()
    group: StreamsGroup | None = None  # the group as the records leave it


class _Scratch:
    """The group as the records emitted so far leave it: the coordinator's own until the
    first record, then a copy each record is replayed into (most heartbeats change nothing,
    and copy nothing)."""

    def __init__(self, group: StreamsGroup | None, group_id: str, p: int) -> None:
        self.groups: dict[str, StreamsGroup] = {} if group is None else {group_id: group}
        self.copied = group is None
        self.group_id = group_id
        self.p = p
        self.records: list[rec.Record] = []

    @property
    def group(self) -> StreamsGroup:
        return self.groups[self.group_id]

    def emit(self, record: rec.Record) -> None:
        if not self.copied:
            self.groups = copy.deepcopy(self.groups)
            self.copied = True
        self.records.append(record)
        key = rec.decode_streams_key(record[0])
        assert key is not None
        rec.replay(self.groups, self.p, key, record[1])


def validate(req: Heartbeat) -> None:
    """Kafka's throwIfStreamsGroupHeartbeatRequestIsInvalid (INVALID_REQUEST)."""
    def invalid(why: str) -> GroupError:
        return GroupError(ErrorCode.invalid_request, why)
    if not req.group_id:
        raise invalid("GroupId can't be empty.")
    if not req.member_id:
        raise invalid("MemberId can't be empty.")
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.topology is None:
            raise invalid("Topology must be non-null when (re-)joining.")
        if req.process_id is None:
            raise invalid("ProcessId can't be null.")
        if any(req_tasks for req_tasks in (req.active, req.standby, req.warmup)):
            raise invalid("Assigned tasks must be empty when (re-)joining.")
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        raise invalid(f"MemberEpoch is {req.member_epoch}, but must be greater than or "
                      "equal to -2.")
    if req.topology is not None:
        validate_topology(req.topology)


def validate_topology(t: Topology) -> None:
    """STREAMS_INVALID_TOPOLOGY for a topology Kafka's StreamsTopology checks refuse."""
    ids = [s.subtopology_id for s in t.subtopologies]
    if len(set(ids)) != len(ids):
        raise GroupError(ErrorCode.streams_invalid_topology, "Duplicate subtopology ids.")
    sources = {t.name for s in t.subtopologies for t in s.repartition_source_topics}
    for s in t.subtopologies:
        for sink in s.repartition_sink_topics:
            if sink not in sources:
                raise GroupError(ErrorCode.streams_invalid_topology,
                                 f"Repartition sink topic {sink} is not a source topic of "
                                 "any subtopology.")
        for regex in s.source_topic_regex:
            try:
                re.compile(regex)
            except re.error as exc:
                raise GroupError(ErrorCode.streams_invalid_topology,
                                 f"Invalid source topic regex {regex!r}: {exc}") from None
        changelogs = {c.name for c in s.state_changelog_topics}
        if changelogs & set(s.source_topics):
            raise GroupError(ErrorCode.streams_invalid_topology,
                             "A changelog topic is a source topic of its subtopology.")


def heartbeat(group: StreamsGroup | None, req: Heartbeat, p: int, counts: PartitionCounts,
              now_ms: int, standby_replicas: int = 0, names: Iterable[str] = (),
              max_size: int = 2**31 - 1, delayed: bool = False,
              interval_ms: int = 0, rack_tags: tuple[str, ...] = ()) -> Outcome:
    """A heartbeat of a known or new member (see the module's docstring); raises GroupError
    with the answer's error. `standby_replicas`: the standby tasks of each stateful task;
    `names`: every topic's name (what source regexes match); `max_size`: the most members;
    `delayed`: the group waits for more members before its first assignment (its initial
    rebalance delay: no target assignment now); `interval_ms`: the least time between two
    target assignments (a newer group epoch waits for a heartbeat after it); `rack_tags`: the
    client tags the member should have (MISSING_CLIENT_TAGS names those it has not)."""
    validate(req)
    if req.member_epoch == STATIC_LEAVE_EPOCH and group is not None:
        leaving = group.members.get(req.member_id)
        if leaving is not None and leaving.instance_id is not None:
            return _static_leave(group, leaving)
    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return leave(group, req.member_id)
    if group is None and req.member_epoch != 0:
        raise GroupError(ErrorCode.group_id_not_found,
                         f"Streams group {req.group_id} not found.")
    if group is not None and req.member_id not in group.members \
            and len(group.members) >= max_size:
        raise GroupError(ErrorCode.group_max_size_reached,
                         f"The streams group has reached its maximum capacity of {max_size} "
                         "members.")
    s = _Scratch(group, req.group_id, p)
    if group is None:
        s.emit(rec.group_metadata(req.group_id, 0, 0, -1))
    joined = req.member_id not in s.group.members or req.member_epoch == 0
    if req.member_epoch == 0 and req.instance_id is not None:
        req = _take_over_instance(s, req)
    member = _member(s.group, req)
    bump = _update_member(s, member, req)
    status: list[tuple[int, str]] = []
    bump |= _update_topology(s, req, status)
    g = s.group
    names = list(names) if g.topology is not None and any(
        t.source_topic_regex for t in g.topology.subtopologies) else []  # read only if needed
    configured = (configure(g.topology, counts, names) if g.topology is not None
                  else Configured(status=Status.MISSING_SOURCE_TOPICS))
    if configured.ready:
        for reported in (req.active, req.standby, req.warmup):
            _check_tasks(configured.tasks, reported)
    new_hash = metadata_hash(g.topology, counts, names) if g.topology is not None else 0
    if bump or new_hash != g.metadata_hash:
        s.emit(rec.group_metadata(req.group_id, g.epoch + 1, new_hash,
                                  g.topology.epoch if g.topology is not None else -1))
    held_back = None
    if s.group.epoch > s.group.assignment_epoch:
        if delayed:
            held_back = INITIAL_DELAY
        elif not _may_assign(s.group, interval_ms, now_ms):
            held_back = INTERVAL
        else:
            _new_target(s, configured, now_ms, standby_replicas)
    before = s.group.members[req.member_id].assigned
    _reconcile(s, req.member_id, (req.active, req.standby, req.warmup), delayed)
    after = s.group.members[req.member_id]
    if not configured.ready and configured.status is not None:
        status.append((int(configured.status), configured.detail))
    if held_back is not None:
        status.append((int(Status.ASSIGNMENT_DELAYED), held_back))
    if s.group.shutdown_requested_by is not None or req.shutdown_application:
        status.append((int(Status.SHUTDOWN_APPLICATION),
                       "The application is requested to shut down by a member."))
    missing = [t for t in rack_tags if t not in dict(after.client_tags)]
    if missing:  # Java's List.toString
        status.append((int(Status.MISSING_CLIENT_TAGS),
                       f"Missing required client tags for rack-aware standby assignment: "
                       f"[{', '.join(missing)}]. Configure them via 'client.tag.<tagKey>' in "
                       "your Streams config."))
    answer = Answer(req.member_id, after.member_epoch,
                    after.assigned if joined or after.assigned != before else None, status)
    return Outcome(s.records, answer, configured.to_create, s.group)


def _may_assign(group: StreamsGroup, interval_ms: int, now_ms: int) -> bool:
    """Kafka's canComputeNextTargetAssignment: never assigned, no interval, or past it."""
    return (group.assignment_ms == 0 or interval_ms == 0
            or now_ms >= group.assignment_ms + interval_ms)


def delayed_target(group: StreamsGroup, counts: PartitionCounts, now_ms: int,
                   standby_replicas: int = 0, names: Iterable[str] = ()) -> list[rec.Record]:
    """The records of the target assignment computed when a group's initial rebalance delay
    ends (Kafka's computeDelayedTargetAssignment): none for a group left empty or without a
    topology; its members take it at their next heartbeats."""
    if not group.members or group.topology is None \
            or group.epoch <= group.assignment_epoch:
        return []
    s = _Scratch(group, group.group_id, group.partition)
    names = list(names) if any(t.source_topic_regex for t in group.topology.subtopologies) \
        else []
    _new_target(s, configure(group.topology, counts, names), now_ms, standby_replicas)
    return s.records


def _take_over_instance(s: _Scratch, req: Heartbeat) -> Heartbeat:
    """Static membership: a member joining with the instance id of a member that left with
    epoch -2 takes its place, its tasks and its epoch, without a rebalance (the request then
    goes on as a heartbeat at that epoch); one whose holder has not left is
    UNRELEASED_INSTANCE_ID."""
    holder = next((m for m in s.group.members.values()
                   if m.instance_id == req.instance_id and m.member_id != req.member_id), None)
    if holder is None:
        return req
    if holder.member_epoch != STATIC_LEAVE_EPOCH:
        raise GroupError(ErrorCode.unreleased_instance_id,
                         f"Static member {holder.member_id} with instance id "
                         f"{req.instance_id} is not released.")
    new = copy.copy(holder)
    new.member_id, new.member_epoch = req.member_id, holder.previous_member_epoch
    target = s.group.target.get(holder.member_id, EMPTY)
    for record in rec.tombstones(s.group_id, holder.member_id):
        s.emit(record)
    s.emit(rec.member_metadata(s.group_id, new))
    s.emit(rec.target_member(s.group_id, new.member_id, target))
    s.emit(rec.current_assignment(s.group_id, new))
    return replace(req, member_epoch=new.member_epoch)


def _static_leave(group: StreamsGroup, m: StreamsMember) -> Outcome:
    """A static member leaves for a while (epoch -2): it keeps its tasks, and its place for
    a new member with its instance id, until its session ends."""
    s = _Scratch(group, group.group_id, group.partition)
    left = copy.copy(m)
    left.previous_member_epoch, left.member_epoch = m.member_epoch, STATIC_LEAVE_EPOCH
    s.emit(rec.current_assignment(group.group_id, left))
    return Outcome(s.records, Answer(m.member_id, STATIC_LEAVE_EPOCH), (), s.group)


def _member(group: StreamsGroup, req: Heartbeat) -> StreamsMember:
    """The request's member: for epoch 0 a new one, or the known one as it is (Kafka's
    getOrCreateDefaultMember: a rejoining member keeps its epoch and its tasks, answered in
    full), else the known one at the epoch it was told (or, after a lost answer, the one
    before with no task it was not given)."""
    member = group.members.get(req.member_id)
    if req.member_epoch == 0:
        return member if member is not None else StreamsMember(req.member_id)
    if req.instance_id is not None:
        member = _static_holder(group, req)
    if member is None:
        raise GroupError(ErrorCode.unknown_member_id,
                         f"Member {req.member_id} is not a member of group {req.group_id}.")
    if req.member_epoch == member.member_epoch:
        return member
    owned = req.active
    if (req.member_epoch == member.previous_member_epoch and owned is not None
            and not minus(owned, member.assigned.active)):
        return member
    raise GroupError(ErrorCode.fenced_member_epoch,
                     f"The streams group member has a smaller member epoch "
                     f"({req.member_epoch}) than the one known by the group coordinator "
                     f"({member.member_epoch}). The member must abandon all its tasks and "
                     "rejoin." if req.member_epoch < member.member_epoch else
                     f"The streams group member has a greater member epoch "
                     f"({req.member_epoch}) than the one known by the group coordinator "
                     f"({member.member_epoch}). The member must abandon all its tasks and "
                     "rejoin.")


def _check_tasks(tasks: dict[str, int], reported: TaskMap | None) -> None:
    """Kafka's throwIfRequestContainsInvalidTasks: each task a member reports is one of the
    configured topology's (its subtopology exists, its partition is below its task count)."""
    for subtopology, partitions in (reported or {}).items():
        count = tasks.get(subtopology)
        if count is None:
            raise GroupError(ErrorCode.invalid_request,
                             f"Subtopology {subtopology} does not exist in the topology.")
        for p in partitions:
            if not 0 <= p < count:
                raise GroupError(ErrorCode.invalid_request,
                                 f"Task {p} for subtopology {subtopology} is invalid. Number "
                                 f"of tasks for this subtopology: {count}")


def _static_holder(group: StreamsGroup, req: Heartbeat) -> StreamsMember:
    """Kafka's throwIfStaticMemberIsUnknown and throwIfInstanceIdIsFenced: the member holding
    the request's instance id must be the request's member."""
    holder = next((m for m in group.members.values() if m.instance_id == req.instance_id), None)
    if holder is None:
        raise GroupError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
    if holder.member_id != req.member_id:
        raise GroupError(ErrorCode.fenced_instance_id,
                         f"Static member {req.member_id} with instance id {req.instance_id} "
                         f"was fenced by member {holder.member_id}.")
    return holder


def _update_member(s: _Scratch, member: StreamsMember, req: Heartbeat) -> bool:
    """Write the member's metadata if it changed; True if the group epoch must move (a new
    member, or one whose process, rack or tags the assignor reads changed)."""
    new = copy.copy(member)
    if req.instance_id is not None:
        new.instance_id = req.instance_id
    if req.rack_id is not None:
        new.rack_id = req.rack_id
    new.client_id, new.client_host = req.client_id, req.client_host
    if req.rebalance_timeout_ms != -1:
        new.rebalance_timeout_ms = req.rebalance_timeout_ms
    if req.topology is not None:
        new.topology_epoch = req.topology.epoch
    if req.process_id is not None:
        new.process_id = req.process_id
    if req.user_endpoint is not None:
        new.user_endpoint = req.user_endpoint
    if req.client_tags is not None:
        new.client_tags = req.client_tags
    known = s.group.members.get(member.member_id)
    if known is None or new.metadata() != known.metadata():
        s.emit(rec.member_metadata(s.group_id, new))
    return (known is None or (new.process_id, new.rack_id, new.client_tags)
            != (known.process_id, known.rack_id, known.client_tags))


def _update_topology(s: _Scratch, req: Heartbeat, status: list[tuple[int, str]]) -> bool:
    """The group takes the first topology, a later one with a greater epoch, and any one while
    no other member runs the old (an application restarted with a changed topology); True if
    it changed. A member with an older topology hears STALE_TOPOLOGY."""
    current, sent = s.group.topology, req.topology
    alone = all(m == req.member_id for m in s.group.members)
    if sent is not None and (current is None or sent.epoch > current.epoch
                             or (alone and sent != current)):
        s.emit(rec.topology(s.group_id, sent))
        return True
    if sent is not None and current is not None and sent.epoch == current.epoch \
            and sent != current:
        raise GroupError(ErrorCode.streams_invalid_topology_epoch,
                         "Topology updated but topology epoch not incremented.")
    member = s.group.members[req.member_id]
    if current is not None and member.topology_epoch < current.epoch:
        status.append((int(Status.STALE_TOPOLOGY),
                       f"The member's topology epoch {member.topology_epoch} is behind the "
                       f"group's topology epoch {current.epoch}."))
    return False


def _new_target(s: _Scratch, configured: Configured, now_ms: int,
                standby_replicas: int) -> None:
    """The target assignment of the group's epoch: the sticky assignor over the tasks the
    configured topology has (none while it cannot run)."""
    g = s.group
    tasks = configured.tasks if configured.ready else {}
    spec = {m.member_id: (m.process_id, g.target.get(m.member_id, EMPTY).active)
            for m in g.members.values()}
    stateful = {t.subtopology_id for t in g.topology.subtopologies
                if t.state_changelog_topics} if g.topology is not None else set()
    previous = {m: t.standby for m, t in g.target.items()}
    targets = assign(spec, tasks, standby_replicas, stateful, previous)
    for member_id, target in sorted(targets.items()):
        if g.target.get(member_id) != target:
            s.emit(rec.target_member(s.group_id, member_id, target))
    s.emit(rec.target_metadata(s.group_id, g.epoch, now_ms))


# a heartbeat's owned tasks by role (active, standby, warm-up); None: the role not reported
Owned = tuple[TaskMap | None, TaskMap | None, TaskMap | None]
ROLES = ("active", "standby", "warmup")


def _reconcile(s: _Scratch, member_id: str, owned: Owned, delayed: bool = False) -> None:
    """Kafka 4.4's streams CurrentAssignmentBuilder: revoke what the target takes away first
    (the member keeps its epoch until it reports them gone; at once if this heartbeat already
    shows them gone; one done revoking that must revoke again takes its epoch + 1), then take
    the new epoch with the target's tasks no other member holds
    (the rest once released). A role change of the member's own task needs no revocation
    round: an active task becomes a standby, and a standby a warm-up (and back), in one step;
    a standby or warm-up to be promoted stays until its active task is free, then becomes it.
    `delayed`: the group's initial delay runs, the target is empty at the assignment epoch
    (at least 1: Kafka 4.4's initial target assignment is epoch 1, empty)."""
    g = s.group
    m = g.members[member_id]
    if m.state == MemberState.UNREVOKED_TASKS and not _released(owned, m.pending_revocation):
        return  # still revoking
    target = EMPTY if delayed else g.target.get(member_id, EMPTY)
    epoch = max(1, g.assignment_epoch) if delayed else g.assignment_epoch
    if m.member_epoch == epoch and m.state == MemberState.STABLE and m.assigned == target:
        return
    kept, revoke, pending, unreleased = _difference(g, m, target)
    revoking = not revoke.is_empty() and not _released(owned, revoke)
    # a standby or warm-up promoted to active is kept until the active task is granted
    promoted: TaskMap = {} if revoking else pending.active
    kept = replace(kept, **{role: union(getattr(kept, role), minus(
        intersect(getattr(m.assigned, role), target.active), promoted))
        for role in ("standby", "warmup")})
    new = copy.copy(m)
    given = {(sub, p): m.task_epoch(sub, p) or 0
             for tasks in (m.assigned.active, m.pending_revocation.active)
             for sub, ps in tasks.items() for p in ps}
    if revoking:
        new.state, new.assigned, new.pending_revocation = (
            MemberState.UNREVOKED_TASKS, kept, revoke)
        new.task_epochs = given
        if m.state == MemberState.UNREVOKED_TASKS:  # done with one revocation, into the next
            new.previous_member_epoch, new.member_epoch = m.member_epoch, m.member_epoch + 1
    else:
        new.assigned = Tasks(*(union(getattr(kept, r), getattr(pending, r)) for r in ROLES))
        new.pending_revocation = EMPTY
        new.state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
        if m.member_epoch != epoch:
            new.previous_member_epoch, new.member_epoch = m.member_epoch, epoch
        # a task kept keeps the epoch it was given at; a new one has the member's new epoch
        new.task_epochs = {(sub, p): given.get((sub, p), new.member_epoch)
                           for sub, ps in new.assigned.active.items() for p in ps}
    if (new.state, new.assigned, new.pending_revocation, new.member_epoch) != (
            m.state, m.assigned, m.pending_revocation, m.member_epoch):
        s.emit(rec.current_assignment(s.group_id, new))


def _released(owned: Owned, tasks: Tasks) -> bool:
    """Kafka's hasNotReleased, negated: the heartbeat reports none of `tasks` in their role
    (a role it does not report cannot prove its tasks released)."""
    for reported, held in zip(owned, (tasks.active, tasks.standby, tasks.warmup), strict=True):
        if held and (reported is None or intersect(reported, held)):
            return False
    return True


def _difference(g: StreamsGroup, m: StreamsMember,
                target: Tasks) -> tuple[Tasks, Tasks, Tasks, bool]:
    """Kafka 4.4's computeNextAssignment before its promotions: the tasks kept, to revoke,
    and to assign now, and whether some target task waits for its release. A role change
    of the member's own task is granted at once, and the role it leaves needs no revocation
    (an active task demoted to standby stays to revoke: its next owner waits for it)."""
    kept, revoke = m.assigned.intersect(target), m.assigned.minus(target)
    wanted = target.minus(kept)
    blocked = Tasks(*(intersect(getattr(wanted, r), b) for r, b in
                      zip(ROLES, _unreleased(g, m), strict=True)))
    pending = wanted.minus(blocked)
    mine = m.assigned
    # in place: active -> standby, standby -> warm-up, warm-up -> standby
    to_standby = intersect(pending.standby, union(mine.active, mine.warmup))
    to_warmup = intersect(pending.warmup, mine.standby)
    kept = Tasks(kept.active, union(kept.standby, to_standby), union(kept.warmup, to_warmup))
    pending = Tasks(pending.active, minus(pending.standby, to_standby),
                    minus(pending.warmup, to_warmup))
    # a replica promoted to active, or converted, is not revoked
    revoke = Tasks(revoke.active, minus(revoke.standby, union(target.active, to_warmup)),
                   minus(revoke.warmup, union(target.active, to_standby)))
    return kept, revoke, pending, not blocked.is_empty()


def _unreleased(g: StreamsGroup, m: StreamsMember) -> tuple[TaskMap, TaskMap, TaskMap]:
    """The tasks m may not be given yet in each role (Kafka 4.4's isUnreleasedActiveTask,
    isUnreleasedStandbyTask, isUnreleasedWarmupTask): an active task anyone still runs, and
    any task its own process holds in another role (two threads of one process never hold
    one task); a task m itself holds is a role change, not a blocker. An active task m itself
    has pending revocation counts too: the group learns of its release a heartbeat later."""
    anywhere: TaskMap = {}
    here: list[TaskMap] = [{}, {}, {}]
    for other in g.members.values():
        for t in (other.assigned, other.pending_revocation):
            anywhere = union(anywhere, t.active)
            if other.process_id == m.process_id:
                here = [union(h, getattr(t, r)) for h, r in zip(here, ROLES, strict=True)]
    active_here, standby_here, warmup_here = here
    by_other = [minus(h, getattr(m.assigned, r)) for h, r in zip(here, ROLES, strict=True)]
    return (union(anywhere, union(by_other[1], by_other[2])),
            union(by_other[0], union(standby_here, by_other[2])),
            union(active_here, union(by_other[1], warmup_here)))


def leave(group: StreamsGroup | None, member_id: str) -> Outcome:
    """A member leaves (or its session ended): its records go, and the group epoch moves so
    the others are assigned its tasks."""
    if group is None or member_id not in group.members:
        raise GroupError(ErrorCode.unknown_member_id,
                         f"Member {member_id} is not a member of the group.")
    s = _Scratch(group, group.group_id, group.partition)
    for record in rec.tombstones(group.group_id, member_id):
        s.emit(record)
    g = s.group
    s.emit(rec.group_metadata(group.group_id, g.epoch + 1, g.metadata_hash,
                              g.validated_topology_epoch))
    if g.shutdown_requested_by == member_id:
        g.shutdown_requested_by = None
    return Outcome(s.records, Answer(member_id, LEAVE_EPOCH), (), s.group)
