"""ConsumerGroupHeartbeat (KIP-848), in the steps of Kafka's
GroupMetadataManager.consumerGroupHeartbeat: check the request, find the group (new, or
upgraded from a classic one) and the member (dynamic, static, or a static one replacing
another), update the member, bump the group epoch if the subscriptions changed, compute the
target assignment (target.py), reconcile the member (reconciliation.py), write the records
(records.py) and answer. The state is `ConsumerGroups`' (groups.py). A heartbeat is decided
without changing it (`decide`; a leave: transitions.py), as a `Step` that
`GroupPartitions.take` applies once its records are in the local log: a refused write leaves
nothing to undo.
"""

from __future__ import annotations

import functools
import logging
import uuid
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..classic.model import ClassicGroup
from ..common import GroupError, Step, new_member_id
from . import transitions
from .model import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicsMetadata,
)
from .reconciliation import FencedMemberEpoch, reconcile
from .records import (
    Records,
    current_assignment_record,
    epoch_record,
    member_record,
    replace_records,
)
from .target import new_target, preferred_assignor, replaced_target
from .transitions import Owned, static_member, validate_epoch, validate_request

if TYPE_CHECKING:
    from .groups import ConsumerGroups

log = logging.getLogger("samsa.coordinator.group.coordinator")


@dataclass(frozen=True, slots=True)
class _Change:
    """What a heartbeat changes of its group, made once its records are in the log."""

    group: ConsumerGroup  # a new or upgraded group is installed with it
    replaced: ConsumerMember | None  # the static member the heartbeat's member replaces
    member: ConsumerMember
    group_epoch: int
    subscription_metadata: TopicsMetadata
    target: dict[str, Assignment]
    target_epoch: int
    session_ms: int | None  # the group's session timeout; None: a classic member's join


