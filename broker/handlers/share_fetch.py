"""Share groups (KIP-932) on the partition leader: ShareFetch (78) and ShareAcknowledge (79).

Thin: check the gate, the session and the ACLs, then ask `ctx.shares` (broker/share/fetch.py)
to apply acknowledgements and acquire records. A ShareFetch first applies its piggy-backed
acknowledgements, then acquires records on every partition of the member's share session,
waiting like Fetch (max wait, min bytes) while nothing is acquired. Epoch -1 (ShareFetch or
ShareAcknowledge) applies the acknowledgements, then closes the session and releases the
member's other records; so does the close of the connection that opened the session (as
Kafka). Served only while `share.version` is at least 1.

Versions: v1-v2 of both (v0 was Kafka's early access); v2 renews acknowledgements (KIP-1222),
and both of its acquire modes never exceed MaxRecords.

A member must belong to the share group when this broker coordinates the group; with the
group's coordinator on another broker the leader cannot tell and serves it (as the locks
still bound what a stranger can hold).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext, ShareFetchContext
from ..replication.partition import READ_COMMITTED, READ_UNCOMMITTED, Partition
from ..security.authorizer import AclOperation, ResourceType
from ..share.fetch import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    LedSharePartition,
    ShareFetcher,
    SharePartitionUnavailable,
    ShareSessionError,
)
from .common import PARTITION_ERRORS, error_code_of, field, leader_endpoints
from .consumer_groups import cached_group_configs
from .declare import api
from .share_groups import _enabled

if TYPE_CHECKING:
    from .requests import ShareAcknowledgeRequest, ShareFetchRequest

log = logging.getLogger(__name__)


TopicPartition = tuple[uuid.UUID, int]
_NO_TOPIC = uuid.UUID(int=0)


def _tp(topic_id: uuid.UUID | None, index: int) -> TopicPartition:
    return (topic_id or _NO_TOPIC, int(index))


async def _group_settings(ctx: ShareFetchContext, group_id: str) -> tuple[str, int]:
    """The group's share.auto.offset.reset and isolation level (its group configs)."""
    configs = await cached_group_configs(ctx, group_id)
    reset = configs.get("share.auto.offset.reset", "latest")
    isolation = (READ_COMMITTED if configs.get("share.isolation.level") == "read_committed"
                 else READ_UNCOMMITTED)
    return reset, isolation


def _top_error(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message,
            "acquisition_lock_timeout": 0, "responses": [], "node_endpoints": []}


def _admit(ctx: ShareFetchContext, group_id: str | None, member_id: str | None,
           epoch: int) -> tuple[ShareFetcher, str, str] | dict[str, Any]:
    """ShareFetch's and ShareAcknowledge's checks before the session: the fetcher, group and
    member the request may go on with, or its top-level error answer."""
    shares = ctx.shares
    if not _enabled(ctx) or shares is None:
        return _top_error(ErrorCode.unsupported_version, "Share groups are not enabled.")
    if not group_id or not member_id:
        return _top_error(ErrorCode.invalid_request, "GroupId and MemberId must be set.")
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return _top_error(ErrorCode.group_authorization_failed)
    if epoch != FINAL_EPOCH and ctx.groups.share_member_known(group_id, member_id) is False:
        return _top_error(ErrorCode.unknown_member_id,
                          f"Member {member_id} is not in share group {group_id}.")
    return shares, group_id, member_id


class _Partitions:
    """Looks up the partitions a request names: the leader's replica, or an error code."""

    def __init__(self, ctx: ShareFetchContext, topic_ids: Iterable[uuid.UUID | None]) -> None:
        self.ctx = ctx
        self.names: dict[uuid.UUID, str | None] = {}
        for tid in topic_ids:
            if tid is not None and tid not in self.names:
                self.names[tid] = ctx.store.topic_name_by_id(tid)
        known = {n for n in self.names.values() if n is not None}
        self.denied = known - set(ctx.authorized(AclOperation.READ, ResourceType.TOPIC, known))

    def lookup(self, tp: TopicPartition) -> Partition | ErrorCode:
        name = self.names.get(tp[0])
        if name is None:
            return ErrorCode.unknown_topic_id
        if name in self.denied:
            return ErrorCode.topic_authorization_failed
        try:
            partition = self.ctx.replicas.leader_partition(name, tp[1])
        except PARTITION_ERRORS as exc:
            return ErrorCode(error_code_of(exc))
        return partition


