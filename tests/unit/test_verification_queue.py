"""A partition leader's queue of verifications waiting for one transaction coordinator
(Kafka's AddPartitionsToTxnManager.addTxnData): at most one entry per transactional id, and a
second one for a waiting id settles one of the two at once, by epoch."""

from __future__ import annotations

from samsa.broker.txn.verification import Asked, VerificationQueue
from samsa.protocol.errors import ErrorCode


def _asked(txn: str, epoch: int, partition: int = 0, verify_only: bool = True) -> Asked:
    return Asked(txn, 7, epoch, [("t", partition)], verify_only)


async def test_a_lower_epoch_is_fenced_at_once_and_the_waiting_one_stays() -> None:
    queue = VerificationQueue()
    waiting, lower = _asked("a", 3), _asked("a", 2)
    assert queue.add(waiting)
    assert not queue.add(lower)
    assert lower.answer.result() == {("t", 0): ErrorCode.invalid_producer_epoch}
    assert not waiting.answer.done()
    assert queue.take() == [waiting]


async def test_a_higher_epoch_fences_the_waiting_one_and_takes_its_place() -> None:
    queue = VerificationQueue()
    waiting, higher = _asked("a", 3, 0), _asked("a", 4, 1)
    assert queue.add(waiting) and queue.add(higher)
    assert waiting.answer.result() == {("t", 0): ErrorCode.invalid_producer_epoch}
    assert not higher.answer.done()
    assert queue.take() == [higher]


async def test_the_same_epoch_again_answers_the_waiting_one_retriably() -> None:
    queue = VerificationQueue()
    waiting, retry = _asked("a", 3, 0), _asked("a", 3, 1)
    assert queue.add(waiting) and queue.add(retry)
    assert waiting.answer.result() == {("t", 0): ErrorCode.network_exception}
    assert queue.take() == [retry]


async def test_different_ids_wait_side_by_side_and_are_taken_together_in_order() -> None:
    queue = VerificationQueue()
    first, second = _asked("a", 3), _asked("b", 0, verify_only=False)
    assert queue.add(first) and queue.add(second)
    assert queue.take() == [first, second]
    assert queue.take() == [] and queue.waiting == {}
    assert not first.answer.done() and not second.answer.done()
    # one AddPartitionsToTxn v5 transaction each, VerifyOnly as asked
    assert [a.body()["verify_only"] for a in (first, second)] == [True, False]


async def test_an_asker_that_went_away_is_settled_without_harm() -> None:
    queue = VerificationQueue()
    gone, retry = _asked("a", 3), _asked("a", 3)
    queue.add(gone)
    gone.answer.cancel()  # its connection closed while it waited
    assert queue.add(retry)
    retry.settle_all(ErrorCode.none)
    assert retry.answer.result() == {("t", 0): ErrorCode.none}
