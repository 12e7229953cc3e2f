"""The classic members of a consumer group (Kafka's classicGroupJoinToConsumerGroup and its
Sync, Heartbeat and Leave): a member speaking the classic protocol in a consumer group, during
an online migration (`group.consumer.migration.policy`). Its subscription and owned partitions
go through the consumer group's heartbeat (assignment and reconciliation); a join that leaves
no consumer-protocol member turns the group classic again (`ConsumerMigration`,
migration.py).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..classic.rebalance import error_join
from ..common import GroupError, new_member_id, static_member_id
from ..partitions import GroupPartitions
from ..records import encode_consumer_assignment, subscription_owned_partitions
from ..records import subscribed_topics as classic_subscribed_topics
from .model import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from .records import Records

if TYPE_CHECKING:
    from .groups import ConsumerGroups
    from .migration import ConsumerMigration

# The coordinator's logger: one name for all of its parts (log configs select by it).
log = logging.getLogger("samsa.coordinator.group.coordinator")


class ClassicMembers:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup of the classic members of `consumer`'s
    groups. Owns no state."""

    def __init__(self, partitions: GroupPartitions, consumer: ConsumerGroups,
                 migration: ConsumerMigration) -> None:
        self.partitions = partitions
        self.consumer = consumer
        self.migration = migration

    def _member(self, group: ConsumerGroup, member_id: str,
                instance_id: str | None) -> ConsumerMember:
        if instance_id is not None:
            member_id = static_member_id(group.static_members.get(instance_id), member_id)
        member = group.members.get(member_id)
        if member is None or member.classic_protocols is None:
            raise GroupError(ErrorCode.unknown_member_id)
        return member

    async def join_group(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None,
        protocol_type: str, protocols: list[tuple[str, bytes]], session_timeout_ms: int,
        rebalance_timeout_ms: int, client_id: str, client_host: str, version: int,
    ) -> dict[str, Any]:
        """JoinGroup of a classic member in a consumer group (Kafka's
        classicGroupJoinToConsumerGroup): its subscription and owned partitions go through the
        consumer group's assignment and reconciliation; the answer is its member epoch as the
        generation (a follower: the coordinator assigns)."""
        def error(code: ErrorCode, mid: str = member_id) -> dict[str, Any]:
            return error_join(code, mid)

        if protocol_type != "consumer" or not protocols:
            return error(ErrorCode.inconsistent_group_protocol)
        if not member_id and instance_id is None and version >= 4:
            return error(ErrorCode.member_id_required, new_member_id())
        if not member_id:
            member_id = new_member_id()
        snapshot = self.consumer.consumer_snapshot(group.group_id)
        try:
            try:
                records, after = self._join(
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

    def _join(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None,
        protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
        client_id: str, client_host: str,
    ) -> tuple[Records, list[Callable[[], None]]]:
        """The state change of a classic JoinGroup (as `ConsumerHeartbeat.apply`'s)."""
        static_id = group.static_members.get(instance_id) if instance_id else None
        static = group.members.get(static_id) if static_id is not None else None
        # Kafka's step 4: the joining static member replaces the group's last
        # consumer-protocol member, so the group goes back to classic
        downgrade = static is not None and \
            self.migration.replace_downgradable(group, static.member_id)
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
        step = self.consumer.heartbeat.decide(
            group.partition, group.group_id, member_id,
            existing.member_epoch if existing is not None else 0, instance_id, None,
            rebalance_timeout_ms, names, None, None,
            owned, client_id, client_host, self.consumer.consumer_session_ms,
            self.consumer.consumer_heartbeat_ms, classic=(session_timeout_ms, list(protocols)),
            downgrading=downgrade, resubscribed=resubscribed)
        # applied at once: the conversion below reads the group as the join leaves it (the
        # caller undoes the change from its snapshot if the records cannot be written)
        install, *after = step.apply
        install()
        records = step.records
        if downgrade:
            log.info("static member %s (instance %s) replaces %s, the last consumer-protocol "
                     "member of group %s: the group goes back to classic", member_id,
                     instance_id, static_id, group.group_id)
            # the joining member takes the replaced one's place and target assignment in a
            # classic group at the group's epoch, stable unless it subscribes to other
            # topics; no consumer-group timers for it
            conversion, install = self.migration.to_classic(group, None, rebalance=resubscribed,
                                                  generation=generation)
            return records + conversion, [install]
        return records, after

    def sync_group(self, group: ConsumerGroup, generation: int, member_id: str,
                   instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None) -> dict[str, Any]:
        """SyncGroup of a classic member in a consumer group: its current assignment."""
        try:
            member = self._member(group, member_id, instance_id)
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

    def heartbeat(self, group: ConsumerGroup, generation: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        """Heartbeat of a classic member in a consumer group: REBALANCE_IN_PROGRESS while it
        is not reconciled to the group epoch, so that it rejoins."""
        try:
            member = self._member(group, member_id, instance_id)
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

    def leave_group(self, group: ConsumerGroup, member_id: str,
                    instance_id: str | None) -> ErrorCode:
        """LeaveGroup of a classic member in a consumer group."""
        try:
            member = self._member(group, member_id, instance_id)
        except GroupError as exc:
            return exc.error_code
        log.info("classic member %s leaves consumer group %s", member.member_id, group.group_id)
        try:
            # only classic members may stay (Kafka's consumerGroupFenceMembers)
            self.partitions.take_now(group.partition, self.consumer.fence(group, member))
        except GroupError as exc:
            return exc.error_code
        return ErrorCode.none
