"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47), TxnOffsetCommit (28).

Thin: decode version differences, call `ctx.groups` (coordinator/group), shape the answer.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from coordinator.group import GroupCoordinator, GroupError, OffsetCommitEntry
from protocol.codec import millis
from protocol.errors import ErrorCode

from ..context import RequestContext
from .common import field

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


def _entries(
    ctx: RequestContext, request: OffsetCommitRequest | TxnOffsetCommitRequest
) -> tuple[list[OffsetCommitEntry], dict[tuple[str, int], int]]:
    """The entries to commit, and the error of each partition that does not exist.

    As Kafka's KafkaApis (every version of OffsetCommit and TxnOffsetCommit): a partition of
    an unknown topic, or beyond its topic's partition count, is answered
    UNKNOWN_TOPIC_OR_PARTITION and not committed.
    """
    entries: list[OffsetCommitEntry] = []
    unknown: dict[tuple[str, int], int] = {}
    for t in request.topics:
        state = ctx.store.topic(t.name)
        for p in t.partitions:
            if state is None or p.partition_index not in state.partitions:
                unknown[(t.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
                continue
            entries.append(OffsetCommitEntry(t.name, p.partition_index, p.committed_offset,
                                             field(p, "committed_leader_epoch", -1),
                                             p.committed_metadata))
    return entries, unknown


def _topics_result(
    request: OffsetCommitRequest | TxnOffsetCommitRequest, errors: dict[tuple[str, int], int]
) -> list[dict[str, Any]]:
    return [
        {"name": t.name,
         "partitions": [{"partition_index": p.partition_index,
                         "error_code": errors.get((t.name, p.partition_index),
                                                     ErrorCode.none)}
                        for p in t.partitions]}
        for t in request.topics
    ]


async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> dict[str, Any]:
    retention: timedelta | None = field(request, "retention_time", None)
    entries, unknown = _entries(ctx, request)
    if not entries:  # Kafka answers without asking the coordinator
        return {"throttle_time": 0, "topics": _topics_result(request, unknown)}
    errors = await ctx.groups.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        field(request, "group_instance_id", None),
        entries,
        version=ctx.version,
        retention_ms=millis(retention) if retention is not None else -1,
    )
    return {"throttle_time": 0, "topics": _topics_result(request, {**errors, **unknown})}


async def handle_txn_offset_commit(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> dict[str, Any]:
    entries, unknown = _entries(ctx, request)
    if not entries:
        return {"throttle_time": 0, "topics": _topics_result(request, unknown)}
    errors = await ctx.groups.commit_offsets(
        request.group_id,
        field(request, "generation_id", -1),
        field(request, "member_id", "") or "",
        field(request, "group_instance_id", None),
        entries,
        version=ctx.version,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
    )
    return {"throttle_time": 0, "topics": _topics_result(request, {**errors, **unknown})}


def _fetch_group(coordinator: GroupCoordinator, group_id: str,
                 topics: list[tuple[str, list[int]]] | None,
                 require_stable: bool) -> tuple[int, list[dict[str, Any]]]:
    try:
        return ErrorCode.none, coordinator.fetch_offsets(group_id, topics, require_stable)
    except GroupError as exc:
        return exc.error_code, []


async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> dict[str, Any]:
    coordinator = ctx.groups
    require_stable = bool(field(request, "require_stable", False))
    wanted: list[tuple[str, list[int]]] | None
    if _batched(request):
        groups = []
        for g in request.groups:
            wanted = None if g.topics is None else [
                (t.name, list(t.partition_indexes)) for t in g.topics
            ]
            error, topics = _fetch_group(coordinator, g.group_id, wanted, require_stable)
            groups.append({"group_id": g.group_id, "error_code": error, "topics": topics})
        return {"throttle_time": 0, "groups": groups}
    wanted = None if request.topics is None else [
        (t.name, list(t.partition_indexes)) for t in request.topics
    ]
    error, topics = _fetch_group(coordinator, request.group_id, wanted, require_stable)
    if error != ErrorCode.none and ctx.version < 2:
        # v1 has no top-level error: report it on every requested partition
        topics = [
            {"name": t.name,
             "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": "",
                             "error_code": error} for p in t.partition_indexes]}
            for t in request.topics or ()
        ]
    return {"throttle_time": 0, "error_code": error, "topics": topics}


async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> dict[str, Any]:
    wanted: list[tuple[str, int]] = [
        (t.name, p.partition_index) for t in request.topics for p in t.partitions
    ]
    error, results = await ctx.groups.delete_offsets(request.group_id, wanted)
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
