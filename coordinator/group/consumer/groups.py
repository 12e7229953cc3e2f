"""The consumer-protocol (KIP-848) groups of the offsets partitions loaded here: the part of
`GroupCoordinator` (coordinator.py) that owns `consumer_groups`. It keeps their state (undone
from a snapshot when a change's records cannot be written, as Kafka's timeline), their session
and rebalance timers, the offset-commit/fetch member checks, the describe/list/delete answers,
and their loading from the records of `__consumer_offsets` (records.py). The heartbeat that
changes them is `ConsumerHeartbeat` (heartbeat.py); the online migration from and to classic
groups, and the classic members of a consumer group, are `ConsumerMigration` (migration.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samsa.config.schema import BrokerConfig
from samsa.protocol.errors import ErrorCode

from ..common import GroupError, Step, listed_groups, new_commit_errors
from ..partitions import GroupPartitions
from . import transitions
from .assignors import ASSIGNOR_CLASSES
from .heartbeat import ConsumerHeartbeat
from .model import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicsMetadata,
    compile_regex,
    subscribed_topics,
)
from .records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerKey,
    decode_current_assignment,
    decode_epoch_value,
    decode_member_metadata,
    decode_target_member,
    key,
)
from .target import preferred_assignor

if TYPE_CHECKING:
    from ..classic.groups import ClassicGroups
    from ..share.groups import ShareGroups
    from ..streams.groups import StreamsGroups
    from .migration import ConsumerMigration

log = logging.getLogger("samsa.coordinator.group.coordinator")


@dataclass(frozen=True, slots=True)
class ConsumerSnapshot:
    group_id: str
    group: ConsumerGroup | None  # None: the group did not exist
    saved: dict[str, Any] | None


class ConsumerGroups:
    """The consumer-protocol groups of the offsets partitions loaded here: their state,
    timers and loading; `heartbeat` changes them. A group id taken by a classic group is
    `classic`'s, by a share group `share`'s; a change that upgrades or downgrades a group
    goes through `migration`."""

    migration: ConsumerMigration
    share: ShareGroups
    streams: StreamsGroups

    def __init__(self, partitions: GroupPartitions, cfg: BrokerConfig,
                 classic: ClassicGroups) -> None:
        self.partitions = partitions
        self.classic = classic
        self.consumer_assignors: list[str] = [
            ASSIGNOR_CLASSES.get(a, a) for a in cfg["group.consumer.assignors"]]
        self.consumer_max_size: int = cfg["group.consumer.max.size"]
        self.consumer_heartbeat_ms: int = cfg["group.consumer.heartbeat.interval.ms"]
        self.consumer_session_ms: int = cfg["group.consumer.session.timeout.ms"]
        self.migration_policy: str = cfg["group.consumer.migration.policy"]
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.heartbeat = ConsumerHeartbeat(self)

    # ------------------------------------------------------------------ metadata
    def member_topics(self, m: ConsumerMember) -> set[str]:
        all_topics = self.partitions.topics_view.topic_names() if m.subscribed_topic_regex else ()
        return subscribed_topics(m, all_topics, compile_regex)

    def subscription_metadata(self, members: list[ConsumerMember]) -> TopicsMetadata:
        names: set[str] = set()
        for m in members:
            names |= self.member_topics(m)
        return self.partitions.topics_metadata(names)

    def consumer_subscribed_topics(self, group: ConsumerGroup) -> set[str]:
        """The topics the group's members subscribe to (names and regex matches)."""
        topics: set[str] = set()
        for m in group.members.values():
            topics |= self.member_topics(m)
        return topics

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.partitions.topics_view.topic_name(topic_id)

    def fence(self, group: ConsumerGroup, member: ConsumerMember) -> Step:
        """`member` leaves the group (transitions.fence_member)."""
        return transitions.fence_member(group, member, self.migration.downgrade,
                                        self.subscription_metadata)

    def delete_empty_consumer_group(self, group: ConsumerGroup) -> None:
        """Remove an empty consumer group (its offsets stay): a classic group of its id
        takes its place, or DeleteGroups removes it. Raises GroupError."""
        self.partitions.append(group.partition,
                               [(key(TARGET_ASSIGNMENT_METADATA, group.group_id), None),
                                (key(GROUP_METADATA, group.group_id), None)])
        group.dead = True
        if self.consumer_groups.get(group.group_id) is group:
            del self.consumer_groups[group.group_id]

    # ------------------------------------------------------------------ admin
    def _described_assignment(self, a: Assignment) -> dict[str, Any]:
        parts = []
        for tid, ps in sorted(a.items(), key=lambda kv: str(kv[0])):
            name = self.topic_name(tid)
            if name is not None:
                parts.append({"topic_id": tid, "topic_name": name, "partitions": sorted(ps)})
        return {"topic_partitions": parts}

    def describe_consumer_group(self, group_id: str) -> dict[str, Any]:
        """A ConsumerGroupDescribe group entry, as Kafka's ConsumerGroup.asDescribedGroup."""
        out: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None,
                               "group_id": group_id, "group_state": "", "group_epoch": -1,
                               "assignment_epoch": -1, "assignor_name": "", "members": []}
        try:
            self.partitions.coordinator_partition(group_id)
        except GroupError as exc:
            out["error_code"] = exc.error_code
            return out
        group = self.consumer_groups.get(group_id)
        if group is None or group.dead:
            classic = self.classic.groups.get(group_id)
            out["error_code"] = ErrorCode.group_id_not_found
            out["error_message"] = (f"Group {group_id} is not a consumer group."
                                    if classic is not None and classic.protocol_type
                                    else f"Group {group_id} not found.")
            return out
        members = list(group.members.values())
        out.update(
            group_state=group.state().value, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=preferred_assignor(members, self.consumer_assignors[0]),
            members=[{
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": sorted(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": self._described_assignment(m.assigned),
                "target_assignment": self._described_assignment(
                    group.target.get(m.member_id, {})),
                "member_type": 0 if m.classic_protocols is not None else 1,
            } for m in members],
        )
        return out

    def list_consumer_groups(self, states: set[str]) -> list[dict[str, Any]]:
        return listed_groups(self.consumer_groups.values(), self.partitions.loaded, states,
                             "consumer")

    def delete_consumer_group(self, group: ConsumerGroup) -> ErrorCode:
        """DeleteGroups of a consumer group: only an empty one, with its offsets."""
        if group.members:
            return ErrorCode.non_empty_group
        try:
            self.delete_empty_consumer_group(group)
        except GroupError as exc:
            return exc.error_code
        return ErrorCode.none

    # ------------------------------------------------------------------ timers
    def schedule_session(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        session_ms = group.session_ms if group.session_ms > 0 else self.consumer_session_ms
        if member.classic_protocols is not None and member.classic_session_ms > 0:
            session_ms = member.classic_session_ms
        member.session_timer = asyncio.get_running_loop().call_later(
            session_ms / 1000, self._on_consumer_timeout, group, member.member_id,
            None, "session timeout")

    def schedule_rebalance(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
        timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 300_000
        member.rebalance_timer = asyncio.get_running_loop().call_later(
            timeout / 1000, self._on_consumer_timeout, group, member.member_id,
            member.member_epoch, "rebalance timeout: it did not revoke its partitions in time")

    def schedule_classic(self, group: ConsumerGroup, member: ConsumerMember, which: str,
                          timeout_ms: int | None = None) -> None:
        """A classic member's deadline (Kafka's consumer-group join and sync timeouts, of its
        rebalance timeout): "join" to rejoin once asked to (kept if already running), "sync"
        to send SyncGroup after its JoinGroup (restarted)."""
        if which == "join" and member.join_timer is not None and \
                not member.join_timer.cancelled():
            return
        if which == "sync" and member.sync_timer is not None:
            member.sync_timer.cancel()
        if timeout_ms is None:
            timeout_ms = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 \
                else 300_000
        reason = ("the classic member failed to join within the rebalance timeout"
                  if which == "join" else "the member failed to sync within timeout")
        handle = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._on_consumer_timeout, group, member.member_id, None,
            reason, which)
        if which == "join":
            member.join_timer = handle
        else:
            member.sync_timer = handle

    def _on_consumer_timeout(self, group: ConsumerGroup, member_id: str, epoch: int | None,
                             reason: str, which: str = "session") -> None:
        if self.consumer_groups.get(group.group_id) is not group:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if epoch is not None:
            member.rebalance_timer = None
            if member.state != MemberState.UNREVOKED_PARTITIONS or member.member_epoch != epoch:
                return
        elif which == "join":
            member.join_timer = None
        elif which == "sync":
            member.sync_timer = None
        else:
            member.session_timer = None
        log.info("member %s of consumer group %s fenced (%s)", member_id, group.group_id, reason)
        try:
            self.partitions.take_now(group.partition, self.fence(group, member))
        except GroupError as exc:
            self.rearm_timers(group)  # the member stays; its session runs again
            log.warning("could not write the removal of member %s of group %s: %d", member_id,
                        group.group_id, exc.error_code)

    # ------------------------------------------------------------------ snapshots
    def consumer_snapshot(self, group_id: str) -> ConsumerSnapshot:
        """The consumer group's state before a change, to undo the change if its records
        cannot be written (Kafka's timeline snapshots: the state is the log's)."""
        group = self.consumer_groups.get(group_id)
        return ConsumerSnapshot(group_id, group, group.save() if group is not None else None)

    def consumer_restore(self, snapshot: ConsumerSnapshot) -> None:
        """Undo a change whose records were not written: the group as it was, and the timers
        of the members as they were (one the change cancelled runs again, in full)."""
        current = self.consumer_groups.get(snapshot.group_id)
        saved = snapshot.saved or {}
        members: dict[str, ConsumerMember] = saved.get("members", {})
        kept = {id(t) for m in members.values() for t in m.timers() if t is not None}
        if current is not None:
            for m in current.members.values():
                for t in m.timers():
                    if t is not None and id(t) not in kept:
                        t.cancel()
        group = snapshot.group
        if group is None:
            self.consumer_groups.pop(snapshot.group_id, None)
            return
        group.restore(saved)
        self.consumer_groups[snapshot.group_id] = group
        self.rearm_timers(group)

    def rearm_timers(self, group: ConsumerGroup) -> None:
        """The timers a change stopped run again (in full) when the change did not happen."""
        for m in group.members.values():
            if m.session_timer is None or m.session_timer.cancelled():
                self.schedule_session(group, m)
            if m.classic_protocols is None and m.state == MemberState.UNREVOKED_PARTITIONS \
                    and (m.rebalance_timer is None or m.rebalance_timer.cancelled()):
                self.schedule_rebalance(group, m)

    # ------------------------------------------------------------------ offsets checks
    def validate_consumer_offset_commit(self, group: ConsumerGroup, member_id: str,
                                        member_epoch: int, transactional: bool, version: int,
                                        partitions: list[tuple[str, int]],
                                        instance_id: str | None = None) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit with its assignment epochs (KIP-1251):
        an epoch older than the member's passes for the partitions the member was given at
        or before it, as a commit sent before the member heard of its new epoch."""
        if member_epoch < 0 and not group.members:
            return
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return  # Kafka 4.4: a producer that sends no member of the group commits as is
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        classic = member.classic_protocols is not None
        if not transactional and not classic and version < 9:
            raise GroupError(ErrorCode.unsupported_version)
        if member_epoch == member.member_epoch:
            return
        # Kafka answers ILLEGAL_GENERATION to a classic member, and to a request version that
        # does not know STALE_MEMBER_EPOCH (a transactional commit before TxnOffsetCommit v6)
        stale = (ErrorCode.illegal_generation
                 if classic or not new_commit_errors(version, transactional)
                 else ErrorCode.stale_member_epoch)
        if member_epoch > member.member_epoch:
            raise GroupError(stale)
        for topic, partition in partitions:
            info = self.partitions.topics_view.topic_info(topic)
            given = member.assignment_epoch(info[0], partition) if info is not None else None
            if given is None or member_epoch < given:
                raise GroupError(stale)

    def validate_consumer_offset_fetch(self, group_id: str, member_id: str | None,
                                       member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9+ with a member)."""
        group = self.consumer_groups.get(group_id)
        if member_id is None or (member_epoch < 0 and not member_id):
            return
        if group is None:
            raise GroupError(ErrorCode.group_id_not_found)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        if member_epoch != member.member_epoch:
            raise GroupError(ErrorCode.stale_member_epoch)

    # ------------------------------------------------------------------ loading
    def replay_consumer(self, p: int, k: ConsumerKey, value: bytes | None) -> None:
        group = self.consumer_groups.get(k.group)
        if value is None:
            if group is None:
                return
            if k.type == GROUP_METADATA:
                del self.consumer_groups[k.group]
            elif k.type == MEMBER_METADATA and k.member is not None:
                group.members.pop(k.member, None)
            elif k.type == TARGET_ASSIGNMENT_MEMBER and k.member is not None:
                group.target.pop(k.member, None)
            return
        if group is None:
            group = ConsumerGroup(k.group, p)
            self.consumer_groups[k.group] = group
        if k.type == GROUP_METADATA:
            group.group_epoch = decode_epoch_value(value)
        elif k.type == TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = decode_epoch_value(value)
        elif k.type == TARGET_ASSIGNMENT_MEMBER and k.member is not None:
            group.target[k.member] = decode_target_member(value)
        elif k.type in (MEMBER_METADATA, CURRENT_MEMBER_ASSIGNMENT) and k.member is not None:
            member = group.members.get(k.member)
            if member is None:
                member = group.members[k.member] = ConsumerMember(k.member)
            if k.type == MEMBER_METADATA:
                decode_member_metadata(value, member)
            else:
                decode_current_assignment(value, member)

    def consumer_groups_loaded(self, p: int) -> None:
        for group in [g for g in self.consumer_groups.values() if g.partition == p]:
            group.static_members = {m.instance_id: m.member_id for m in group.members.values()
                                    if m.instance_id is not None}
            group.rebuild_partition_epochs()
            group.subscription_metadata = self.subscription_metadata(
                list(group.members.values()))
            for m in group.members.values():
                self.schedule_session(group, m)
                if m.state == MemberState.UNREVOKED_PARTITIONS:
                    self.schedule_rebalance(group, m)
            log.info("loaded consumer group %s: epoch %d, assignment epoch %d, %d members",
                     group.group_id, group.group_epoch, group.assignment_epoch,
                     len(group.members))

    def unload_consumer_groups(self, p: int | None) -> None:
        for group in [g for g in self.consumer_groups.values()
                      if p is None or g.partition == p]:
            for m in group.members.values():
                m.cancel_timers()
            del self.consumer_groups[group.group_id]
