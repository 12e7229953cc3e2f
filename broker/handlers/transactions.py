"""Transaction APIs: InitProducerId (22), AddPartitionsToTxn (24, client versions 0-3),
AddOffsetsToTxn (25), EndTxn (26; v5 = transactions v2), WriteTxnMarkers (27),
DescribeProducers (61), DescribeTransactions (65), ListTransactions (66; v2 filters by a
transactional id pattern, KIP-1152).

The state machine lives in coordinator/transaction/; these handlers translate requests and
map errors per version like KafkaApis does.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from samsa.coordinator.group.consumer.model import compile_regex
from samsa.coordinator.producer_ids import ProducerIdNotAvailable
from samsa.coordinator.transaction.metadata import TxnState
from samsa.protocol.codec import millis
from samsa.protocol.errors import ErrorCode
from samsa.storage.clock import milliseconds
from samsa.storage.producer_entry import NO_SEQUENCE

from .. import metrics
from ..cluster.features import UNSTABLE_VERSIONS
from ..context import RequestContext, TxnContext
from ..network.policy import THROTTLE_EXEMPT
from ..network.signals import CloseConnection
from ..replication.replica_manager import PartitionError
from ..security.authorizer import AclOperation, ResourceType
from ..txn.markers import TxnMarker, append_markers_replicated
from ..txn.verification import produce_error
from .common import field
from .declare import api

if TYPE_CHECKING:
    from typing_extensions import TypeIs

    from samsa.storage.verification_state import VerificationState

    from .requests import (
        AddOffsetsToTxnRequest,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnRequestBatched,
        AddPartitionsToTxnRequestClient,
        DescribeProducersRequest,
        DescribeTransactionsRequest,
        EndTxnRequest,
        InitProducerIdRequest,
        ListTransactionsRequest,
        WriteTxnMarkersRequest,
    )

log = logging.getLogger(__name__)


def _may_write_txn(ctx: TxnContext, transactional_id: str) -> bool:
    """Kafka: a transactional producer's requests need WRITE on its transactional id."""
    return ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _fenced_for(code: ErrorCode, version: int, first_version: int) -> ErrorCode:
    """PRODUCER_FENCED is only known to clients from `first_version` on."""
    if code == ErrorCode.producer_fenced and version < first_version:
        return ErrorCode.invalid_producer_epoch
    return code


# ---------------------------------------------------------------------------- InitProducerId
@api(22, "InitProducerId", (0, 6))
async def handle_init_producer_id(
    ctx: RequestContext, request: InitProducerIdRequest
) -> dict[str, Any]:
    """v6 (KIP-939 two-phase commit) is unstable in Kafka 4.4: served only with
    unstable.api.versions.enable, and otherwise the connection is closed, as Kafka's
    SocketServer closes one that sends a version it does not enable."""
    if ctx.version >= UNSTABLE_VERSIONS[22] and not ctx.config["unstable.api.versions.enable"]:
        raise CloseConnection(f"InitProducerId v{ctx.version} is not enabled")
    txn_id = request.transactional_id
    enable_2pc: bool = field(request, "enable2_pc", False)
    if txn_id is not None and not (
        _may_write_txn(ctx, txn_id)
        # KIP-939: a 2PC producer also needs TWO_PHASE_COMMIT on its transactional id
        and (not enable_2pc or ctx.authorize(AclOperation.TWO_PHASE_COMMIT,
                                             ResourceType.TRANSACTIONAL_ID, txn_id))
    ):
        return _init_error(ErrorCode.transactional_id_authorization_failed)
    if txn_id is None and not (
        ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, log_denied=False)
        or ctx.authorize_any(AclOperation.WRITE, ResourceType.TOPIC)
    ):
        # Kafka 3+: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on
        # some topic.
        return _init_error(ErrorCode.cluster_authorization_failed)
    if txn_id is None:
        # Idempotent producer: a fresh producer id, no timeout validation.
        try:
            fresh = ctx.producer_ids.next_id()
        except ProducerIdNotAvailable as exc:  # next block still being claimed: retriable
            return _init_error(exc.error_code)
        return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": fresh,
                "producer_epoch": 0}
    pid: int = field(request, "producer_id", -1)
    epoch: int = field(request, "producer_epoch", -1)
    if (pid == -1) != (epoch == -1):
        return _init_error(ErrorCode.invalid_request)
    expected = None if pid == -1 else (pid, epoch)
    try:
        await ctx.txn_topic.ensure_created()
    except Exception:
        log.exception("creating %s failed", ctx.txn_topic.name)
        return _init_error(ErrorCode.coordinator_not_available)
    result = await ctx.transactions.init_producer_id(
        txn_id, millis(request.transaction_timeout), expected, enable_2pc=enable_2pc,
        keep_prepared=field(request, "keep_prepared_txn", False),
    )
    code = result.error_code
    if code != ErrorCode.none:
        return _init_error(_fenced_for(code, ctx.version, 4))
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "producer_id": result.producer_id,
        "producer_epoch": result.producer_epoch,
    }


