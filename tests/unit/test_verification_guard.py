"""KIP-890 at the log (Kafka's VerificationGuard and VerificationStateEntry): the first
transactional batch of a producer on a partition is appended only with the verification
state its leader made before asking the coordinator, and a marker written in between ends
that state, so a batch verified just before its transaction ended opens no transaction the
coordinator does not know of. The state's two sequence checks, its end and its expiry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.protocol.records import build_batch, build_control_batch
from samsa.storage.config import LogConfig
from samsa.storage.errors import InvalidTxnState, OutOfOrderSequence
from samsa.storage.log import Log

PID = 7


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    lg = Log.open(tmp_path / "t-0", LogConfig(), recover=False)
    yield lg
    lg.close()


def _txn(epoch: int, seq: int) -> bytes:
    return build_batch([(b"k", b"v%d" % seq)], producer_id=PID, producer_epoch=epoch,
                       base_sequence=seq, transactional=True)


def _marker(epoch: int, commit: bool = False) -> bytes:
    return build_control_batch(PID, epoch, commit, 0, 0)


def test_a_first_batch_needs_its_verification(log: Log) -> None:
    with pytest.raises(InvalidTxnState, match="not part of an ongoing transaction"):
        log.append_as_leader(_txn(0, 0), 0, verify=True)
    assert log.log_end_offset == 0
    guard = log.producer_state.verifications.start(PID, 0, 0, False, 0)
    log.append_as_leader(_txn(0, 0), 0, verify=True, guard=guard)
    # the transaction is open: its next batches need none, and the state is over
    assert log.producer_state.verifications.get(PID) is None
    log.append_as_leader(_txn(0, 1), 0, verify=True)
    assert log.log_end_offset == 2


def test_a_marker_between_verification_and_append_refuses_the_batch(log: Log) -> None:
    """The race the guard exists for: the coordinator answered "in the transaction", the
    transaction was aborted and its marker written before the batch's append ran."""
    guard = log.producer_state.verifications.start(PID, 0, 0, False, 0)
    log.append_as_leader(_marker(0), 0, origin="coordinator")
    assert log.producer_state.verifications.get(PID) is None
    with pytest.raises(InvalidTxnState):
        log.append_as_leader(_txn(0, 0), 0, verify=True, guard=guard)
    assert not log.producer_state.txn_open_at(PID, 0)
    assert log.producer_state.first_unstable_offset() is None  # nothing hangs
    # a new verification (the client's retry) is a new state
    again = log.producer_state.verifications.start(PID, 0, 0, False, 0)
    assert again is not guard
    log.append_as_leader(_txn(0, 0), 0, verify=True, guard=again)
    assert log.producer_state.txn_open_at(PID, 0)


def test_a_marker_through_the_general_path_ends_the_state_too(log: Log) -> None:
    log.append_as_leader(_txn(0, 0), 0, verify=True,
                         guard=log.producer_state.verifications.start(PID, 0, 0, False, 0))
    guard = log.producer_state.verifications.start(PID, 1, 1, False, 0)
    # two batches in one append take prepare_append's path, not the one-marker path
    log.append_as_leader(_marker(0, commit=True) + _marker(0, commit=True), 0,
                         origin="coordinator")
    assert log.producer_state.verifications.get(PID) is None
    with pytest.raises(InvalidTxnState):
        log.append_as_leader(_txn(1, 0), 0, verify=True, guard=guard)


def test_without_verify_the_log_takes_the_batch_as_before(log: Log) -> None:
    log.append_as_leader(_txn(0, 0), 0)
    assert log.producer_state.txn_open_at(PID, 0)


def test_transactions_v2_start_at_sequence_zero_without_state(log: Log) -> None:
    guard = log.producer_state.verifications.start(PID, 3, 0, True, 0)
    with pytest.raises(OutOfOrderSequence, match="starts at sequence 0"):
        log.append_as_leader(_txn(0, 3), 0, verify=True, guard=guard)
    # transactions v1 accepts a producer without state at any sequence, as before
    log.producer_state.verifications.start(PID + 1, 3, 0, False, 0)
    other = build_batch([(b"k", b"v")], producer_id=PID + 1, producer_epoch=0,
                        base_sequence=3, transactional=True)
    log.append_as_leader(other, 0, verify=True,
                         guard=log.producer_state.verifications.get(PID + 1))
    assert log.producer_state.txn_open_at(PID + 1, 0)


