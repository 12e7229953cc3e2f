"""Share groups' offsets (KIP-932): DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91),
DeleteShareGroupOffsets (92), answered by the group's coordinator from the share-partitions'
persisted state (the persister: broker/share/persister.py).

A share-partition's offset is its start offset in `__share_group_state` (-1: never initialized).
Describe names the given partitions, or, without topics, every partition of the topics the
group's members subscribed to since the group was created on this coordinator (Kafka keeps the
group's initialized share-partitions in `__consumer_offsets`; Samsa's share groups live in the
coordinator's memory, so after a coordinator change only named topics are described).
Alter and Delete need an empty group (NON_EMPTY_GROUP otherwise): Alter initializes the
share-partitions again at the given start offsets with the next state epoch (so a leader holding
the old state is fenced and reads the new one), and makes the group, empty, when it has none
(as Kafka does), so that Describe of all its topics finds them; Delete removes their state.
ACLs as Kafka: DESCRIBE (Describe), READ (Alter) or DELETE (Delete) on the group, READ (Alter,
Delete) or DESCRIBE (Describe) on each topic. Served while `share.version` >= 1.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from samsa.coordinator.group.common import GroupError
from samsa.coordinator.share.coordinator import ShareStateError
from samsa.protocol.errors import ErrorCode

from ..context import GroupContext, RequestContext
from ..security.authorizer import AclOperation, ResourceType
from ..share.persister import SharePersister
from .declare import api
from .share_groups import _enabled

if TYPE_CHECKING:
    from .requests import (
        AlterShareGroupOffsetsRequest,
        AlterShareGroupOffsetsTopic,
        DeleteShareGroupOffsetsRequest,
        DeleteShareGroupOffsetsTopic,
        DescribeShareGroupOffsetsRequest,
        DescribeShareGroupOffsetsRequestGroup,
    )

log = logging.getLogger(__name__)


def _group_check(ctx: GroupContext, group_id: str, op: AclOperation,
                 empty: bool) -> tuple[ErrorCode, str | None]:
    """NONE if the request may go on for the group; else its group-level error."""
    if not _enabled(ctx) or ctx.share_persister is None:
        return ErrorCode.unsupported_version, "Share groups are not enabled."
    if not ctx.authorize(op, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, None
    try:
        group = ctx.groups.share_group_of(group_id)
    except GroupError as exc:
        return exc.error_code, str(exc.args[0]) if exc.args else None
    if empty and group is not None and group.members:
        return ErrorCode.non_empty_group, "The group has active members."
    return ErrorCode.none, None


def _topic(ctx: GroupContext, name: str) -> tuple[uuid.UUID, int] | None:
    state = ctx.store.topic(name)
    return None if state is None else (state.topic_id, len(state.partitions))


@api(90, "DescribeShareGroupOffsets", (0, 1),
     structs={"DescribeShareGroupOffsetsRequestGroup": "DescribeShareGroupOffsetsRequestGroup"})
async def handle_describe_share_group_offsets(
    ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> dict[str, Any]:
    return {"throttle_time": 0,
            "groups": [await _describe_group(ctx, g) for g in request.groups]}


async def _describe_group(ctx: RequestContext,
                          g: DescribeShareGroupOffsetsRequestGroup) -> dict[str, Any]:
    code, message = _group_check(ctx, g.group_id, AclOperation.DESCRIBE, empty=False)
    entry: dict[str, Any] = {"group_id": g.group_id, "topics": [], "error_code": code,
                             "error_message": message}
    persister = ctx.share_persister
    if code != ErrorCode.none or persister is None:
        return entry
    if g.topics is None:
        group = ctx.groups.share_group_of(g.group_id)
        names = sorted(group.offsets_topics) if group is not None else []
        wanted: list[tuple[str, list[int] | None]] = [(n, None) for n in names]
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
    allowed = set(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                 {n for n, _ in wanted}))
    for name, partitions in wanted:
        info = _topic(ctx, name)
        if info is None or name not in allowed:
            if g.topics is None:
                continue
            error = (ErrorCode.topic_authorization_failed if name not in allowed
                     else ErrorCode.unknown_topic_or_partition)
            entry["topics"].append({"topic_name": name, "topic_id": None, "partitions": [
                _offsets_entry(p, error) for p in partitions or []]})
            continue
        topic_id, count = info
        out = [await _describe_partition(ctx, persister, g.group_id, name, topic_id, count, p)
               for p in (partitions if partitions is not None else range(count))]
        entry["topics"].append({"topic_name": name, "topic_id": topic_id, "partitions": out})
    return entry


def _offsets_entry(partition: int, error: ErrorCode = ErrorCode.none,
                   message: str | None = None) -> dict[str, Any]:
    return {"partition_index": partition, "start_offset": -1, "leader_epoch": -1, "lag": -1,
            "error_code": error, "error_message": message}


async def _describe_partition(ctx: RequestContext, persister: SharePersister, group_id: str,
                              topic: str, topic_id: uuid.UUID, count: int,
                              partition: int) -> dict[str, Any]:
    """One partition's share-partition start offset and leader epoch, and (v1, KIP-1226) its
    lag as Kafka computes it: the high watermark less the start offset less the records
    delivered for good after it; -1 while the share-partition has no start offset or no
    delivery-complete count yet."""
    if not 0 <= partition < count:
        return _offsets_entry(partition, ErrorCode.unknown_topic_or_partition)
    item = _offsets_entry(partition)
    try:
        summary = await persister.summary(group_id, topic_id, partition)
        item["start_offset"], item["leader_epoch"] = summary.start_offset, summary.leader_epoch
        if ctx.version >= 1 and summary.start_offset != -1 \
                and summary.delivery_complete_count != -1:
            end = await _end_offset(ctx, persister, topic, partition)
            item["lag"] = end - summary.start_offset - summary.delivery_complete_count
    except ShareStateError as exc:
        return _offsets_entry(partition, exc.error_code, exc.message)
    return item


async def _end_offset(ctx: RequestContext, persister: SharePersister, topic: str,
                      partition: int) -> int:
    """The partition's high watermark: read here if led here, else asked of its leader."""
    replica = ctx.replicas.get(topic, partition)
    if replica is not None and replica.is_leader:
        return replica.high_watermark
    return await persister.end_offset(topic, partition)


