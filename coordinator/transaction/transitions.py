"""What each request does to a transactional id's state (Kafka's TransactionCoordinator
handle* methods), without I/O: a request's `Step` is its answer and the transition to write
before answering (none: answer at once). The coordinator (coordinator.py) checks it coordinates
the id, writes the step's record through the coordinator runtime, applies the transition once
the ISR has it, and sends the markers after a Prepare. Specs: tests/unit/test_txn_transitions.py.

A transition is prepared on the id's `TxnMetadata` (its `pending_state` set), so these functions
change nothing else of it, but for the in-memory epoch fence of the coordinator's own abort,
which they undo when the abort cannot go ahead.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from samsa.protocol.errors import ErrorCode, KafkaError

from .log import encode_key, encode_value
from .metadata import (
    COMPLETED,
    MAX_EPOCH,
    PREPARED,
    TxnMetadata,
    TxnState,
    TxnTransit,
    epoch_exhausted,
)

# A fresh producer id; raises KafkaError (with the code to answer) when none is ready.
NextProducerId = Callable[[], int]
Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Step:
    """A request's outcome: `error`, or the `transit` to write before answering NONE."""

    error: ErrorCode = ErrorCode.none
    transit: TxnTransit | None = None
    # EndTxn's Prepare: the markers go out once it is written
    send_markers: bool = False
    # the coordinator's own abort fenced the producer in memory: undone if the write fails
    fenced: bool = False
    # InitProducerId of an id with a transaction open: fence its producer and abort it first
    # (the client retries on the answer, CONCURRENT_TRANSACTIONS)
    abort_ongoing: bool = False


def record(txn_id: str, transit: TxnTransit | None,
           transaction_version: int) -> tuple[bytes, bytes | None]:
    """The `__transaction_state` record of a transition (None: the id's tombstone). Value v1
    once the cluster finalized transaction.version >= 1, and always for a TV2 transaction (its
    client version and next producer id live only in v1's fields)."""
    if transit is None:
        return encode_key(txn_id), None
    flexible = transaction_version >= 1 or transit.client_transaction_version >= 2
    return encode_key(txn_id), encode_value(transit.log_value(), int(flexible))


# ---- InitProducerId --------------------------------------------------------------------------
# KIP-939: a two-phase commit transaction's timeout, which Kafka also reads as its 2PC mark (an
# external transaction manager ends it, never the coordinator's timeout).
TWO_PHASE_TIMEOUT_MS = 2**31 - 1


def init_request_error(timeout_ms: int, max_timeout_ms: int, *, enable_2pc: bool = False,
                       keep_prepared: bool = False, two_phase_enabled: bool = False) -> ErrorCode:
    """Kafka 4.4's handleInitProducerId checks of a transactional request before its id's
    state: 2PC only where transaction.two.phase.commit.enable is on (refused as if denied, so a
    client cannot probe the switch); keeping a prepared transaction is not served yet, as in
    Kafka 4.4; a 2PC transaction's own timeout is not checked (it has none)."""
    if enable_2pc and not two_phase_enabled:
        return ErrorCode.transactional_id_authorization_failed
    if keep_prepared:
        return ErrorCode.unsupported_version
    if not enable_2pc and not 0 < timeout_ms <= max_timeout_ms:
        return ErrorCode.invalid_transaction_timeout
    return ErrorCode.none


def resolved_timeout(timeout_ms: int, enable_2pc: bool) -> int:
    """The timeout the id keeps: a 2PC transaction's is TWO_PHASE_TIMEOUT_MS."""
    return TWO_PHASE_TIMEOUT_MS if enable_2pc else timeout_ms


def init_producer_id(md: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                     now: int, next_producer_id: NextProducerId) -> Step:
    """Kafka's handleInitProducerId for a known id: a new epoch (or, past an exhausted one, a
    new producer id); `expected` is the (producer id, epoch) a recovering producer sends."""
    if expected is not None:
        pid, epoch = expected
        valid = (
            md.producer_epoch == -1
            or pid == md.producer_id
            or (pid == md.last_producer_id and epoch_exhausted(epoch))
        )
        if not valid:
            return Step(ErrorCode.producer_fenced)
    if md.pending or md.state in PREPARED:
        return Step(ErrorCode.concurrent_transactions)
    if md.state is TxnState.ONGOING:
        return Step(ErrorCode.concurrent_transactions, abort_ongoing=True)
    if md.state not in COMPLETED:
        return Step(ErrorCode.unknown_server_error)
    if epoch_exhausted(md.producer_epoch) and (
        expected is None or expected[1] == md.producer_epoch
    ):
        transit: TxnTransit | ErrorCode = md.prepare_producer_id_rotation(
            next_producer_id(), timeout_ms, now, expected is not None
        )
    else:
        transit = md.prepare_increment_epoch(
            timeout_ms, None if expected is None else expected[1], now
        )
    if isinstance(transit, ErrorCode):
        return Step(transit)
    return Step(transit=transit)


