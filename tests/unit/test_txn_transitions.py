"""What each request does to a transactional id (coordinator/transaction/transitions.py),
specified without a coordinator, a log or an event loop: the answer, and the transition the
coordinator writes before answering. Kafka's TransactionCoordinator (handleInitProducerId,
handleAddPartitionsToTransaction, handleVerifyPartitionsInTransaction, endTransaction) is the
reference; the per-id transitions themselves are test_txn_state_machine.py's."""

from __future__ import annotations

import pytest

from samsa.coordinator.transaction.log import decode_value
from samsa.coordinator.transaction.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_ID,
    TxnMetadata,
    TxnState,
)
from samsa.coordinator.transaction.transitions import (
    TWO_PHASE_TIMEOUT_MS,
    Marker,
    Step,
    add_partitions,
    end_transaction,
    expired,
    init_producer_id,
    init_request_error,
    listed,
    marker_outcome,
    record,
    resolved_timeout,
    timed_out,
    verify_partition,
    verify_partitions,
)
from samsa.protocol.errors import ErrorCode, KafkaError

S = TxnState
NOW = 1_700_000_000_000
PID, NEW_PID = 1000, 2000
TP0, TP1 = ("t", 0), ("t", 1)


def _md(state: TxnState = S.EMPTY, epoch: int = 5, *, tv2: bool = False,
        partitions: frozenset[tuple[str, int]] = frozenset(), **kw: object) -> TxnMetadata:
    return TxnMetadata("tx", PID, producer_epoch=epoch, state=state, partitions=set(partitions),
                       start_ms=NOW - 10 if state is not S.EMPTY else -1, last_update_ms=NOW - 10,
                       client_transaction_version=2 if tv2 else 0, **kw)  # type: ignore[arg-type]


def _no_pid() -> int:
    raise AssertionError("no new producer id expected")


def _pid() -> int:
    return NEW_PID


def _none_ready() -> int:
    raise KafkaError("no block yet", ErrorCode.coordinator_load_in_progress)


def _end(md: TxnMetadata, commit: bool, epoch: int | None = None, *, pid: int = PID,
         from_client: bool = True, client_version: int = 0,
         next_pid: object = _no_pid) -> Step:
    return end_transaction(md, pid, md.producer_epoch if epoch is None else epoch, commit, NOW,
                           next_pid, from_client=from_client,  # type: ignore[arg-type]
                           client_version=client_version)


# ---- InitProducerId ----------------------------------------------------------------------------
def test_init_bumps_the_epoch_of_a_completed_id() -> None:
    md = _md(S.COMPLETE_COMMIT, 5)
    step = init_producer_id(md, 30_000, None, NOW, _no_pid)
    assert step.error == ErrorCode.none and step.transit is not None
    assert (step.transit.state, step.transit.producer_id, step.transit.producer_epoch) == \
        (S.EMPTY, PID, 6)
    assert step.transit.timeout_ms == 30_000 and step.transit.last_update_ms == NOW
    assert md.pending_state is S.EMPTY and md.producer_epoch == 5  # applied only once written


def test_init_past_an_exhausted_epoch_moves_to_a_new_producer_id() -> None:
    step = init_producer_id(_md(S.EMPTY, MAX_EPOCH - 1), 30_000, None, NOW, _pid)
    assert step.transit is not None
    assert (step.transit.producer_id, step.transit.last_producer_id,
            step.transit.producer_epoch) == (NEW_PID, PID, 0)


def test_init_cannot_rotate_without_a_producer_id_and_says_why() -> None:
    md = _md(S.EMPTY, MAX_EPOCH - 1)
    with pytest.raises(KafkaError) as exc:
        init_producer_id(md, 30_000, None, NOW, _none_ready)
    assert exc.value.error_code == ErrorCode.coordinator_load_in_progress
    assert not md.pending


@pytest.mark.parametrize("expected, answer, epoch", [
    ((PID, 5), ErrorCode.none, 6),        # the current epoch: bumped
    ((PID, 4), ErrorCode.none, 5),        # the epoch before the last bump: a retry of it
    ((PID, 3), ErrorCode.producer_fenced, None),
    ((7, 5), ErrorCode.producer_fenced, None),  # another producer id
])
def test_init_of_a_recovering_producer(expected: tuple[int, int], answer: ErrorCode,
                                       epoch: int | None) -> None:
    md = _md(S.COMPLETE_ABORT, 5, last_producer_epoch=4)
    step = init_producer_id(md, 30_000, expected, NOW, _no_pid)
    assert step.error == answer
    assert (step.transit.producer_epoch if step.transit else None) == epoch


