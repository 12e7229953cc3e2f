"""Produce (0): validate, append to each partition's leader log, answer per partition.

acks=0 gets no response at all (Kafka closes the connection on error instead).

Versions: v3-v13 are served (record batches of magic 2 only), but v0 is advertised as Kafka 4
does (KAFKA-18659: librdkafka checks it before it enables compression); v13 names topics by
id (KIP-516). From v10 a partition answered NOT_LEADER_OR_FOLLOWER names its leader
(KIP-951).
"""

from __future__ import annotations

import uuid
from functools import partial
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode
from samsa.protocol.produce_wire import ProduceRequest as WireProduceRequest
from samsa.protocol.produce_wire import (
    read_produce,
    write_one_partition_answer,
    write_produce_response,
)
from samsa.protocol.records import (
    ATTR_COMPRESSION_MASK,
    ATTRIBUTES_LOW,
    HEADER_SIZE,
    hold_inflated,
    iter_batches,
)

from ..context import BrokerServices, RequestContext
from ..network.policy import ApiPolicy, RawLane, Served
from ..network.quotas import PRODUCE_BYTES
from ..network.signals import CloseConnection
from ..replication.partition import Partition
from ..replication.produce_appends import (
    AppendResult,
    ProduceEntry,
    after_appends,
    log_refusal,
)
from ..security.authorizer import AclOperation, ResourceType
from .common import field, name_leaders
from .declare import api
from .inflate import has_compressed, inflate_produce

if TYPE_CHECKING:
    from ..cluster.metadata_store import MetadataStore
    from .requests import ProduceRequest

# v10+ (KIP-951): a partition answered NOT_LEADER_OR_FOLLOWER names its leader and the answer
# lists that leader's endpoint (Kafka's handleProduceRequest; no hint for other errors).
HINTS_FROM = 10


def serve_produce(services: BrokerServices, request: WireProduceRequest, version: int
                  ) -> Served | None:
    """Produce's raw lane for librdkafka's usual request (one topic, one partition; issue 47):
    when nothing but the append applies (no authorizer, no produce check, no compressed
    batch, and a transactional batch only once its transaction is open on the partition, so
    that no coordinator is asked), the same append and answer as `handle_produce` without a
    request context, the handler's coroutines and the answer's dicts; None for any other
    request, with nothing done (tests/protocol/test_produce_fast_path.py compares them)."""
    topics = request.topic_data
    appends = services.appends
    if (len(topics) != 1 or len(topics[0].partition_data) != 1
            or services.authorizer is not None or appends.produce_check is not None):
        return None
    topic = topics[0]
    pdata = topic.partition_data[0]
    acks, records = request.acks, pdata.records
    if (records is not None and len(records) >= HEADER_SIZE
            and records[ATTRIBUTES_LOW] & ATTR_COMPRESSION_MASK):
        return None  # has_compressed's test: inflate_produce's
    name = topic.name or _topic_name(services.store, topic)  # v13: by id (the Java producer's)
    if name is None:
        return None  # the handler answers UNKNOWN_TOPIC_ID
    transactional_id = request.transactional_id
    if transactional_id is not None and not appends.verified_in_advance(
            name, pdata.index, records, version):
        return None  # the first batch of a transaction to the partition: verified or added
    hold_inflated([])  # as the handler does with nothing to inflate
    result, partition = appends.append_one(acks, name, pdata.index, records, transactional_id,
                                           version)
    if result.error_code == ErrorCode.not_leader_or_follower and version >= HINTS_FROM:
        return None  # nothing appended: the handler answers with the leader's hint
    woke = waits = False
    if partition is not None:
        woke = partition.append_woke_fetches
        waits = acks == -1 and partition.high_watermark <= result.last_offset
    if (woke or waits or acks == 0 or result.record_errors is not None
            or result.error_message is not None):
        return _served_later(request, name, topic.topic_id, pdata.index, result,
                             [(result, partition, records)] if waits and partition else [],
                             woke)
    code, append_time = result.error_code, result.log_append_time
    return write_one_partition_answer(
        version, name.encode() if topic.topic_id is None else topic.topic_id.bytes,
        pdata.index, code, result.base_offset, append_time if append_time >= 0 else -1,
        result.log_start_offset), [code] if code else []


async def _served_later(request: WireProduceRequest, name: str, topic_id: uuid.UUID | None,
                        index: int, result: AppendResult,
                        waits: list[tuple[AppendResult, Partition, bytes | None]],
                        woke: bool) -> dict[str, Any] | None:
    """`serve_produce`'s answer after what the append waits for (the fetches it woke, acks=all
    with followers), or one the lane does not write (acks=0, per-record errors)."""
    if woke or waits:
        await after_appends(woke, waits, lambda: request.timeout.total_seconds())
    answer = _partition_answer(index, result)
    return _answer(request.acks, result.error_code != ErrorCode.none, [
        {"name": name, "topic_id": topic_id, "partition_responses": [answer]}])


