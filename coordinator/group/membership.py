"""Classic groups, Kafka's classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, the
rebalance state machine and its timers (session timeouts, join and sync deadlines). The part of
`GroupCoordinator` (coordinator.py) that owns `groups`: the classic groups, which also hold the
committed offsets of every group (GroupOffsets, offsets.py, reads and writes them there)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from samsa.config.schema import BrokerConfig
from samsa.protocol.errors import ErrorCode

from .classic import ClassicGroup, GroupState, Member
from .common import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    GroupError,
    now_ms,
    static_member_id,
)
from .partitions import GroupPartitions
from .records import GroupKey, decode_group_value, group_metadata_key, group_metadata_value

if TYPE_CHECKING:
    from .consumer.groups import ConsumerGroups
    from .consumer.migration import ConsumerMigration
    from .share.groups import ShareGroups

# The coordinator's logger: one name for all of its parts (log configs select by it).
log = logging.getLogger("samsa.coordinator.group.coordinator")


class ClassicGroups:
    """The classic groups of the offsets partitions loaded here: Join/Sync/Heartbeat/Leave,
    rebalancing and persistence. A classic JoinGroup (and Sync, Heartbeat, Leave) of a
    consumer-protocol group goes to `migration`; group ids taken by a consumer or share group
    are checked in `consumer` and `share`."""

    consumer: ConsumerGroups
    migration: ConsumerMigration
    share: ShareGroups

    def __init__(self, partitions: GroupPartitions, cfg: BrokerConfig) -> None:
        self.partitions = partitions
        self.initial_rebalance_delay_ms: int = cfg["group.initial.rebalance.delay.ms"]
        self.min_session_ms: int = cfg["group.min.session.timeout.ms"]
        self.max_session_ms: int = cfg["group.max.session.timeout.ms"]
        self.max_group_size: int = cfg["group.max.size"]
        # classic groups, and the offsets of every group (a group with offsets only is an
        # Empty classic group, as in Kafka)
        self.groups: dict[str, ClassicGroup] = {}

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
                    self.schedule_heartbeat(group, m, m.session_timeout_ms)
            elif group.state_timestamp < 0:
                group.state_timestamp = now

    def unload(self, p: int | None) -> None:
        """Forget the groups of partition p (all if None): their timers stop and the joins
        and syncs waiting are answered NOT_COORDINATOR."""
        for group in [g for g in self.groups.values() if p is None or g.partition == p]:
            self.cancel_timers(group)
            for m in group.members.values():
                for fut in (m.join_future, m.sync_future):
                    if fut is not None and not fut.done():
                        fut.set_result(error_join(ErrorCode.not_coordinator, m.member_id))
            if p is not None:
                del self.groups[group.group_id]

    def store_group(self, group: ClassicGroup) -> None:
        value = group_metadata_value(group.to_value(now_ms()))
        self.partitions.append(group.partition, [(group_metadata_key(group.group_id), value)])

    # ------------------------------------------------------------------ timers
    def cancel_timers(self, group: ClassicGroup) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        for m in group.members.values():
            if m.heartbeat_timer is not None:
                m.heartbeat_timer.cancel()
                m.heartbeat_timer = None
        timer = group.sync_timer
        if timer is not None:
            timer.cancel()
            group.sync_timer = None

    def schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        loop = asyncio.get_running_loop()
        member.heartbeat_timer = loop.call_later(
            timeout_ms / 1000, self._on_heartbeat_expired, group, member.member_id
        )

    def _on_heartbeat_expired(self, group: ClassicGroup, member_id: str) -> None:
        if self.groups.get(group.group_id) is not group:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        member.heartbeat_timer = None
        awaiting_sync = member.sync_future is not None and not member.sync_future.done()
        if (member.awaiting_join and not member.is_new) or awaiting_sync:
            # parked in JoinGroup/SyncGroup: the rebalance / pending-sync timeouts decide
            self.schedule_heartbeat(group, member, member.session_timeout_ms)
            return
        log.info("member %s of group %s has failed (session timeout)", member_id, group.group_id)
        self._remove_member_and_update(group, member, "session timeout")

    def _on_pending_member_expired(self, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join(group)
            elif not group.members and not group.offsets and group.state_timestamp < 0 \
                    and self.groups.get(group.group_id) is group and not group.pending_members:
                del self.groups[group.group_id]

    # ------------------------------------------------------------------ rebalance
    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        log.info("preparing to rebalance group %s in state %s with old generation %d (%s)",
                 group.group_id, group.state.value, group.generation, reason)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_fail_syncs(group, ErrorCode.rebalance_in_progress)
        timer = group.sync_timer
        if timer is not None:
            timer.cancel()
            group.sync_timer = None
        if group.join_timer is not None:
            group.join_timer.cancel()
        loop = asyncio.get_running_loop()
        was_empty = group.is_in(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, now_ms())
        if was_empty:
            group.initial_join = True
            delay = self.initial_rebalance_delay_ms
            group.join_remaining_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_timer = loop.call_later(delay / 1000, self._on_initial_join_delay, group)
        else:
            group.initial_join = False
            group.join_timer = loop.call_later(
                group.max_rebalance_timeout_ms() / 1000, self._complete_join, group
            )
            self._maybe_complete_join(group)

    def _on_initial_join_delay(self, group: ClassicGroup) -> None:
        group.join_timer = None
        remaining = group.join_remaining_ms
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.initial_rebalance_delay_ms, remaining)
            group.join_remaining_ms = remaining - delay
            group.join_timer = asyncio.get_running_loop().call_later(
                delay / 1000, self._on_initial_join_delay, group
            )
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: ClassicGroup) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.initial_join
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not group.is_in(GroupState.PREPARING_REBALANCE) or self.groups.get(group.group_id) \
                is not group:
            return
        for m in list(group.members.values()):
            if not m.awaiting_join:
                log.info("removing member %s of group %s: it did not rejoin", m.member_id,
                         group.group_id)
                group.remove(m.member_id)
        now = now_ms()
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, now)
            try:
                self.store_group(group)
            except GroupError as exc:
                log.warning("could not store empty group %s: %d", group.group_id, exc.error_code)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info("group %s: generation %d (%d members, protocol %s)", group.group_id,
                 group.generation, len(group.members), group.protocol_name)
        for m in group.members.values():
            fut, m.join_future = m.join_future, None
            m.is_new = False
            if fut is not None and not fut.done():
                fut.set_result(self._join_response(group, m, m.member_id == group.leader_id))
            self.schedule_heartbeat(group, m, m.session_timeout_ms)
        generation = group.generation
        group.sync_timer = asyncio.get_running_loop().call_later(
            group.max_rebalance_timeout_ms() / 1000, self._on_sync_expired, group, generation
        )

    def _on_sync_expired(self, group: ClassicGroup, generation: int) -> None:
        group.sync_timer = None
        if group.generation != generation or not group.is_in(GroupState.COMPLETING_REBALANCE):
            return
        missing = [m for m in group.members.values()
                   if m.sync_future is None or m.sync_future.done()]
        for m in missing:
            log.info("removing member %s of group %s: no SyncGroup in time", m.member_id,
                     group.group_id)
            group.remove(m.member_id)
        if missing:
            self.prepare_rebalance(group, "members did not sync in time")

    def _join_response(self, group: ClassicGroup, member: Member, with_members: bool,
                       leader: str | None = None, skip: bool = False) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.none,
            "generation_id": group.generation,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": leader if leader is not None else (group.leader_id or ""),
            "skip_assignment": skip,
            "member_id": member.member_id,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "metadata": m.metadata(group.protocol_name)}
                for m in group.members.values()
            ] if with_members else [],
        }

    def _reset_and_fail_syncs(self, group: ClassicGroup, error: ErrorCode) -> None:
        for m in group.members.values():
            m.assignment = b""
            fut, m.sync_future = m.sync_future, None
            if fut is not None and not fut.done():
                fut.set_result({"error_code": error, "assignment": b""})

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        group.remove(member.member_id)
        for fut in (member.join_future, member.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(error_join(ErrorCode.unknown_member_id, member.member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
            if not group.members and not group.pending_members:
                self._complete_join(group)
        elif group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"removing member {member.member_id}: {reason}")

    # ------------------------------------------------------------------ JoinGroup
    async def join_group(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        version: int,
    ) -> dict[str, Any]:
        if not group_id:
            return error_join(ErrorCode.invalid_group_id, member_id)
        try:
            p = self.partitions.coordinator_partition(group_id)
        except GroupError as exc:
            return error_join(exc.error_code, member_id)
        if group_id in self.share.share_groups:  # Kafka: a share group takes no classic member
            return error_join(ErrorCode.inconsistent_group_protocol, "")
        consumer_group = self.consumer.consumer_groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # a classic member in a consumer group (online migration, Kafka's
                # classicGroupJoinToConsumerGroup)
                if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
                    return error_join(ErrorCode.invalid_session_timeout, member_id)
                return await self.migration.classic_join_consumer_group(
                    consumer_group, member_id, instance_id, protocol_type, protocols,
                    session_timeout_ms, rebalance_timeout_ms, client_id, client_host, version)
            try:
                self.consumer.delete_empty_consumer_group(consumer_group)
            except GroupError as exc:
                return error_join(exc.error_code, member_id)
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return error_join(ErrorCode.invalid_session_timeout, member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return error_join(ErrorCode.unknown_member_id, member_id)
            group = ClassicGroup(group_id, p)
        elif group.is_in(GroupState.DEAD):
            return error_join(ErrorCode.coordinator_not_available, member_id)
        if (
            not group.has_member(member_id)
            and group.static_member_id(instance_id) is None
            and len(group.members) + len(group.pending_members) >= self.max_group_size
        ):
            return error_join(ErrorCode.group_max_size_reached, member_id)
        member_args = (instance_id, protocol_type, protocols, session_timeout_ms,
                       rebalance_timeout_ms, client_id, client_host)
        if not member_id:
            return await self._join_unknown(group, version, *member_args)
        return await self._join_existing(group, member_id, *member_args)

    async def _join_unknown(self, group: ClassicGroup, version: int, instance_id: str | None,
                            protocol_type: str, protocols: list[tuple[str, bytes]],
                            session_ms: int, rebalance_ms: int, client_id: str,
                            client_host: str) -> dict[str, Any]:
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return error_join(ErrorCode.inconsistent_group_protocol, "")
        new_id = f"{client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None and old_id in group.members:
                return await self._replace_static_member(
                    group, old_id, new_id, protocols, session_ms, rebalance_ms, version
                )
        elif version >= 4:
            group.pending_members.add(new_id)
            self.groups.setdefault(group.group_id, group)
            asyncio.get_running_loop().call_later(
                session_ms / 1000, self._on_pending_member_expired, group, new_id
            )
            return error_join(ErrorCode.member_id_required, new_id)
        member = Member(new_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                        protocol_type, protocols)
        return await self._add_member_and_rebalance(group, member)

    async def _add_member_and_rebalance(self, group: ClassicGroup,
                                        member: Member) -> dict[str, Any]:
        self.groups.setdefault(group.group_id, group)
        member.is_new = True
        group.pending_members.discard(member.member_id)
        group.add(member)
        group.new_member_added = True
        return await self._join_rebalance(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS,
                                          f"adding new member {member.member_id}")

    async def _join_rebalance(self, group: ClassicGroup, member: Member, timeout_ms: int,
                              reason: str) -> dict[str, Any]:
        """The member's JoinGroup answer once the rebalance it joins (or starts) completes;
        its heartbeat is due within `timeout_ms` meanwhile."""
        fut = asyncio.get_running_loop().create_future()
        member.join_future = fut
        self.schedule_heartbeat(group, member, timeout_ms)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        else:
            self.prepare_rebalance(group, reason)
        return await fut

    async def _replace_static_member(self, group: ClassicGroup, old_id: str, new_id: str,
                                     protocols: list[tuple[str, bytes]], session_ms: int,
                                     rebalance_ms: int, version: int) -> dict[str, Any]:
        member = group.members.pop(old_id)
        for fut in (member.join_future, member.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(error_join(ErrorCode.fenced_instance_id, old_id))
        member.join_future = member.sync_future = None
        current_leader = group.leader_id
        member.member_id = new_id
        group.members[new_id] = member
        assert member.group_instance_id is not None
        group.static_members[member.group_instance_id] = new_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        old_protocols = member.protocols
        member.protocols = protocols
        member.session_timeout_ms = session_ms
        member.rebalance_timeout_ms = rebalance_ms
        self.schedule_heartbeat(group, member, session_ms)
        fut = asyncio.get_running_loop().create_future()
        member.join_future = fut
        if group.is_in(GroupState.STABLE):
            if group.select_protocol() == group.protocol_name:
                member.join_future = None
                try:
                    self.store_group(group)
                except GroupError as exc:
                    member.protocols = old_protocols
                    del group.members[new_id]
                    member.member_id = old_id
                    group.members[old_id] = member
                    group.static_members[member.group_instance_id] = old_id
                    if group.leader_id == new_id:
                        group.leader_id = old_id
                    return error_join(exc.error_code, "")
                is_leader = group.leader_id == new_id
                if version >= 9:
                    return self._join_response(group, member, is_leader, skip=is_leader)
                return self._join_response(group, member, False, leader=current_leader)
            self.prepare_rebalance(group, f"static member {new_id} changed protocols")
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"static member {new_id} rejoined")
        else:
            self._maybe_complete_join(group)
        return await fut

    async def _join_existing(self, group: ClassicGroup, member_id: str, instance_id: str | None,
                             protocol_type: str, protocols: list[tuple[str, bytes]],
                             session_ms: int, rebalance_ms: int, client_id: str,
                             client_host: str) -> dict[str, Any]:
        if group.is_pending(member_id):
            if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
                return error_join(ErrorCode.inconsistent_group_protocol, member_id)
            member = Member(member_id, instance_id, client_id, client_host, rebalance_ms,
                            session_ms, protocol_type, protocols)
            return await self._add_member_and_rebalance(group, member)
        try:
            member = self.validate_member(group, member_id, instance_id)
        except GroupError as exc:
            return error_join(exc.error_code, member_id)
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return error_join(ErrorCode.inconsistent_group_protocol, member_id)
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return error_join(ErrorCode.unknown_member_id, member_id)
        if group.is_in(GroupState.COMPLETING_REBALANCE) and member.matches(protocols):
            return self._join_response(group, member, member_id == group.leader_id)
        if (
            group.is_in(GroupState.STABLE)
            and member_id != group.leader_id
            and member.matches(protocols)
        ):
            self.schedule_heartbeat(group, member, member.session_timeout_ms)
            return self._join_response(group, member, False)
        # update the member and (re)join the rebalance
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(error_join(ErrorCode.unknown_member_id, member_id))
        member.protocols = protocols
        member.session_timeout_ms = session_ms
        member.rebalance_timeout_ms = rebalance_ms
        return await self._join_rebalance(group, member, session_ms,
                                          f"member {member_id} rejoined")

    def validate_member(self, group: ClassicGroup, member_id: str,
                         instance_id: str | None) -> Member:
        if instance_id is not None:
            static_id = group.static_member_id(instance_id)
            if static_id is None:
                raise GroupError(ErrorCode.unknown_member_id)
            if static_id != member_id:
                raise GroupError(ErrorCode.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        return member

    # ------------------------------------------------------------------ SyncGroup
    async def sync_group(self, group_id: str, generation: int, member_id: str,
                         instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None,
                         assignments: list[tuple[str, bytes]]) -> dict[str, Any]:
        try:
            self.partitions.coordinator_partition(group_id)
            consumer_group = self.consumer.consumer_groups.get(group_id)
            if consumer_group is not None and consumer_group.members:
                return self.migration.classic_sync_consumer_group(
                    consumer_group, generation, member_id, instance_id, protocol_type,
                    protocol_name)
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                raise GroupError(ErrorCode.unknown_member_id)
            member = self.validate_member(group, member_id, instance_id)
            if generation != group.generation:
                raise GroupError(ErrorCode.illegal_generation)
            if (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                raise GroupError(ErrorCode.inconsistent_group_protocol)
            if group.is_in(GroupState.EMPTY):
                raise GroupError(ErrorCode.unknown_member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                raise GroupError(ErrorCode.rebalance_in_progress)
        except GroupError as exc:
            return {"error_code": exc.error_code, "assignment": b""}
        self.schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(GroupState.STABLE):
            return self._sync_response(group, member)
        # CompletingRebalance
        fut = asyncio.get_running_loop().create_future()
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result({"error_code": ErrorCode.rebalance_in_progress,
                                           "assignment": b""})
        member.sync_future = fut
        if member_id == group.leader_id:
            given = dict(assignments)
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            try:
                self.store_group(group)
            except GroupError as exc:
                self._reset_and_fail_syncs(group, exc.error_code)
                self.prepare_rebalance(group, "storing the group failed")
                return await fut
            timer = group.sync_timer
            if timer is not None:
                timer.cancel()
                group.sync_timer = None
            group.transition(GroupState.STABLE, now_ms())
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
                return self.migration.classic_heartbeat_consumer_group(
                    consumer_group, generation, member_id, instance_id)
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD, GroupState.EMPTY):
                raise GroupError(ErrorCode.unknown_member_id)
            member = self.validate_member(group, member_id, instance_id)
            if generation != group.generation:
                raise GroupError(ErrorCode.illegal_generation)
        except GroupError as exc:
            return exc.error_code
        self.schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

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
                 "error_code": self.migration.classic_leave_consumer_group(
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
            if instance_id is None and group.is_pending(member_id):
                group.pending_members.discard(member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE):
                    self._maybe_complete_join(group)
                continue
            try:
                if instance_id is not None:
                    member_id = static_member_id(group.static_member_id(instance_id),
                                                 member_id)
                member = group.members.get(member_id)
                if member is None:
                    raise GroupError(ErrorCode.unknown_member_id)
            except GroupError as exc:
                out["error_code"] = exc.error_code
                continue
            log.info("member %s leaves group %s", member_id, group_id)
            self._remove_member_and_update(group, member, "the member left the group")
        return ErrorCode.none, results



def error_join(code: ErrorCode, member_id: str) -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "member_id": member_id, "members": [],
            "assignment": b""}

