"""The classic groups' rebalance (Kafka's classic group state machine in
GroupMetadataManager): PreparingRebalance, the initial join delay, completing the join
(a generation and a leader, the JoinGroup answers), the sync deadline, and the members'
session timers. A part of `ClassicGroups` (groups.py), whose groups it changes."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..common import GroupError, now_ms
from .model import ClassicGroup, GroupState, Member

if TYPE_CHECKING:
    from .groups import ClassicGroups

# The coordinator's logger: one name for all of its parts (log configs select by it).
log = logging.getLogger("samsa.coordinator.group.coordinator")


class ClassicRebalance:
    """The rebalances and timers of the classic groups `classic` owns."""

    def __init__(self, classic: ClassicGroups) -> None:
        self.classic = classic

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
        if self.classic.groups.get(group.group_id) is not group:
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
        self.remove_member_and_update(group, member, "session timeout")

    def on_pending_member_expired(self, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self.maybe_complete_join(group)
            elif not group.members and not group.offsets and group.state_timestamp < 0 \
                    and self.classic.groups.get(group.group_id) is group \
                    and not group.pending_members:
                del self.classic.groups[group.group_id]

    # ------------------------------------------------------------------ rebalance
    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        log.info("preparing to rebalance group %s in state %s with old generation %d (%s)",
                 group.group_id, group.state.value, group.generation, reason)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self.reset_and_fail_syncs(group, ErrorCode.rebalance_in_progress)
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
            delay = self.classic.initial_rebalance_delay_ms
            group.join_remaining_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_timer = loop.call_later(delay / 1000, self._on_initial_join_delay, group)
        else:
            group.initial_join = False
            group.join_timer = loop.call_later(
                group.max_rebalance_timeout_ms() / 1000, self.complete_join, group
            )
            self.maybe_complete_join(group)

    def _on_initial_join_delay(self, group: ClassicGroup) -> None:
        group.join_timer = None
        remaining = group.join_remaining_ms
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            delay = min(self.classic.initial_rebalance_delay_ms, remaining)
            group.join_remaining_ms = remaining - delay
            group.join_timer = asyncio.get_running_loop().call_later(
                delay / 1000, self._on_initial_join_delay, group
            )
            return
        self.complete_join(group)

    def maybe_complete_join(self, group: ClassicGroup) -> None:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.initial_join
            and group.all_members_joined()
        ):
            self.complete_join(group)

    def complete_join(self, group: ClassicGroup) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not group.is_in(GroupState.PREPARING_REBALANCE) or \
                self.classic.groups.get(group.group_id) is not group:
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
                self.classic.store_group(group)
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
                fut.set_result(self.join_response(group, m, m.member_id == group.leader_id))
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

    def join_response(self, group: ClassicGroup, member: Member, with_members: bool,
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

    def reset_and_fail_syncs(self, group: ClassicGroup, error: ErrorCode) -> None:
        for m in group.members.values():
            m.assignment = b""
            fut, m.sync_future = m.sync_future, None
            if fut is not None and not fut.done():
                fut.set_result({"error_code": error, "assignment": b""})

    def remove_member_and_update(self, group: ClassicGroup, member: Member, reason: str) -> None:
        group.remove(member.member_id)
        for fut in (member.join_future, member.sync_future):
            if fut is not None and not fut.done():
                fut.set_result(error_join(ErrorCode.unknown_member_id, member.member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self.maybe_complete_join(group)
            if not group.members and not group.pending_members:
                self.complete_join(group)
        elif group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"removing member {member.member_id}: {reason}")


def error_join(code: ErrorCode, member_id: str) -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "member_id": member_id, "members": [],
            "assignment": b""}