class _NamedTopic(Protocol):
    @property
    def topic_name(self) -> str: ...


class _Target(NamedTuple):
    """A topic of an Alter or Delete: its id and partition count (None, 0: no such topic), and
    its topic-level error (not READ-able, unknown) or NONE."""

    topic_id: uuid.UUID | None
    partitions: int
    error: ErrorCode


_T = TypeVar("_T", bound=_NamedTopic)
# One topic's answer: (the context, the group id, the persister, the topic, its target) -> its
# entry in "responses".
_TopicChange = Callable[[GroupContext, str, SharePersister, _T, _Target],
                        Awaitable[dict[str, Any]]]


async def _change_offsets(ctx: GroupContext, group_id: str, op: AclOperation,
                          topics: Sequence[_T], change: _TopicChange[_T]) -> dict[str, Any]:
    """Alter and Delete alike: `op` on the empty group, READ on each topic, then `change` for
    each topic in the request's order."""
    code, message = _group_check(ctx, group_id, op, empty=True)
    if code != ErrorCode.none:
        return {"throttle_time": 0, "error_code": code, "error_message": message,
                "responses": []}
    persister = ctx.share_persister
    assert persister is not None
    allowed = set(ctx.authorized(AclOperation.READ, ResourceType.TOPIC,
                                 {t.topic_name for t in topics}))
    responses = [await change(ctx, group_id, persister, t, _target(ctx, t.topic_name, allowed))
                 for t in topics]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "responses": responses}


