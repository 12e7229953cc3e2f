"""The transaction coordinator's per-id state machine (coordinator/transaction/metadata.py),
specified without a broker: which transitions Kafka's TransactionState allows, the pending-state
rule (one prepared transition at a time, applied only once written), epoch bumps, epoch
exhaustion and producer-id rotation (KIP-360), and what a transition writes to the log.

The table of legal transitions is Kafka's `TransactionState.validPreviousStates`
(core/src/main/scala/kafka/coordinator/transaction/TransactionMetadata.scala), written here by
Kafka's state names, so that the test reads as the specification it is checked against."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.coordinator.transaction.log import TxnLogValue
from samsa.coordinator.transaction.metadata import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    TxnTransit,
    epoch_exhausted,
)
from samsa.protocol.errors import ErrorCode

S = TxnState
NOW = 1_700_000_000_000
TP0, TP1, TP2 = ("t", 0), ("t", 1), ("u", 0)

# Kafka's TransactionState ids (TransactionState.fromId) and validPreviousStates, by name.
KAFKA_IDS = {
    "Empty": 0,
    "Ongoing": 1,
    "PrepareCommit": 2,
    "PrepareAbort": 3,
    "CompleteCommit": 4,
    "CompleteAbort": 5,
    "Dead": 6,
    "PrepareEpochFence": 7,
}
KAFKA_VALID_PREVIOUS = {
    "Empty": {"Empty", "CompleteCommit", "CompleteAbort"},
    "Ongoing": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareCommit": {"Ongoing"},
    # Kafka 4.x: a TV2 abort with no transaction open goes through PrepareAbort too.
    "PrepareAbort": {"Ongoing", "PrepareEpochFence", "Empty", "CompleteCommit", "CompleteAbort"},
    "CompleteCommit": {"PrepareCommit"},
    "CompleteAbort": {"PrepareAbort"},
    "Dead": {"Empty", "CompleteAbort", "CompleteCommit"},
    "PrepareEpochFence": {"Ongoing"},
}


def _state(name: str) -> TxnState:
    state = TxnState.by_name(name)
    assert state is not None, name
    return state


def _md(state: TxnState = S.EMPTY, *, epoch: int = 5, pid: int = 1000) -> TxnMetadata:
    """Metadata as the coordinator holds it after some history: a producer id and epoch, and
    partitions/start time when the state is in the middle of a transaction."""
    in_txn = state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE)
    return TxnMetadata(
        "txn",
        pid,
        producer_epoch=epoch,
        timeout_ms=60_000,
        state=state,
        partitions={TP0} if in_txn else set(),
        start_ms=NOW - 10 if in_txn else -1,
        last_update_ms=NOW - 5,
    )


def _snapshot(md: TxnMetadata) -> tuple[object, ...]:
    return (
        md.producer_id,
        md.last_producer_id,
        md.producer_epoch,
        md.last_producer_epoch,
        md.timeout_ms,
        md.state,
        frozenset(md.partitions),
        md.start_ms,
        md.last_update_ms,
    )


# One public way to ask for each target state (the coordinator's prepare* calls).
Prepare = Callable[[TxnMetadata], object]
REQUESTS: list[tuple[str, str, Prepare]] = [
    ("Empty", "init", lambda md: md.prepare_increment_epoch(30_000, None, NOW)),
    ("Empty", "rotate",  # to a producer id never used before, as the allocator hands out
     lambda md: md.prepare_producer_id_rotation(md.producer_id + 1000, 30_000, NOW, False)),
    ("Ongoing", "add", lambda md: md.prepare_add_partitions({TP1}, NOW)),
    ("PrepareCommit", "commit", lambda md: md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)),
    ("PrepareAbort", "abort", lambda md: md.prepare_abort_or_commit(S.PREPARE_ABORT, NOW)),
    ("Dead", "expire", lambda md: md.prepare_dead()),
    ("PrepareEpochFence", "fence", lambda md: md.prepare_fence_epoch()),
]


def test_state_ids_and_names_are_kafkas() -> None:
    # The id is what the transaction log stores (TransactionStatus), the name what
    # DescribeTransactions/ListTransactions answer.
    assert {s.kafka_name: int(s) for s in TxnState} == KAFKA_IDS
    for name in KAFKA_IDS:
        assert _state(name).kafka_name == name
    assert TxnState.by_name("Preparing") is None


@pytest.mark.parametrize(
    ("target", "source"),
    [
        (target, source)
        for target, _how, _fn in REQUESTS
        for source in KAFKA_IDS
    ],
    ids=lambda v: v,
)
def test_every_transition_is_legal_exactly_when_kafka_allows_it(target: str, source: str) -> None:
    legal = source in KAFKA_VALID_PREVIOUS[target]
    for tgt, how, prepare in REQUESTS:
        if tgt != target:
            continue
        md = _md(_state(source))
        before = _snapshot(md)
        if legal:
            transit = prepare(md)
            if transit is not None:  # fencing has no transit: it is applied in memory
                assert isinstance(transit, TxnTransit) and transit.state is _state(target), how
            assert md.pending_state is _state(target), how
            assert md.state is _state(source), how  # nothing is applied before the write
        else:
            with pytest.raises(IllegalTransition):
                prepare(md)
            assert md.pending_state is None, how
            assert _snapshot(md) == before, how


@pytest.mark.parametrize("source", list(KAFKA_IDS))
def test_completion_follows_the_prepare_and_nothing_else(source: str) -> None:
    # CompleteCommit is legal only from PrepareCommit, CompleteAbort only from PrepareAbort:
    # prepare_complete picks the completion matching the prepared decision.
    md = _md(_state(source))
    expected = {"PrepareCommit": S.COMPLETE_COMMIT, "PrepareAbort": S.COMPLETE_ABORT}.get(source)
    if expected is None:
        with pytest.raises(IllegalTransition):
            md.prepare_complete(NOW)
        assert md.pending_state is None
        return
    assert source in KAFKA_VALID_PREVIOUS[expected.kafka_name]
    transit = md.prepare_complete(NOW)
    assert transit.state is expected and md.pending_state is expected
    assert transit.partitions == frozenset()  # the markers are written: nothing is pending
    assert transit.start_ms == md.start_ms and transit.producer_epoch == md.producer_epoch


def test_the_table_the_metadata_checks_is_kafkas() -> None:
    # Checked above through every prepare call; also read back through the exported table,
    # so that a state added on one side only shows up here.
    from samsa.coordinator.transaction.metadata import VALID_PREVIOUS

    assert {
        target.kafka_name: {s.kafka_name for s in sources}
        for target, sources in VALID_PREVIOUS.items()
    } == KAFKA_VALID_PREVIOUS


# ---- the pending-state rule -------------------------------------------------------------


@pytest.mark.parametrize(("first", "how", "prepare"), REQUESTS, ids=[r[1] for r in REQUESTS])
def test_no_transition_is_prepared_while_another_is_pending(
    first: str, how: str, prepare: Prepare
) -> None:
    # From a state where `first` is legal, prepare it, then ask for every other transition.
    source = next(s for s in KAFKA_IDS if s in KAFKA_VALID_PREVIOUS[first])
    md = _md(_state(source))
    prepare(md)
    pending = md.pending_state
    assert pending is _state(first) and md.pending
    held = _snapshot(md)
    for _tgt, other, again in REQUESTS:
        with pytest.raises(IllegalTransition):
            again(md)
        assert md.pending_state is pending and _snapshot(md) == held, other
    with pytest.raises(IllegalTransition):
        md.prepare_complete(NOW)


def test_a_transition_changes_nothing_until_it_is_completed() -> None:
    md = _md(S.EMPTY)
    before = _snapshot(md)
    transit = md.prepare_add_partitions({TP0, TP1}, NOW)
    assert _snapshot(md) == before  # the write may still fail
    with pytest.raises(dataclasses.FrozenInstanceError):
        transit.state = S.DEAD  # type: ignore[misc]

    md.complete_transition(transit)
    assert md.state is S.ONGOING and md.pending_state is None and not md.pending
    assert md.partitions == {TP0, TP1} and md.start_ms == NOW and md.last_update_ms == NOW


def test_a_failed_write_drops_the_pending_transition_and_keeps_the_state() -> None:
    md = _md(S.ONGOING)
    before = _snapshot(md)
    md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    md.abort_transition()
    assert md.pending_state is None and _snapshot(md) == before
    # ... and the next request may prepare again (here the other decision).
    transit = md.prepare_abort_or_commit(S.PREPARE_ABORT, NOW)
    md.complete_transition(transit)
    assert md.state is S.PREPARE_ABORT and md.partitions == {TP0}


# ---- a whole transaction -----------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_a_transaction_from_init_to_completion(commit: bool) -> None:
    md = TxnMetadata("txn", 1000, timeout_ms=60_000, last_update_ms=NOW)
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (S.EMPTY, -1, -1)

    t = md.prepare_increment_epoch(30_000, None, NOW + 1)  # InitProducerId of a new producer
    assert isinstance(t, TxnTransit)
    md.complete_transition(t)
    assert (md.producer_id, md.producer_epoch, md.last_producer_epoch) == (1000, 0, -1)
    assert md.timeout_ms == 30_000 and md.start_ms == -1 and md.last_update_ms == NOW + 1

    md.complete_transition(md.prepare_add_partitions({TP0}, NOW + 2))
    assert md.state is S.ONGOING and md.start_ms == NOW + 2  # the transaction starts here
    md.complete_transition(md.prepare_add_partitions({TP1, TP2}, NOW + 3))
    assert md.partitions == {TP0, TP1, TP2}
    assert md.start_ms == NOW + 2 and md.last_update_ms == NOW + 3  # still the same txn

    prepared = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
    md.complete_transition(md.prepare_abort_or_commit(prepared, NOW + 4))
    assert md.state is prepared and md.partitions == {TP0, TP1, TP2}  # markers go there
    assert md.producer_epoch == 0 and md.start_ms == NOW + 2

    md.complete_transition(md.prepare_complete(NOW + 5))
    assert md.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert md.partitions == set() and md.last_update_ms == NOW + 5 and md.producer_epoch == 0

    # The next transaction of the same producer starts a new clock.
    md.complete_transition(md.prepare_add_partitions({TP2}, NOW + 6))
    assert md.state is S.ONGOING and md.partitions == {TP2} and md.start_ms == NOW + 6

    md.complete_transition(md.prepare_abort_or_commit(S.PREPARE_ABORT, NOW + 7))
    md.complete_transition(md.prepare_complete(NOW + 8))
    dead = md.prepare_dead()  # transactional.id.expiration.ms: written as a tombstone
    assert dead.state is S.DEAD and md.pending_state is S.DEAD


# ---- epochs: InitProducerId --------------------------------------------------------------


def test_init_without_an_expected_epoch_bumps_and_forgets_the_last_epoch() -> None:
    md = _md(S.COMPLETE_COMMIT, epoch=7)
    md.last_producer_epoch = 6
    t = md.prepare_increment_epoch(30_000, None, NOW)
    assert isinstance(t, TxnTransit)
    assert (t.producer_id, t.producer_epoch, t.last_producer_epoch) == (1000, 8, NO_PRODUCER_EPOCH)
    assert t.state is S.EMPTY and t.partitions == frozenset() and t.start_ms == -1
    assert t.timeout_ms == 30_000 and t.last_update_ms == NOW


def test_init_with_the_current_epoch_bumps_and_remembers_it() -> None:
    # KIP-360: a producer recovering from an abortable error keeps its producer id.
    md = _md(S.COMPLETE_ABORT, epoch=7)
    t = md.prepare_increment_epoch(30_000, 7, NOW)
    assert isinstance(t, TxnTransit)
    assert (t.producer_epoch, t.last_producer_epoch) == (8, 7)


def test_init_retried_after_a_lost_response_returns_the_same_epoch() -> None:
    md = _md(S.EMPTY, epoch=8)
    md.last_producer_epoch = 7
    t = md.prepare_increment_epoch(30_000, 7, NOW)
    assert isinstance(t, TxnTransit)
    assert (t.producer_epoch, t.last_producer_epoch) == (8, 7)  # no second bump


def test_init_of_a_brand_new_id_takes_epoch_zero_whatever_is_expected() -> None:
    md = TxnMetadata("txn", 1000)
    t = md.prepare_increment_epoch(30_000, 3, NOW)
    assert isinstance(t, TxnTransit)
    assert (t.producer_epoch, t.last_producer_epoch) == (0, NO_PRODUCER_EPOCH)


def test_init_with_a_stale_epoch_is_fenced_and_prepares_nothing() -> None:
    md = _md(S.COMPLETE_COMMIT, epoch=8)
    md.last_producer_epoch = 7
    before = _snapshot(md)
    assert md.prepare_increment_epoch(30_000, 5, NOW) == ErrorCode.producer_fenced
    assert md.pending_state is None and _snapshot(md) == before
    # A later, legitimate request is not blocked by it.
    assert isinstance(md.prepare_increment_epoch(30_000, None, NOW), TxnTransit)


def test_epoch_exhaustion_is_kafkas_short_max_minus_one() -> None:
    # Kafka's TransactionMetadata.isEpochExhausted: epoch >= Short.MaxValue - 1, so that the
    # coordinator always has one epoch left to fence the producer with.
    assert MAX_EPOCH == 32767
    assert not epoch_exhausted(0)
    assert not epoch_exhausted(32765)
    assert epoch_exhausted(32766)
    assert epoch_exhausted(32767)


@pytest.mark.parametrize("recovering", [False, True], ids=["new-producer", "recovering"])
def test_producer_id_rotation_starts_a_new_id_at_epoch_zero(recovering: bool) -> None:
    md = _md(S.COMPLETE_COMMIT, epoch=32766, pid=1000)
    assert epoch_exhausted(md.producer_epoch)
    t = md.prepare_producer_id_rotation(2000, 30_000, NOW, recovering)
    assert t.state is S.EMPTY
    assert (t.producer_id, t.producer_epoch) == (2000, 0)
    # The old id is remembered, so a retry of this InitProducerId with the old id and its
    # exhausted epoch is recognised instead of fenced.
    assert t.last_producer_id == 1000
    assert t.last_producer_epoch == (32766 if recovering else NO_PRODUCER_EPOCH)
    assert t.partitions == frozenset() and t.start_ms == -1 and t.timeout_ms == 30_000
    md.complete_transition(t)
    assert (md.producer_id, md.last_producer_id, md.producer_epoch) == (2000, 1000, 0)
    assert not epoch_exhausted(md.producer_epoch)


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_no_rotation_while_a_transaction_is_in_progress(state: TxnState) -> None:
    # Kafka's prepareProducerIdRotation: "Cannot rotate producer ids while a transaction is
    # still pending".
    md = _md(state, epoch=32766)
    with pytest.raises(IllegalTransition):
        md.prepare_producer_id_rotation(2000, 30_000, NOW, False)
    assert md.producer_id == 1000 and md.pending_state is None


# ---- fencing (InitProducerId or a timeout during an ongoing transaction) -----------------


def test_fencing_bumps_the_epoch_and_blocks_other_transitions() -> None:
    md = _md(S.ONGOING, epoch=5)
    md.prepare_fence_epoch()
    assert md.producer_epoch == 6  # the old producer's requests are fenced from now on
    assert md.pending_state is S.PREPARE_EPOCH_FENCE
    assert md.state is S.ONGOING and md.partitions == {TP0}  # the abort still has to happen
    with pytest.raises(IllegalTransition):
        md.prepare_fence_epoch()
    with pytest.raises(IllegalTransition):
        md.prepare_add_partitions({TP1}, NOW)
    assert md.producer_epoch == 6


@pytest.mark.parametrize("state", [s for s in TxnState if s is not S.ONGOING])
def test_fencing_only_from_ongoing(state: TxnState) -> None:
    md = _md(state, epoch=5)
    with pytest.raises(IllegalTransition):
        md.prepare_fence_epoch()
    assert md.producer_epoch == 5 and md.pending_state is None


# ---- what is written ---------------------------------------------------------------------


def test_a_transit_is_written_as_kafkas_transaction_log_value() -> None:
    md = _md(S.EMPTY, epoch=3)
    t = md.prepare_add_partitions({TP2, TP1, TP0}, NOW)
    v = t.log_value()
    assert v == TxnLogValue(
        producer_id=1000,
        producer_epoch=3,
        timeout_ms=60_000,
        status=KAFKA_IDS["Ongoing"],
        partitions=(TP0, TP1, TP2),  # sorted: the same state is the same record
        last_update_ms=NOW,
        start_ms=NOW,
    )


def test_an_empty_state_is_written_without_partitions() -> None:
    # Kafka's TransactionLog refuses to write Empty with partitions.
    t = TxnTransit(1000, NO_PRODUCER_ID, 3, -1, 60_000, S.EMPTY, frozenset({TP0}), -1, NOW)
    assert t.log_value().partitions == ()
    assert t.log_value().status == KAFKA_IDS["Empty"]


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_ABORT])
def test_loading_a_written_state_gives_the_metadata_back(state: TxnState) -> None:
    value = TxnLogValue(1000, 9, 60_000, int(state), (TP0, TP2), NOW, NOW - 10)
    loaded = TxnMetadata.from_log("txn", value)
    assert loaded.transactional_id == "txn" and loaded.state is state
    assert (loaded.producer_id, loaded.producer_epoch, loaded.timeout_ms) == (1000, 9, 60_000)
    assert loaded.partitions == {TP0, TP2}
    assert (loaded.start_ms, loaded.last_update_ms) == (NOW - 10, NOW)
    assert loaded.pending_state is None
    # Kafka loads lastProducerEpoch as NO_PRODUCER_EPOCH too (TransactionLog.readTxnRecordValue).
    assert loaded.last_producer_epoch == NO_PRODUCER_EPOCH


# ---- any sequence of requests ------------------------------------------------------------

ACTIONS = [how for _tgt, how, _fn in REQUESTS] + ["complete"]
PREPARE_BY_NAME: dict[str, Prepare] = {how: fn for _tgt, how, fn in REQUESTS}
PREPARE_BY_NAME["complete"] = lambda md: md.prepare_complete(NOW)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(ACTIONS), st.booleans()), max_size=30))
def test_any_sequence_of_requests_keeps_kafkas_invariants(
    steps: list[tuple[str, bool]],
) -> None:
    """Each step prepares one transition and then either writes it (complete) or fails the
    write (abort). Whatever the order, only Kafka's transitions happen, a completed
    transaction holds no partitions, and a producer id's epoch never goes back."""
    md = TxnMetadata("txn", 1000, timeout_ms=60_000, last_update_ms=NOW)
    for how, written in steps:
        before = md.state
        pid, epoch = md.producer_id, md.producer_epoch
        try:
            transit = PREPARE_BY_NAME[how](md)
        except IllegalTransition:
            assert md.pending_state is None and md.state is before
            continue
        target = md.pending_state
        assert target is not None
        assert before.kafka_name in KAFKA_VALID_PREVIOUS[target.kafka_name]
        if transit is None:  # fencing: applied in memory; the abort that follows is the
            md.abort_transition()  # coordinator's (modelled here as a failed write)
        elif written:
            assert isinstance(transit, TxnTransit)
            md.complete_transition(transit)
            assert md.state is target
        else:
            md.abort_transition()
            assert md.state is before
        assert md.pending_state is None
        if md.producer_id == pid:
            assert md.producer_epoch >= epoch
        if md.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            assert md.partitions == set()
        if md.state is S.EMPTY:
            assert md.start_ms == -1
        if md.state in (S.ONGOING, S.PREPARE_COMMIT):
            assert md.partitions
        if md.state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT):
            assert 0 <= md.start_ms <= md.last_update_ms


def test_tv2_end_txn_at_an_exhausted_epoch_moves_to_the_next_producer_id() -> None:
    """EndTxn v5 at epoch 32766: Prepare bumps to 32767 (the markers' epoch) and records the
    next producer id; Complete moves to it at epoch 0 (the old id becomes the previous one).
    Log value v1 keeps what a new coordinator needs to answer retries."""
    from samsa.coordinator.transaction.log import decode_value, encode_value

    md = _md(S.ONGOING, epoch=MAX_EPOCH - 1)
    prepare = md.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW, 2, 2000, bump=True)
    assert (prepare.producer_id, prepare.producer_epoch, prepare.last_producer_epoch,
            prepare.next_producer_id) == (1000, MAX_EPOCH, MAX_EPOCH - 1, 2000)
    loaded = decode_value(encode_value(prepare.log_value(), 1))
    assert (loaded.next_producer_id, loaded.client_transaction_version) == (2000, 2)
    md.complete_transition(prepare)
    done = md.prepare_complete(NOW + 1)
    assert (done.state, done.producer_id, done.last_producer_id, done.producer_epoch,
            done.next_producer_id) == (S.COMPLETE_COMMIT, 2000, 1000, 0, NO_PRODUCER_ID)
