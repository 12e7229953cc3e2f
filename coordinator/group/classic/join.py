"""JoinGroup of a classic group (Kafka's classicGroupJoin): a new member (a member id to
rejoin with, from version 4), a static member taking its place back, or a known member
rejoining; each waits for the rebalance it joins (rebalance.py). A classic member joining a
consumer group goes to `ClassicMembers` (../consumer/classic_members.py)."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..common import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupError
from .model import ClassicGroup, GroupState, Member
from .rebalance import error_join

if TYPE_CHECKING:
    from .groups import ClassicGroups


class ClassicJoin:
    """JoinGroup for the classic groups `classic` owns."""

    def __init__(self, classic: ClassicGroups) -> None:
        self.classic = classic
        self.rebalance = classic.rebalance

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
        classic = self.classic
        try:
            p = classic.partitions.coordinator_partition(group_id)
        except GroupError as exc:
            return error_join(exc.error_code, member_id)
        # Kafka: a share group takes no classic member, nor a streams group with members
        streams_group = classic.streams.groups.get(group_id)
        if group_id in classic.share.share_groups or \
                (streams_group is not None and (streams_group.members or member_id)):
            return error_join(ErrorCode.inconsistent_group_protocol, "")
        if streams_group is not None:
            # a new member turns an empty streams group classic (its offsets stay)
            code = classic.streams.delete(streams_group)
            if code != ErrorCode.none:
                return error_join(code, member_id)
        consumer_group = classic.consumer.consumer_groups.get(group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # a classic member in a consumer group (online migration, Kafka's
                # classicGroupJoinToConsumerGroup)
                if not classic.min_session_ms <= session_timeout_ms <= classic.max_session_ms:
                    return error_join(ErrorCode.invalid_session_timeout, member_id)
                return await classic.classic_members.join_group(
                    consumer_group, member_id, instance_id, protocol_type, protocols,
                    session_timeout_ms, rebalance_timeout_ms, client_id, client_host, version)
            try:
                classic.consumer.delete_empty_consumer_group(consumer_group)
            except GroupError as exc:
                return error_join(exc.error_code, member_id)
        if not classic.min_session_ms <= session_timeout_ms <= classic.max_session_ms:
            return error_join(ErrorCode.invalid_session_timeout, member_id)
        group = classic.groups.get(group_id)
        if group is None:
            if member_id:
                return error_join(ErrorCode.unknown_member_id, member_id)
            group = ClassicGroup(group_id, p)
        elif group.is_in(GroupState.DEAD):
            return error_join(ErrorCode.coordinator_not_available, member_id)
        if (
            not group.has_member(member_id)
            and group.static_member_id(instance_id) is None
            and len(group.members) + len(group.pending_members) >= classic.max_group_size
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
            self.classic.groups.setdefault(group.group_id, group)
            asyncio.get_running_loop().call_later(
                session_ms / 1000, self.rebalance.on_pending_member_expired, group, new_id
            )
            return error_join(ErrorCode.member_id_required, new_id)
        member = Member(new_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                        protocol_type, protocols)
        return await self._add_member_and_rebalance(group, member)

    async def _add_member_and_rebalance(self, group: ClassicGroup,
                                        member: Member) -> dict[str, Any]:
        self.classic.groups.setdefault(group.group_id, group)
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
        self.rebalance.schedule_heartbeat(group, member, timeout_ms)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self.rebalance.maybe_complete_join(group)
        else:
            self.rebalance.prepare_rebalance(group, reason)
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
        self.rebalance.schedule_heartbeat(group, member, session_ms)
        fut = asyncio.get_running_loop().create_future()
        member.join_future = fut
        if group.is_in(GroupState.STABLE):
            if group.select_protocol() == group.protocol_name:
                member.join_future = None
                try:
                    self.classic.store_group(group)
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
                    return self.rebalance.join_response(group, member, is_leader, skip=is_leader)
                return self.rebalance.join_response(group, member, False, leader=current_leader)
            self.rebalance.prepare_rebalance(group, f"static member {new_id} changed protocols")
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            self.rebalance.prepare_rebalance(group, f"static member {new_id} rejoined")
        else:
            self.rebalance.maybe_complete_join(group)
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
            member = self.classic.validate_member(group, member_id, instance_id)
        except GroupError as exc:
            return error_join(exc.error_code, member_id)
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return error_join(ErrorCode.inconsistent_group_protocol, member_id)
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return error_join(ErrorCode.unknown_member_id, member_id)
        if group.is_in(GroupState.COMPLETING_REBALANCE) and member.matches(protocols):
            return self.rebalance.join_response(group, member, member_id == group.leader_id)
        if (
            group.is_in(GroupState.STABLE)
            and member_id != group.leader_id
            and member.matches(protocols)
        ):
            self.rebalance.schedule_heartbeat(group, member, member.session_timeout_ms)
            return self.rebalance.join_response(group, member, False)
        # update the member and (re)join the rebalance
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(error_join(ErrorCode.unknown_member_id, member_id))
        member.protocols = protocols
        member.session_timeout_ms = session_ms
        member.rebalance_timeout_ms = rebalance_ms
        return await self._join_rebalance(group, member, session_ms,
                                          f"member {member_id} rejoined")
