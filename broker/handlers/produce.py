"""Produce (0): validate, append to each partition's leader log, answer per partition.

acks=0 gets no response at all (Kafka closes the connection on error instead).

Versions: v3-v13 are served (record batches of magic 2 only), but v0 is advertised as Kafka 4
does (KAFKA-18659: librdkafka checks it before it enables compression); v13 names topics by
id (KIP-516).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import hold_inflated, iter_batches
from samsa.storage.errors import KafkaStorageError, RecordValidationError

from .. import metrics
from ..cluster.topic_admin import INTERNAL_TOPICS
from ..context import ProduceContext, RequestContext
from ..network.signals import CloseConnection
from ..replication.partition import Partition
from ..replication.replica_manager import PartitionError
from ..security.authorizer import AclOperation, ResourceType
from .common import PARTITION_ERRORS, error_code_of, field
from .declare import api
from .inflate import has_compressed, inflate_produce
from .transactions import verify_transactional_produce, verify_with_remote_coordinator

if TYPE_CHECKING:
    from .requests import ProduceRequest

log = logging.getLogger(__name__)

# A partition's answer: (error code, base offset, log append time, log start offset, last offset).
AppendResult = tuple[int, int, int, int, int]
# Produce v8+ (KIP-467): the records a batch was refused for, and the error message.
RecordErrors = list[dict[str, Any]]
# acks=all: the partition's response entry, the partition, the offset the HW must reach and the
# records (named in the debug log if the wait fails).
ReplicationWait = tuple[dict[str, Any], Partition, int, bytes | None]


def _failed(code: ErrorCode) -> AppendResult:
    return code, -1, -1, -1, -1


@api(0, "Produce", (3, 13), advertised_min=0)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> dict[str, Any] | None:
    acks = request.acks
    transactional_id = request.transactional_id
    responses = []
    failed = woke_fetches = False
    waits: list[ReplicationWait] = []
    # Kafka's authorization: transactional records need WRITE on the transactional id (else
    # every partition fails), each topic WRITE on the topic.
    txn_denied = ctx.authorizer is not None and _has_transactional_records(request) and not (
        transactional_id is not None
        and ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id))
    # v13+ (KIP-516): topics by id; an id this cluster does not know has no name
    named = [(_topic_name(ctx, topic), topic) for topic in request.topic_data]
    denied_topics: set[str] = set()
    if ctx.authorizer is not None:
        known = {name for name, _ in named if name is not None}
        denied_topics = known - set(ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC,
                                                   known))
    verified = await verify_with_remote_coordinator(ctx, transactional_id, [
        (name, pdata.index, pdata.records)
        for name, topic in named if name is not None and name not in denied_topics
        for pdata in topic.partition_data
    ]) if transactional_id and not txn_denied else {}
    if not txn_denied:  # the last pause before the appends: nothing may come between
        allowed = [(name, topic) for name, topic in named if name not in denied_topics]
        if has_compressed(allowed):
            await inflate_produce(ctx, allowed)
        else:  # what inflate_produce does with nothing to inflate, without its coroutine
            hold_inflated([])
    for name, topic in named:
        partitions = []
        for pdata in topic.partition_data:
            record_errors: RecordErrors = []
            error_message: list[str] = []
            refused = (ErrorCode.none if name is None
                       else verified.get((name, pdata.index), ErrorCode.none))
            if name is None:
                code, base_offset, append_time, start, last = _failed(ErrorCode.unknown_topic_id)
            elif txn_denied or name in denied_topics:
                denied = (ErrorCode.transactional_id_authorization_failed if txn_denied
                          else ErrorCode.topic_authorization_failed)
                code, base_offset, append_time, start, last = _failed(denied)
            elif refused != ErrorCode.none:  # the remote coordinator's KIP-890 answer
                code, base_offset, append_time, start, last = _failed(ErrorCode(refused))
            else:
                code, base_offset, append_time, start, last = _append(
                    ctx, acks, name, pdata.index, pdata.records, transactional_id,
                    record_errors, error_message,
                )
            if code != ErrorCode.none:
                failed = True
                _log_refusal(name, pdata.index, pdata.records, code)
            out: dict[str, Any] = {
                "index": pdata.index,
                "error_code": code,
                "base_offset": base_offset,
                "log_append_time": None if append_time < 0 else append_time,
                "log_start_offset": start,
                "record_errors": record_errors,
                "error_message": error_message[0] if error_message else None,
            }
            partitions.append(out)
            if code == ErrorCode.none and name is not None:
                partition = ctx.replicas.get(name, pdata.index)
                if partition is not None:
                    woke_fetches |= partition.append_woke_fetches
                    if acks == -1 and partition.high_watermark <= last:
                        waits.append((out, partition, last + 1, pdata.records))
        responses.append({"name": name or "", "topic_id": field(topic, "topic_id", None),
                          "partition_responses": partitions})
    if woke_fetches:
        # Let the fetches this append woke (consumers', followers') answer first, as Kafka
        # completes delayed fetches in the appending thread: the rest of this request (its
        # response) waits one event-loop pass instead of the records' readers.
        await asyncio.sleep(0)
    if waits:
        timeout_s = max(0.0, request.timeout.total_seconds())
        await _await_replication(waits, timeout_s)
    if acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return None
    return {"responses": responses, "throttle_time": 0}


def _topic_name(ctx: ProduceContext, topic: object) -> str | None:
    name: str | None = field(topic, "name", None)
    if name is not None:
        return name
    topic_id: uuid.UUID | None = field(topic, "topic_id", None)
    return None if topic_id is None else ctx.store.topic_name_by_id(topic_id)


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


async def _await_replication(waits: list[ReplicationWait], timeout_s: float) -> None:
    """acks=all: answer once the ISR has each partition's batch (Kafka's delayed produce)."""
    if len(waits) == 1:  # the usual case: awaited as it is, without a task and a gather
        _, partition, offset, _ = waits[0]
        done = [await partition.wait_for_high_watermark(offset, timeout_s)]
    else:
        done = await asyncio.gather(*(partition.wait_for_high_watermark(offset, timeout_s)
                                      for _, partition, offset, _ in waits))
    for (out, partition, offset, records), ok in zip(waits, done, strict=True):
        if not ok:
            code = (
                ErrorCode.request_timed_out
                if partition.is_leader
                else ErrorCode.not_leader_or_follower
            )
        elif len(partition.isr) < partition.effective_min_isr:
            # written, and replicated, but the ISR shrank since (Kafka's
            # checkEnoughReplicasReachOffset): the client retries it as possibly written
            code = ErrorCode.not_enough_replicas_after_append
        else:
            continue
        _log_refusal(partition.topic, partition.index, records, code,
                     f"after appending at {out['base_offset']}-{offset - 1}, leader epoch "
                     f"{partition.leader_epoch}, ISR {partition.isr}")
        out.update(error_code=code, base_offset=-1, log_append_time=None)


def _log_refusal(topic: str | None, index: int, records: bytes | None, code: int,
                 why: str = "") -> None:
    """DEBUG: a partition's error answer with its batch's producer id, epoch and sequences,
    the chain an idempotent producer's epoch bump is followed by (nothing is made when DEBUG
    is off: the answers of a partition that lost its leader come by thousands)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    log.debug("produce to %s-%d (%s) answered %s%s", topic, index, _batch_ids(records),
              ErrorCode(code).name, f" {why}" if why else "")