# ---- AddPartitionsToTxn / AddOffsetsToTxn, and their verification ------------------------------
def add_partitions(md: TxnMetadata | None, producer_id: int, producer_epoch: int,
                   added: set[Partition], now: int, client_version: int = 0) -> Step:
    """Kafka's handleAddPartitionsToTransaction: nothing to write when they are all in the
    open transaction already."""
    if md is None or md.producer_id != producer_id:
        return Step(ErrorCode.invalid_producer_id_mapping)
    if md.producer_epoch != producer_epoch:
        return Step(ErrorCode.producer_fenced)
    if md.pending or md.state in PREPARED:
        return Step(ErrorCode.concurrent_transactions)
    if md.state is TxnState.ONGOING and added <= md.partitions:
        return Step()
    if md.state not in COMPLETED and md.state is not TxnState.ONGOING:
        return Step(ErrorCode.invalid_txn_state)
    return Step(transit=md.prepare_add_partitions(added, now, client_version))


def verify_partitions(md: TxnMetadata | None, producer_id: int, producer_epoch: int,
                      partitions: list[Partition]) -> dict[Partition, ErrorCode]:
    """AddPartitionsToTxn v4+ with VerifyOnly (Kafka's handleVerifyPartitionsInTransaction):
    per partition NONE if it is in the transaction, else TRANSACTION_ABORTABLE; a problem
    with the transaction itself is every partition's answer. Pending transitions are not
    checked (the append that follows is validated on its own)."""
    if md is None or md.producer_id != producer_id:
        return dict.fromkeys(partitions, ErrorCode.invalid_producer_id_mapping)
    if md.producer_epoch != producer_epoch:
        return dict.fromkeys(partitions, ErrorCode.producer_fenced)
    if md.state in PREPARED:
        return dict.fromkeys(partitions, ErrorCode.concurrent_transactions)
    return {tp: ErrorCode.none if tp in md.partitions else ErrorCode.transaction_abortable
            for tp in partitions}


def verify_partition(md: TxnMetadata | None, producer_id: int, producer_epoch: int,
                     tp: Partition) -> ErrorCode:
    """KIP-890 part 1: is `tp` in the ongoing transaction of this producer?"""
    if md is None or md.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if md.producer_epoch != producer_epoch:
        return ErrorCode.invalid_producer_epoch
    if md.state in PREPARED or (md.pending and md.state is not TxnState.ONGOING):
        return ErrorCode.concurrent_transactions
    if md.state is TxnState.ONGOING and tp in md.partitions:
        return ErrorCode.none
    return ErrorCode.transaction_abortable


# ---- EndTxn ----------------------------------------------------------------------------------
def end_transaction(md: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool,
                    now: int, next_producer_id: NextProducerId, *, from_client: bool,
                    client_version: int = 0) -> Step:
    """Kafka's endTransaction: PrepareCommit/PrepareAbort of the open transaction (the
    markers follow once it is written), or the answer to a retry or a misuse. Not
    `from_client`: the coordinator's own abort (a timeout, InitProducerId), whose producer
    `md.prepare_fence_epoch` fenced in memory."""
    fencing = md.pending_state is TxnState.PREPARE_EPOCH_FENCE
    state = md.state
    # A TV2 transaction bumps the epoch at every EndTxn, so a retry carries the epoch before
    # the bump (or, past an exhausted epoch, the previous id).
    tv2 = md.tv2 and not fencing
    retry_on_bump = tv2 and md.producer_epoch == producer_epoch + 1
    retry_on_overflow = (
        tv2 and md.last_producer_id == producer_id and md.producer_epoch == 0
        and producer_epoch == MAX_EPOCH - 1
    )
    if md.producer_id != producer_id and not retry_on_overflow:
        return _unfenced(md, fencing, ErrorCode.invalid_producer_id_mapping)
    if not _valid_epoch(md, producer_epoch, tv2, retry_on_bump, retry_on_overflow, from_client):
        return _unfenced(md, fencing, ErrorCode.producer_fenced)
    if md.pending and not fencing:
        return Step(ErrorCode.concurrent_transactions)
    is_retry = retry_on_bump or retry_on_overflow
    target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    fresh_abort = (  # TV2: an abort with nothing open bumps the epoch all the same
        client_version >= 2 and not commit and not is_retry
        and state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    )
    if state is TxnState.ONGOING or fresh_abort:
        return _prepare(md, target, fencing, now, next_producer_id, client_version)
    return _unfenced(md, fencing, _not_open(state, commit, tv2 and not is_retry))


def _valid_epoch(md: TxnMetadata, producer_epoch: int, tv2: bool, retry_on_bump: bool,
                 retry_on_overflow: bool, from_client: bool) -> bool:
    if not tv2:
        return (not from_client or producer_epoch == md.producer_epoch) \
            and producer_epoch >= md.producer_epoch
    if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return retry_on_bump
    if md.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        return retry_on_bump or retry_on_overflow or producer_epoch == md.producer_epoch
    return producer_epoch == md.producer_epoch