def _init_error(code: int) -> dict[str, Any]:
    # v6's OngoingTxnProducerId/Epoch keep their default, -1: no prepared transaction is kept
    return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}


# ---------------------------------------------------------------------------- AddPartitionsToTxn
def _batched(request: AddPartitionsToTxnRequest) -> TypeIs[AddPartitionsToTxnRequestBatched]:
    """v4+: the broker-to-coordinator form, a batch of transactions, each VerifyOnly or not."""
    return request.__version__ >= 4


async def _add_partitions(
    ctx: TxnContext, txn_id: str, producer_id: int, producer_epoch: int,
    topics: Sequence[tuple[str, Sequence[int]]], verify_only: bool,
    writable: set[str] | None = None,
) -> dict[tuple[str, int], int]:
    """One transaction's answer per partition (Kafka's handleAddPartitionsToTxnRequest): an
    unknown partition, or a topic outside `writable` (the client form's ACL check), fails
    the whole transaction (the others OPERATION_NOT_ATTEMPTED)."""
    refused: dict[tuple[str, int], int] = {}
    for name, parts in topics:
        state = ctx.store.topic(name)
        for p in parts:
            if writable is not None and name not in writable:
                refused[(name, p)] = ErrorCode.topic_authorization_failed
            elif state is None or p not in state.partitions:
                refused[(name, p)] = ErrorCode.unknown_topic_or_partition
    partitions = [(n, p) for n, ps in topics for p in ps]
    if refused:
        return {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in partitions}
    if verify_only:
        codes: dict[tuple[str, int], int] = dict(ctx.transactions.verify_partitions(
            txn_id, producer_id, producer_epoch, partitions))
        if ctx.version < 5:  # TRANSACTION_ABORTABLE is known from v5 on
            codes = {tp: ErrorCode.invalid_txn_state if c == ErrorCode.transaction_abortable
                     else c for tp, c in codes.items()}
        return codes
    # v4+ without VerifyOnly comes from a leader serving a TV2 client's Produce v12 (or a group
    # coordinator its TxnOffsetCommit v5): the transaction is a TV2 one.
    code = await ctx.transactions.add_partitions(
        txn_id, producer_id, producer_epoch, partitions, 2 if ctx.version >= 4 else 0)
    return dict.fromkeys(partitions, _fenced_for(code, ctx.version, 2))


def _topic_results(
    topics: Sequence[tuple[str, Sequence[int]]], codes: dict[tuple[str, int], int]
) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": codes[(name, p)]} for p in parts
            ],
        }
        for name, parts in topics
    ]


@api(24, "AddPartitionsToTxn", (0, 5), families={
    "AddPartitionsToTxnRequestBatched": (4, 5), "AddPartitionsToTxnRequestClient": (0, 3)})
