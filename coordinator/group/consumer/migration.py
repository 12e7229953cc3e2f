"""Online migration between classic and consumer-protocol (KIP-848) groups
(`group.consumer.migration.policy`), and the classic members of a consumer group: Kafka's
ConsumerGroup.fromClassicGroup / ClassicGroup.fromConsumerGroup conversions, and JoinGroup,
SyncGroup, Heartbeat and LeaveGroup of a classic member, which run the consumer group's
assignment and reconciliation. A part of `GroupCoordinator`: `ConsumerGroups`
(groups.py) owns the consumer groups' state and the heartbeat they go through,
`ClassicGroups` (../classic/groups.py) the classic groups.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..classic.model import ClassicGroup, GroupState, Member
from ..common import GroupError, new_member_id, now_ms, static_member_id
from ..partitions import GroupPartitions
from ..records import (
    decode_consumer_assignment,
    encode_consumer_assignment,
    group_metadata_key,
    subscription_owned_partitions,
)
from ..records import (
    group_metadata_value as classic_group_value,
)
from ..records import (
    subscribed_topics as classic_subscribed_topics,
)
from .model import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    copy_assignment,
)
from .records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    Records,
    current_assignment_record,
    epoch_record,
    key,
    member_record,
    target_epoch_record,
    target_member_record,
)

if TYPE_CHECKING:
    from ..classic.groups import ClassicGroups
    from .groups import ConsumerGroups

# The coordinator's logger: one name for all of its parts (log configs select by it).
log = logging.getLogger("samsa.coordinator.group.coordinator")


class ConsumerMigration:
    """Online migration between classic and consumer groups, and the classic members of a
    consumer group. Owns no state: it changes `consumer`'s groups (through its heartbeat,
    snapshots and timers) and `classic`'s."""

    def __init__(self, partitions: GroupPartitions, consumer: ConsumerGroups,
                 classic: ClassicGroups) -> None:
        self.partitions = partitions
        self.consumer = consumer
        self.classic = classic

    # ------------------------------------------------------------------ online migration
    def from_classic(self, classic: ClassicGroup, p: int) -> tuple[ConsumerGroup, Records]:
        """Kafka's ConsumerGroup.fromClassicGroup: the classic group's members, generation
        and assignment as a consumer group (not installed), and the records that write it."""
        epoch = classic.generation
        group = ConsumerGroup(classic.group_id, p, group_epoch=epoch, assignment_epoch=epoch)
        records: Records = [epoch_record(group.group_id, epoch)]
        for m in classic.members.values():
            metadata = (m.metadata(classic.protocol_name) if classic.protocol_name
                        else m.protocols[0][1] if m.protocols else b"")
            assigned: Assignment = {}
            for topic, partitions in decode_consumer_assignment(m.assignment).items():
                info = self.partitions.topics_view.topic_info(topic)
                if info is not None and partitions:
                    assigned[info[0]] = set(partitions)
            member = ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=sorted(classic_subscribed_topics(metadata)),
                rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=epoch,
                previous_member_epoch=epoch, assigned=assigned,
                classic_session_ms=m.session_timeout_ms, classic_protocols=list(m.protocols))
            group.update_member(None, member)
            group.target[m.member_id] = copy_assignment(assigned)
            records += [member_record(group.group_id, member),
                        target_member_record(group.group_id, m.member_id, assigned),
                        current_assignment_record(group.group_id, member)]
        records.append(target_epoch_record(group.group_id, epoch))
        group.subscription_metadata = self.consumer.subscription_metadata(
            list(group.members.values()))
        return group, records

    def downgradable(self, group: ConsumerGroup, leaving_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMembers, before the member is removed
        (whatever its protocol): members are left, all of the classic protocol, the policy
        allows a downgrade and they fit in a classic group."""
        others = [m for m in group.members.values() if m.member_id != leaving_id]
        if not others or any(m.classic_protocols is None for m in others):
            return False
        if self.consumer.migration_policy not in ("downgrade", "bidirectional"):
            log.info("cannot downgrade consumer group %s to a classic group: the online "
                     "downgrade is disabled", group.group_id)
            return False
        if len(others) > self.classic.max_group_size:
            log.info("cannot downgrade consumer group %s to a classic group: its size is "
                     "greater than the classic group max size", group.group_id)
            return False
        return True

    def _replace_downgradable(self, group: ConsumerGroup, replaced_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithReplacedMemberId: a classic static member
        takes the place of the group's last consumer-protocol member (the others all use
        the classic protocol), the policy allows a downgrade and the group fits in a
        classic group."""
        replaced = group.members.get(replaced_id)
        if replaced is None or replaced.classic_protocols is not None or \
                any(m.classic_protocols is None for m in group.members.values()
                    if m.member_id != replaced_id):
            return False
        if self.consumer.migration_policy not in ("downgrade", "bidirectional"):
            log.info("cannot downgrade consumer group %s to a classic group: the online "
                     "downgrade is disabled", group.group_id)
            return False
        if len(group.members) > self.classic.max_group_size:
            log.info("cannot downgrade consumer group %s to a classic group: its size is "
                     "greater than the classic group max size", group.group_id)
            return False
        return True

    def to_classic(self, group: ConsumerGroup, leaving_id: str | None,
                    rebalance: bool = True, generation: int | None = None,
                    ) -> tuple[Records, Callable[[], None]]:
        """Kafka's convertToClassicGroup: the records that delete the consumer group (every
        member's, the leaving one's too) and write the classic group of its other members
        (their target assignments, the group epoch as the generation), in Kafka's order; and
        what installs that classic group once they are written, which then rebalances unless
        the conversion is a static member's replacement (`rebalance` False). `generation`:
        the group epoch before the change (default: the group's)."""
        gid = group.group_id
        if generation is None:
            generation = group.group_epoch
        ids = list(group.members)
        records: Records = [(key(CURRENT_MEMBER_ASSIGNMENT, gid, m), None) for m in ids]
        records += [(key(TARGET_ASSIGNMENT_MEMBER, gid, m), None) for m in ids]
        records.append((key(TARGET_ASSIGNMENT_METADATA, gid), None))
        records += [(key(MEMBER_METADATA, gid, m), None) for m in ids]
        records += [(key(PARTITION_METADATA, gid), None), (key(GROUP_METADATA, gid), None)]
        converted = self._fill_classic(ClassicGroup(gid, group.partition), group, leaving_id,
                                       generation)
        records.append((group_metadata_key(gid),
                        classic_group_value(converted.to_value(now_ms()))))
        return records, functools.partial(self._install_classic, group, leaving_id, rebalance,
                                          generation)

    def _fill_classic(self, classic: ClassicGroup, group: ConsumerGroup,
                      leaving_id: str | None, generation: int) -> ClassicGroup:
        """Kafka's ClassicGroup.fromConsumerGroup: `classic` holds the consumer group's
        members but `leaving_id`, each with its target assignment, stable at
        `generation`."""
        classic.members.clear()
        classic.static_members.clear()
        classic.pending_members.clear()
        classic.leader_id = None
        classic.generation = generation
        classic.protocol_type = "consumer"
        for m in group.members.values():
            if m.member_id == leaving_id:
                continue
            assignment: dict[str, list[int]] = {}
            for tid, partitions in sorted(group.target.get(m.member_id, {}).items(),
                                          key=lambda kv: str(kv[0])):
                name = self.consumer.topic_name(tid)
                if name is not None and partitions:
                    assignment[name] = sorted(partitions)
            classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                               m.rebalance_timeout_ms, m.classic_session_ms, "consumer",
                               list(m.classic_protocols or ()),
                               assignment=encode_consumer_assignment(assignment)))
        classic.protocol_name = classic.select_protocol()
        classic.transition(GroupState.STABLE, now_ms())
        return classic

    def _install_classic(self, group: ConsumerGroup, leaving_id: str | None,
                         rebalance: bool, generation: int) -> None:
        gid = group.group_id
        classic = self.classic.groups.get(gid)
        if classic is None or classic.is_in(GroupState.DEAD):
            classic = self.classic.groups[gid] = ClassicGroup(gid, group.partition)
        for m in group.members.values():
            m.cancel_timers()
        self._fill_classic(classic, group, leaving_id, generation)
        group.dead = True
        if self.consumer.consumer_groups.get(gid) is group:
            del self.consumer.consumer_groups[gid]
        log.info("consumer group %s (epoch %d, %d classic members) converted to a classic "
                 "group", gid, group.group_epoch, len(classic.members))
        for member in classic.members.values():
            self.classic.rebalance.schedule_heartbeat(classic, member, member.session_timeout_ms)
        if rebalance:
            self.classic.rebalance.prepare_rebalance(
                classic, f"Downgrade group {gid} from consumer to classic.")

    def retire_classic(self, classic: ClassicGroup) -> None:
        """The classic group a consumer group took over: its members' pending JoinGroup and
        SyncGroup are answered REBALANCE_IN_PROGRESS (they rejoin the consumer group); only
        its committed offsets stay."""
        self.classic.rebalance.cancel_timers(classic)
        for m in classic.members.values():
            for fut in (m.join_future, m.sync_future):
                if fut is not None and not fut.done():
                    fut.set_result({"error_code": ErrorCode.rebalance_in_progress,
                                    "generation_id": -1, "protocol_type": None,
                                    "protocol_name": None, "leader": "",
                                    "member_id": m.member_id, "members": [],
                                    "assignment": b""})
        log.info("classic group %s (generation %d, %d members) converted to a consumer group",
                 classic.group_id, classic.generation, len(classic.members))
        classic.members.clear()
        classic.static_members.clear()
        classic.pending_members.clear()
        classic.leader_id = classic.protocol_name = None
        classic.transition(GroupState.EMPTY, now_ms())
        try:
            self.classic.store_group(classic)
        except GroupError as exc:
            log.warning("could not write the empty classic group %s: %s", classic.group_id,
                        exc.error_code.name)

    # ------------------------------------------------------------------ classic members
    def _classic_member(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> ConsumerMember:
        if instance_id is not None:
            member_id = static_member_id(group.static_members.get(instance_id), member_id)
        member = group.members.get(member_id)
        if member is None or member.classic_protocols is None:
            raise GroupError(ErrorCode.unknown_member_id)
        return member

    async def classic_join_consumer_group(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None,
        protocol_type: str, protocols: list[tuple[str, bytes]], session_timeout_ms: int,
        rebalance_timeout_ms: int, client_id: str, client_host: str, version: int,
    ) -> dict[str, Any]:
        """JoinGroup of a classic member in a consumer group (Kafka's
        classicGroupJoinToConsumerGroup): its subscription and owned partitions go through the
        consumer group's assignment and reconciliation; the answer is its member epoch as the
        generation (a follower: the coordinator assigns)."""
        def error(code: ErrorCode, mid: str = member_id) -> dict[str, Any]:
            return {"error_code": code, "generation_id": -1, "protocol_type": None,
                    "protocol_name": None, "leader": "", "member_id": mid, "members": [],
                    "assignment": b""}

        if protocol_type != "consumer" or not protocols:
            return error(ErrorCode.inconsistent_group_protocol)
        if not member_id and instance_id is None and version >= 4:
            return error(ErrorCode.member_id_required, new_member_id())
        if not member_id:
            member_id = new_member_id()
        snapshot = self.consumer.consumer_snapshot(group.group_id)
        try:
            try:
                records, after = self._classic_join(
                    group, member_id, instance_id, protocols, session_timeout_ms,
                    rebalance_timeout_ms, client_id, client_host)
                replicated = (self.partitions.begin_append_replicated(group.partition, records)
                              if records else None)
            except GroupError:
                self.consumer.consumer_restore(snapshot)
                raise
            await self.partitions.apply_and_await(group.partition, after, replicated)
            member = group.members.get(member_id)
            if member is None:
                raise GroupError(ErrorCode.unknown_member_id)
        except GroupError as exc:
            log.info("classic JoinGroup of member %r in consumer group %r: %s", member_id,
                     group.group_id, exc.error_code.name)
            return error(exc.error_code)
        if group.dead:
            # converted to a classic group by this join (its timers are the classic group's)
            return {"error_code": ErrorCode.none, "generation_id": member.member_epoch,
                    "protocol_type": "consumer", "protocol_name": protocols[0][0],
                    "leader": "", "skip_assignment": False, "member_id": member_id,
                    "members": [], "assignment": b""}
        # Kafka's classicGroupJoinToConsumerGroup once written: no more join deadline; the
        # session of the JoinGroup runs, and the SyncGroup is due within its rebalance timeout
        if member.join_timer is not None:
            member.join_timer.cancel()
            member.join_timer = None
        self.consumer.schedule_session(group, member)
        self.consumer.schedule_classic(group, member, "sync", rebalance_timeout_ms)
        return {"error_code": ErrorCode.none, "generation_id": member.member_epoch,
                "protocol_type": "consumer", "protocol_name": protocols[0][0], "leader": "",
                "skip_assignment": False, "member_id": member_id, "members": [],
                "assignment": b""}

    def _classic_join(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None,
        protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
        client_id: str, client_host: str,
    ) -> tuple[Records, list[Callable[[], None]]]:
        """The state change of a classic JoinGroup (as `ConsumerHeartbeat.apply`'s)."""
        static_id = group.static_members.get(instance_id) if instance_id else None
        static = group.members.get(static_id) if static_id is not None else None
        # Kafka's step 4: the joining static member replaces the group's last
        # consumer-protocol member, so the group goes back to classic
        downgrade = static is not None and self._replace_downgradable(group, static.member_id)
        metadata = protocols[0][1]
        names = sorted(classic_subscribed_topics(metadata))
        resubscribed = static is not None and set(names) != set(static.subscribed_topic_names)
        generation = group.group_epoch
        if static is not None and static.member_id != member_id:
            # a static member back under a new member id takes the old one's place
            # (Kafka's replaceMember): the old one counts as having left temporarily
            group.update_member(static, replace(
                static, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                previous_member_epoch=static.member_epoch))
        existing = group.members.get(member_id)
        if existing is not None and existing.classic_protocols is None:
            raise GroupError(ErrorCode.unknown_member_id)
        owned: list[tuple[uuid.UUID, list[int]]] = []
        for topic, partitions in subscription_owned_partitions(metadata):
            info = self.partitions.topics_view.topic_info(topic)
            if info is not None:
                owned.append((info[0], partitions))
        records, _, after = self.consumer.heartbeat.apply(
            group.partition, group.group_id, member_id,
            existing.member_epoch if existing is not None else 0, instance_id, None,
            rebalance_timeout_ms, names, None, None,
            owned, client_id, client_host, self.consumer.consumer_session_ms,
            self.consumer.consumer_heartbeat_ms, classic=(session_timeout_ms, list(protocols)),
            downgrading=downgrade, resubscribed=resubscribed)
        if downgrade:
            log.info("static member %s (instance %s) replaces %s, the last consumer-protocol "
                     "member of group %s: the group goes back to classic", member_id,
                     instance_id, static_id, group.group_id)
            # the joining member takes the replaced one's place and target assignment in a
            # classic group at the group's epoch, stable unless it subscribes to other
            # topics; no consumer-group timers for it
            conversion, install = self.to_classic(group, None, rebalance=resubscribed,
                                                  generation=generation)
            return records + conversion, [install]
        return records, after

    def classic_sync_consumer_group(self, group: ConsumerGroup, generation: int,
                                    member_id: str, instance_id: str | None,
                                    protocol_type: str | None,
                                    protocol_name: str | None) -> dict[str, Any]:
        """SyncGroup of a classic member in a consumer group: its current assignment."""
        try:
            member = self._classic_member(group, member_id, instance_id)
            if generation != member.member_epoch:
                raise GroupError(ErrorCode.illegal_generation)
            names = [n for n, _ in member.classic_protocols or ()]
            if (protocol_type is not None and protocol_type != "consumer") or \
                    (protocol_name is not None and protocol_name not in names):
                raise GroupError(ErrorCode.inconsistent_group_protocol)
            if group.group_epoch > member.member_epoch and \
                    member.state != MemberState.UNREVOKED_PARTITIONS:
                # a new rebalance: the member must rejoin (Kafka's throwIfRebalanceInProgress)
                self.consumer.schedule_classic(group, member, "join")
                raise GroupError(ErrorCode.rebalance_in_progress)
        except GroupError as exc:
            return {"error_code": exc.error_code, "assignment": b""}
        if member.sync_timer is not None:
            member.sync_timer.cancel()
            member.sync_timer = None
        self.consumer.schedule_session(group, member)
        assignment: dict[str, list[int]] = {}
        for tid, partitions in member.assigned.items():
            name = self.consumer.topic_name(tid)
            if name is not None:
                assignment[name] = sorted(partitions)
        return {"error_code": ErrorCode.none, "protocol_type": "consumer",
                "protocol_name": protocol_name or names[0],
                "assignment": encode_consumer_assignment(assignment)}

    def classic_heartbeat_consumer_group(self, group: ConsumerGroup, generation: int,
                                         member_id: str, instance_id: str | None) -> ErrorCode:
        """Heartbeat of a classic member in a consumer group: REBALANCE_IN_PROGRESS while it
        is not reconciled to the group epoch, so that it rejoins."""
        try:
            member = self._classic_member(group, member_id, instance_id)
            if generation != member.member_epoch:
                raise GroupError(ErrorCode.illegal_generation)
        except GroupError as exc:
            return exc.error_code
        self.consumer.schedule_session(group, member)
        # Kafka's classicGroupHeartbeatToConsumerGroup: rejoin to catch up with the group
        # epoch, to revoke, or to get partitions that were released meanwhile; within the
        # rebalance timeout
        if member.member_epoch < group.group_epoch or \
                member.state == MemberState.UNREVOKED_PARTITIONS or \
                (member.state == MemberState.UNRELEASED_PARTITIONS
                 and not group.waiting_on_unreleased_partition(member)):
            self.consumer.schedule_classic(group, member, "join")
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def classic_leave_consumer_group(self, group: ConsumerGroup, member_id: str,
                                     instance_id: str | None) -> ErrorCode:
        """LeaveGroup of a classic member in a consumer group."""
        try:
            member = self._classic_member(group, member_id, instance_id)
        except GroupError as exc:
            return exc.error_code
        log.info("classic member %s leaves consumer group %s", member.member_id, group.group_id)
        snapshot = self.consumer.consumer_snapshot(group.group_id)
        install: Callable[[], None] | None = None
        try:
            if self.downgradable(group, member.member_id):
                # only classic members stay (Kafka's consumerGroupFenceMembers)
                records, install = self.to_classic(group, member.member_id)
            else:
                records = self.consumer.remove_consumer_member(group, member)
            self.partitions.append(group.partition, records)
        except GroupError as exc:
            self.consumer.consumer_restore(snapshot)
            return exc.error_code
        if install is not None:
            install()
        return ErrorCode.none
