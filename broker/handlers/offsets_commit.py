"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47), TxnOffsetCommit (28).

Thin: decode version differences, call `broker.groups` (coordinator/group), shape the answer.
"""

from __future__ import annotations

from typing import Any

from coordinator.group import GroupError, OffsetCommitEntry
from protocol.codec import millis

from .common import field


def _entries(request: Any) -> list[OffsetCommitEntry]:
    return [
        OffsetCommitEntry(t.name, p.partition_index, p.committed_offset,
                          field(p, "committed_leader_epoch", -1), p.committed_metadata)
        for t in request.topics
        for p in t.partitions
    ]


def _topics_result(request: Any, errors: dict[tuple[str, int], int]) -> list[dict[str, Any]]:
    return [
        {"name": t.name,
         "partitions": [{"partition_index": p.partition_index,
                         "error_code": errors.get((t.name, p.partition_index), 0)}
                        for p in t.partitions]}
        for t in request.topics
    ]


async def handle_offset_commit(ctx: Any, request: Any) -> dict[str, Any]:
    retention = field(request, "retention_time", None)
    errors = ctx.broker.groups.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        field(request, "group_instance_id", None),
        _entries(request),
        version=ctx.version,
        retention_ms=millis(retention) if retention is not None else -1,
    )
    await _replicated(ctx.broker, request.group_id, errors, request)
    return {"throttle_time": 0, "topics": _topics_result(request, errors)}


async def handle_txn_offset_commit(ctx: Any, request: Any) -> dict[str, Any]:
    errors = ctx.broker.groups.commit_offsets(
        request.group_id,
        field(request, "generation_id", -1),
        field(request, "member_id", "") or "",
        field(request, "group_instance_id", None),
        _entries(request),
        version=ctx.version,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
    )
    await _replicated(ctx.broker, request.group_id, errors, request)
    return {"throttle_time": 0, "topics": _topics_result(request, errors)}


async def _replicated(
    broker: Any, group_id: str, errors: dict[tuple[str, int], int], request: Any
) -> None:
    """Commits are answered once the ISR of the group's offsets partition has them."""
    if all(errors.get((t.name, p.partition_index), 0) for t in request.topics
           for p in t.partitions):
        return  # nothing was written
    groups = broker.groups
    code = await groups.topic.await_replication(groups.partition_for(group_id),
                                                groups.commit_timeout_ms / 1000)
    if code:
        for t in request.topics:
            for p in t.partitions:
                errors.setdefault((t.name, p.partition_index), code)
                if errors[(t.name, p.partition_index)] == 0:
                    errors[(t.name, p.partition_index)] = code


def _fetch_group(coordinator: Any, group_id: str, topics: Any,
                 require_stable: bool) -> tuple[int, list[dict[str, Any]]]:
    wanted = None
    if topics is not None:
        wanted = [(t.name, list(t.partition_indexes)) for t in topics]
    try:
        return 0, coordinator.fetch_offsets(group_id, wanted, require_stable)
    except GroupError as exc:
        return exc.error_code, []


async def handle_offset_fetch(ctx: Any, request: Any) -> dict[str, Any]:
    coordinator = ctx.broker.groups
    require_stable = bool(field(request, "require_stable", False))
    if ctx.version >= 8:
        groups = []
        for g in request.groups:
            error, topics = _fetch_group(coordinator, g.group_id, g.topics, require_stable)
            groups.append({"group_id": g.group_id, "error_code": error, "topics": topics})
        return {"throttle_time": 0, "groups": groups}
    error, topics = _fetch_group(coordinator, request.group_id, request.topics, require_stable)
    if error and ctx.version < 2:
        # v1 has no top-level error: report it on every requested partition
        topics = [
            {"name": t.name,
             "partitions": [{"partition_index": p, "committed_offset": -1, "metadata": "",
                             "error_code": error} for p in t.partition_indexes]}
            for t in request.topics or ()
        ]
    return {"throttle_time": 0, "error_code": error, "topics": topics}


async def handle_offset_delete(ctx: Any, request: Any) -> dict[str, Any]:
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    error, results = ctx.broker.groups.delete_offsets(request.group_id, wanted)
    topics = []
    if not error:
        topics = [
            {"name": t.name,
             "partitions": [{"partition_index": p.partition_index,
                             "error_code": results.get((t.name, p.partition_index), 0)}
                            for p in t.partitions]}
            for t in request.topics
        ]
    return {"throttle_time": 0, "error_code": error, "topics": topics}
