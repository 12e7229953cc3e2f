"""Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe, a part of `GroupCoordinator`.

Kept by the coordinator of the group's `__consumer_offsets` partition and written there as
Kafka's share-group records (records.py): a change is answered once the ISR has its
records, and the next coordinator of the partition replays them (members, epochs,
assignments and the topics the group has share-partition state of), so the members heartbeat
on to it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from samsa.config.schema import BrokerConfig
from samsa.protocol.errors import ErrorCode

from ..common import GroupError, listed_groups
from ..consumer.records import decode_epoch_value, decode_target_member, target_member_value
from ..partitions import GroupPartitions
from . import records as sr
from .model import (
    LEAVE_GROUP_MEMBER_EPOCH,
    SIMPLE,
    Assignment,
    ShareGroup,
    ShareMember,
    simple_assign,
)

if TYPE_CHECKING:
    from ..classic.groups import ClassicGroups
    from ..consumer.groups import ConsumerGroups

log = logging.getLogger(__name__)

Records = list[tuple[bytes, bytes | None]]
# the order a change's records are written in: a member's tombstones first, the group's last
_UPSERT_ORDER = {t: i for i, t in enumerate((
    sr.MEMBER_METADATA, sr.GROUP_METADATA, sr.TARGET_ASSIGNMENT_MEMBER,
    sr.TARGET_ASSIGNMENT_METADATA, sr.CURRENT_MEMBER_ASSIGNMENT, sr.STATE_PARTITION_METADATA))}
_TOMBSTONE_ORDER = {t: i for i, t in enumerate((
    sr.CURRENT_MEMBER_ASSIGNMENT, sr.TARGET_ASSIGNMENT_MEMBER, sr.MEMBER_METADATA,
    sr.STATE_PARTITION_METADATA, sr.TARGET_ASSIGNMENT_METADATA, sr.GROUP_METADATA))}


def _key_type(k: bytes) -> int:
    return int.from_bytes(k[:2], "big", signed=True)


def _error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


def _wire_assignment(a: Assignment) -> dict[str, Any]:
    return {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                 for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))]}


class ShareGroups:
    """The share groups of the offsets partitions loaded here, which this part owns
    (`share_groups`); a group id taken by a classic or consumer group is `classic`'s or
    `consumer`'s."""

    def __init__(self, partitions: GroupPartitions, cfg: BrokerConfig, classic: ClassicGroups,
                 consumer: ConsumerGroups) -> None:
        self.partitions = partitions
        self.classic = classic
        self.consumer = consumer
        self.share_max_size: int = cfg["group.share.max.size"]
        self.share_session_ms: int = cfg["group.share.session.timeout.ms"]
        self.share_heartbeat_ms: int = cfg["group.share.heartbeat.interval.ms"]
        self.share_groups: dict[str, ShareGroup] = {}
        # called with (group id, member id) when a member leaves or is fenced: the
        # share-partition leader here closes its share session and releases its records
        self.share_member_removed: list[Callable[[str, str], None]] = []

    def share_member_known(self, group_id: str, member_id: str) -> bool | None:
        """Is `member_id` a member of share group `group_id`? None when this broker is not
        the group's coordinator (it cannot tell)."""
        try:
            self.partitions.coordinator_partition(group_id)
        except GroupError:
            return None
        group = self.share_groups.get(group_id)
        return group is not None and not group.dead and member_id in group.members

    def share_group_of(self, group_id: str, create: bool = False) -> ShareGroup | None:
        """The share group `group_id` for its offsets' admin APIs (None if it has no state
        here, unless `create`: then a new empty one, as Kafka's alterShareGroupOffsets makes);
        raises GroupError when this broker does not coordinate it now, or when it is a group
        of another type (GROUP_ID_NOT_FOUND)."""
        p = self.partitions.coordinator_partition(group_id)
        if group_id in self.consumer.consumer_groups or group_id in self.classic.groups:
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Group {group_id} is not a share group.")
        group = self.share_groups.get(group_id)
        if (group is None or group.dead) and create:
            return self._share_group(group_id, p, create=True)
        return None if group is None or group.dead else group

    def _share_group(self, group_id: str, p: int, create: bool) -> ShareGroup:
        group = self.share_groups.get(group_id)
        if group is not None and not group.dead:
            return group
        if group_id in self.consumer.consumer_groups or group_id in self.classic.groups:
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Group {group_id} is not a share group.")
        if not create:
            raise GroupError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        group = self.share_groups[group_id] = ShareGroup(group_id, p)
        return group

    async def share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                                    rack_id: str | None, names: list[str] | None,
                                    client_id: str, client_host: str) -> dict[str, Any]:
        """One ShareGroupHeartbeat, as Kafka's GroupMetadataManager.shareGroupHeartbeat:
        answered once the records of what it changed are replicated."""
        try:
            if not group_id:
                raise GroupError(ErrorCode.invalid_request, "GroupId can't be empty.")
            if not member_id:
                raise GroupError(ErrorCode.invalid_request, "MemberId can't be empty.")
            if member_epoch == 0 and not names:
                raise GroupError(ErrorCode.invalid_request,
                                 "SubscribedTopicNames must be set in first request.")
            if member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
                raise GroupError(ErrorCode.invalid_request,
                                 f"MemberEpoch is invalid: {member_epoch}.")
            p = self.partitions.coordinator_partition(group_id)
            if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                group, response = self._share_leave(group_id, member_id)
            else:
                group, response = self._share_heartbeat(p, group_id, member_id, member_epoch,
                                                        rack_id, names, client_id, client_host)
            await self._write_share_group(group)
            return response
        except GroupError as exc:
            message = str(exc.args[0]) if exc.args else None
            if message == str(int(exc.error_code)):
                message = None
            log.info("ShareGroupHeartbeat of member %r (epoch %d) in group %r: %s %s",
                     member_id, member_epoch, group_id, exc.error_code.name, message or "")
            return _error(exc.error_code, message)

    def _share_heartbeat(self, p: int, group_id: str, member_id: str, member_epoch: int,
                         rack_id: str | None, names: list[str] | None, client_id: str,
                         client_host: str) -> tuple[ShareGroup, dict[str, Any]]:
        group = self._share_group(group_id, p, create=member_epoch == 0)
        member = group.members.get(member_id)
        if member is None:
            if member_epoch != 0:
                raise GroupError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self.share_max_size:
                raise GroupError(ErrorCode.group_max_size_reached,
                                 f"The share group has reached its maximum capacity of "
                                 f"{self.share_max_size} members.")
            member = group.members[member_id] = ShareMember(member_id)
        elif member_epoch not in (0, member.member_epoch, member.previous_member_epoch):
            # Kafka: a member may be one epoch behind (the answer that bumped it was lost)
            raise GroupError(ErrorCode.fenced_member_epoch,
                             f"The share group member has an epoch {member_epoch} that is not "
                             f"its current epoch {member.member_epoch}.")
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if names is not None and sorted(names) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = sorted(set(names))
            group.offsets_topics.update(names)
            group.group_epoch += 1  # once for a member joining with its subscription
        self._share_reassign(group)
        send_assignment = member_epoch == 0 or member.member_epoch != group.assignment_epoch
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        member.assigned = group.target.get(member_id, {})
        self._schedule_share_session(group, member)
        return group, {"error_code": ErrorCode.none, "error_message": None, "member_id": member_id,
                "member_epoch": member.member_epoch,
                "heartbeat_interval": self.share_heartbeat_ms,
                "assignment": _wire_assignment(member.assigned) if send_assignment else None}

    def _share_reassign(self, group: ShareGroup) -> None:
        topics = self.partitions.topics_metadata(group.subscribed())
        subscribed = {m.member_id: m.subscribed_topic_names for m in group.members.values()}
        target = simple_assign(subscribed, topics)
        if group.assignment_epoch < group.group_epoch or target != group.target:
            if group.assignment_epoch >= group.group_epoch:
                group.group_epoch += 1  # the topics' metadata changed
            group.target = target
            group.assignment_epoch = group.group_epoch

    def _share_leave(self, group_id: str,
                     member_id: str) -> tuple[ShareGroup, dict[str, Any]]:
        group = self.share_groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            raise GroupError(ErrorCode.unknown_member_id,
                             f"Member {member_id} is not a member of group {group_id}.")
        self._remove_share_member(group, member)
        return group, {"error_code": ErrorCode.none, "error_message": None, "member_id": member_id,
                "member_epoch": LEAVE_GROUP_MEMBER_EPOCH, "heartbeat_interval": 0,
                "assignment": None}

    def _remove_share_member(self, group: ShareGroup, member: ShareMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        del group.members[member.member_id]
        group.group_epoch += 1
        self._share_reassign(group)
        for listener in self.share_member_removed:
            listener(group.group_id, member.member_id)

    def _schedule_share_session(self, group: ShareGroup, member: ShareMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = asyncio.get_running_loop().call_later(
            self.share_session_ms / 1000, self._on_share_session_timeout, group,
            member.member_id)

    def _on_share_session_timeout(self, group: ShareGroup, member_id: str) -> None:
        member = group.members.get(member_id)
        if self.share_groups.get(group.group_id) is not group or member is None:
            return
        member.session_timer = None
        log.info("member %s of share group %s fenced (session timeout)", member_id,
                 group.group_id)
        self._remove_share_member(group, member)
        try:
            self.partitions.append(group.partition, self._share_changes(group))
        except GroupError as exc:
            group.persisted.clear()  # written whole next time
            log.warning("could not write the removal of member %s of share group %s: %d",
                        member_id, group.group_id, exc.error_code)

    def describe_share_group(self, group_id: str) -> dict[str, Any]:
        """A ShareGroupDescribe group entry, as Kafka's ShareGroup.asDescribedGroup."""
        out: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None,
                               "group_id": group_id, "group_state": "", "group_epoch": -1,
                               "assignment_epoch": -1, "assignor_name": "", "members": []}
        try:
            group = self._share_group(group_id, self.partitions.coordinator_partition(group_id),
                                      create=False)
        except GroupError as exc:
            out["error_code"] = exc.error_code
            out["error_message"] = str(exc.args[0]) if exc.args else None
            return out
        out.update(
            group_state=group.state().value, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, assignor_name=SIMPLE,
            members=[{
                "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "assignment": {"topic_partitions": [
                    {"topic_id": t, "topic_name": self.partitions.topics_view.topic_name(t) or "",
                     "partitions": sorted(ps)}
                    for t, ps in sorted(m.assigned.items(), key=lambda kv: str(kv[0]))]},
            } for m in group.members.values()],
        )
        return out

    def list_share_groups(self, states: set[str]) -> list[dict[str, Any]]:
        return listed_groups(self.share_groups.values(), self.partitions.loaded, states, "share")

    def unload_share_groups(self, p: int | None) -> None:
        for group_id, group in list(self.share_groups.items()):
            if p is None or group.partition == p:
                for m in group.members.values():
                    if m.session_timer is not None:
                        m.session_timer.cancel()
                group.dead = True
                del self.share_groups[group_id]

    # ------------------------------------------------------------------ records
    def _share_records(self, group: ShareGroup) -> dict[bytes, bytes]:
        """All of the group's records as they should be in `__consumer_offsets` now."""
        gid = group.group_id
        out = {sr.share_key(sr.GROUP_METADATA, gid): sr.group_metadata_value(group.group_epoch),
               sr.share_key(sr.TARGET_ASSIGNMENT_METADATA, gid):
                   sr.target_metadata_value(group.assignment_epoch)}
        for m in group.members.values():
            mid = m.member_id
            out[sr.share_key(sr.MEMBER_METADATA, gid, mid)] = sr.member_metadata_value(m)
            out[sr.share_key(sr.CURRENT_MEMBER_ASSIGNMENT, gid, mid)] = \
                sr.current_assignment_value(m)
        for mid, a in group.target.items():
            out[sr.share_key(sr.TARGET_ASSIGNMENT_MEMBER, gid, mid)] = target_member_value(a)
        initialized: sr.TopicPartitions = {}
        for name in group.offsets_topics:
            info = self.partitions.topics_view.topic_info(name)
            if info is not None:
                initialized[info[0]] = (name, set(range(info[1])))
        if initialized:
            out[sr.share_key(sr.STATE_PARTITION_METADATA, gid)] = \
                sr.state_partition_metadata_value(initialized)
        return out

    def _share_changes(self, group: ShareGroup, deleted: bool = False) -> Records:
        """The records that take `__consumer_offsets` from what was last written of the group
        to its state now (to nothing when `deleted`); that state counts as written from now."""
        now = {} if deleted else self._share_records(group)
        old = group.persisted
        upserts = sorted((k for k, v in now.items() if old.get(k) != v),
                         key=lambda k: _UPSERT_ORDER[_key_type(k)])
        tombstones = sorted((k for k in old if k not in now),
                            key=lambda k: _TOMBSTONE_ORDER[_key_type(k)])
        group.persisted = now
        member_tombstones = [k for k in tombstones if _key_type(k) in sr.KEYS.with_member]
        group_tombstones = [k for k in tombstones if _key_type(k) not in sr.KEYS.with_member]
        out: Records = [(k, None) for k in member_tombstones]
        out += [(k, now[k]) for k in upserts]
        out += [(k, None) for k in group_tombstones]
        return out

    async def _write_share_group(self, group: ShareGroup, deleted: bool = False) -> None:
        """Write what changed in the group, replicated; GroupError when it was not."""
        records = self._share_changes(group, deleted)
        if not records:
            return
        try:
            await self.partitions.append_replicated(group.partition, records)
        except GroupError:
            group.persisted.clear()  # unknown what holds: written whole next time
            raise
        if group.partition not in self.partitions.loaded:
            raise GroupError(ErrorCode.not_coordinator)

    async def update_share_offsets_topics(self, group: ShareGroup, added: set[str],
                                          removed: set[str]) -> None:
        """The topics the group has share-partition state of changed (AlterShareGroupOffsets,
        DeleteShareGroupOffsets): written as its ShareGroupStatePartitionMetadata."""
        group.offsets_topics.update(added)
        group.offsets_topics.difference_update(removed)
        await self._write_share_group(group)

    async def delete_share_group(self, group: ShareGroup) -> ErrorCode:
        """DeleteGroups of an empty share group: tombstones of all its records."""
        if group.members:
            return ErrorCode.non_empty_group
        try:
            await self._write_share_group(group, deleted=True)
        except GroupError as exc:
            return exc.error_code
        group.dead = True
        if self.share_groups.get(group.group_id) is group:
            del self.share_groups[group.group_id]
        return ErrorCode.none

    # ------------------------------------------------------------------ loading
    def replay_share(self, p: int, k: sr.ShareKey, value: bytes | None) -> None:
        group = self.share_groups.get(k.group)
        if value is None:
            if group is None:
                return
            if k.type == sr.GROUP_METADATA:
                del self.share_groups[k.group]
            elif k.type == sr.MEMBER_METADATA and k.member is not None:
                group.members.pop(k.member, None)
            elif k.type == sr.TARGET_ASSIGNMENT_MEMBER and k.member is not None:
                group.target.pop(k.member, None)
            elif k.type == sr.STATE_PARTITION_METADATA:
                group.offsets_topics.clear()
            return
        if k.type == sr.PARTITION_METADATA:
            return
        if group is None:
            group = self.share_groups[k.group] = ShareGroup(k.group, p)
        if k.type == sr.GROUP_METADATA:
            group.group_epoch = decode_epoch_value(value)
        elif k.type == sr.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = decode_epoch_value(value)
        elif k.type == sr.TARGET_ASSIGNMENT_MEMBER and k.member is not None:
            group.target[k.member] = decode_target_member(value)
        elif k.type == sr.STATE_PARTITION_METADATA:
            group.offsets_topics = {n for n, _ in sr.decode_state_partition_metadata(value)
                                    .values()}
        elif k.member is not None:
            member = group.members.get(k.member)
            if member is None:
                member = group.members[k.member] = ShareMember(k.member)
            if k.type == sr.MEMBER_METADATA:
                sr.decode_member_metadata(value, member)
            else:
                sr.decode_current_assignment(value, member)

    def share_groups_loaded(self, p: int) -> None:
        for group in [g for g in self.share_groups.values() if g.partition == p]:
            group.persisted = self._share_records(group)
            for m in group.members.values():
                self._schedule_share_session(group, m)
            log.info("loaded share group %s: epoch %d, assignment epoch %d, %d members",
                     group.group_id, group.group_epoch, group.assignment_epoch,
                     len(group.members))
