"""Fetch (1): read from leaders up to HW (read_uncommitted) or LSO (read_committed).

Long poll: if fewer than min_bytes are ready, wait until new data arrives on any requested
partition or max_wait passes. v7+ fetchers may keep their partitions in an incremental fetch
session (KIP-227, broker/replication/fetch_sessions.py): then a request names only what changed
and the answer only the partitions with something new.

v13+ name topics by id (an id this cluster does not know, such as the id of a topic deleted
and created again under its name, is UNKNOWN_TOPIC_ID); v15+ carry the follower's id in
replica_state; v16+ answer NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH with the current
leader and its endpoint (KIP-951); v17's replica directory id is for KRaft followers and not
used here, nor v18's high watermark a replica knows (KIP-1166): Kafka reads it only in KRaft's
own fetches, a broker's partitions answer v18 as v17.
"""

from __future__ import annotations

import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache as memoize
from typing import TYPE_CHECKING, Any

from samsa.config.schema import RACK_AWARE_SELECTOR
from samsa.protocol.codec import response_type
from samsa.protocol.encoder import Encoded, encode_entity
from samsa.protocol.errors import ErrorCode
from samsa.protocol.kio_adapter import Entity, schema_fields

from .. import metrics
from ..context import ReplicaContext, RequestContext
from ..network.policy import ApiPolicy
from ..network.quotas import FETCH_BYTES, UndoableAnswer
from ..replication.fetch_sessions import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    FetchContext,
    FetchSession,
    FetchSessionCache,
    PartitionKey,
    RequestedTopic,
    SessionPartition,
)
from ..replication.partition import READ_COMMITTED, Partition, PartitionRead
from ..replication.replica_manager import PartitionError
from ..security.authorizer import AclOperation, ResourceType
from .common import PARTITION_ERRORS, error_code_of, field, name_leaders
from .declare import api

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from .requests import FetchRequest, FetchRequestWithReplicaState


# read_one(partition, fetch offset, last fetched epoch (-1: none), byte limit, is the first
# partition read) -> the partition's response entry
ReadOne = Callable[[Partition, int, int, int, bool], dict[str, Any]]


def _has_replica_state(request: FetchRequest) -> TypeIs[FetchRequestWithReplicaState]:
    """v15+ carry the fetching replica's id in replica_state, older versions in replica_id."""
    return request.__version__ >= 15


FETCH_KEY = 1