def _leader(ctx: ShareFetchContext, p: Partition | ErrorCode, tp: TopicPartition,
            names: dict[uuid.UUID, str | None]) -> dict[str, int]:
    if isinstance(p, Partition):
        return {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch}
    name = names.get(tp[0])
    leader, epoch = ctx.replicas.current_leader(name, tp[1]) if name is not None else (-1, -1)
    return {"leader_id": leader, "leader_epoch": epoch}


async def _acknowledge(ctx: ShareFetchContext, shares: ShareFetcher, parts: _Partitions,
                       group_id: str, member_id: str, reset: str, topics: Sequence[Any],
                       renew: bool,
                       ) -> dict[TopicPartition, tuple[ErrorCode, Partition | ErrorCode]]:
    """Apply the acknowledgements, then have the persister write every share-partition they
    changed (at once): each is answered only once its state is durable."""
    out: dict[TopicPartition, tuple[ErrorCode, Partition | ErrorCode]] = {}
    written: list[tuple[TopicPartition, Partition, LedSharePartition]] = []
    for t in topics:
        for p in t.partitions:
            if not p.acknowledgement_batches:
                continue
            tp = _tp(t.topic_id, p.partition_index)
            partition = parts.lookup(tp)
            if not isinstance(partition, Partition):
                out[tp] = (partition, partition)
                continue
            try:
                led = await shares.share_partition(group_id, partition, reset)
            except SharePartitionUnavailable as exc:
                out[tp] = (exc.error_code, partition)
                continue
            code = shares.acknowledge(led, partition, member_id, p.acknowledgement_batches,
                                      renew)
            out[tp] = (code, partition)
            written.append((tp, partition, led))
    codes = await asyncio.gather(*(shares.persist(led, partition.topic)
                                   for _, partition, led in written))
    for (tp, partition, _), code in zip(written, codes, strict=True):
        if code != ErrorCode.none:
            out[tp] = (code, partition)
    return out