def _prepare(md: TxnMetadata, target: TxnState, fencing: bool, now: int,
             next_producer_id: NextProducerId, client_version: int) -> Step:
    """The Prepare of the open transaction (or of a TV2 abort with nothing open)."""
    if fencing:
        if target is not TxnState.PREPARE_ABORT:
            return _unfenced(md, fencing, ErrorCode.invalid_txn_state)
        md.pending_state = None
        md.last_producer_epoch = -1
        # The coordinator's own abort of a TV2 transaction bumps the epoch once more after
        # the fence, so the fenced producer's retry (its epoch + 1 = the fence) does not pass
        # for a retry of this abort. (Kafka goes by the cluster's level here; by the
        # transaction's, a classic client's epochs stay exactly what they were before
        # transactions v2.)
        client_version = md.client_transaction_version
    bump = client_version >= 2 and (not fencing or md.producer_epoch < MAX_EPOCH)
    next_pid = -1
    if bump and not fencing and epoch_exhausted(md.producer_epoch):
        try:
            next_pid = next_producer_id()
        except KafkaError as exc:
            return Step(exc.error_code)
    transit = md.prepare_abort_or_commit(target, now, client_version, next_pid, bump)
    return Step(transit=transit, send_markers=True, fenced=fencing)


def _not_open(state: TxnState, commit: bool, tv2_current_epoch: bool) -> ErrorCode:
    """EndTxn's answer when no transaction is open to end: NONE for a retry of the end that
    happened, CONCURRENT_TRANSACTIONS while it is being finished."""
    if state is TxnState.COMPLETE_COMMIT:
        if tv2_current_epoch:
            return ErrorCode.invalid_txn_state  # commit with the current epoch: nothing open
        return ErrorCode.none if commit else ErrorCode.invalid_txn_state
    if state is TxnState.COMPLETE_ABORT:
        if tv2_current_epoch:
            return ErrorCode.invalid_txn_state
        return ErrorCode.invalid_txn_state if commit else ErrorCode.none
    if state is TxnState.PREPARE_COMMIT:
        return ErrorCode.concurrent_transactions if commit else ErrorCode.invalid_txn_state
    if state is TxnState.PREPARE_ABORT:
        return ErrorCode.invalid_txn_state if commit else ErrorCode.concurrent_transactions
    return ErrorCode.invalid_txn_state


def _unfenced(md: TxnMetadata, fencing: bool, error: ErrorCode) -> Step:
    """`error`, the in-memory fence undone: the coordinator's abort does not happen."""
    if fencing:
        md.pending_state = None
        md.producer_epoch -= 1
    return Step(error)


# ---- markers ---------------------------------------------------------------------------------
class Marker(enum.Enum):
    """What a partition's answer to a transaction marker means for the transaction's end."""

    WRITTEN = "written"
    DELETED = "deleted"  # the partition's topic is gone: nothing to mark
    RETRY = "retry"  # sent again after a pause
    ABANDON = "abandon"  # a newer producer or coordinator took over: this end stops
    FAILED = "failed"  # not retriable: the partition is counted done (and logged)


_RETRY_MARKER = frozenset({
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_leader_or_follower,
    ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out,
    ErrorCode.kafka_storage_error,
    ErrorCode.coordinator_load_in_progress,
})
_ABANDON_MARKER = frozenset({ErrorCode.invalid_producer_epoch,
                             ErrorCode.transaction_coordinator_fenced})


def marker_outcome(code: int, topic_deleted: Callable[[], bool]) -> Marker:
    """The outcome of a marker answered `code` (Kafka's TransactionMarkerRequestCompletion-
    Handler); `topic_deleted` is asked only of UNKNOWN_TOPIC_OR_PARTITION."""
    if code == ErrorCode.none:
        return Marker.WRITTEN
    if code == ErrorCode.unknown_topic_or_partition and topic_deleted():
        return Marker.DELETED
    if code in _ABANDON_MARKER:
        return Marker.ABANDON
    return Marker.RETRY if code in _RETRY_MARKER else Marker.FAILED


# ---- the coordinator's own transitions -------------------------------------------------------
def timed_out(md: TxnMetadata, now: int) -> bool:
    """An open transaction past its timeout (the coordinator aborts it); a two-phase commit
    transaction never is (Kafka's isDistributedTwoPhaseCommitTxn)."""
    return (md.state is TxnState.ONGOING and not md.pending
            and md.timeout_ms != TWO_PHASE_TIMEOUT_MS and md.start_ms + md.timeout_ms < now)


def expired(md: TxnMetadata, now: int, expiration_ms: int) -> bool:
    """An id idle for transactional.id.expiration.ms with no transaction open (removed)."""
    return md.state in COMPLETED and not md.pending and md.last_update_ms <= now - expiration_ms


def listed(md: TxnMetadata, states: set[TxnState], producer_ids: set[int],
           duration_ms: int, now: int) -> bool:
    """ListTransactions' filters: the states, the producer ids, and running longer than
    `duration_ms` (-1: any)."""
    if md.state is TxnState.DEAD:
        return False
    if producer_ids and md.producer_id not in producer_ids:
        return False
    if states and md.state not in states:
        return False
    return duration_ms < 0 or (md.start_ms >= 0 and now - md.start_ms > duration_ms)