async def handle_add_partitions_to_txn(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> dict[str, Any]:
    if _batched(request):
        # Brokers only (Kafka: CLUSTER_ACTION on the cluster, else a top-level error).
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                    "results_by_transaction": []}
        results = []
        for txn in request.transactions:
            topics = [(t.name, list(dict.fromkeys(t.partitions))) for t in txn.topics]
            codes = await _add_partitions(ctx, txn.transactional_id, txn.producer_id,
                                          txn.producer_epoch, topics, txn.verify_only)
            results.append({"transactional_id": txn.transactional_id,
                            "topic_results": _topic_results(topics, codes)})
        return {"throttle_time": 0, "error_code": ErrorCode.none,
                "results_by_transaction": results}
    client: AddPartitionsToTxnRequestClient = request
    topics = [(t.name, list(t.partitions)) for t in client.v3_and_below_topics]
    txn_id = client.v3_and_below_transactional_id
    if not _may_write_txn(ctx, txn_id):
        codes = {(n, p): ErrorCode.transactional_id_authorization_failed
                 for n, ps in topics for p in ps}
    else:
        writable = {str(n) for n in ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC,
                                                   {n for n, _ in topics})}
        codes = await _add_partitions(
            ctx, txn_id, client.v3_and_below_producer_id, client.v3_and_below_producer_epoch,
            topics, verify_only=False, writable=writable)
    return {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(topics, codes)}


# ---------------------------------------------------------------------------- AddOffsetsToTxn
@api(25, "AddOffsetsToTxn", (0, 4))
async def handle_add_offsets_to_txn(
    ctx: RequestContext, request: AddOffsetsToTxnRequest
) -> dict[str, Any]:
    coord = ctx.transactions
    if not _may_write_txn(ctx, request.transactional_id):
        return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed}
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return {"throttle_time": 0, "error_code": ErrorCode.group_authorization_failed}
    tp = coord.offsets_partition(request.group_id)
    code = await coord.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [tp]
    )
    return {"throttle_time": 0, "error_code": _fenced_for(code, ctx.version, 2)}


# ---------------------------------------------------------------------------- EndTxn
@api(26, "EndTxn", (0, 5))
async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> dict[str, Any]:
    """EndTxn; v5 is transactions v2 (the coordinator bumps the epoch and answers the producer
    id and epoch the client goes on with)."""
    if not _may_write_txn(ctx, request.transactional_id):
        return {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed,
                "producer_id": -1, "producer_epoch": -1}
    result = await ctx.transactions.end_transaction(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        bool(request.committed),
        client_version=2 if ctx.version >= 5 else 0,
    )
    return {"throttle_time": 0, "error_code": _fenced_for(result.error_code, ctx.version, 2),
            "producer_id": result.producer_id, "producer_epoch": result.producer_epoch}


# ---------------------------------------------------------------------------- WriteTxnMarkers
@api(27, "WriteTxnMarkers", (1, 2), policy=THROTTLE_EXEMPT)
async def handle_write_txn_markers(
    ctx: RequestContext, request: WriteTxnMarkersRequest
) -> dict[str, Any]:
    markers = []
    # Kafka: from another broker (ALTER or CLUSTER_ACTION on the cluster) only.
    allowed = (ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, log_denied=False)
               or ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER))
    for m in request.markers:
        # v2: the transaction's version (2: KIP-890's strict epoch rule)
        marker = TxnMarker(m.producer_id, m.producer_epoch, bool(m.transaction_result),
                           m.coordinator_epoch, getattr(m, "transaction_version", 0))
        # Kafka appends a marker's partitions together and answers once the ISR has them all
        codes = (await append_markers_replicated(
            ctx.services, marker, [(t.name, p) for t in m.topics for p in t.partition_indexes])
            if allowed else {})
        topics = [{"name": t.name, "partitions": [
            {"partition_index": p,
             "error_code": codes.get((t.name, p), ErrorCode.cluster_authorization_failed)}
            for p in t.partition_indexes]} for t in m.topics]
        markers.append({"producer_id": m.producer_id, "topics": topics})
    return {"markers": markers}


