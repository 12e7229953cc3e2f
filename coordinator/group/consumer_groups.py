"""Consumer-protocol (KIP-848) groups: ConsumerGroupHeartbeat, session and rebalance
timeouts, the offset-commit/fetch member checks, persistence and loading of the groups'
records. The part of `GroupCoordinator` (coordinator.py) that owns `consumer_groups`, as
Kafka's GroupMetadataManager handles them: every change is written to the group's
`__consumer_offsets` partition as Kafka's records (consumer_records.py) and answered once the
ISR has them. The online migration from and to classic groups, and the classic members of a
consumer group, are in consumer_migration.py (`ConsumerMigration`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from samsa.config.schema import BrokerConfig
from samsa.protocol.errors import ErrorCode

from .classic import ClassicGroup
from .common import GroupError, listed_groups, new_member_id
from .consumer import (
    ASSIGNOR_CLASSES,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    FencedMemberEpoch,
    MemberState,
    TopicsMetadata,
    assign,
    reconcile,
    subscribed_topics,
)
from .consumer_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerKey,
    current_assignment_value,
    decode_current_assignment,
    decode_epoch_value,
    decode_member_metadata,
    decode_target_member,
    group_metadata_value,
    key,
    member_metadata_value,
    target_member_value,
    target_metadata_value,
)
from .partitions import GroupPartitions

if TYPE_CHECKING:
    from .consumer_migration import ConsumerMigration
    from .membership import ClassicGroups
    from .share_groups import ShareGroups

log = logging.getLogger("samsa.coordinator.group.coordinator")

Records = list[tuple[bytes, bytes | None]]


@dataclass(frozen=True, slots=True)
class ConsumerSnapshot:
    group_id: str
    group: ConsumerGroup | None  # None: the group did not exist
    saved: dict[str, Any] | None


@functools.lru_cache(maxsize=256)
def _compile(regex: str) -> re.Pattern[str] | None:
    try:
        return re.compile(regex)
    except re.error:
        return None


def _fence_records(group_id: str, member_id: str) -> Records:
    return [(key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
            (key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
            (key(MEMBER_METADATA, group_id, member_id), None)]


def _error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    """An error answer: Kafka leaves the member id null and the epoch 0."""
    return {"error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


class ConsumerGroups:
    """The consumer-protocol groups of the offsets partitions loaded here: their heartbeat,
    timers, persistence and loading. A group id taken by a classic group is `classic`'s, by a
    share group `share`'s; a change that upgrades or downgrades a group goes through
    `migration`."""

    migration: ConsumerMigration
    share: ShareGroups

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

    # ------------------------------------------------------------------ metadata
    def _member_topics(self, m: ConsumerMember) -> set[str]:
        all_topics = self.partitions.topics_view.topic_names() if m.subscribed_topic_regex else ()
        return subscribed_topics(m, all_topics, _compile)

    def subscription_metadata(self, members: list[ConsumerMember]) -> TopicsMetadata:
        names: set[str] = set()
        for m in members:
            names |= self._member_topics(m)
        return self.partitions.topics_metadata(names)

    def consumer_subscribed_topics(self, group: ConsumerGroup) -> set[str]:
        """The topics the group's members subscribe to (names and regex matches)."""
        topics: set[str] = set()
        for m in group.members.values():
            topics |= self._member_topics(m)
        return topics

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.partitions.topics_view.topic_name(topic_id)

    # ------------------------------------------------------------------ validation
    def _validate_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                            instance_id: str | None, rack_id: str | None,
                            rebalance_timeout_ms: int, names: list[str] | None,
                            regex: str | None, assignor: str | None,
                            owned: list[tuple[uuid.UUID, list[int]]] | None,
                            version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        def invalid(message: str) -> GroupError:
            return GroupError(ErrorCode.invalid_request, message)

        if not group_id:
            raise invalid("GroupId can't be empty.")
        if instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if rack_id == "":
            raise invalid("RackId can't be empty.")
        if version >= 1 and not member_id:
            raise invalid("MemberId can't be empty.")
        if member_epoch > 0 or member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not member_id:
                raise invalid("MemberId can't be empty.")
        elif member_epoch == 0:
            if rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if names is None and regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                              "non-null when (re-)joining.")
        elif member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not member_id:
                raise invalid("MemberId can't be empty.")
            if instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if assignor is not None and assignor not in self.consumer_assignors:
            raise GroupError(ErrorCode.unsupported_assignor,
                             f"ServerAssignor {assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.consumer_assignors)}.")
        if regex and _compile(regex) is None:
            raise GroupError(ErrorCode.invalid_regular_expression,
                             f"SubscribedTopicRegex `{regex}` is not a valid regular expression.")

    @staticmethod
    def _validate_epoch(member: ConsumerMember, received: int,
                        owned: list[tuple[uuid.UUID, list[int]]] | None) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
        if received > member.member_epoch:
            raise GroupError(ErrorCode.fenced_member_epoch,
                             f"The consumer group member has a greater member epoch ({received})"
                             f" than the one known by the group coordinator "
                             f"({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
        if received < member.member_epoch:
            subset = owned is not None and all(
                p in member.assigned.get(tid, ()) for tid, ps in owned for p in ps)
            if received != member.previous_member_epoch or not subset:
                raise GroupError(ErrorCode.fenced_member_epoch,
                                 f"The consumer group member has a smaller member epoch "
                                 f"({received}) than the one known by the group coordinator "
                                 f"({member.member_epoch}). The member must abandon all its "
                                 "partitions and rejoin.")

    # ------------------------------------------------------------------ heartbeat
    async def consumer_group_heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, instance_id: str | None,
        rack_id: str | None, rebalance_timeout_ms: int, names: list[str] | None,
        regex: str | None, assignor: str | None,
        owned: list[tuple[uuid.UUID, list[int]]] | None, client_id: str, client_host: str,
        version: int, *, session_ms: int | None = None, heartbeat_ms: int | None = None,
    ) -> dict[str, Any]:
        """One ConsumerGroupHeartbeat; `session_ms`/`heartbeat_ms` are the group's
        consumer.session.timeout.ms / consumer.heartbeat.interval.ms (default: the broker's
        group.consumer.* values)."""
        try:
            self._validate_heartbeat(group_id, member_id, member_epoch, instance_id, rack_id,
                                     rebalance_timeout_ms, names, regex, assignor, owned,
                                     version)
            p = self.partitions.coordinator_partition(group_id)
            if group_id in self.share.share_groups:
                raise GroupError(ErrorCode.group_id_not_found,
                                 f"Group {group_id} is not a consumer group.")
            if not member_id:
                member_id = new_member_id()
            snapshot = self.consumer_snapshot(group_id)
            try:
                if member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                    records, response, after = self._leave(group_id, member_id, member_epoch,
                                                           instance_id)
                else:
                    records, response, after = self.apply_heartbeat(
                        p, group_id, member_id, member_epoch, instance_id, rack_id,
                        rebalance_timeout_ms, names, regex, assignor, owned, client_id,
                        client_host,
                        session_ms if session_ms is not None else self.consumer_session_ms,
                        heartbeat_ms if heartbeat_ms is not None
                        else self.consumer_heartbeat_ms)
                replicated = (self.partitions.begin_append_replicated(p, records)
                              if records else None)
            except GroupError:
                self.consumer_restore(snapshot)
                raise
            await self.partitions.apply_and_await(p, after, replicated)
        except GroupError as exc:
            message = str(exc.args[0]) if exc.args else ""
            if exc.error_code != ErrorCode.coordinator_load_in_progress:
                log.info("ConsumerGroupHeartbeat of member %r (epoch %d) in group %r: %s %s",
                         member_id, member_epoch, group_id, exc.error_code.name,
                         message)
            return _error(exc.error_code, None if message == str(int(exc.error_code))
                          else message)
        return response

    def apply_heartbeat(
        self, p: int, group_id: str, member_id: str, member_epoch: int,
        instance_id: str | None, rack_id: str | None, rebalance_timeout_ms: int,
        names: list[str] | None, regex: str | None, assignor: str | None,
        owned: list[tuple[uuid.UUID, list[int]]] | None, client_id: str, client_host: str,
        session_ms: int, heartbeat_ms: int,
        classic: tuple[int, list[tuple[str, bytes]]] | None = None,
        downgrading: bool = False, resubscribed: bool = False,
    ) -> tuple[Records, dict[str, Any], list[Callable[[], None]]]:
        """Apply one heartbeat to the group state; the records to write, the answer, and
        what to do once the records are in the log (timers, the classic group an upgrade
        replaces). The caller undoes the change if the records cannot be written.
        `classic`: the member joins with JoinGroup (session timeout, protocols).
        `downgrading`: the joining member turns the group classic (Kafka computes no new
        target assignment then, and reconciles the member only if not `resubscribed`, as
        the classic group rebalances then). Kafka's consumerGroupHeartbeat, step by step."""
        group, records, upgraded = self._heartbeat_group(p, group_id, member_epoch)
        self._check_capacity(group, member_id, instance_id)
        member, replaced = self._heartbeat_member(group, member_id, member_epoch, instance_id,
                                                  owned)
        is_new = member_id not in group.members
        swapped = replaced is not None and replaced.member_id != member_id
        updated = _updated_member(member, instance_id, rack_id, rebalance_timeout_ms, assignor,
                                  names, regex, client_id, client_host, classic)
        if swapped and replaced is not None:
            records += _replace_records(group, member, replaced)
        if (is_new and not swapped) or updated.metadata_key() != member.metadata_key():
            records.append((key(MEMBER_METADATA, group_id, member_id),
                            member_metadata_value(updated)))
        members_after = {m.member_id: m for m in group.members.values()
                         if replaced is None or m.member_id != replaced.member_id}
        members_after[member_id] = updated
        sub_meta = self.subscription_metadata(list(members_after.values()))
        # a static member taking its place back keeps the group epoch (Kafka's replaceMember)
        bump = (is_new and replaced is None) or sub_meta != group.subscription_metadata or \
            _subscription(updated) != _subscription(member)
        group_epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            records.append((key(GROUP_METADATA, group_id), group_metadata_value(group_epoch)))
        target, target_epoch = self._heartbeat_target(
            group, member_id, replaced, swapped, members_after, sub_meta, group_epoch,
            downgrading, records)
        reconciled = _reconciled(group, updated, replaced, target, target_epoch, owned,
                                 keep=downgrading and resubscribed)
        if (is_new and not swapped) or reconciled.assignment_key() != member.assignment_key():
            records.append((key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
                            current_assignment_value(reconciled)))
        self.consumer_groups.setdefault(group_id, group)
        group.group_epoch = group_epoch
        group.subscription_metadata = sub_meta
        group.target = target
        group.assignment_epoch = target_epoch
        group.update_member(group.members.get(member_id), reconciled)
        if classic is None:
            group.session_ms = session_ms
        written = functools.partial(self._heartbeat_written, group, member, reconciled,
                                    upgraded, is_new, classic is not None)
        return records, _heartbeat_response(member, reconciled, member_epoch, heartbeat_ms,
                                            rebalance_timeout_ms, names, owned), [written]

    def _heartbeat_group(self, p: int, group_id: str, member_epoch: int
                         ) -> tuple[ConsumerGroup, Records, ClassicGroup | None]:
        """The group the heartbeat is for: the consumer group, a new one for a joining
        member, or the one a classic group upgrades to (with its records, and the classic
        group it replaces once they are written)."""
        group = self.consumer_groups.get(group_id)
        if group is not None:
            return group, [], None
        classic_group = self.classic.groups.get(group_id)
        if classic_group is not None and classic_group.members:
            if self.migration_policy not in ("upgrade", "bidirectional") or \
                    classic_group.protocol_type != "consumer" or \
                    len(classic_group.members) >= self.consumer_max_size:
                raise GroupError(ErrorCode.group_id_not_found,
                                 f"Group {group_id} is not a consumer group.")
            group, records = self.migration.from_classic(classic_group, p)
            return group, records, classic_group
        if member_epoch != 0:
            raise GroupError(ErrorCode.unknown_member_id,
                             f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id, p), [], None

    def _check_capacity(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> None:
        if member_id not in group.members and \
                (instance_id is None or instance_id not in group.static_members) and \
                len(group.members) >= self.consumer_max_size:
            raise GroupError(ErrorCode.group_max_size_reached,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self.consumer_max_size} members.")

    def _heartbeat_member(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                          instance_id: str | None,
                          owned: list[tuple[uuid.UUID, list[int]]] | None
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
                self._validate_epoch(existing, member_epoch, owned)
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
        static = _static_member(static, member_id, instance_id)
        self._validate_epoch(static, member_epoch, owned)
        return static, None

    def _heartbeat_target(self, group: ConsumerGroup, member_id: str,
                          replaced: ConsumerMember | None, swapped: bool,
                          members_after: dict[str, ConsumerMember], sub_meta: TopicsMetadata,
                          group_epoch: int, downgrading: bool,
                          records: Records) -> tuple[dict[str, Assignment], int]:
        """The target assignment after the heartbeat and its epoch: a new one computed when
        `group_epoch` is past the group's assignment epoch (not for a group `downgrading` to
        classic); its records go to `records`."""
        group_id = group.group_id
        target = group.target
        if replaced is not None:
            target = {(member_id if m == replaced.member_id else m): a
                      for m, a in target.items()}
            if member_id in target and not swapped:
                records.append((key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
                                target_member_value(target[member_id])))
        if downgrading or group_epoch <= group.assignment_epoch:
            return target, group.assignment_epoch
        name = _preferred(list(members_after.values()), self.consumer_assignors[0])
        subs = {m.member_id: self._member_topics(m) for m in members_after.values()}
        new_target = assign(name, subs, sub_meta, target)
        for mid, a in sorted(new_target.items()):
            if mid not in target or target[mid] != a:
                records.append((key(TARGET_ASSIGNMENT_MEMBER, group_id, mid),
                                target_member_value(a)))
        records.append((key(TARGET_ASSIGNMENT_METADATA, group_id),
                        target_metadata_value(group_epoch)))
        log.info("group %s: epoch %d, target assignment computed by %s for %d members",
                 group_id, group_epoch, name, len(members_after))
        return new_target, group_epoch

    def _heartbeat_written(self, group: ConsumerGroup, member: ConsumerMember,
                           reconciled: ConsumerMember, upgraded: ClassicGroup | None,
                           is_new: bool, classic: bool) -> None:
        """Once the heartbeat's records are in the log: the classic group an upgrade
        replaces goes, and the member's timers run."""
        if upgraded is not None:
            self.migration.retire_classic(upgraded)
            # the classic members taken over: their sessions run on in the new group
            for m in group.members.values():
                if m.member_id != reconciled.member_id:
                    self.schedule_session(group, m)
        self.schedule_session(group, reconciled)
        if classic:
            return  # a classic member revokes by rejoining (its join timeout)
        if reconciled.state == MemberState.UNREVOKED_PARTITIONS:
            if member.state != MemberState.UNREVOKED_PARTITIONS or \
                    member.member_epoch != reconciled.member_epoch or is_new:
                self._schedule_rebalance(group, reconciled)
        elif reconciled.rebalance_timer is not None:
            reconciled.rebalance_timer.cancel()
            reconciled.rebalance_timer = None

    def _leave(self, group_id: str, member_id: str, member_epoch: int,
               instance_id: str | None
               ) -> tuple[Records, dict[str, Any], list[Callable[[], None]]]:
        group = self.consumer_groups.get(group_id)
        if group is None:
            raise GroupError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {group_id}.")
        else:
            member = _static_member(group.static_member(instance_id), member_id, instance_id)
        response = {"error_code": ErrorCode.none, "error_message": None,
                    "member_id": member_id, "member_epoch": member_epoch,
                    "heartbeat_interval": 0, "assignment": None}
        if member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # The static member will come back: it keeps its partitions until its session
            # times out.
            log.info("static member %s (instance %s) of group %s leaves temporarily",
                     member_id, instance_id, group_id)
            updated = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                              previous_member_epoch=member.member_epoch)
            group.update_member(member, updated)
            return [(key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
                     current_assignment_value(updated))], response, []
        log.info("member %s leaves consumer group %s", member_id, group_id)
        response["member_epoch"] = LEAVE_GROUP_MEMBER_EPOCH
        if self.migration.downgradable(group, member.member_id):
            # the last consumer-protocol member leaves: the group goes back to classic
            # instead (Kafka's consumerGroupFenceMember writes only the conversion)
            records, install = self.migration.to_classic(group, member.member_id)
            return records, response, [install]
        return self.remove_consumer_member(group, member), response, []

    def remove_consumer_member(self, group: ConsumerGroup, member: ConsumerMember) -> Records:
        """Fence `member` out of the group (state applied); the records that say so."""
        records = _fence_records(group.group_id, member.member_id)
        group.remove_member(member.member_id)
        group.target.pop(member.member_id, None)
        group.group_epoch += 1
        records.append((key(GROUP_METADATA, group.group_id),
                        group_metadata_value(group.group_epoch)))
        group.subscription_metadata = self.subscription_metadata(list(group.members.values()))
        return records

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
            assignor_name=_preferred(members, self.consumer_assignors[0]),
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

    def _schedule_rebalance(self, group: ConsumerGroup, member: ConsumerMember) -> None:
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
        snapshot = self.consumer_snapshot(group.group_id)
        install: Callable[[], None] | None = None
        if self.migration.downgradable(group, member_id):
            records, install = self.migration.to_classic(group, member_id)
        else:
            records = self.remove_consumer_member(group, member)
        try:
            self.partitions.append(group.partition, records)
        except GroupError as exc:
            self.consumer_restore(snapshot)  # the member stays; its session runs again
            log.warning("could not write the removal of member %s of group %s: %d", member_id,
                        group.group_id, exc.error_code)
            return
        if install is not None:
            install()

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
        for m in group.members.values():
            if m.session_timer is None or m.session_timer.cancelled():
                self.schedule_session(group, m)
            if m.classic_protocols is None and m.state == MemberState.UNREVOKED_PARTITIONS \
                    and (m.rebalance_timer is None or m.rebalance_timer.cancelled()):
                self._schedule_rebalance(group, m)

    # ------------------------------------------------------------------ offsets checks
    def validate_consumer_offset_commit(self, group: ConsumerGroup, member_id: str,
                                        member_epoch: int, transactional: bool, version: int,
                                        partitions: list[tuple[str, int]]) -> None:
        """Kafka's ConsumerGroup.validateOffsetCommit with its assignment epochs (KIP-1251):
        an epoch older than the member's passes for the partitions the member was given at
        or before it, as a commit sent before the member heard of its new epoch."""
        if member_epoch < 0 and not group.members:
            return
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        classic = member.classic_protocols is not None
        if not transactional and not classic and version < 9:
            raise GroupError(ErrorCode.unsupported_version)
        if member_epoch == member.member_epoch:
            return
        # Kafka answers a transactional commit ILLEGAL_GENERATION, as older clients expect
        stale = (ErrorCode.illegal_generation if classic or transactional
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
                    self._schedule_rebalance(group, m)
            log.info("loaded consumer group %s: epoch %d, assignment epoch %d, %d members",
                     group.group_id, group.group_epoch, group.assignment_epoch,
                     len(group.members))

    def unload_consumer_groups(self, p: int | None) -> None:
        for group in [g for g in self.consumer_groups.values()
                      if p is None or g.partition == p]:
            for m in group.members.values():
                m.cancel_timers()
            del self.consumer_groups[group.group_id]


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


def _replace_records(group: ConsumerGroup, member: ConsumerMember,
                     replaced: ConsumerMember) -> Records:
    """Kafka's replaceMember: the old member's tombstones, then the new one as a copy of it
    (its target assignment, epoch 0), before this heartbeat's changes."""
    group_id, member_id = group.group_id, member.member_id
    return _fence_records(group_id, replaced.member_id) + [
        (key(MEMBER_METADATA, group_id, member_id), member_metadata_value(member)),
        (key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
         target_member_value(group.target.get(replaced.member_id, {}))),
        (key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
         current_assignment_value(member)),
    ]


def _reconciled(group: ConsumerGroup, updated: ConsumerMember,
                replaced: ConsumerMember | None, target: dict[str, Assignment],
                target_epoch: int,
                owned: list[tuple[uuid.UUID, list[int]]] | None, keep: bool) -> ConsumerMember:
    """The member moved toward its target assignment (as it is when `keep`); the static
    member it replaces leaves the group first."""
    if replaced is not None:
        group.remove_member(replaced.member_id)
    if keep:
        return updated
    try:
        return reconcile(updated, target_epoch, target.get(updated.member_id, {}),
                         group.current_partition_epoch, owned)
    except FencedMemberEpoch as exc:
        raise GroupError(ErrorCode.fenced_member_epoch, str(exc)) from exc


def _heartbeat_response(member: ConsumerMember, reconciled: ConsumerMember, member_epoch: int,
                        heartbeat_ms: int, rebalance_timeout_ms: int, names: list[str] | None,
                        owned: list[tuple[uuid.UUID, list[int]]] | None) -> dict[str, Any]:
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


def _preferred(members: list[ConsumerMember], default: str) -> str:
    """The assignor most members ask for (ties by name); the default when none asks."""
    votes: dict[str, int] = {}
    for m in members:
        if m.server_assignor:
            votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
    if not votes:
        return default
    return max(sorted(votes), key=lambda n: votes[n])


def _static_member(static: ConsumerMember | None, member_id: str,
                   instance_id: str) -> ConsumerMember:
    """`static`, the member holding `instance_id`, if the request's `member_id` is it
    (Kafka's throwIfStaticMemberIsUnknown and throwIfInstanceIdIsFenced)."""
    if static is None:
        raise GroupError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if static.member_id != member_id:
        raise GroupError(ErrorCode.fenced_instance_id,
                         f"Static member {member_id} with instance id {instance_id}"
                         f" was fenced by member {static.member_id}.")
    return static
