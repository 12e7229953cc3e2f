"""Classic groups, Kafka's classic protocol: the part of `GroupCoordinator` (../coordinator.py)
that owns `groups`, the classic groups, which also hold the committed offsets of every group
(GroupOffsets, ../offsets.py, reads and writes them there). It loads and stores them and
answers SyncGroup, Heartbeat and LeaveGroup; JoinGroup is `join` (join.py), the rebalance state
machine and its timers (session timeouts, join and sync deadlines) `rebalance`
(rebalance.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from samsa.config.schema import BrokerConfig
from samsa.protocol.errors import ErrorCode

from ..common import GroupError, now_ms
from ..partitions import GroupPartitions
from ..records import GroupKey, decode_group_value, group_metadata_key, group_metadata_value
from . import transitions
from .join import ClassicJoin
from .model import ClassicGroup, GroupState, Member
from .rebalance import ClassicRebalance, error_join

if TYPE_CHECKING:
    from ..consumer.classic_members import ClassicMembers
    from ..consumer.groups import ConsumerGroups
    from ..share.groups import ShareGroups
    from ..streams.groups import StreamsGroups

# The coordinator's logger: one name for all of its parts (log configs select by it).
log = logging.getLogger("samsa.coordinator.group.coordinator")


class ClassicGroups:
    """The classic groups of the offsets partitions loaded here: their state, loading and
    persistence, Sync/Heartbeat/Leave; `join` and `rebalance` change them too. A classic
    JoinGroup (and Sync, Heartbeat, Leave) of a consumer-protocol group goes to `classic_members`;
    group ids taken by a consumer or share group are checked in `consumer` and `share`."""

    consumer: ConsumerGroups
    classic_members: ClassicMembers
    share: ShareGroups
    streams: StreamsGroups

    def __init__(self, partitions: GroupPartitions, cfg: BrokerConfig) -> None:
        self.partitions = partitions
        self.initial_rebalance_delay_ms: int = cfg["group.initial.rebalance.delay.ms"]
        self.min_session_ms: int = cfg["group.min.session.timeout.ms"]
        self.max_session_ms: int = cfg["group.max.session.timeout.ms"]
        self.max_group_size: int = cfg["group.max.size"]
        # classic groups, and the offsets of every group (a group with offsets only is an
        # Empty classic group, as in Kafka)
        self.groups: dict[str, ClassicGroup] = {}
        self.rebalance = ClassicRebalance(self)
        self.join = ClassicJoin(self)

    # ------------------------------------------------------------------ loading
    def group_for_replay(self, group_id: str, p: int) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, p)
            self.groups[group_id] = group
        return group

    def replay(self, p: int, k: GroupKey, value: bytes | None) -> None:
        """A group metadata record (a tombstone: the group was deleted) read at load."""
        if value is None:
            removed = self.groups.pop(k.group, None)
            if removed is not None:
                # offsets written after the tombstone start a new (simple) group
                removed.state = GroupState.DEAD
            return
        self.group_for_replay(k.group, p).load_value(decode_group_value(value))

    def loaded_partition(self, p: int) -> None:
        """Partition p is read: its groups with members are Stable, their sessions run."""
        now = now_ms()
        for group in [g for g in self.groups.values() if g.partition == p]:
            if not group.members and not group.offsets and not group.pending_txn_offsets \
                    and group.protocol_type is None:
                del self.groups[group.group_id]
                continue
            if group.members:
                group.transition(GroupState.STABLE, group.state_timestamp)
                for m in group.members.values():
                    self.rebalance.schedule_heartbeat(group, m, m.session_timeout_ms)
            elif group.state_timestamp < 0:
                group.state_timestamp = now

    def unload(self, p: int | None) -> None:
        """Forget the groups of partition p (all if None): their timers stop and the joins
        and syncs waiting are answered NOT_COORDINATOR."""
        for group in [g for g in self.groups.values() if p is None or g.partition == p]:
            self.rebalance.cancel_timers(group)
            for m in group.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.set_result(error_join(ErrorCode.not_coordinator, m.member_id))
            if p is not None:
                del self.groups[group.group_id]

    def store_group(self, group: ClassicGroup) -> None:
        value = group_metadata_value(group.to_value(now_ms()))
        self.partitions.append(group.partition, [(group_metadata_key(group.group_id), value)])

    # ------------------------------------------------------------------ members
    validate_member = staticmethod(transitions.known_member)

    def _group(self, group_id: str) -> ClassicGroup:
        """The classic group a member's request names; UNKNOWN_MEMBER_ID if there is none."""
        group = self.groups.get(group_id)
        if group is None:
            raise GroupError(ErrorCode.unknown_member_id)
        return group

    # ------------------------------------------------------------------ SyncGroup
    async def sync_group(self, group_id: str, generation: int, member_id: str,
                         instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None,
                         assignments: list[tuple[str, bytes]]) -> dict[str, Any]:
        try:
            self.partitions.coordinator_partition(group_id)
            consumer_group = self.consumer.consumer_groups.get(group_id)
            if consumer_group is not None and consumer_group.members:
                return self.classic_members.sync_group(
                    consumer_group, generation, member_id, instance_id, protocol_type,
                    protocol_name)
            group = self._group(group_id)
            member = transitions.sync(group, generation, member_id, instance_id,
                                      protocol_type, protocol_name)
        except GroupError as exc:
            return {"error_code": exc.error_code, "assignment": b""}
        self.rebalance.schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(GroupState.STABLE):
            return self._sync_response(group, member)
        # CompletingRebalance
        fut = asyncio.get_running_loop().create_future()
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result({"error_code": ErrorCode.rebalance_in_progress,
                                           "assignment": b""})
        member.sync_future = fut
        if member_id == group.leader_id:
            try:
                self.partitions.take_now(group.partition,
                                         transitions.assign(group, assignments, now_ms()))
            except GroupError as exc:
                self.rebalance.reset_and_fail_syncs(group, exc.error_code)
                self.rebalance.prepare_rebalance(group, "storing the group failed")
                return await fut
            timer = group.sync_timer
            if timer is not None:
                timer.cancel()
                group.sync_timer = None
            for m in group.members.values():
                f, m.sync_future = m.sync_future, None
                if f is not None and not f.done():
                    f.set_result(self._sync_response(group, m))
        return await fut

    @staticmethod
    def _sync_response(group: ClassicGroup, member: Member) -> dict[str, Any]:
        return {"error_code": ErrorCode.none, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name, "assignment": member.assignment}

    # ------------------------------------------------------------------ Heartbeat
    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        try:
            self.partitions.coordinator_partition(group_id)
            consumer_group = self.consumer.consumer_groups.get(group_id)
            if consumer_group is not None and consumer_group.members:
                return self.classic_members.heartbeat(
                    consumer_group, generation, member_id, instance_id)
            group = self._group(group_id)
            member, answer = transitions.heartbeat(group, generation, member_id, instance_id)
        except GroupError as exc:
            return exc.error_code
        self.rebalance.schedule_heartbeat(group, member, member.session_timeout_ms)
        return answer

    # ------------------------------------------------------------------ LeaveGroup
    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[dict[str, Any]]]:
        """(top-level error, per-member results) for (member_id, group_instance_id) pairs."""
        try:
            self.partitions.coordinator_partition(group_id)
        except GroupError as exc:
            return exc.error_code, []
        consumer_group = self.consumer.consumer_groups.get(group_id)
        if consumer_group is not None and consumer_group.members:
            return ErrorCode.none, [
                {"member_id": member_id, "group_instance_id": instance_id,
                 "error_code": self.classic_members.leave_group(
                     consumer_group, member_id, instance_id)}
                for member_id, instance_id in members]
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.unknown_member_id, []
        results = []
        for member_id, instance_id in members:
            out = {"member_id": member_id, "group_instance_id": instance_id,
                   "error_code": ErrorCode.none}
            results.append(out)
            try:
                member = transitions.leave(group, member_id, instance_id)
            except GroupError as exc:
                out["error_code"] = exc.error_code
                continue
            if member is None:
                group.pending_members.discard(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE):
                    self.rebalance.maybe_complete_join(group)
                continue
            log.info("member %s leaves group %s", member.member_id, group_id)
            self.rebalance.remove_member_and_update(group, member, "the member left the group")
        return ErrorCode.none, results