# ---------------------------------------------------------------------------- DescribeProducers
@api(61, "DescribeProducers", (0, 0))
async def handle_describe_producers(
    ctx: RequestContext, request: DescribeProducersRequest
) -> dict[str, Any]:
    readable = set(ctx.authorized(AclOperation.READ, ResourceType.TOPIC,
                                  {t.name for t in request.topics}))
    topics = [{"name": t.name, "partitions": [
        _producers_of(ctx, t.name, p, t.name in readable) for p in t.partition_indexes]}
        for t in request.topics]
    return {"throttle_time": 0, "topics": topics}


def _producers_of(ctx: TxnContext, topic: str, index: int, readable: bool) -> dict[str, Any]:
    """A partition's answer: the producers its leader here retains state of (Kafka: READ on
    the topic)."""
    try:
        if not readable:
            raise PartitionError(ErrorCode.topic_authorization_failed)
        partition = ctx.replicas.leader_partition(topic, index)
    except PartitionError as exc:
        return {"partition_index": index, "error_code": exc.error_code, "error_message": None,
                "active_producers": []}
    producers = [
        {
            "producer_id": e.producer_id,
            "producer_epoch": e.producer_epoch,
            "last_sequence": e.last_sequence,
            "last_timestamp": e.last_timestamp,
            "coordinator_epoch": e.coordinator_epoch,
            "current_txn_start_offset": e.current_txn_start_offset,
        }
        for e in partition.active_producers()
    ]
    return {"partition_index": index, "error_code": ErrorCode.none, "error_message": None,
            "active_producers": producers}


# ---------------------------------------------------------------------------- DescribeTransactions
@api(65, "DescribeTransactions", (0, 0))
async def handle_describe_transactions(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> dict[str, Any]:
    coord = ctx.transactions
    states = []
    for txn_id in request.transactional_ids:
        code, md = coord.describe(txn_id)
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
            code, md = ErrorCode.transactional_id_authorization_failed, None
        if md is None:
            # Kafka leaves the other fields at their schema defaults (0 / "").
            states.append(
                {
                    "error_code": code,
                    "transactional_id": txn_id,
                    "transaction_state": "",
                    "transaction_timeout": 0,
                    "transaction_start_time": 0,
                    "producer_id": 0,
                    "producer_epoch": 0,
                    "topics": [],
                }
            )
            continue
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, p in sorted(md.partitions):
            by_topic[topic].append(p)
        # Kafka: only the topics the principal may describe.
        by_topic = {t: ps for t, ps in by_topic.items()
                    if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t)}
        states.append(
            {
                "error_code": ErrorCode.none,
                "transactional_id": txn_id,
                "transaction_state": md.state.kafka_name,
                "transaction_timeout": md.timeout_ms,
                "transaction_start_time": md.start_ms,
                "producer_id": md.producer_id,
                "producer_epoch": md.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            }
        )
    return {"throttle_time": 0, "transaction_states": states}


# ---------------------------------------------------------------------------- ListTransactions
@api(66, "ListTransactions", (0, 2))
async def handle_list_transactions(
    ctx: RequestContext, request: ListTransactionsRequest
) -> dict[str, Any]:
    states: set[TxnState] = set()
    unknown = []
    for name in request.state_filters:
        state = TxnState.by_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.add(state)
    code, found = ctx.transactions.list_transactions(
        states, set(request.producer_id_filters), field(request, "duration_filter", -1)
    )
    if request.state_filters and not states:
        found = []  # every filter is unknown: nothing can match
    pattern = field(request, "transactional_id_pattern", None)
    if pattern and code == ErrorCode.none:  # KIP-1152: null or empty lists every id
        compiled = compile_regex(pattern)
        if compiled is None:  # Kafka answers the error alone, as for any failed request
            return {"throttle_time": 0, "error_code": ErrorCode.invalid_regular_expression,
                    "unknown_state_filters": [], "transaction_states": []}
        found = [md for md in found if compiled.fullmatch(md.transactional_id)]  # RE2J matches
    # Kafka: only the transactional ids the principal may describe.
    found = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, found,
                           lambda md: md.transactional_id, log_denied=False)
    return {
        "throttle_time": 0,
        "error_code": code,
        "unknown_state_filters": unknown,
        "transaction_states": [
            {
                "transactional_id": md.transactional_id,
                "producer_id": md.producer_id,
                "transaction_state": md.state.kafka_name,
            }
            for md in found
        ],
    }


