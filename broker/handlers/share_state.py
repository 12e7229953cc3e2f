"""The share coordinator's persister APIs (KIP-932), between brokers: InitializeShareGroupState
(83), ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87).

Thin: a share-partition leader on another broker sends them here when this broker leads the
share-partition's `__share_group_state` partition; `ctx.share_state`
(coordinator/share/coordinator.py) answers. As in Kafka, they are cluster actions (CLUSTER_ACTION
on the cluster), one share-partition per request is what the persister sends (each partition
named is answered on its own), and they are served while `share.version` is at least 1.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from samsa.coordinator.share.coordinator import ShareStateCoordinator, ShareStateError
from samsa.coordinator.share.records import StateBatch
from samsa.protocol.errors import ErrorCode

from ..context import RequestContext, ShareStateContext
from ..security.authorizer import AclOperation, ResourceType
from .declare import api
from .share_groups import _enabled

if TYPE_CHECKING:
    from .requests import (
        DeleteShareGroupStateRequest,
        InitializeShareGroupStateRequest,
        ReadShareGroupStatePartition,
        ReadShareGroupStateRequest,
        ReadShareGroupStateSummaryPartition,
        ReadShareGroupStateSummaryRequest,
        WriteShareGroupStatePartition,
        WriteShareGroupStateRequest,
    )

log = logging.getLogger(__name__)

Key = tuple[str, uuid.UUID, int]  # (group, topic id, partition): a share-partition


class _PartitionData(Protocol):
    """A partition entry of any of these requests."""

    @property
    def partition(self) -> int: ...


P_co = TypeVar("P_co", bound=_PartitionData, covariant=True)


class _TopicData(Protocol[P_co]):
    """A topic entry of any of these requests, with its partition entries."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> tuple[P_co, ...]: ...


def _refused(ctx: ShareStateContext) -> ErrorCode | None:
    if not _enabled(ctx) or ctx.share_state is None:
        return ErrorCode.unsupported_version
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        return ErrorCode.cluster_authorization_failed
    return None


async def _each(ctx: ShareStateContext, group_id: str,
                topics: Iterable[_TopicData[_PartitionData]],
                run: Callable[[ShareStateCoordinator, Key, Any],
                              Awaitable[dict[str, Any] | None]],
                error_fields: dict[str, Any]) -> dict[str, Any]:
    """Each partition's entry: `run`'s fields (none: None) from the share coordinator, or the
    error and `error_fields`."""
    refused = _refused(ctx)
    state = ctx.share_state
    results = []
    for t in topics:
        partitions = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition": p.partition}
            if refused is not None or state is None:  # (no coordinator: refused already)
                code: ErrorCode = refused or ErrorCode.unsupported_version
                message: str | None = None
            elif t.topic_id is None:
                code, message = ErrorCode.invalid_request, "The topic id cannot be null."
            else:
                try:
                    entry.update(await run(state, (group_id, t.topic_id, p.partition), p) or {})
                    code, message = ErrorCode.none, None
                except ShareStateError as exc:
                    code, message = exc.error_code, exc.message
            if code != ErrorCode.none:
                entry.update(error_fields)
            entry.update(error_code=code, error_message=message)
            partitions.append(entry)
        results.append({"topic_id": t.topic_id, "partitions": partitions})
    return {"results": results}


@api(83, "InitializeShareGroupState", (0, 0),
     structs={"InitializeShareGroupStatePartition": "PartitionData"})
async def handle_initialize_share_group_state(
    ctx: RequestContext, request: InitializeShareGroupStateRequest
) -> dict[str, Any]:
    return await _each(ctx, request.group_id, request.topics, lambda state, key, p:
                       state.initialize(key, p.state_epoch, p.start_offset), {})


@api(84, "ReadShareGroupState", (0, 0), structs={"ReadShareGroupStatePartition": "PartitionData"})
async def handle_read_share_group_state(
    ctx: RequestContext, request: ReadShareGroupStateRequest
) -> dict[str, Any]:
    async def run(state: ShareStateCoordinator, key: Key,
                  p: ReadShareGroupStatePartition) -> dict[str, Any]:
        r = await state.read(key, p.leader_epoch)
        return {"state_epoch": r.state_epoch, "start_offset": r.start_offset,
                "state_batches": [_batch(b) for b in r.batches]}

    return await _each(ctx, request.group_id, request.topics, run,
                       {"state_epoch": 0, "start_offset": -1, "state_batches": []})


@api(85, "WriteShareGroupState", (0, 1), structs={"WriteShareGroupStatePartition": "PartitionData"})
async def handle_write_share_group_state(
    ctx: RequestContext, request: WriteShareGroupStateRequest
) -> dict[str, Any]:
    async def run(state: ShareStateCoordinator, key: Key,
                  p: WriteShareGroupStatePartition) -> None:
        batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                   for b in p.state_batches]
        await state.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches,
                          int(getattr(p, "delivery_complete_count", -1)))  # v0: unknown

    return await _each(ctx, request.group_id, request.topics, run, {})


@api(86, "DeleteShareGroupState", (0, 0),
     structs={"DeleteShareGroupStatePartition": "PartitionData"})
async def handle_delete_share_group_state(
    ctx: RequestContext, request: DeleteShareGroupStateRequest
) -> dict[str, Any]:
    return await _each(ctx, request.group_id, request.topics,
                       lambda state, key, p: state.delete(key), {})


@api(87, "ReadShareGroupStateSummary", (0, 1),
     structs={"ReadShareGroupStateSummaryPartition": "PartitionData"})
async def handle_read_share_group_state_summary(
    ctx: RequestContext, request: ReadShareGroupStateSummaryRequest
) -> dict[str, Any]:
    async def run(state: ShareStateCoordinator, key: Key,
                  p: ReadShareGroupStateSummaryPartition) -> dict[str, Any]:
        r = state.summary(key)
        return {"state_epoch": r.state_epoch, "leader_epoch": r.leader_epoch,
                "start_offset": r.start_offset,
                "delivery_complete_count": r.delivery_complete_count}

    return await _each(ctx, request.group_id, request.topics, run,
                       {"state_epoch": 0, "leader_epoch": -1, "start_offset": -1,
                        "delivery_complete_count": -1})


def _batch(b: StateBatch) -> dict[str, int]:
    return {"first_offset": b.first_offset, "last_offset": b.last_offset,
            "delivery_state": b.delivery_state, "delivery_count": b.delivery_count}