@api(0, "Produce", (3, 13), advertised_min=0,
     policy=ApiPolicy(PRODUCE_BYTES, raw=RawLane(read_produce, write_produce_response,
                                                  serve_produce)))
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> dict[str, Any] | None:
    """Authorization here (Kafka's KafkaApis.handleProduceRequest); verification, appends and
    the acks=all wait in ProduceAppender.append_records."""
    transactional_id = request.transactional_id
    # Kafka's authorization: transactional records need WRITE on the transactional id (else
    # every partition fails), each topic WRITE on the topic.
    txn_denied = ctx.authorizer is not None and _has_transactional_records(request) and not (
        transactional_id is not None
        and ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id))
    # v13+ (KIP-516): topics by id; an id this cluster does not know has no name
    named = [(_topic_name(ctx.store, topic), topic) for topic in request.topic_data]
    denied_topics: set[str] = set()
    if ctx.authorizer is not None:
        known = {name for name, _ in named if name is not None}
        denied_topics = known - set(ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC,
                                                   known))
    entries: list[ProduceEntry] = []
    inflate = None
    refused: dict[tuple[str, int], AppendResult] = {}
    if not txn_denied:
        entries = [(name, pdata.index, pdata.records)
                   for name, topic in named if name is not None and name not in denied_topics
                   for pdata in topic.partition_data]
        if ctx.appends.produce_check is not None:  # schema validation: refused, not appended
            refused = await ctx.appends.produce_check(entries)
            entries = [e for e in entries if (e[0], e[1]) not in refused] if refused else entries
        if has_compressed(named):
            # the last pause before the appends: nothing may come between
            inflate = partial(inflate_produce, ctx,
                              [(name, topic) for name, topic in named if name not in denied_topics])
        else:  # what inflate_produce does with nothing to inflate, without its coroutine
            hold_inflated([])
    appended = await ctx.appends.append_records(
        request.acks, lambda: request.timeout.total_seconds(), entries, transactional_id,
        ctx.version, inflate)
    failed = False
    responses: list[dict[str, Any]] = []
    at = 0
    for name, topic in named:
        partitions = []
        for pdata in topic.partition_data:
            if name is None or txn_denied or name in denied_topics:
                code = (ErrorCode.unknown_topic_id if name is None
                        else ErrorCode.transactional_id_authorization_failed if txn_denied
                        else ErrorCode.topic_authorization_failed)
                log_refusal(name, pdata.index, pdata.records, code)
                result = AppendResult(code)
            elif (name, pdata.index) in refused:
                result = refused[name, pdata.index]
            else:  # appended (or refused) by the replica manager, which logged a refusal
                result = appended[at]
                at += 1
            failed = failed or result.error_code != ErrorCode.none
            partitions.append(_partition_answer(pdata.index, result))
        responses.append({"name": name or "", "topic_id": field(topic, "topic_id", None),
                          "partition_responses": partitions})
    answer = _answer(request.acks, failed, responses)
    if failed and answer is not None and ctx.version >= HINTS_FROM:
        endpoints = name_leaders(ctx, (
            (name, p["index"], p) for (name, _), r in zip(named, responses, strict=True)
            for p in r["partition_responses"]
            if p["error_code"] == ErrorCode.not_leader_or_follower))
        if endpoints:
            answer["node_endpoints"] = endpoints
    return answer


def _partition_answer(index: int, result: AppendResult) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": result.error_code,
        "base_offset": result.base_offset,
        "log_append_time": None if result.log_append_time < 0 else result.log_append_time,
        "log_start_offset": result.log_start_offset,
        "record_errors": [] if result.record_errors is None else [
            {"batch_index": i, "batch_index_error_message": m}
            for i, m in result.record_errors],
        "error_message": result.error_message,
    }


def _answer(acks: int, failed: bool, responses: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The handler's result: none for acks=0 (whose failure closes the connection)."""
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return None
    return {"responses": responses, "throttle_time": 0}


def _topic_name(store: MetadataStore, topic: object) -> str | None:
    name: str | None = field(topic, "name", None)
    if name is not None:
        return name
    topic_id: uuid.UUID | None = field(topic, "topic_id", None)
    return None if topic_id is None else store.topic_name_by_id(topic_id)


def _has_transactional_records(request: ProduceRequest) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: a partition's first batch is
    transactional."""
    for topic in request.topic_data:
        for pdata in topic.partition_data:
            if not pdata.records:
                continue
            try:
                _, header = next(iter_batches(pdata.records))
            except Exception:  # malformed: the log's validation answers it
                continue
            if header.is_transactional:
                return True
    return False