# ---------------------------------------------------------------- TxnOffsetCommit: KIP-890

async def verify_offsets_partition(
    ctx: TxnContext, transactional_id: str, producer_id: int, producer_epoch: int,
    group_id: str, version: int,
) -> tuple[int, VerificationState | None, bool]:
    """KIP-890 for TxnOffsetCommit, as Kafka's group coordinator runs it through its
    partition writer: before a transaction's first offsets go to the group's
    `__consumer_offsets` partition, the transaction coordinator confirms that the partition
    is in the producer's ongoing transaction (v5, transactions v2: adds it, the client having
    sent no AddOffsetsToTxn), the producer's verification state on the partition made before
    it is asked. Returns the error for the TxnOffsetCommit response (retriable ones as
    COORDINATOR_NOT_AVAILABLE), the state the write presents, and whether the write is
    checked against it (transaction.partition.verification.enable). Without this a late
    TxnOffsetCommit of an ended transaction left offsets pending for good: every OffsetFetch
    asking for stable offsets was answered UNSTABLE_OFFSET_COMMIT."""
    coord = ctx.transactions
    topic, index = tp = coord.offsets_partition(group_id)
    add = version >= 5
    required = coord.verification_enabled
    if not (add or required):
        return ErrorCode.none, None, False
    try:
        partition = ctx.replicas.leader_partition(topic, index)
    except PartitionError:
        return ErrorCode.none, None, required  # the commit answers NOT_COORDINATOR
    producers = partition.log.producer_state
    if producers.txn_open_at(producer_id, producer_epoch):
        return ErrorCode.none, None, required  # the transaction's offsets are here already
    # a coordinator's write asks about no batch sequence (Kafka's)
    guard = producers.verifications.start(producer_id, NO_SEQUENCE, producer_epoch, add,
                                          milliseconds())
    code = await _ask_about_offsets_partition(ctx, transactional_id, producer_id,
                                              producer_epoch, tp, add)
    if code == ErrorCode.none:
        return code, guard, required
    # as a Produce of the same generation of KIP-890 carries it: v4 knows TRANSACTION_ABORTABLE
    code = produce_error(code, 12 if add else 11 if version >= 4 else 10)
    retriable = (ErrorCode.not_enough_replicas, ErrorCode.concurrent_transactions)
    return (ErrorCode.coordinator_not_available if code in retriable else code), guard, required


async def _ask_about_offsets_partition(
    ctx: TxnContext, transactional_id: str, producer_id: int, producer_epoch: int,
    tp: tuple[str, int], add: bool,
) -> int:
    """The transaction coordinator's answer about the offsets partition: in process when it
    is this broker (or no other can be asked), else over the inter-broker channel."""
    coord, verifier = ctx.transactions, ctx.txn_verifier
    if coord.is_local(transactional_id) or verifier is None:
        started = time.monotonic()
        if add:
            code = int(await coord.add_partitions(
                transactional_id, producer_id, producer_epoch, [tp], 2))
        else:
            code = int(coord.verify_partitions(transactional_id, producer_id, producer_epoch,
                                               [tp])[tp])
        metrics.transaction_verified(started, (code,))
        return code
    answers = await verifier.verify(verifier.coordinator_of(transactional_id),
                                    transactional_id, producer_id, producer_epoch, [tp],
                                    verify_only=not add)
    return answers[tp]