@api(FETCH_KEY, "Fetch", (4, 18), families={"FetchRequestWithReplicaState": (15, 18)},
     policy=ApiPolicy(FETCH_BYTES, answer_at_once=True))
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> dict[str, Any]:
    max_wait_s = max(0.0, request.max_wait.total_seconds())
    deadline = time.monotonic() + max_wait_s
    isolation = request.isolation_level
    # Kafka caps every fetch, a follower's too, at the broker's fetch.max.bytes.
    max_bytes: int = min(request.max_bytes, ctx.config["fetch.max.bytes"])
    replica_id = (request.replica_state.replica_id if _has_replica_state(request)
                  else request.replica_id)
    # KIP-903: a follower's broker epoch (-1: not carried), for who may join an ISR
    replica_epoch = (request.replica_state.replica_epoch if _has_replica_state(request)
                     else -1)
    read_one = (_follower_reader(ctx, replica_id, replica_epoch) if replica_id >= 0
                else _consumer_reader(isolation, ctx.zero_copy, _partition_entity(ctx.version)))
    if replica_id < 0 and ctx.quotas is not None and ctx.quotas.active:
        # Kafka caps a consumer's fetch at what its quota allows in one full window
        max_bytes = min(max_bytes, ctx.quotas.max_fetch_bytes(ctx.listener, ctx.principal.name,
                                                              ctx.client_id))
    min_bytes = min(request.min_bytes, max_bytes)
    sessions = ctx.fetch_sessions
    session_epoch: int = field(request, "session_epoch", FINAL_EPOCH)
    context = sessions.context(ctx.version, field(request, "session_id", INVALID_SESSION_ID),
                               session_epoch, replica_id >= 0, _by_topic_key(request.topics),
                               _by_topic_key(field(request, "forgotten_topics_data", ())))
    if context.error != ErrorCode.none:
        return _with_endpoints(ctx, _session_error(context.error, INVALID_SESSION_ID))
    session = context.session
    wanted = (session.topics(ctx.store.topic_name_by_id) if session is not None
              else _wanted_topics(ctx, request))
    # KIP-392, with replica.selector.class set: a consumer's fetch (v11+) may be served by a
    # follower, and a leader with the rack-aware selector points a consumer of a rack at an
    # in-sync replica there. (Kafka's followers serve v11+ consumers whatever the selector;
    # without one Samsa's answer NOT_LEADER_OR_FOLLOWER, sending them to the leader.)
    selector_class = ctx.config["replica.selector.class"]
    from_consumer = replica_id < 0 and ctx.version >= 11 and selector_class is not None
    client_rack: str = field(request, "rack_id", "") or ""
    selector = (_rack_selector(ctx, client_rack) if from_consumer and client_rack
                and selector_class == RACK_AWARE_SELECTOR else None)
    # Kafka's authorization: a follower needs CLUSTER_ACTION on the cluster, a consumer READ
    # on each topic; the others' partitions answer TOPIC_AUTHORIZATION_FAILED.
    denied: set[str] = set()
    if ctx.authorizer is not None:
        names = {name for name, _, _ in wanted if name is not None}
        if replica_id >= 0:
            if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
                denied = names
        else:
            denied = names - set(ctx.authorized(AclOperation.READ, ResourceType.TOPIC, names))
    # An incremental fetch passes over the partitions its fetcher has been told all of
    # (most of them, for a consumer or a follower of many partitions at a low rate) without
    # reading them; a follower's fetch of each is still recorded.
    told_all: Callable[[Partition, SessionPartition], bool] | None = None
    if session is not None and selector is None:
        told_all = (_told_all(isolation) if replica_id < 0
                    else _follower_told_all(replica_id, replica_epoch))
    previous: list[dict[str, Any]] | None = None
    woken: set[tuple[str, int]] = set()
    parked_on: list[Partition] = []
    while True:
        responses, total, leaders, had_error = _read_all(ctx, wanted, max_bytes, read_one,
                                                         denied, from_consumer, selector,
                                                         replica_id, told_all, previous, woken)
        remaining = deadline - time.monotonic()
        if total >= min_bytes or had_error or remaining <= 0 or not leaders:
            return _with_endpoints(ctx, _answer(sessions, context, session_epoch, wanted,
                                                responses))
        # Read again after a wake: only the partitions that woke the fetch, and any that had
        # records (the byte limits are laid out again); a time-out reads everything again.
        # A partition that did not wake it has no new records, and its leadership is the same
        # (a change wakes every fetch parked on it), so its answer is what was read.
        if previous is None:
            parked_on = leaders
        woke = await ctx.replicas.wait_for_data(parked_on, remaining,
                                                follower=replica_id >= 0)
        previous = responses if woke else None
        woken = {(p.topic, p.index) for p in woke}


def _by_topic_key(topics: Iterable[Any]) -> Iterator[tuple[uuid.UUID | str, Sequence[Any]]]:
    """Topics of a request, each by its id (v13+) or name, with their partitions: the ones
    it fetches, or (its forgotten_topics_data, v7+) the ones an incremental request removes
    from its session."""
    for topic in topics:
        yield _topic_key(field(topic, "topic", None), field(topic, "topic_id", None)), \
            topic.partitions


def _topic_key(name: str | None, topic_id: uuid.UUID | None) -> uuid.UUID | str:
    """How a fetch session names a topic: by its id from v13 on, else by its name."""
    return topic_id if topic_id is not None else name or ""


def _session_error(code: ErrorCode, session_id: int) -> dict[str, Any]:
    """A fetch session error: no partitions (Kafka's SessionErrorContext)."""
    return {"throttle_time": 0, "error_code": code, "session_id": session_id, "responses": []}


def _with_endpoints(ctx: ReplicaContext, out: dict[str, Any]) -> dict[str, Any]:
    if ctx.version >= 16:
        out["node_endpoints"] = _leader_hints(ctx, out["responses"])
    return out


