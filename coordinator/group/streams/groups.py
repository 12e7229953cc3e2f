"""`StreamsGroups`: the group coordinator's part that owns the streams groups (KIP-1071) of the
`__consumer_offsets` partitions led here. A heartbeat's decision is transitions.py's; this part
writes its records through the coordinator runtime (GroupPartitions.begin_append_replicated),
replays them into its state once they are in the local log, answers once the ISR has them, and
keeps each member's session timer. It also describes and lists its groups and checks the
member epoch of a streams member's offset commit."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from samsa.config.schema import BrokerConfig
from samsa.protocol.errors import ErrorCode

from ..common import GroupError, new_commit_errors, now_ms
from ..partitions import GroupPartitions
from . import records as rec
from . import transitions
from .model import GroupState, MemberState, StreamsGroup, TaskMap, Tasks
from .topology import configure

log = logging.getLogger(__name__)

TaskOffsets = tuple[tuple[str, int, int], ...]  # (subtopology, partition, offset)


@dataclass(frozen=True)
class Settings:
    """What a streams group's heartbeats are decided and answered with: the broker's
    group.streams.* properties, or the group's streams.* overrides (Kafka's GroupConfig)."""
    session_ms: int
    heartbeat_ms: int
    standby_replicas: int
    task_offset_interval_ms: int
    acceptable_recovery_lag: int
    initial_delay_ms: int = 0
    assignment_interval_ms: int = 0
    rack_tags: tuple[str, ...] = ()  # the client tags each member should have


class StreamsGroups:
    def __init__(self, partitions: GroupPartitions, cfg: BrokerConfig) -> None:
        self.partitions = partitions
        self.groups: dict[str, StreamsGroup] = {}
        self.session_ms: int = cfg["group.streams.session.timeout.ms"]
        self.heartbeat_ms: int = cfg["group.streams.heartbeat.interval.ms"]
        self.task_offset_interval_ms: int = cfg["group.streams.task.offset.interval.ms"]
        self.acceptable_recovery_lag: int = cfg["group.streams.acceptable.recovery.lag"]
        self.standby_replicas: int = cfg["group.streams.num.standby.replicas"]
        self.max_size: int = cfg["group.streams.max.size"]
        self.initial_delay_ms: int = cfg["group.streams.initial.rebalance.delay.ms"]
        self._cfg = cfg  # group.streams.assignment.interval.ms is dynamic: read at each use
        # whether a group id is a group of another type (the coordinator's, which knows them)
        self.other_type: Callable[[str], bool] = lambda group_id: False
        self._sessions: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._session_ms: dict[str, int] = {}  # a group's own session timeout, if it has one
        # Kafka's MemberTaskOffsets (kept in memory only): (group, member) -> the offsets and
        # end offsets of its tasks' changelogs it last reported
        self._task_offsets: dict[tuple[str, str], tuple[TaskOffsets, TaskOffsets]] = {}
        # a member revoking tasks: (its epoch, the deadline of its rebalance timeout)
        self._revoking: dict[tuple[str, str], tuple[int, asyncio.TimerHandle]] = {}
        # a group waiting for more members before its first assignment: its timer
        self._initial: dict[str, asyncio.TimerHandle] = {}

    # ------------------------------------------------------------------ loading
    def replay(self, p: int, key: bytes, value: bytes | None) -> bool:
        """Apply one record of partition p if it is a streams group's; False if it is not."""
        k = rec.decode_streams_key(key)
        if k is None:
            return False
        if k.type != rec.PARTITION_METADATA:
            rec.replay(self.groups, p, k, value)
        return True

    def loaded(self, p: int) -> None:
        """Partition p is loaded: its members' sessions start now."""
        for group in self.groups.values():
            if group.partition == p:
                for member_id in group.members:
                    self._schedule(group.group_id, member_id)
                    self._revocation_deadline(group.group_id, member_id)

    def unload(self, p: int | None) -> None:
        """Forget the groups of partition p (all if None)."""
        for group_id in [g for g, group in self.groups.items()
                         if p is None or group.partition == p]:
            for member_id in self.groups[group_id].members:
                self._cancel(group_id, member_id)
            initial = self._initial.pop(group_id, None)
            if initial is not None:
                initial.cancel()
            del self.groups[group_id]
            self._session_ms.pop(group_id, None)

    # ------------------------------------------------------------------ heartbeat
    def settings(self, overrides: Mapping[str, Any]) -> Settings:
        """The settings of a group with these streams.* overrides (its group configs)."""
        def get(name: str, default: int) -> int:
            value = overrides.get(name)
            return int(value) if value is not None else default

        return Settings(
            get("streams.session.timeout.ms", self.session_ms),
            get("streams.heartbeat.interval.ms", self.heartbeat_ms),
            get("streams.num.standby.replicas", self.standby_replicas),
            get("streams.task.offset.interval.ms", self.task_offset_interval_ms),
            get("streams.acceptable.recovery.lag", self.acceptable_recovery_lag),
            get("streams.initial.rebalance.delay.ms", self.initial_delay_ms),
            get("streams.assignment.interval.ms",
                self._cfg["group.streams.assignment.interval.ms"]),
            _tags(overrides.get("streams.rack.aware.assignment.tags",
                                self._cfg["group.streams.rack.aware.assignment.tags"])))

    def _counts(self, name: str) -> int | None:
        info = self.partitions.topics_view.topic_info(name)
        return info[1] if info is not None and info[1] > 0 else None

    async def heartbeat(self, req: transitions.Heartbeat,
                        settings: Settings | None = None) -> transitions.Outcome:
        """A StreamsGroupHeartbeat: raises GroupError with the answer's error."""
        settings = settings or self.settings({})
        p = self.partitions.coordinator_partition(req.group_id)
        if req.group_id not in self.groups and self.other_type(req.group_id):
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Group {req.group_id} is not a streams group.")
        before = self.groups.get(req.group_id)
        # a group getting its first member waits for more before its first assignment
        delay = (settings.initial_delay_ms if before is None or not before.members else 0)
        out = transitions.heartbeat(before, req, p, self._counts, now_ms(),
                                    settings.standby_replicas,
                                    self.partitions.topics_view.topic_names(), self.max_size,
                                    delayed=req.group_id in self._initial or delay > 0,
                                    interval_ms=settings.assignment_interval_ms,
                                    rack_tags=settings.rack_tags)
        await self._write(p, out.records)
        if delay > 0 and out.answer.member_epoch >= 0 and req.group_id not in self._initial:
            self._initial[req.group_id] = asyncio.get_running_loop().call_later(
                delay / 1000, self._initial_assignment, req.group_id, settings)
        self._session_ms[req.group_id] = settings.session_ms
        group = self.groups.get(req.group_id)
        if group is not None and req.shutdown_application:
            group.shutdown_requested_by = req.member_id
        if out.answer.member_epoch >= 0:
            self._schedule(req.group_id, req.member_id)
            self._report_offsets(req)
            self._revocation_deadline(req.group_id, req.member_id)
        elif out.answer.member_epoch == transitions.STATIC_LEAVE_EPOCH:
            # a static member that left keeps its place until its session ends
            self._cancel_revocation(req.group_id, req.member_id)
            if (req.group_id, req.member_id) not in self._sessions:
                self._schedule(req.group_id, req.member_id)
        else:
            self._cancel(req.group_id, req.member_id)
        return out

    def _report_offsets(self, req: transitions.Heartbeat) -> None:
        """A reported list replaces the member's last one; a null one keeps it."""
        key = (req.group_id, req.member_id)
        offsets, ends = self._task_offsets.get(key, ((), ()))
        self._task_offsets[key] = (offsets if req.task_offsets is None else req.task_offsets,
                                   ends if req.task_end_offsets is None else req.task_end_offsets)

    async def _write(self, p: int, records: list[rec.Record]) -> None:
        if not records:
            return
        waiting = self.partitions.begin_append_replicated(p, records)
        await self.partitions.apply_and_await(p, [lambda: self._apply(p, records)], waiting)

    def _apply(self, p: int, records: list[rec.Record]) -> None:
        for key, value in records:
            self.replay(p, key, value)

    # ------------------------------------------------------------------ sessions
    def _schedule(self, group_id: str, member_id: str) -> None:
        self._stop_timers(group_id, member_id)
        self._sessions[(group_id, member_id)] = asyncio.get_running_loop().call_later(
            self._session_ms.get(group_id, self.session_ms) / 1000, self._expire, group_id,
            member_id)

    def _cancel(self, group_id: str, member_id: str) -> None:
        """The member is gone: its timers and what it reported."""
        self._stop_timers(group_id, member_id)
        self._task_offsets.pop((group_id, member_id), None)

    def _stop_timers(self, group_id: str, member_id: str) -> None:
        handle = self._sessions.pop((group_id, member_id), None)
        if handle is not None:
            handle.cancel()
        self._cancel_revocation(group_id, member_id)

    def _cancel_revocation(self, group_id: str, member_id: str) -> None:
        revoking = self._revoking.pop((group_id, member_id), None)
        if revoking is not None:
            revoking[1].cancel()

    def _revocation_deadline(self, group_id: str, member_id: str) -> None:
        """Kafka's rebalance timeout: a member told to revoke tasks that still has not, at
        the same epoch, rebalance.timeout.ms later is removed from the group."""
        member = self.groups[group_id].members[member_id]
        key = (group_id, member_id)
        if member.state != MemberState.UNREVOKED_TASKS:
            self._cancel_revocation(group_id, member_id)
            return
        if key in self._revoking and self._revoking[key][0] == member.member_epoch:
            return  # its deadline runs from when it was first told
        self._cancel_revocation(group_id, member_id)
        timeout_ms = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 300_000
        handle = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._expire, group_id, member_id, member.member_epoch)
        self._revoking[key] = (member.member_epoch, handle)

    def _expire(self, group_id: str, member_id: str, revoking_at: int | None = None) -> None:
        """The member's session ended, or (`revoking_at`: its epoch then) its rebalance
        timeout while revoking: it is removed."""
        if revoking_at is None:
            self._sessions.pop((group_id, member_id), None)
        else:
            self._revoking.pop((group_id, member_id), None)
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        if revoking_at is not None and (member.member_epoch != revoking_at
                                        or member.state != MemberState.UNREVOKED_TASKS):
            return
        log.info("streams group %s: member %s fenced (%s)", group_id, member_id,
                 "session timeout" if revoking_at is None else
                 "rebalance timeout: it did not revoke its tasks in time")
        self._cancel(group_id, member_id)
        out = transitions.leave(group, member_id)
        task = asyncio.get_running_loop().create_task(self._write(group.partition,
                                                                  out.records))
        task.add_done_callback(_log_failure)

    def _initial_assignment(self, group_id: str, settings: Settings) -> None:
        """The group's initial rebalance delay ended: its first target assignment, of the
        members that joined meanwhile."""
        self._initial.pop(group_id, None)
        group = self.groups.get(group_id)
        if group is None:
            return
        records = transitions.delayed_target(group, self._counts, now_ms(),
                                             settings.standby_replicas,
                                             self.partitions.topics_view.topic_names())
        if records:
            task = asyncio.get_running_loop().create_task(self._write(group.partition,
                                                                      records))
            task.add_done_callback(_log_failure)

    def delete(self, group: StreamsGroup) -> ErrorCode:
        """DeleteGroups of a streams group: only an empty one (its offsets are the caller's);
        its records go as tombstones."""
        if group.members:
            return ErrorCode.non_empty_group
        records = [r for m in group.target for r in rec.tombstones(group.group_id, m)]
        records += rec.group_tombstones(group.group_id)
        try:
            self.partitions.append(group.partition, records)
        except GroupError as exc:
            return exc.error_code
        self._apply(group.partition, records)
        return ErrorCode.none

    # ------------------------------------------------------------------ offsets
    def validate_offset_commit(self, group: StreamsGroup, member_id: str, member_epoch: int,
                               transactional: bool, version: int,
                               partitions: Sequence[tuple[str, int]] = ()) -> None:
        """Kafka 4.4's StreamsGroup.validateOffsetCommit: a known member at its current epoch,
        or at an older one for the partitions of the active tasks it was given at or before
        it (a commit sent before the member heard of its new epoch); a commit naming no
        member, epoch -1, passes on an empty group, and when transactional.
        STALE_MEMBER_EPOCH is ILLEGAL_GENERATION to a version before it."""
        if member_epoch < 0 and not member_id and (not group.members or transactional):
            return
        stale = (ErrorCode.stale_member_epoch if new_commit_errors(version, transactional)
                 else ErrorCode.illegal_generation)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        if member_epoch == member.member_epoch:
            return
        if member_epoch > member.member_epoch:
            raise GroupError(stale)
        sources = _source_topic_map(group)
        for topic, partition in partitions:
            subtopology = sources.get(topic)
            given = member.task_epoch(subtopology, partition) if subtopology else None
            if given is None or member_epoch < given:
                raise GroupError(stale)

    def validate_offset_fetch(self, group_id: str, member_id: str, member_epoch: int) -> None:
        """Kafka's StreamsGroup.validateOffsetFetch (OffsetFetch v9+ naming a member): a
        known member at its current epoch; one naming none (epoch -1) is an admin's fetch."""
        group = self.groups.get(group_id)
        if group is None or (member_epoch < 0 and not member_id):
            return
        _check_member(group, member_id, member_epoch, ErrorCode.stale_member_epoch)

    # ------------------------------------------------------------------ describe, list
    def list_groups(self, states: set[str]) -> list[dict[str, Any]]:
        out = []
        for group in self.groups.values():
            if group.partition not in self.partitions.loaded:
                continue
            state = self.state_of(group).value
            if states and state.lower() not in states:
                continue
            out.append({"group_id": group.group_id, "protocol_type": "streams",
                        "group_state": state, "group_type": "streams"})
        return out

    def state_of(self, group: StreamsGroup) -> GroupState:
        ready = group.topology is not None and configure(
            group.topology, self._counts, self.partitions.topics_view.topic_names()).ready
        return group.state(ready)

    def describe(self, group_id: str) -> dict[str, Any]:
        """A StreamsGroupDescribe group entry (Kafka's StreamsGroup.asDescribedGroup)."""
        group, message = None, None
        try:
            self.partitions.coordinator_partition(group_id)
            group = self.groups.get(group_id)
            code = ErrorCode.none if group is not None else ErrorCode.group_id_not_found
        except GroupError as exc:
            code = exc.error_code
        if group is None:
            message = f"Group {group_id} not found." if code == ErrorCode.group_id_not_found \
                else None
            return {"error_code": code, "error_message": message, "group_id": group_id,
                    "group_state": "", "group_epoch": -1, "assignment_epoch": -1,
                    "topology": None, "members": []}
        return {"error_code": code, "error_message": None, "group_id": group_id,
                "group_state": self.state_of(group).value, "group_epoch": group.epoch,
                "assignment_epoch": group.assignment_epoch,
                "topology": _describe_topology(group),
                "members": [_describe_member(group, m, self._task_offsets.get(
                    (group_id, m.member_id), ((), ()))) for m in group.members.values()]}

    def endpoints(self, group: StreamsGroup) -> list[dict[str, Any]]:
        """PartitionsByUserEndpoint: each member with an endpoint, the source partitions of
        its active tasks (Kafka's EndpointToPartitionsManager)."""
        out = []
        for m in group.members.values():
            if m.user_endpoint is None:
                continue
            out.append({"user_endpoint": {"host": m.user_endpoint[0],
                                          "port": m.user_endpoint[1]},
                        "active_partitions": _source_partitions(group, m.assigned.active),
                        "standby_partitions": _source_partitions(
                            group, {**m.assigned.standby, **m.assigned.warmup})})
        return out


