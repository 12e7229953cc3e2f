"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47), TxnOffsetCommit (28).

OffsetCommit v10 and TxnOffsetCommit v6 (KIP-1319; kio lacks it: protocol/own_versions.py) name
topics by id; TxnOffsetCommit v6 also learns GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH, which
older versions get as ILLEGAL_GENERATION (the coordinator's new_commit_errors).

Thin: decode version differences, call `ctx.groups` (coordinator/group), shape the answer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from samsa.coordinator.group import GroupCoordinator, GroupError, OffsetCommitEntry
from samsa.protocol.codec import millis
from samsa.protocol.errors import ErrorCode

from ..context import GroupContext, RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .common import field
from .declare import api
from .transactions import verify_offsets_partition

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from .requests import (
        OffsetCommitRequest,
        OffsetDeleteRequest,
        OffsetFetchRequest,
        OffsetFetchRequestBatched,
        TxnOffsetCommitRequest,
    )


def _batched(request: OffsetFetchRequest) -> TypeIs[OffsetFetchRequestBatched]:
    """v8+ ask for several groups at once."""
    return request.__version__ >= 8


@dataclass(frozen=True, slots=True)
class _Topic:
    """A topic of a commit: by name, or (OffsetCommit v10+, TxnOffsetCommit v6+) by id,
    resolved to its name (None: an id this cluster does not know)."""

    name: str | None
    topic_id: uuid.UUID | None
    partitions: tuple[Any, ...]


def _topics(ctx: GroupContext,
            request: OffsetCommitRequest | TxnOffsetCommitRequest) -> list[_Topic]:
    out = []
    for t in request.topics:
        name: str | None = field(t, "name", None)
        if name is not None:
            out.append(_Topic(name, None, tuple(t.partitions)))
            continue
        # by id only (KIP-848, KIP-1319): an unknown (or zero) id has no name
        topic_id: uuid.UUID | None = field(t, "topic_id", None)
        out.append(_Topic(None if topic_id is None else ctx.store.topic_name_by_id(topic_id),
                          topic_id, tuple(t.partitions)))
    return out


def _entries(
    ctx: GroupContext, topics: list[_Topic]
) -> tuple[list[OffsetCommitEntry], dict[tuple[str, int], int]]:
    """The entries to commit, and the error of each partition that does not exist.

    As Kafka's KafkaApis (every version of OffsetCommit and TxnOffsetCommit): a partition of
    an unknown topic, or beyond its topic's partition count, is answered
    UNKNOWN_TOPIC_OR_PARTITION and not committed (UNKNOWN_TOPIC_ID for an unknown id, v10+).
    """
    entries: list[OffsetCommitEntry] = []
    unknown: dict[tuple[str, int], int] = {}
    readable = set(ctx.authorized(AclOperation.READ, ResourceType.TOPIC,
                                  {t.name for t in topics if t.name is not None}))
    for t in topics:
        if t.name is None:
            continue  # answered UNKNOWN_TOPIC_ID by _topics_result
        state = ctx.store.topic(t.name)
        for p in t.partitions:
            if t.name not in readable:  # Kafka: READ on each topic
                unknown[(t.name, p.partition_index)] = ErrorCode.topic_authorization_failed
                continue
            if state is None or p.partition_index not in state.partitions:
                unknown[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
                continue
            entries.append(OffsetCommitEntry(t.name, p.partition_index, p.committed_offset,
                                             field(p, "committed_leader_epoch", -1),
                                             p.committed_metadata))
    return entries, unknown


def _every_partition(topics: list[_Topic], code: ErrorCode) -> dict[str, Any]:
    """The answer of a commit refused whole (Kafka's getErrorResponse)."""
    errors: dict[tuple[str, int], int] = {
        (t.name, p.partition_index): code
        for t in topics if t.name is not None for p in t.partitions}
    return {"throttle_time": 0, "topics": _topics_result(topics, errors)}


def _topics_result(
    topics: list[_Topic], errors: dict[tuple[str, int], int]
) -> list[dict[str, Any]]:
    return [
        {"name": t.name or "",
         "topic_id": t.topic_id,
         "partitions": [{"partition_index": p.partition_index,
                         "error_code": (ErrorCode.unknown_topic_id if t.name is None else
                                        errors.get((t.name, p.partition_index),
                                                   ErrorCode.none))}
                        for p in t.partitions]}
        for t in topics
    ]


@api(8, "OffsetCommit", (2, 10))
async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> dict[str, Any]:
    retention: timedelta | None = field(request, "retention_time", None)
    topics = _topics(ctx, request)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _every_partition(topics, ErrorCode.group_authorization_failed)
    entries, unknown = _entries(ctx, topics)
    if not entries:  # Kafka answers without asking the coordinator
        return {"throttle_time": 0, "topics": _topics_result(topics, unknown)}
    errors = await ctx.groups.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        field(request, "group_instance_id", None),
        entries,
        version=ctx.version,
        retention_ms=millis(retention) if retention is not None else -1,
    )
    return {"throttle_time": 0, "topics": _topics_result(topics, {**errors, **unknown})}


@api(28, "TxnOffsetCommit", (0, 6))
async def handle_txn_offset_commit(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> dict[str, Any]:
    # Kafka: WRITE on the transactional id, READ on the group, READ on each topic.
    topics = _topics(ctx, request)
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                         request.transactional_id):
        return _every_partition(topics, ErrorCode.transactional_id_authorization_failed)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _every_partition(topics, ErrorCode.group_authorization_failed)
    entries, unknown = _entries(ctx, topics)
    if not entries:
        return {"throttle_time": 0, "topics": _topics_result(topics, unknown)}
    code, guard, verify = await verify_offsets_partition(
        ctx, request.transactional_id, request.producer_id, request.producer_epoch,
        request.group_id, ctx.version)
    if code != ErrorCode.none:
        return _every_partition(topics, ErrorCode(code))
    errors = await ctx.groups.commit_offsets(
        request.group_id,
        field(request, "generation_id", -1),
        field(request, "member_id", "") or "",
        field(request, "group_instance_id", None),
        entries,
        version=ctx.version,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        verify=verify,
        guard=guard,
    )
    return {"throttle_time": 0, "topics": _topics_result(topics, {**errors, **unknown})}


def _fetch_group(ctx: GroupContext, group_id: str,
                 topics: list[tuple[str, list[int]]] | None,
                 require_stable: bool, member_id: str | None = None,
                 member_epoch: int = -1) -> tuple[int, list[dict[str, Any]]]:
    """One group's committed offsets. Kafka's authorization: DESCRIBE on the group, and only
    topics the principal may describe (others asked for answer TOPIC_AUTHORIZATION_FAILED,
    others of the whole group's are left out)."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.group_authorization_failed, []
    coordinator: GroupCoordinator = ctx.groups
    denied: list[tuple[str, list[int]]] = []
    if topics is not None:
        allowed = set(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                     {t for t, _ in topics}))
        denied = [(t, ps) for t, ps in topics if t not in allowed]
        topics = [(t, ps) for t, ps in topics if t in allowed]
    try:
        out = coordinator.fetch_offsets(group_id, topics, require_stable, member_id,
                                        member_epoch)
    except GroupError as exc:
        return exc.error_code, []
    if topics is None:
        out = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, out,
                             lambda t: str(t["name"]), log_denied=False)
    out += [{"name": t, "partitions": [
        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
         "metadata": "", "error_code": ErrorCode.topic_authorization_failed} for p in ps]}
        for t, ps in denied]
    return ErrorCode.none, out


def _with_topic_ids(ctx: GroupContext, topics: list[dict[str, Any]],
                    unknown_ids: list[tuple[uuid.UUID | None, list[int]]]
                    ) -> list[dict[str, Any]]:
    """OffsetFetch v10+: each topic answered by its id (one deleted since its offsets were
    committed has none and is left out), and each requested id this cluster does not know
    answered UNKNOWN_TOPIC_ID."""
    out = []
    for t in topics:
        state = ctx.store.topic(str(t["name"]))
        if state is not None:
            out.append({**t, "topic_id": state.topic_id})
    out += [{"topic_id": topic_id, "partitions": [
        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
         "metadata": "", "error_code": ErrorCode.unknown_topic_id} for p in ps]}
        for topic_id, ps in unknown_ids]
    return out


@api(9, "OffsetFetch", (1, 10), families={"OffsetFetchRequestBatched": (8, 10)})
async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> dict[str, Any]:
    require_stable = bool(field(request, "require_stable", False))
    wanted: list[tuple[str, list[int]]] | None
    if _batched(request):
        groups = []
        by_id = ctx.version >= 10  # KIP-848: topics by id only
        for g in request.groups:
            unknown_ids: list[tuple[uuid.UUID | None, list[int]]] = []
            if g.topics is None:
                wanted = None
            elif by_id:
                wanted = []
                for t in g.topics:
                    topic_id: uuid.UUID | None = field(t, "topic_id", None)
                    name = None if topic_id is None else ctx.store.topic_name_by_id(topic_id)
                    if name is None:
                        unknown_ids.append((topic_id, list(t.partition_indexes)))
                    else:
                        wanted.append((name, list(t.partition_indexes)))
            else:
                wanted = [(field(t, "name", ""), list(t.partition_indexes)) for t in g.topics]
            # v9+: a consumer-protocol member says who it is (KIP-848)
            error, topics = _fetch_group(ctx, g.group_id, wanted, require_stable,
                                         field(g, "member_id", None),
                                         field(g, "member_epoch", -1))
            if by_id and error == ErrorCode.none:
                topics = _with_topic_ids(ctx, topics, unknown_ids)
            groups.append({"group_id": g.group_id, "error_code": error, "topics": topics})
        return {"throttle_time": 0, "groups": groups}
    wanted = None if request.topics is None else [
        (t.name, list(t.partition_indexes)) for t in request.topics
    ]
    error, topics = _fetch_group(ctx, request.group_id, wanted, require_stable)
    if error != ErrorCode.none and ctx.version < 2:
        # v1 has no top-level error: report it on every requested partition
        topics = [
            {"name": t.name,
             "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": "",
                             "error_code": error} for p in t.partition_indexes]}
            for t in request.topics or ()
        ]
    return {"throttle_time": 0, "error_code": error, "topics": topics}


@api(47, "OffsetDelete", (0, 0))
async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> dict[str, Any]:
    # Kafka: DELETE on the group, READ on each topic.
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed,
                "topics": []}
    readable = set(ctx.authorized(AclOperation.READ, ResourceType.TOPIC,
                                  {t.name for t in request.topics}))
    wanted: list[tuple[str, int]] = [
        (t.name, p.partition_index) for t in request.topics for p in t.partitions
        if t.name in readable
    ]
    error, results = await ctx.groups.delete_offsets(request.group_id, wanted)
    results = {**results, **{(t.name, p.partition_index): ErrorCode.topic_authorization_failed
                             for t in request.topics for p in t.partitions
                             if t.name not in readable}}
    topics = []
    if error == ErrorCode.none:
        topics = [
            {"name": t.name,
             "partitions": [{"partition_index": p.partition_index,
                             "error_code": results.get((t.name, p.partition_index),
                                                      ErrorCode.none)}
                            for p in t.partitions]}
            for t in request.topics
        ]
    return {"throttle_time": 0, "error_code": error, "topics": topics}