def test_no_batch_passes_a_lower_one_still_being_verified(log: Log) -> None:
    log.append_as_leader(build_batch([(b"k", b"v")], producer_id=PID, producer_epoch=0,
                                     base_sequence=0), 0)  # idempotent: state at sequence 0
    log.append_as_leader(_marker(0), 0, origin="coordinator")
    low = log.producer_state.verifications.start(PID, 1, 0, False, 0)
    high = log.producer_state.verifications.start(PID, 2, 0, False, 0)
    assert high is low and low.lowest_sequence == 1
    with pytest.raises(OutOfOrderSequence, match="the earliest being verified"):
        log.append_as_leader(_txn(0, 2), 0, verify=True, guard=high)
    log.append_as_leader(_txn(0, 1), 0, verify=True, guard=low)
    log.append_as_leader(_txn(0, 2), 0, verify=True)  # the state is over with the first


def test_a_newer_epoch_restarts_the_lowest_sequence(log: Log) -> None:
    state = log.producer_state.verifications.start(PID, 5, 0, False, 0)
    log.producer_state.verifications.start(PID, 9, 0, False, 0)
    assert (state.epoch, state.lowest_sequence) == (0, 5)
    log.producer_state.verifications.start(PID, 0, 1, False, 0)
    assert (state.epoch, state.lowest_sequence) == (1, 0)


def test_a_transactions_v2_marker_of_the_verified_epoch_keeps_the_state(log: Log) -> None:
    """Under transactions v2 a transaction ends with its epoch bumped, and the next one may be
    verified (at that epoch) before the marker of the one before lands here."""
    log.append_as_leader(_txn(0, 0), 0, verify=True,
                         guard=log.producer_state.verifications.start(PID, 0, 0, True, 0))
    guard = log.producer_state.verifications.start(PID, 0, 1, True, 0)
    log.append_as_leader(_marker(1, commit=True), 0, origin="coordinator",
                         transaction_version=2)
    assert log.producer_state.verifications.get(PID) is guard
    log.append_as_leader(_txn(1, 0), 0, verify=True, guard=guard)
    assert log.producer_state.txn_open_at(PID, 1)


def test_a_verification_never_used_expires_with_the_producers(log: Log) -> None:
    psm = log.producer_state
    psm.verifications.start(PID, 0, 0, False, 1_000)
    psm.remove_expired(1_000 + psm.producer_id_expiration_ms - 1)
    assert psm.verifications.get(PID) is not None
    psm.remove_expired(1_000 + psm.producer_id_expiration_ms)
    assert psm.verifications.get(PID) is None


def test_a_coordinator_s_transactional_offsets_are_checked_alike(log: Log) -> None:
    """The group coordinator writes a TxnOffsetCommit's offsets as the producer's
    transactional batch: verified as a Produce's (Kafka checks COORDINATOR appends too)."""
    guard = log.producer_state.verifications.start(PID, -1, 0, False, 0)
    log.append_as_leader(_marker(0), 0, origin="coordinator")
    with pytest.raises(InvalidTxnState):
        log.append_as_leader(_txn(0, 0), 0, origin="coordinator", verify=True, guard=guard)
    again = log.producer_state.verifications.start(PID, -1, 0, False, 0)
    log.append_as_leader(_txn(0, 0), 0, origin="coordinator", verify=True, guard=again)
    assert log.producer_state.txn_open_at(PID, 0)


def test_a_known_producer_s_first_batch_is_checked_on_the_one_batch_path(log: Log) -> None:
    """A producer the partition knows takes the log's one-batch append: the check is there
    too, and a verified batch ends its state there."""
    log.append_as_leader(build_batch([(b"k", b"v")], producer_id=PID, producer_epoch=0,
                                     base_sequence=0), 0)
    stale = log.producer_state.verifications.start(PID, 1, 0, False, 0)
    log.append_as_leader(_marker(0), 0, origin="coordinator")
    with pytest.raises(InvalidTxnState):
        log.append_as_leader(_txn(0, 1), 0, verify=True, guard=stale)
    guard = log.producer_state.verifications.start(PID, 1, 0, False, 0)
    log.append_as_leader(_txn(0, 1), 0, verify=True, guard=guard)
    assert log.producer_state.verifications.get(PID) is None
    assert log.producer_state.txn_open_at(PID, 0)