@api(78, "ShareFetch", (1, 2))
async def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequest) -> dict[str, Any]:
    epoch = request.share_session_epoch
    admitted = _admit(ctx, request.group_id, request.member_id, epoch)
    if isinstance(admitted, dict):
        return admitted
    shares, group_id, member_id = admitted
    wanted = [_tp(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [_tp(t.topic_id, i) for t in request.forgotten_topics_data for i in t.partitions]
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    # v2 (KIP-1222): a request renewing locks only acknowledges; it must ask for no records
    renew: bool = field(request, "is_renew_ack", False)
    if renew and (request.max_wait.total_seconds() or request.min_bytes or request.max_bytes
                  or request.max_records):
        return _top_error(ErrorCode.invalid_request,
                          "MaxWaitMs, MinBytes, MaxBytes and MaxRecords must be 0 with "
                          "IsRenewAck.")
    try:
        if epoch == INITIAL_EPOCH:
            if has_acks:
                return _top_error(ErrorCode.invalid_request,
                                  "Acknowledgements in the request that opens a session.")
            session = shares.open_session(group_id, member_id, wanted,
                                          f"{ctx.listener} {ctx.peer}")
        else:
            if epoch == FINAL_EPOCH and wanted and not has_acks:
                return _top_error(ErrorCode.invalid_request,
                                  "Partitions to fetch in the request that closes a session.")
            session = shares.session(group_id, member_id, epoch)
            if epoch != FINAL_EPOCH:
                for tp in forgotten:
                    session.partitions.pop(tp, None)
                session.partitions.update(dict.fromkeys(wanted))
    except ShareSessionError as exc:
        return _top_error(exc.error_code, str(exc))
    reset, isolation = await _group_settings(ctx, group_id)
    ack_ids = [t.topic_id for t in request.topics]
    parts = _Partitions(ctx, [*ack_ids, *(tp[0] for tp in session.partitions)])
    acks = await _acknowledge(ctx, shares, parts, group_id, member_id, reset, request.topics,
                              renew)
    results: dict[TopicPartition, dict[str, Any]] = {}
    for tp, (ack_code, p) in acks.items():
        results[tp] = _partition_entry(ctx, tp, p, parts)
        results[tp]["acknowledge_error_code"] = ack_code
    if epoch == FINAL_EPOCH:
        shares.close_session(group_id, member_id)
    if epoch == FINAL_EPOCH or renew:
        return _fetch_response(ctx, shares, results)
    max_bytes = max(0, min(request.max_bytes, ctx.config["fetch.max.bytes"]))
    max_records = request.max_records if request.max_records > 0 else 500
    deadline = time.monotonic() + max(0.0, request.max_wait.total_seconds())
    full = epoch == INITIAL_EPOCH
    total = 0
    while True:
        leaders, errors = [], False
        for tp in session.partitions:
            p = parts.lookup(tp)
            entry = results.get(tp) or _partition_entry(ctx, tp, p, parts)
            if not isinstance(p, Partition):
                errors = True
                results[tp] = entry
                continue
            leaders.append(p)
            if total >= max_bytes or max_records <= 0:
                continue
            try:
                led = await shares.share_partition(group_id, p, reset)
            except SharePartitionUnavailable as exc:
                entry["error_code"] = exc.error_code
                results[tp] = entry
                errors = True
                continue
            records, ranges = shares.acquire(led, p, member_id, max_records,
                                             max_bytes - total, isolation)
            if ranges:
                entry["records"] += records
                entry["acquired_records"] += ranges
                total += len(records)
                max_records -= sum(r["last_offset"] - r["first_offset"] + 1 for r in ranges)
                results[tp] = entry
            elif full:
                results[tp] = entry
        remaining = deadline - time.monotonic()
        if total >= max(1, request.min_bytes) or errors or remaining <= 0 or not leaders:
            return _fetch_response(ctx, shares, results)
        await ctx.replicas.wait_for_data(leaders, remaining)
        if shares.sessions.get((group_id, member_id)) is not session:
            return _fetch_response(ctx, shares, results)  # closed (or replaced) meanwhile


def _partition_entry(ctx: ShareFetchContext, tp: TopicPartition, p: Partition | ErrorCode,
                     parts: _Partitions) -> dict[str, Any]:
    code = ErrorCode.none if isinstance(p, Partition) else p
    return {"partition_index": tp[1], "error_code": code, "error_message": None,
            "acknowledge_error_code": ErrorCode.none, "acknowledge_error_message": None,
            "current_leader": _leader(ctx, p, tp, parts.names), "records": b"",
            "acquired_records": []}


def _fetch_response(ctx: ShareFetchContext, shares: ShareFetcher,
                    results: dict[TopicPartition, dict[str, Any]]) -> dict[str, Any]:
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (tid, _), entry in results.items():
        topics.setdefault(tid, []).append(entry)
    moved = [e["current_leader"]["leader_id"] for e in results.values()
             if e["error_code"] == ErrorCode.not_leader_or_follower]
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "acquisition_lock_timeout": shares.lock_ms,
            "responses": [{"topic_id": tid, "partitions": ps} for tid, ps in topics.items()],
            "node_endpoints": leader_endpoints(ctx, moved)}


@api(79, "ShareAcknowledge", (1, 2))
async def handle_share_acknowledge(
    ctx: RequestContext, request: ShareAcknowledgeRequest
) -> dict[str, Any]:
    epoch = request.share_session_epoch
    admitted = _admit(ctx, request.group_id, request.member_id, epoch)
    if isinstance(admitted, dict):
        return admitted
    shares, group_id, member_id = admitted
    try:
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError("ShareAcknowledge cannot open a share session.",
                                    ErrorCode.invalid_share_session_epoch)
        shares.session(group_id, member_id, epoch)
    except ShareSessionError as exc:
        return _top_error(exc.error_code, str(exc))
    reset, _ = await _group_settings(ctx, group_id)
    parts = _Partitions(ctx, [t.topic_id for t in request.topics])
    acks = await _acknowledge(ctx, shares, parts, group_id, member_id, reset, request.topics,
                              field(request, "is_renew_ack", False))
    if epoch == FINAL_EPOCH:
        shares.close_session(group_id, member_id)
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    moved = []
    for tp, (ack_code, p) in acks.items():
        leader = _leader(ctx, p, tp, parts.names)
        if ack_code == ErrorCode.not_leader_or_follower:
            moved.append(leader["leader_id"])
        topics.setdefault(tp[0], []).append({
            "partition_index": tp[1], "error_code": ack_code, "error_message": None,
            "current_leader": leader})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "acquisition_lock_timeout": shares.lock_ms,  # (v2+)
            "responses": [{"topic_id": tid, "partitions": ps} for tid, ps in topics.items()],
            "node_endpoints": leader_endpoints(ctx, moved)}