@pytest.mark.parametrize("state", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_init_waits_for_a_transaction_being_finished(state: TxnState) -> None:
    assert init_producer_id(_md(state), 30_000, None, NOW, _no_pid) == \
        Step(ErrorCode.concurrent_transactions)


def test_init_of_an_id_with_a_pending_transition_waits() -> None:
    md = _md(S.EMPTY)
    md.pending_state = S.ONGOING
    assert init_producer_id(md, 30_000, None, NOW, _no_pid) == \
        Step(ErrorCode.concurrent_transactions)


def test_init_with_a_transaction_open_aborts_it_first() -> None:
    md = _md(S.ONGOING, partitions=frozenset({TP0}))
    step = init_producer_id(md, 30_000, None, NOW, _no_pid)
    assert step == Step(ErrorCode.concurrent_transactions, abort_ongoing=True)
    assert not md.pending  # the coordinator fences and aborts


# ---- AddPartitionsToTxn ------------------------------------------------------------------------
@pytest.mark.parametrize(("timeout", "flags", "answer"), [
    (60_000, {}, ErrorCode.none),
    (0, {}, ErrorCode.invalid_transaction_timeout),
    (900_001, {}, ErrorCode.invalid_transaction_timeout),
    # KIP-939 two-phase commit: refused as if denied where the broker does not allow it
    (60_000, {"enable_2pc": True}, ErrorCode.transactional_id_authorization_failed),
    (60_000, {"enable_2pc": True, "two_phase_enabled": True}, ErrorCode.none),
    # a 2PC transaction has no timeout of its own to check
    (0, {"enable_2pc": True, "two_phase_enabled": True}, ErrorCode.none),
    (900_001, {"enable_2pc": True, "two_phase_enabled": True}, ErrorCode.none),
    # keeping a prepared transaction is not served yet, as in Kafka 4.4
    (60_000, {"keep_prepared": True}, ErrorCode.unsupported_version),
    (60_000, {"enable_2pc": True, "keep_prepared": True, "two_phase_enabled": True},
     ErrorCode.unsupported_version),
    (60_000, {"enable_2pc": True, "keep_prepared": True},
     ErrorCode.transactional_id_authorization_failed),
])
def test_init_request_checks(timeout: int, flags: dict[str, bool], answer: ErrorCode) -> None:
    assert init_request_error(timeout, 900_000, **flags) == answer


def test_a_two_phase_commit_init_keeps_the_no_timeout_mark() -> None:
    assert resolved_timeout(60_000, False) == 60_000
    assert resolved_timeout(60_000, True) == TWO_PHASE_TIMEOUT_MS == 2**31 - 1
    step = init_producer_id(_md(S.COMPLETE_COMMIT), resolved_timeout(60_000, True), None, NOW,
                            _no_pid)
    assert step.transit is not None and step.transit.timeout_ms == TWO_PHASE_TIMEOUT_MS
    # the mark is in the transaction log, so a new coordinator knows the transaction for 2PC
    _, value = record("tx", step.transit, 0)
    assert value is not None and decode_value(value).timeout_ms == TWO_PHASE_TIMEOUT_MS


def test_add_partitions_opens_a_transaction() -> None:
    step = add_partitions(_md(S.COMPLETE_COMMIT), PID, 5, {TP0}, NOW, 2)
    assert step.transit is not None
    assert (step.transit.state, step.transit.partitions, step.transit.start_ms,
            step.transit.client_transaction_version) == (S.ONGOING, {TP0}, NOW, 2)


def test_add_partitions_to_an_open_transaction_keeps_its_start() -> None:
    md = _md(S.ONGOING, partitions=frozenset({TP0}))
    step = add_partitions(md, PID, 5, {TP1}, NOW)
    assert step.transit is not None
    assert step.transit.partitions == {TP0, TP1} and step.transit.start_ms == md.start_ms


@pytest.mark.parametrize("added", [{TP0}, {TP0, TP1}])
def test_add_partitions_already_in_the_transaction_writes_nothing(
        added: set[tuple[str, int]]) -> None:
    md = _md(S.ONGOING, partitions=frozenset({TP0, TP1}))
    assert add_partitions(md, PID, 5, added, NOW) == Step()
    assert not md.pending


@pytest.mark.parametrize("md, pid, epoch, answer", [
    (None, PID, 5, ErrorCode.invalid_producer_id_mapping),
    (_md(S.EMPTY), 7, 5, ErrorCode.invalid_producer_id_mapping),
    (_md(S.EMPTY), PID, 4, ErrorCode.producer_fenced),
    (_md(S.PREPARE_COMMIT), PID, 5, ErrorCode.concurrent_transactions),
    (_md(S.DEAD), PID, 5, ErrorCode.invalid_txn_state),
])
def test_add_partitions_refused(md: TxnMetadata | None, pid: int, epoch: int,
                                answer: ErrorCode) -> None:
    assert add_partitions(md, pid, epoch, {TP0}, NOW) == Step(answer)


def test_verify_partitions_answers_each_partition() -> None:
    md = _md(S.ONGOING, partitions=frozenset({TP0}))
    assert verify_partitions(md, PID, 5, [TP0, TP1]) == {
        TP0: ErrorCode.none, TP1: ErrorCode.transaction_abortable}
    assert verify_partitions(md, PID, 4, [TP0, TP1]) == dict.fromkeys(
        [TP0, TP1], ErrorCode.producer_fenced)
    assert verify_partitions(None, PID, 5, [TP0]) == {
        TP0: ErrorCode.invalid_producer_id_mapping}


@pytest.mark.parametrize("state, pending, epoch, tp, answer", [
    (S.ONGOING, None, 5, TP0, ErrorCode.none),
    (S.ONGOING, None, 5, TP1, ErrorCode.transaction_abortable),
    (S.ONGOING, S.PREPARE_COMMIT, 5, TP0, ErrorCode.none),  # Ongoing while its end is written
    (S.EMPTY, S.ONGOING, 5, TP0, ErrorCode.concurrent_transactions),
    (S.PREPARE_ABORT, None, 5, TP0, ErrorCode.concurrent_transactions),
    (S.ONGOING, None, 4, TP0, ErrorCode.invalid_producer_epoch),
    (S.COMPLETE_COMMIT, None, 5, TP0, ErrorCode.transaction_abortable),
])
def test_verify_partition_of_a_produce(state: TxnState, pending: TxnState | None, epoch: int,
                                       tp: tuple[str, int], answer: ErrorCode) -> None:
    md = _md(state, partitions=frozenset({TP0}) if state is not S.EMPTY else frozenset())
    md.pending_state = pending
    assert verify_partition(md, PID, epoch, tp) == answer


# ---- EndTxn, transactions v1 -------------------------------------------------------------------
@pytest.mark.parametrize("commit, state", [(True, S.PREPARE_COMMIT), (False, S.PREPARE_ABORT)])
def test_end_prepares_the_open_transaction(commit: bool, state: TxnState) -> None:
    md = _md(S.ONGOING, partitions=frozenset({TP0}))
    step = _end(md, commit)
    assert step.transit is not None and step.send_markers and not step.fenced
    assert (step.transit.state, step.transit.producer_epoch, step.transit.partitions) == \
        (state, 5, {TP0})


@pytest.mark.parametrize("state, commit, answer", [
    (S.COMPLETE_COMMIT, True, ErrorCode.none),  # a retry of the commit that happened
    (S.COMPLETE_COMMIT, False, ErrorCode.invalid_txn_state),
    (S.COMPLETE_ABORT, False, ErrorCode.none),
    (S.COMPLETE_ABORT, True, ErrorCode.invalid_txn_state),
    (S.PREPARE_COMMIT, True, ErrorCode.concurrent_transactions),
    (S.PREPARE_COMMIT, False, ErrorCode.invalid_txn_state),
    (S.PREPARE_ABORT, False, ErrorCode.concurrent_transactions),
    (S.PREPARE_ABORT, True, ErrorCode.invalid_txn_state),
    (S.EMPTY, True, ErrorCode.invalid_txn_state),
    (S.EMPTY, False, ErrorCode.invalid_txn_state),
])
def test_end_with_no_transaction_open(state: TxnState, commit: bool,
                                      answer: ErrorCode) -> None:
    md = _md(state)
    assert _end(md, commit) == Step(answer)
    assert not md.pending


@pytest.mark.parametrize("pid, epoch, answer", [
    (7, 5, ErrorCode.invalid_producer_id_mapping),
    (PID, 4, ErrorCode.producer_fenced),
    (PID, 6, ErrorCode.producer_fenced),  # from a client the epoch must be the current one
])
def test_end_by_another_producer(pid: int, epoch: int, answer: ErrorCode) -> None:
    assert _end(_md(S.ONGOING, partitions=frozenset({TP0})), True, epoch, pid=pid) == \
        Step(answer)


def test_end_while_a_transition_is_pending_waits() -> None:
    md = _md(S.ONGOING, partitions=frozenset({TP0}))
    md.pending_state = S.ONGOING
    assert _end(md, True) == Step(ErrorCode.concurrent_transactions)


# ---- EndTxn, transactions v2 (KIP-890): the epoch is bumped at every end ------------------------
def test_tv2_end_bumps_the_epoch_in_the_prepare() -> None:
    step = _end(_md(S.ONGOING, tv2=True, partitions=frozenset({TP0})), True, client_version=2)
    assert step.transit is not None
    assert (step.transit.state, step.transit.producer_epoch, step.transit.last_producer_epoch,
            step.transit.next_producer_id) == (S.PREPARE_COMMIT, 6, 5, NO_PRODUCER_ID)


def test_tv2_end_past_an_exhausted_epoch_names_the_next_producer_id() -> None:
    md = _md(S.ONGOING, MAX_EPOCH - 1, tv2=True, partitions=frozenset({TP0}))
    step = _end(md, False, client_version=2, next_pid=_pid)
    assert step.transit is not None and step.transit.next_producer_id == NEW_PID


def test_tv2_end_without_a_next_producer_id_answers_and_leaves_the_id() -> None:
    md = _md(S.ONGOING, MAX_EPOCH - 1, tv2=True, partitions=frozenset({TP0}))
    assert _end(md, True, client_version=2, next_pid=_none_ready) == \
        Step(ErrorCode.coordinator_load_in_progress)
    assert not md.pending


@pytest.mark.parametrize("state, commit, epoch, answer", [
    (S.COMPLETE_COMMIT, True, 5, ErrorCode.none),      # the retry: the epoch before the bump
    (S.COMPLETE_COMMIT, True, 6, ErrorCode.invalid_txn_state),  # the current one: none open
    (S.COMPLETE_ABORT, False, 5, ErrorCode.none),
    (S.PREPARE_COMMIT, True, 5, ErrorCode.concurrent_transactions),
    (S.PREPARE_COMMIT, True, 6, ErrorCode.producer_fenced),
    (S.COMPLETE_COMMIT, True, 4, ErrorCode.producer_fenced),
])
def test_tv2_end_retried(state: TxnState, commit: bool, epoch: int, answer: ErrorCode) -> None:
    assert _end(_md(state, 6, tv2=True), commit, epoch, client_version=2) == Step(answer)


def test_tv2_end_retried_past_an_exhausted_epoch_is_known_by_the_previous_id() -> None:
    md = _md(S.COMPLETE_COMMIT, 0, tv2=True, last_producer_id=7)
    assert _end(md, True, MAX_EPOCH - 1, pid=7, client_version=2) == Step(ErrorCode.none)


def test_tv2_abort_with_nothing_open_bumps_the_epoch_all_the_same() -> None:
    step = _end(_md(S.COMPLETE_COMMIT, 6, tv2=True), False, 6, client_version=2)
    assert step.transit is not None and step.send_markers
    assert (step.transit.state, step.transit.producer_epoch, step.transit.partitions,
            step.transit.start_ms) == (S.PREPARE_ABORT, 7, frozenset(), NOW)


# ---- the coordinator's own abort (a timeout, InitProducerId): the producer fenced first --------
def test_fenced_abort_prepares_with_the_fence_epoch() -> None:
    md = _md(S.ONGOING, partitions=frozenset({TP0}))
    md.prepare_fence_epoch()
    step = _end(md, False, md.producer_epoch, from_client=False)
    assert step.transit is not None and step.fenced and step.send_markers
    assert (step.transit.state, step.transit.producer_epoch, step.transit.last_producer_epoch) \
        == (S.PREPARE_ABORT, 6, -1)


def test_fenced_abort_of_a_tv2_transaction_bumps_once_more() -> None:
    md = _md(S.ONGOING, tv2=True, partitions=frozenset({TP0}))
    md.prepare_fence_epoch()
    step = _end(md, False, md.producer_epoch, from_client=False)
    assert step.transit is not None and step.transit.producer_epoch == 7


@pytest.mark.parametrize("commit, pid, answer", [
    (True, PID, ErrorCode.invalid_txn_state),
    (False, 7, ErrorCode.invalid_producer_id_mapping),
])
def test_a_fence_that_cannot_abort_is_undone(commit: bool, pid: int, answer: ErrorCode) -> None:
    md = _md(S.ONGOING, partitions=frozenset({TP0}))
    md.prepare_fence_epoch()
    assert _end(md, commit, md.producer_epoch, pid=pid, from_client=False) == Step(answer)
    assert (md.producer_epoch, md.pending_state) == (5, None)


# ---- records and the coordinator's scans -------------------------------------------------------
@pytest.mark.parametrize("tv2, transaction_version, version", [
    (False, 0, 0), (False, 1, 1), (True, 0, 1),
])
def test_record_of_a_transition(tv2: bool, transaction_version: int, version: int) -> None:
    step = add_partitions(_md(S.EMPTY, tv2=tv2), PID, 5, {TP0}, NOW, 2 if tv2 else 0)
    assert step.transit is not None
    key, value = record("tx", step.transit, transaction_version)
    assert value is not None and int.from_bytes(value[:2], "big") == version
    assert decode_value(value).partitions == (TP0,)
    assert record("tx", None, transaction_version) == (key, None)


def test_scans_find_timed_out_and_expired_ids() -> None:
    ongoing = _md(S.ONGOING, timeout_ms=1000)
    ongoing.start_ms = NOW - 1001
    assert timed_out(ongoing, NOW) and not timed_out(ongoing, NOW - 1)
    ongoing.pending_state = S.PREPARE_ABORT
    assert not timed_out(ongoing, NOW)
    idle = _md(S.COMPLETE_COMMIT)
    assert expired(idle, NOW, 10) and not expired(idle, NOW, 11)
    assert not expired(_md(S.ONGOING), NOW, 0)


def test_a_two_phase_commit_transaction_never_times_out() -> None:
    ongoing = _md(S.ONGOING, timeout_ms=TWO_PHASE_TIMEOUT_MS)
    ongoing.start_ms = NOW - 2 * TWO_PHASE_TIMEOUT_MS  # open far longer than its "timeout"
    assert not timed_out(ongoing, NOW)
    ongoing.timeout_ms = TWO_PHASE_TIMEOUT_MS - 1
    assert timed_out(ongoing, NOW)


def test_list_transactions_filters() -> None:
    md = _md(S.ONGOING)
    assert listed(md, set(), set(), -1, NOW)
    assert listed(md, {S.ONGOING}, {PID}, 9, NOW) and not listed(md, {S.ONGOING}, set(), 10, NOW)
    assert not listed(md, {S.EMPTY}, set(), -1, NOW) and not listed(md, set(), {7}, -1, NOW)
    assert not listed(_md(S.DEAD), set(), set(), -1, NOW)
    assert not listed(_md(S.EMPTY), set(), set(), 0, NOW)  # no transaction: no duration


@pytest.mark.parametrize("code, deleted, outcome", [
    (ErrorCode.none, False, Marker.WRITTEN),
    (ErrorCode.unknown_topic_or_partition, True, Marker.DELETED),
    (ErrorCode.unknown_topic_or_partition, False, Marker.RETRY),  # not known here yet
    (ErrorCode.not_leader_or_follower, False, Marker.RETRY),
    (ErrorCode.not_enough_replicas, False, Marker.RETRY),
    (ErrorCode.coordinator_load_in_progress, False, Marker.RETRY),
    (ErrorCode.invalid_producer_epoch, False, Marker.ABANDON),
    (ErrorCode.transaction_coordinator_fenced, False, Marker.ABANDON),
    (ErrorCode.corrupt_message, False, Marker.FAILED),
])
def test_a_marker_answer(code: ErrorCode, deleted: bool, outcome: Marker) -> None:
    asked = []

    def topic_deleted() -> bool:
        asked.append(code)
        return deleted

    assert marker_outcome(code, topic_deleted) is outcome
    assert asked == ([code] if code == ErrorCode.unknown_topic_or_partition else [])