def _target(ctx: GroupContext, name: str, allowed: set[str]) -> _Target:
    info = _topic(ctx, name)
    if name not in allowed:
        return _Target(None if info is None else info[0], 0,
                       ErrorCode.topic_authorization_failed)
    if info is None:
        return _Target(None, 0, ErrorCode.unknown_topic_or_partition)
    return _Target(info[0], info[1], ErrorCode.none)


def _failure(exc: ShareStateError | GroupError) -> dict[str, Any]:
    return {"error_code": exc.error_code, "error_message": getattr(exc, "message", None)}


async def _alter_topic(ctx: GroupContext, group_id: str, persister: SharePersister,
                       t: AlterShareGroupOffsetsTopic, target: _Target) -> dict[str, Any]:
    out = []
    for p in t.partitions:
        item: dict[str, Any] = {"partition_index": p.partition_index,
                                "error_code": target.error, "error_message": None}
        out.append(item)
        if target.error != ErrorCode.none:
            continue
        if not 0 <= p.partition_index < target.partitions:
            item["error_code"] = ErrorCode.unknown_topic_or_partition
        elif p.start_offset < 0:
            item["error_code"], item["error_message"] = (ErrorCode.invalid_request,
                                                         "The start offset is negative.")
        else:
            try:
                await _alter(ctx, persister, group_id, t.topic_name, target,
                             p.partition_index, p.start_offset)
            except (ShareStateError, GroupError) as exc:
                item.update(_failure(exc))
    return {"topic_name": t.topic_name, "topic_id": target.topic_id, "partitions": out}


async def _alter(ctx: GroupContext, persister: SharePersister, group_id: str, topic: str,
                 target: _Target, partition: int, start_offset: int) -> None:
    """Initialize the share-partition again at `start_offset`, with the next state epoch."""
    assert target.topic_id is not None
    summary = await persister.summary(group_id, target.topic_id, partition)
    await persister.initialize(group_id, target.topic_id, partition, summary.state_epoch + 1,
                               start_offset)
    # Kafka makes the group when it has none, so that Describe of all its topics finds the
    # offsets set here
    group = ctx.groups.share_group_of(group_id, create=True)
    assert group is not None
    await ctx.groups.update_share_offsets_topics(group, {topic}, set())
    log.info("share group %s: %s-%d starts at offset %d now", group_id, topic, partition,
             start_offset)


async def _delete_topic(ctx: GroupContext, group_id: str, persister: SharePersister,
                        t: DeleteShareGroupOffsetsTopic, target: _Target) -> dict[str, Any]:
    item: dict[str, Any] = {"topic_name": t.topic_name, "topic_id": target.topic_id,
                            "error_code": target.error, "error_message": None}
    if target.error != ErrorCode.none or target.topic_id is None:
        return item
    try:
        for p in range(target.partitions):
            await persister.delete(group_id, target.topic_id, p)
        group = ctx.groups.share_group_of(group_id)
        if group is not None:
            await ctx.groups.update_share_offsets_topics(group, set(), {t.topic_name})
    except (ShareStateError, GroupError) as exc:
        item.update(_failure(exc))
    return item


@api(91, "AlterShareGroupOffsets", (0, 0),
     structs={"AlterShareGroupOffsetsTopic": "AlterShareGroupOffsetsRequestTopic"})
async def handle_alter_share_group_offsets(
    ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> dict[str, Any]:
    return await _change_offsets(ctx, request.group_id, AclOperation.READ, request.topics,
                                 _alter_topic)


@api(92, "DeleteShareGroupOffsets", (0, 0),
     structs={"DeleteShareGroupOffsetsTopic": "DeleteShareGroupOffsetsRequestTopic"})
async def handle_delete_share_group_offsets(
    ctx: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> dict[str, Any]:
    return await _change_offsets(ctx, request.group_id, AclOperation.DELETE, request.topics,
                                 _delete_topic)
