"""Share groups (KIP-932): ShareGroupHeartbeat and ShareGroupDescribe, for `GroupCoordinator`.

Membership only, kept in memory by the coordinator of the group's `__consumer_offsets`
partition (its records are not written yet: a coordinator move forgets the members, which
re-join with epoch 0 after their heartbeat is answered with an unknown member id).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from samsa.protocol.errors import ErrorCode

from .common import GroupCoordinatorParts, GroupError, listed_groups
from .share import (
    LEAVE_GROUP_MEMBER_EPOCH,
    SIMPLE,
    Assignment,
    ShareGroup,
    ShareMember,
    TopicsMetadata,
    simple_assign,
)

log = logging.getLogger(__name__)

def _error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "member_id": None,
            "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}


def _wire_assignment(a: Assignment) -> dict[str, Any]:
    return {"topic_partitions": [{"topic_id": t, "partitions": sorted(ps)}
                                 for t, ps in sorted(a.items(), key=lambda kv: str(kv[0]))]}


class ShareGroups(GroupCoordinatorParts):
    """The share groups' membership state."""

    share_groups: dict[str, ShareGroup]
    share_max_size: int  # group.share.max.size
    share_session_ms: int  # group.share.session.timeout.ms
    share_heartbeat_ms: int  # group.share.heartbeat.interval.ms
    # called with (group id, member id) when a member leaves or is fenced: the share-partition
    # leader here closes its share session and releases its records
    share_member_removed: list[Callable[[str, str], None]]

    def share_member_known(self, group_id: str, member_id: str) -> bool | None:
        """Is `member_id` a member of share group `group_id`? None when this broker is not
        the group's coordinator (it cannot tell)."""
        try:
            self.coordinator_partition(group_id)
        except GroupError:
            return None
        group = self.share_groups.get(group_id)
        return group is not None and not group.dead and member_id in group.members

    def share_group_of(self, group_id: str) -> ShareGroup | None:
        """The share group `group_id` for its offsets' admin APIs (None if it has no state
        here); raises GroupError when this broker does not coordinate it now, or when it is a
        group of another type (GROUP_ID_NOT_FOUND)."""
        self.coordinator_partition(group_id)
        if group_id in self.consumer_groups or group_id in self.groups:
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Group {group_id} is not a share group.")
        group = self.share_groups.get(group_id)
        return None if group is None or group.dead else group

    def _share_topics(self, names: set[str]) -> TopicsMetadata:
        out: TopicsMetadata = {}
        for name in names:
            info = self.topics_view.topic_info(name)
            if info is not None and info[1] > 0:
                out[name] = info
        return out

    def _share_group(self, group_id: str, p: int, create: bool) -> ShareGroup:
        group = self.share_groups.get(group_id)
        if group is not None and not group.dead:
            return group
        if group_id in self.consumer_groups or group_id in self.groups:
            raise GroupError(ErrorCode.group_id_not_found,
                             f"Group {group_id} is not a share group.")
        if not create:
            raise GroupError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        group = self.share_groups[group_id] = ShareGroup(group_id, p)
        return group

    def share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                              rack_id: str | None, names: list[str] | None, client_id: str,
                              client_host: str) -> dict[str, Any]:
        """One ShareGroupHeartbeat, as Kafka's GroupMetadataManager.shareGroupHeartbeat."""
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
            p = self.coordinator_partition(group_id)
            if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._share_leave(group_id, member_id)
            return self._share_heartbeat(p, group_id, member_id, member_epoch, rack_id, names,
                                         client_id, client_host)
        except GroupError as exc:
            message = str(exc.args[0]) if exc.args else None
            log.info("ShareGroupHeartbeat of member %r (epoch %d) in group %r: %s %s",
                     member_id, member_epoch, group_id, exc.error_code.name, message or "")
            return _error(exc.error_code, message)

    def _share_heartbeat(self, p: int, group_id: str, member_id: str, member_epoch: int,
                         rack_id: str | None, names: list[str] | None, client_id: str,
                         client_host: str) -> dict[str, Any]:
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
            group.group_epoch += 1
        elif member_epoch not in (0, member.member_epoch):
            # Kafka: a share member's epoch may be behind only by what the group moved since
            raise GroupError(ErrorCode.fenced_member_epoch,
                             f"The share group member has an epoch {member_epoch} that is not "
                             f"its current epoch {member.member_epoch}.")
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if names is not None and sorted(names) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = sorted(set(names))
            group.offsets_topics.update(names)
            group.group_epoch += 1
        self._share_reassign(group)
        send_assignment = member_epoch == 0 or member.member_epoch != group.assignment_epoch
        member.member_epoch = group.assignment_epoch
        member.assigned = group.target.get(member_id, {})
        self._schedule_share_session(group, member)
        return {"error_code": ErrorCode.none, "error_message": None, "member_id": member_id,
                "member_epoch": member.member_epoch,
                "heartbeat_interval": self.share_heartbeat_ms,
                "assignment": _wire_assignment(member.assigned) if send_assignment else None}

    def _share_reassign(self, group: ShareGroup) -> None:
        topics = self._share_topics(group.subscribed())
        subscribed = {m.member_id: m.subscribed_topic_names for m in group.members.values()}
        target = simple_assign(subscribed, topics)
        if group.assignment_epoch < group.group_epoch or target != group.target:
            if group.assignment_epoch >= group.group_epoch:
                group.group_epoch += 1  # the topics' metadata changed
            group.target = target
            group.assignment_epoch = group.group_epoch

    def _share_leave(self, group_id: str, member_id: str) -> dict[str, Any]:
        group = self.share_groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            raise GroupError(ErrorCode.unknown_member_id,
                             f"Member {member_id} is not a member of group {group_id}.")
        self._remove_share_member(group, member)
        return {"error_code": ErrorCode.none, "error_message": None, "member_id": member_id,
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

    def describe_share_group(self, group_id: str) -> dict[str, Any]:
        """A ShareGroupDescribe group entry, as Kafka's ShareGroup.asDescribedGroup."""
        out: dict[str, Any] = {"error_code": ErrorCode.none, "error_message": None,
                               "group_id": group_id, "group_state": "", "group_epoch": -1,
                               "assignment_epoch": -1, "assignor_name": "", "members": []}
        try:
            group = self._share_group(group_id, self.coordinator_partition(group_id),
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
                    {"topic_id": t, "topic_name": self.topics_view.topic_name(t) or "",
                     "partitions": sorted(ps)}
                    for t, ps in sorted(m.assigned.items(), key=lambda kv: str(kv[0]))]},
            } for m in group.members.values()],
        )
        return out

    def list_share_groups(self, states: set[str]) -> list[dict[str, Any]]:
        return listed_groups(self.share_groups.values(), self.loaded, states, "share")

    def _unload_share_groups(self, p: int | None) -> None:
        for group_id, group in list(self.share_groups.items()):
            if p is None or group.partition == p:
                for m in group.members.values():
                    if m.session_timer is not None:
                        m.session_timer.cancel()
                group.dead = True
                del self.share_groups[group_id]