class ConsumerHeartbeat:
    """The heartbeat of the consumer groups `groups` owns."""

    def __init__(self, groups: ConsumerGroups) -> None:
        self.groups = groups

    async def consumer_group_heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
        rack_id: str | None, rebalance_timeout_ms: int, names: list[str] | None,
        regex: str | None, assignor: str | None, owned: Owned | None, client_id: str,
        client_host: str, version: int, *, session_ms: int | None = None,
        heartbeat_ms: int | None = None,
    ) -> dict[str, Any]:
        """One ConsumerGroupHeartbeat; `session_ms`/`heartbeat_ms` are the group's
        consumer.session.timeout.ms / consumer.heartbeat.interval.ms (default: the broker's
        group.consumer.* values)."""
        groups = self.groups
        try:
            validate_request(group_id, member_id, member_epoch, instance_id, rack_id,
                             rebalance_timeout_ms, names, regex, assignor, owned, version,
                             groups.consumer_assignors)
            p = groups.partitions.coordinator_partition(group_id)
            if group_id in groups.share.share_groups or group_id in groups.streams.groups:
                raise GroupError(ErrorCode.group_id_not_found,
                                 f"Group {group_id} is not a consumer group.")
            if not member_id:
                member_id = new_member_id()
            if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return await groups.partitions.take(p, transitions.leave(
                    group_id, groups.consumer_groups.get(group_id), member_id, member_epoch,
                    instance_id, groups.migration.downgrade, groups.subscription_metadata))
            return await groups.partitions.take(p, self.decide(
                p, group_id, member_id, member_epoch, instance_id, rack_id,
                rebalance_timeout_ms, names, regex, assignor, owned, client_id, client_host,
                session_ms if session_ms is not None else groups.consumer_session_ms,
                heartbeat_ms if heartbeat_ms is not None else groups.consumer_heartbeat_ms))
        except GroupError as exc:
            message = str(exc.args[0]) if exc.args else ""
            if exc.error_code != ErrorCode.coordinator_load_in_progress:
                log.info("ConsumerGroupHeartbeat of member %r (epoch %d) in group %r: %s %s",
                         member_id, member_epoch, group_id, exc.error_code.name,
                         message)
            return _error(exc.error_code, None if message == str(int(exc.error_code))
                          else message)

    def decide(
        self, p: int, group_id: str, member_id: str, member_epoch: int,
        instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
        names: list[str] | None, regex: str | None, assignor: str | None,
        owned: Owned | None, client_id: str, client_host: str,
        session_ms: int, heartbeat_ms: int,
        classic: tuple[int, list[tuple[str, bytes]]] | None = None,
        downgrading: bool = False, resubscribed: bool = False,
    ) -> Step:
        """What one heartbeat does, without I/O: the records to write, the answer, and what
        to do once the records are in the log: the change to the group state, then the rest
        (timers, the classic group an upgrade replaces). Nothing changes before.
        `classic`: the member joins with JoinGroup (session timeout, protocols).
        `downgrading`: the joining member turns the group classic (Kafka computes no new
        target assignment then, and reconciles the member only if not `resubscribed`, as
        the classic group rebalances then). Kafka's consumerGroupHeartbeat, step by step."""
        group, records, upgraded = self._group(p, group_id, member_epoch)
        self._check_capacity(group, member_id, instance_id)
        member, replaced = self._member(group, member_id, member_epoch, instance_id, owned)
        is_new = member_id not in group.members
        swapped = replaced is not None and replaced.member_id != member_id
        updated = _updated_member(member, instance_id, rack_id, rebalance_timeout_ms, assignor,
                                  names, regex, client_id, client_host, classic)
        if swapped and replaced is not None:
            records += replace_records(group, member, replaced)
        if (is_new and not swapped) or updated.metadata_key() != member.metadata_key():
            records.append(member_record(group_id, updated))
        members_after = {m.member_id: m for m in group.members.values()
                         if replaced is None or m.member_id != replaced.member_id}
        members_after[member_id] = updated
        sub_meta = self.groups.subscription_metadata(list(members_after.values()))
        # a static member taking its place back keeps the group epoch (Kafka's replaceMember)
        bump = (is_new and replaced is None) or sub_meta != group.subscription_metadata or \
            _subscription(updated) != _subscription(member)
        group_epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            records.append(epoch_record(group_id, group_epoch))
        target, target_epoch = self._target(
            group, member_id, replaced, swapped, members_after, sub_meta, group_epoch,
            downgrading, records)
        reconciled = _reconciled(group, updated, replaced, target, target_epoch, owned,
                                 keep=downgrading and resubscribed)
        if (is_new and not swapped) or reconciled.assignment_key() != member.assignment_key():
            records.append(current_assignment_record(group_id, reconciled))
        change = _Change(group, replaced, reconciled, group_epoch, sub_meta, target,
                         target_epoch, session_ms if classic is None else None)
        written = functools.partial(self._written, group, member, reconciled, upgraded, is_new,
                                    classic is not None)
        return Step(records, _heartbeat_response(member, reconciled, member_epoch, heartbeat_ms,
                                                 rebalance_timeout_ms, names, owned),
                    (functools.partial(self._install, change), written))

    def _install(self, change: _Change) -> None:
        """The heartbeat's change to the group state (its records are in the log)."""
        group = change.group
        if change.replaced is not None:
            group.remove_member(change.replaced.member_id)
        self.groups.consumer_groups.setdefault(group.group_id, group)
        group.group_epoch = change.group_epoch
        group.subscription_metadata = change.subscription_metadata
        group.target = change.target
        group.assignment_epoch = change.target_epoch
        group.update_member(group.members.get(change.member.member_id), change.member)
        if change.session_ms is not None:
            group.session_ms = change.session_ms

    def _group(self, p: int, group_id: str, member_epoch: int
               ) -> tuple[ConsumerGroup, Records, ClassicGroup | None]:
        """The group the heartbeat is for: the consumer group, a new one for a joining
        member, or the one a classic group upgrades to (with its records, and the classic
        group it replaces once they are written)."""
        groups = self.groups
        group = groups.consumer_groups.get(group_id)
        if group is not None:
            return group, [], None
        classic_group = groups.classic.groups.get(group_id)
        if classic_group is not None and classic_group.members:
            if groups.migration_policy not in ("upgrade", "bidirectional") or \
                    classic_group.protocol_type != "consumer" or \
                    len(classic_group.members) >= groups.consumer_max_size:
                raise GroupError(ErrorCode.group_id_not_found,
                                 f"Group {group_id} is not a consumer group.")
            group, records = groups.migration.from_classic(classic_group, p)
            return group, records, classic_group
        if member_epoch != 0:
            raise GroupError(ErrorCode.unknown_member_id,
                             f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id, p), [], None

    def _check_capacity(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> None:
        max_size = self.groups.consumer_max_size
        if member_id not in group.members and \
                (instance_id is None or instance_id not in group.static_members) and \
                len(group.members) >= max_size:
            raise GroupError(ErrorCode.group_max_size_reached,
                             f"The consumer group has reached its maximum capacity of "
                             f"{max_size} members.")

    @staticmethod
    def _member(group: ConsumerGroup, member_id: str, member_epoch: int,
                instance_id: str | None, owned: Owned | None
                ) -> tuple[ConsumerMember, ConsumerMember | None]:
        """The member as the coordinator knows it before this heartbeat, and the static
        member it replaces (a static member rejoining with a new member id)."""
        if instance_id is None:
            existing = group.members.get(member_id)
            if existing is None:
                if member_epoch != 0:
                    raise GroupError(ErrorCode.unknown_member_id,
                                     f"Member {member_id} is not a member of group "
                                     f"{group.group_id}.")
                return ConsumerMember(member_id), None
            if member_epoch != 0:
                validate_epoch(existing, member_epoch, owned)
            return existing, None
        static = group.static_member(instance_id)
        if member_epoch == 0:
            if static is None:
                return group.members.get(member_id) or ConsumerMember(member_id), None
            if static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(ErrorCode.unreleased_instance_id,
                                 f"Static member {member_id} with instance id "
                                 f"{instance_id} cannot join the group because the "
                                 f"instance id is owned by {static.member_id} member.")
            return replace(static, member_id=member_id, member_epoch=0,
                           previous_member_epoch=0, session_timer=None,
                           rebalance_timer=None, join_timer=None, sync_timer=None), static
        static = static_member(static, member_id, instance_id)
        validate_epoch(static, member_epoch, owned)
        return static, None

    def _target(self, group: ConsumerGroup, member_id: str, replaced: ConsumerMember | None,
                swapped: bool, members_after: dict[str, ConsumerMember],
                sub_meta: TopicsMetadata, group_epoch: int, downgrading: bool,
                records: Records) -> tuple[dict[str, Assignment], int]:
        """The target assignment after the heartbeat and its epoch: a new one computed when
        `group_epoch` is past the group's assignment epoch (not for a group `downgrading` to
        classic); its records go to `records`."""
        target = replaced_target(group, member_id, replaced, swapped, records)
        if downgrading or group_epoch <= group.assignment_epoch:
            return target, group.assignment_epoch
        groups = self.groups
        name = preferred_assignor(list(members_after.values()), groups.consumer_assignors[0])
        return new_target(group.group_id, group_epoch, name, members_after,
                          groups.member_topics, sub_meta, target, records), group_epoch

    def _written(self, group: ConsumerGroup, member: ConsumerMember,
                 reconciled: ConsumerMember, upgraded: ClassicGroup | None,
                 is_new: bool, classic: bool) -> None:
        """Once the heartbeat's records are in the log: the classic group an upgrade
        replaces goes, and the member's timers run."""
        groups = self.groups
        if upgraded is not None:
            groups.migration.retire_classic(upgraded)
            # the classic members taken over: their sessions run on in the new group
            for m in group.members.values():
                if m.member_id != reconciled.member_id:
                    groups.schedule_session(group, m)
        groups.schedule_session(group, reconciled)
        if classic:
            return  # a classic member revokes by rejoining (its join timeout)
        if reconciled.state == MemberState.UNREVOKED_PARTITIONS:
            if member.state != MemberState.UNREVOKED_PARTITIONS or \
                    member.member_epoch != reconciled.member_epoch or is_new:
                groups.schedule_rebalance(group, reconciled)
        elif reconciled.rebalance_timer is not None:
            reconciled.rebalance_timer.cancel()
            reconciled.rebalance_timer = None


# ---- the steps' pure parts -------------------------------------------------------------------
def _subscription(m: ConsumerMember) -> tuple[list[str], str | None]:
    return m.subscribed_topic_names, m.subscribed_topic_regex


def _updated_member(member: ConsumerMember, instance_id: str | None, rack_id: str | None,
                    rebalance_timeout_ms: int, assignor: str | None, names: list[str] | None,
                    regex: str | None, client_id: str, client_host: str,
                    classic: tuple[int, list[tuple[str, bytes]]] | None) -> ConsumerMember:
    """The member with what the heartbeat sets (a field the heartbeat leaves out is kept)."""
    return replace(
        member,
        instance_id=instance_id if instance_id is not None else member.instance_id,
        rack_id=rack_id if rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(rebalance_timeout_ms if rebalance_timeout_ms != -1
                              else member.rebalance_timeout_ms),
        server_assignor=assignor if assignor is not None else member.server_assignor,
        subscribed_topic_names=(list(names) if names is not None
                                else member.subscribed_topic_names),
        subscribed_topic_regex=((regex or None) if regex is not None
                                else member.subscribed_topic_regex),
        client_id=client_id, client_host=client_host,
        assigned=dict(member.assigned), pending_revocation=dict(member.pending_revocation),
        classic_session_ms=classic[0] if classic is not None else member.classic_session_ms,
        classic_protocols=(list(classic[1]) if classic is not None
                           else member.classic_protocols),
    )


def _reconciled(group: ConsumerGroup, updated: ConsumerMember,
                replaced: ConsumerMember | None, target: dict[str, Assignment],
                target_epoch: int, owned: Owned | None, keep: bool) -> ConsumerMember:
    """The member moved toward its target assignment (as it is when `keep`); the partitions
    of the static member it replaces are free (that member leaves the group first)."""
    if keep:
        return updated
    partition_epoch = group.current_partition_epoch
    if replaced is not None:
        freed = replaced.held_epochs().keys()

        def partition_epoch(topic_id: uuid.UUID, partition: int) -> int:
            if (topic_id, partition) in freed:
                return -1
            return group.current_partition_epoch(topic_id, partition)
    try:
        return reconcile(updated, target_epoch, target.get(updated.member_id, {}),
                         partition_epoch, owned)
    except FencedMemberEpoch as exc:
        raise GroupError(ErrorCode.fenced_member_epoch, str(exc)) from exc


def _heartbeat_response(member: ConsumerMember, reconciled: ConsumerMember, member_epoch: int,
                        heartbeat_ms: int, rebalance_timeout_ms: int, names: list[str] | None,
                        owned: Owned | None) -> dict[str, Any]:
    """The answer: the assignment is sent in full to a member joining or sending its whole
    state, else only when it changed."""
    response: dict[str, Any] = {
        "error_code": ErrorCode.none, "error_message": None,
        "member_id": reconciled.member_id, "member_epoch": reconciled.member_epoch,
        "heartbeat_interval": heartbeat_ms, "assignment": None,
    }
    full = member_epoch == 0 or (rebalance_timeout_ms != -1 and names is not None
                                 and owned is not None)
    if full or reconciled.assigned != member.assigned:
        response["assignment"] = {"topic_partitions": [
            {"topic_id": tid, "partitions": sorted(ps)}
            for tid, ps in sorted(reconciled.assigned.items(), key=lambda kv: str(kv[0]))
        ]}
    return response


def _error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    """An error answer: Kafka leaves the member id null and the epoch 0."""
    return {"error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