def _tags(value: Any) -> tuple[str, ...]:
    """A list property's tag keys (a group config's is a comma-separated string)."""
    items = value.split(",") if isinstance(value, str) else value or ()
    return tuple(t.strip() for t in items if t.strip())


def _source_topic_map(group: StreamsGroup) -> dict[str, str]:
    """Each source and repartition source topic's subtopology (Kafka's sourceTopicMap)."""
    out: dict[str, str] = {}
    for s in group.topology.subtopologies if group.topology is not None else ():
        for name in (*s.source_topics, *(t.name for t in s.repartition_source_topics)):
            out[name] = s.subtopology_id
    return out


def _check_member(group: StreamsGroup, member_id: str, member_epoch: int,
                  stale: ErrorCode) -> None:
    member = group.members.get(member_id)
    if member is None:
        raise GroupError(ErrorCode.unknown_member_id)
    if member_epoch != member.member_epoch:
        raise GroupError(stale)


def _source_partitions(group: StreamsGroup, tasks: TaskMap) -> list[dict[str, Any]]:
    by_topic: dict[str, set[int]] = {}
    for s in group.topology.subtopologies if group.topology is not None else ():
        ps = tasks.get(s.subtopology_id)
        if not ps:
            continue
        for name in (*s.source_topics, *(t.name for t in s.repartition_source_topics)):
            by_topic.setdefault(name, set()).update(ps)
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]