def _answer(sessions: FetchSessionCache, context: FetchContext, request_epoch: int,
            wanted: list[RequestedTopic], responses: list[dict[str, Any]]) -> dict[str, Any]:
    """The Fetch answer: a full one as read, opening the session it asked for (if there is
    room); an incremental one pruned to the partitions with something new for its fetcher.
    Either tells the session what its fetcher learns, undone if a quota throttles it."""
    session = context.session
    if session is not None:
        if not sessions.still_current(session, request_epoch):
            return _session_error(ErrorCode.invalid_fetch_session_epoch, session.id)
        return _incremental_answer(session, wanted, responses)
    if not context.opens:
        return {"throttle_time": 0, "error_code": ErrorCode.none,
                "session_id": INVALID_SESSION_ID, "responses": responses}
    partitions: list[tuple[PartitionKey, SessionPartition]] = []
    for (name, topic_id, parts), topic in zip(wanted, responses, strict=True):
        key = _topic_key(name, topic_id)
        for p, answer in zip(parts, topic["partitions"], strict=True):
            cached = SessionPartition.of(p)
            cached.must_answer(answer)
            partitions.append(((key, cached.partition), cached))
    session_id = sessions.open(context, iter(partitions))

    def undo() -> int:  # throttled: no session (Kafka opens none for a throttled fetch)
        sessions.unopen(session_id)
        return INVALID_SESSION_ID

    return UndoableAnswer({"throttle_time": 0, "error_code": ErrorCode.none,
                           "session_id": session_id, "responses": responses}, undo)


def _incremental_answer(session: FetchSession, wanted: list[RequestedTopic],
                        responses: list[dict[str, Any]]) -> dict[str, Any]:
    """The session's partitions that have something new for the fetcher (Kafka's
    IncrementalFetchContext); those answered records go to the back of the session."""
    pruned: list[dict[str, Any]] = []
    told: list[SessionPartition] = []
    to_back = []
    for (name, topic_id, parts), topic in zip(wanted, responses, strict=True):
        kept = []
        for p, answer in zip(parts, topic["partitions"], strict=True):
            if answer is not TOLD_ALREADY and p.must_answer(answer):
                kept.append(answer)
                told.append(p)
                if answer["records"]:
                    to_back.append((_topic_key(name, topic_id), p.partition))
        if kept:
            pruned.append({"topic": topic["topic"], "topic_id": topic["topic_id"],
                           "partitions": kept})
    partitions = session.partitions
    for key in to_back:
        partitions[key] = partitions.pop(key)

    def undo() -> int:  # throttled: what it would have told is told again next time
        for p in told:
            p.told_high_watermark = -1
        return session.id

    return UndoableAnswer({"throttle_time": 0, "error_code": ErrorCode.none,
                           "session_id": session.id, "responses": pruned}, undo)


def _wanted_topics(ctx: ReplicaContext, request: FetchRequest) -> list[RequestedTopic]:
    wanted: list[RequestedTopic] = []
    for topic in request.topics:
        topic_id: uuid.UUID | None = field(topic, "topic_id", None)
        if ctx.version >= 13:
            name = ctx.store.topic_name_by_id(topic_id) if topic_id is not None else None
        else:
            name = field(topic, "topic", None)
        wanted.append((name, topic_id, topic.partitions))
    return wanted