def _batch_ids(records: bytes | None) -> str:
    try:
        _, h = next(iter_batches(records or b""))
    except Exception:  # none or malformed: the error answered says which
        return "no readable batch"
    return (f"producer {h.producer_id} epoch {h.producer_epoch} seq {h.base_sequence}"
            f"..{h.base_sequence + h.last_offset_delta}")


def _append(
    ctx: ProduceContext,
    acks: int,
    topic: str,
    index: int,
    records: bytes | None,
    transactional_id: str | None,
    record_errors: RecordErrors,
    error_message: list[str],
) -> AppendResult:
    """Append to the partition's leader log. A batch refused for some of its records fills
    `record_errors` and `error_message` (Kafka's RecordValidationException)."""
    if acks not in (-1, 0, 1):
        return _failed(ErrorCode.invalid_required_acks)
    if topic in INTERNAL_TOPICS:
        return _failed(ErrorCode.invalid_topic_exception)
    try:
        partition = ctx.replicas.leader_partition(topic, index)
        if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
            return _failed(ErrorCode.not_enough_replicas)
        code = verify_transactional_produce(
            ctx.transactions, partition, records, transactional_id, ctx.version
        )
        if code != ErrorCode.none:
            return code, -1, -1, -1, -1
        info = partition.append_as_leader(records or b"")
    except PartitionError as exc:
        return exc.error_code, -1, -1, -1, -1
    except RecordValidationError as exc:
        log.debug("produce to %s-%d rejected: %s", topic, index, exc)
        record_errors.extend({"batch_index": i, "batch_index_error_message": m}
                             for i, m in exc.record_errors)
        error_message.append(str(exc))
        return exc.error_code, -1, -1, partition.log_start_offset, -1
    except PARTITION_ERRORS as exc:
        # Per request and usually the client's doing (sequence, epoch, size): DEBUG; a
        # failing disk is the operator's business.
        level = logging.WARNING if isinstance(exc, KafkaStorageError) else logging.DEBUG
        log.log(level, "produce to %s-%d rejected: %s (%s)", topic, index,
                type(exc).__name__, exc)
        return error_code_of(exc), -1, -1, -1, -1
    if not info.duplicate:
        metrics.produced(topic, len(records or b""), info.record_count)
    elif log.isEnabledFor(logging.DEBUG):
        log.debug("produce to %s-%d (%s): a duplicate of offsets %d-%d", topic, index,
                  _batch_ids(records), info.first_offset, info.last_offset)
    return (ErrorCode.none, info.first_offset, info.log_append_time, info.log_start_offset,
            info.last_offset)