def task_ids(tasks: TaskMap) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(tasks.items())]


def _assignment(t: Tasks) -> dict[str, Any]:
    return {"active_tasks": task_ids(t.active), "standby_tasks": task_ids(t.standby),
            "warmup_tasks": task_ids(t.warmup)}


def _topic_info(t: Any) -> dict[str, Any]:
    return {"name": t.name, "partitions": t.partitions,
            "replication_factor": t.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in t.configs]}


def _describe_topology(group: StreamsGroup) -> dict[str, Any] | None:
    t = group.topology
    if t is None:
        return None
    return {"epoch": t.epoch, "subtopologies": [
        {"subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
         "repartition_sink_topics": list(s.repartition_sink_topics),
         "state_changelog_topics": [_topic_info(c) for c in s.state_changelog_topics],
         "repartition_source_topics": [_topic_info(r) for r in s.repartition_source_topics]}
        for s in t.subtopologies]}


def _offsets(offsets: TaskOffsets) -> list[dict[str, Any]]:
    return [{"subtopology_id": s, "partition": p, "offset": o} for s, p, o in offsets]


def _describe_member(group: StreamsGroup, m: Any,
                     reported: tuple[TaskOffsets, TaskOffsets]) -> dict[str, Any]:
    endpoint = m.user_endpoint
    return {
        "member_id": m.member_id, "member_epoch": m.member_epoch,
        "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
        "client_host": m.client_host, "topology_epoch": m.topology_epoch,
        "process_id": m.process_id,
        "user_endpoint": None if endpoint is None else {"host": endpoint[0],
                                                        "port": endpoint[1]},
        "client_tags": [{"key": k, "value": v} for k, v in m.client_tags],
        "task_offsets": _offsets(reported[0]), "task_end_offsets": _offsets(reported[1]),
        "assignment": _assignment(m.assigned),
        "target_assignment": _assignment(group.target.get(m.member_id, Tasks())),
        "is_classic": False,
    }


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("writing a streams member's removal failed: %r", task.exception())