def _leader_hints(ctx: ReplicaContext, responses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """v16+: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its
    leader, and the response lists that leader's endpoint (Kafka's handleFetchRequest)."""
    return name_leaders(ctx, ((topic["topic"], p["partition_index"], p)
                              for topic in responses for p in topic["partitions"]
                              if p["error_code"] in (ErrorCode.not_leader_or_follower,
                                                     ErrorCode.fenced_leader_epoch)))


Selector = Callable[[Partition, int], "int | None"]


def _rack_selector(ctx: ReplicaContext, rack: str) -> Selector:
    """Kafka's RackAwareReplicaSelector (with ReplicaManager.findPreferredReadReplica): for a
    partition led here and a fetch offset, the replica a consumer in `rack` should read from:
    None when the leader is in that rack, else of the live in-sync replicas in that rack that
    have the offset, the one with the highest log end offset (None if there is none)."""
    racks = {b.broker_id: b.rack for b in ctx.store.brokers()}

    def select(partition: Partition, fetch_offset: int) -> int | None:
        if racks.get(ctx.broker_id) == rack:
            return None
        best: tuple[int, int] | None = None  # (log end offset, replica)
        for replica in partition.replicas:
            leo = partition.followers.log_end_offset(replica)
            if (replica in partition.isr and replica != ctx.broker_id
                    and racks.get(replica) == rack and leo >= fetch_offset
                    and (best is None or leo > best[0])):
                best = (leo, replica)
        return None if best is None else best[1]

    return select


def _told_all(isolation: int) -> Callable[[Partition, SessionPartition], bool]:
    """Has a session's consumer been told everything the partition has: it fetches from the
    end of what it may read, and knows the high watermark and log start offset? Then a read
    would answer nothing that the incremental answer keeps. (The last stable offset may be
    below the log start, under an open transaction older than it: an offset there is out of
    range, as Partition.read's own caught-up case checks.)"""
    committed = isolation == READ_COMMITTED

    def told_all(partition: Partition, p: SessionPartition) -> bool:
        log = partition.log
        hw = log.high_watermark
        start = log.log_start_offset
        return (p.told_high_watermark == hw and p.told_log_start_offset == start
                and p.fetch_offset == (log.last_stable_offset if committed else hw)
                and p.fetch_offset >= start and not log.offline)

    return told_all


def _follower_told_all(replica_id: int, replica_epoch: int,
                       ) -> Callable[[Partition, SessionPartition], bool]:
    """`_told_all` for a follower's session: it fetches from our log end, after records of
    our latest epoch (so its log cannot have diverged from ours), and knows the high
    watermark and log start offset. Its fetch is recorded (its position, and its time caught
    up, for the ISR), as a read would record it."""

    def told_all(partition: Partition, p: SessionPartition) -> bool:
        log = partition.log
        latest = log.latest_epoch
        if (p.told_high_watermark == log.high_watermark
                and p.told_log_start_offset == log.log_start_offset
                and p.fetch_offset == log.log_end_offset
                and p.last_fetched_epoch == (-1 if latest is None else latest)
                and not log.offline):
            partition.record_follower_fetch(replica_id, p.fetch_offset, replica_epoch)
            return True
        return False

    return told_all


# The entry of a partition passed over (`_told_all`): left out of the incremental answer.
TOLD_ALREADY: dict[str, Any] = {"records": b""}


def _read_all(
    ctx: ReplicaContext, wanted: list[RequestedTopic], max_bytes: int, read_one: ReadOne,
    denied: set[str] | frozenset[str] = frozenset(), from_consumer: bool = False,
    selector: Selector | None = None, replica_id: int = -1,
    told_all: Callable[[Partition, SessionPartition], bool] | None = None,
    previous: list[dict[str, Any]] | None = None,
    woken: set[tuple[str, int]] | frozenset[tuple[str, int]] = frozenset(),
) -> tuple[list[dict[str, Any]], int, list[Partition], bool]:
    """Look up each requested partition, checking the topic id, then the leader epoch the
    fetcher knows, then that it is led here (a consumer's fetch v11+ may read a follower),
    as Kafka's ReplicaManager.readFromLog and Partition.fetchRecords; read it with
    `read_one`, and turn errors into per-partition error codes. A partition whose preferred
    read replica (`selector`) is another broker answers with it and no records, at once.
    With `told_all` (a session's partitions), one its fetcher has been told all of is not
    read: its entry is TOLD_ALREADY. With `previous` (this fetch's last read, its `woken`
    partitions (topic, index) since), a partition answered no records then and not woken
    keeps that answer: it is not looked up or read again (nor is it in the leaders
    returned)."""
    replicas = ctx.replicas
    total = 0
    leaders: list[Partition] = []
    had_error = False
    responses = []
    for ti, (name, topic_id, partitions) in enumerate(wanted):
        parts = []
        read_before = previous[ti]["partitions"] if previous is not None else None
        for pi, p in enumerate(partitions):
            if read_before is not None:
                before = read_before[pi]
                if not before["records"] and (name, p.partition) not in woken:
                    parts.append(before)
                    continue
            out: dict[str, Any] = {"partition_index": p.partition, "records": b""}
            if name is None or name in denied:
                # (an unauthorized partition does not end a long poll, as in Kafka: the
                # authorized ones are waited for)
                had_error |= name is None
                code = (ErrorCode.unknown_topic_id if name is None
                        else ErrorCode.topic_authorization_failed)
                out.update(error_code=code, high_watermark=-1, last_stable_offset=-1,
                           log_start_offset=-1)
                parts.append(out)
                continue
            try:
                partition = replicas.hosted_partition(name, p.partition)
                if topic_id is not None and partition.topic_id != topic_id:
                    raise PartitionError(ErrorCode.inconsistent_topic_id)
                # the epoch, then the leadership (a negative epoch is none, as in Kafka)
                epoch: int = field(p, "current_leader_epoch", -1)
                partition.check_local(epoch if epoch >= 0 else -1, not from_consumer)
                if replica_id >= 0 and replica_id not in partition.replicas:
                    # Kafka's followerReplicaOrThrow: a follower not (yet) in the assignment
                    # this leader knows retries; its position is not recorded
                    raise PartitionError(ErrorCode.unknown_leader_epoch if epoch >= 0
                                         else ErrorCode.not_leader_or_follower)
                if told_all is not None and told_all(partition, p):
                    leaders.append(partition)  # (its new records end a long poll)
                    parts.append(TOLD_ALREADY)
                    continue
                preferred = (selector(partition, p.fetch_offset) if selector is not None
                             and partition.is_leader else None)
                if preferred is not None:
                    had_error = True  # Kafka answers a redirect at once
                    out.update(error_code=ErrorCode.none, preferred_read_replica=preferred,
                               high_watermark=partition.high_watermark,
                               last_stable_offset=partition.last_stable_offset,
                               log_start_offset=partition.log_start_offset)
                    parts.append(out)
                    continue
                leaders.append(partition)
                limit = max(min(p.partition_max_bytes, max_bytes - total), 0)
                last_epoch: int = field(p, "last_fetched_epoch", -1)
                answer = read_one(partition, p.fetch_offset, last_epoch, limit, total == 0)
                if type(answer) is Encoded:  # the partition's whole answer, encoded before
                    out = answer
                else:
                    out.update(answer)
                total += len(out["records"])
                had_error |= "diverging_epoch" in out  # answer now: the follower truncates
            except PARTITION_ERRORS as exc:
                had_error = True
                failed = error_code_of(exc)
                # Kafka's createLogReadResult: an error answer's offsets are unknown (-1) ...
                out.update(error_code=failed, high_watermark=-1, last_stable_offset=-1,
                           log_start_offset=-1)
                # ... but a follower out of range starts over from the leader's log start or
                # high watermark given here (Kafka's asks ListOffsets of the leader instead)
                if (failed == ErrorCode.offset_out_of_range and replica_id >= 0
                        and (hosted := replicas.get(name, p.partition)) is not None):
                    out.update(high_watermark=hosted.high_watermark,
                               log_start_offset=hosted.log_start_offset)
            parts.append(out)
        responses.append({"topic": name, "topic_id": topic_id, "partitions": parts})
    return responses, total, leaders, had_error


@memoize
def _partition_entity(version: int) -> type[Entity]:
    """The Fetch response's partition entity at `version`."""
    for f in schema_fields(response_type(FETCH_KEY, version)):
        if f.name == "responses" and f.entity is not None:
            for g in schema_fields(f.entity):
                if g.name == "partitions" and g.entity is not None:
                    return g.entity
    raise LookupError(f"Fetch v{version} has no partitions")


# A caught-up partition's answer (no records), encoded once: by id(partition), (a reference
# to it, {the answer's entity (a version's): (its figures, the answer)}). A consumer or a
# follower of many partitions at a low rate is answered this for most of them in each fetch,
# and the figures change only when something is appended or replicated; a partition's
# consumers and followers (other versions) each keep theirs. (A WeakKeyDictionary makes a
# new weak reference at each lookup.)
Answers = dict[type[Entity], tuple[tuple[Any, ...], Encoded]]
_CAUGHT_UP: dict[int, tuple[weakref.ref[Partition], Answers]] = {}


def _caught_up(entity: type[Entity], partition: Partition, read: PartitionRead,
               no_aborted: bool) -> Encoded:
    """`no_aborted`: aborted_transactions null (a read_uncommitted consumer's), else empty
    (read_committed, and a follower's answer, which has always written it so)."""
    key = (read.high_watermark, read.last_stable_offset, read.log_start_offset, no_aborted)
    ident = id(partition)
    cached = _CAUGHT_UP.get(ident)
    if cached is None or cached[0]() is not partition:
        cached = (weakref.ref(partition, lambda _: _CAUGHT_UP.pop(ident, None)), {})
        _CAUGHT_UP[ident] = cached
    else:
        hit = cached[1].get(entity)
        if hit is not None and hit[0] == key:
            return hit[1]
    answer = encode_entity(entity, {
        "partition_index": partition.index,
        "error_code": ErrorCode.none,
        "high_watermark": read.high_watermark,
        "last_stable_offset": read.last_stable_offset,
        "log_start_offset": read.log_start_offset,
        "aborted_transactions": None if no_aborted else [],
        "records": b"",
    })
    cached[1][entity] = (key, answer)
    return answer


def _consumer_reader(isolation: int, zero_copy: bool, entity: type[Entity]) -> ReadOne:
    """A consumer's fetch; `zero_copy`: large records as FileRegions of the log, which the
    socket layer sends from the file (the connection can: plaintext, sendfile enabled)."""

    def read_one(
        partition: Partition, fetch_offset: int, _last_epoch: int, limit: int, first: bool
    ) -> dict[str, Any]:
        read = partition.read(fetch_offset, limit, isolation, first, zero_copy)
        if read.records:
            metrics.fetched(partition.topic, len(read.records))
        elif not read.aborted:
            return _caught_up(entity, partition, read, read.aborted is None)
        return {
            "error_code": ErrorCode.none,
            "high_watermark": read.high_watermark,
            "last_stable_offset": read.last_stable_offset,
            "log_start_offset": read.log_start_offset,
            "aborted_transactions": (
                None
                if read.aborted is None
                else [{"producer_id": pid, "first_offset": first} for pid, first in read.aborted]
            ),
            "records": read.records,
        }

    return read_one


def _follower_reader(ctx: ReplicaContext, replica_id: int, replica_epoch: int = -1) -> ReadOne:
    """A follower's fetch: its fetch offset acknowledges what it has; read up to our LEO,
    unless its last fetched epoch ends earlier here (then it must truncate first). A
    throttled replica (broker/replication/replication_quota.py) of a follower out of the ISR gets no
    records while the leader's throttle rate is exceeded."""
    quota = ctx.replicas.leader_quota
    entity = _partition_entity(ctx.version)

    def read_one(
        partition: Partition, fetch_offset: int, last_epoch: int, limit: int, _first: bool
    ) -> dict[str, Any]:
        diverging = partition.diverging_epoch(last_epoch, fetch_offset)
        if diverging is not None:
            epoch, end = diverging
            return {
                "error_code": ErrorCode.none,
                "high_watermark": partition.high_watermark,
                "last_stable_offset": partition.last_stable_offset,
                "log_start_offset": partition.log_start_offset,
                "diverging_epoch": {"epoch": epoch, "end_offset": end},
            }
        partition.record_follower_fetch(replica_id, fetch_offset, replica_epoch)
        throttled = (quota is not None and quota.active and replica_id not in partition.isr
                     and quota.is_throttled(partition.topic, partition.index))
        if throttled and quota is not None and quota.exceeded():
            return {
                "error_code": ErrorCode.none,
                "high_watermark": partition.high_watermark,
                "last_stable_offset": partition.last_stable_offset,
                "log_start_offset": partition.log_start_offset,
                "records": b"",
            }
        read = partition.read_for_follower(fetch_offset, limit, ctx.zero_copy)
        if throttled and quota is not None:
            quota.record(len(read.records))
        if not read.records:  # caught up: most partitions of a follower's fetch
            return _caught_up(entity, partition, read, False)
        return {
            "error_code": ErrorCode.none,
            "high_watermark": read.high_watermark,
            "last_stable_offset": read.last_stable_offset,
            "log_start_offset": read.log_start_offset,
            "records": read.records,
        }

    return read_one
