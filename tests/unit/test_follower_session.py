"""A follower's side of an incremental fetch session (broker/replication/follower_session.py),
as Kafka's FetchSessionHandler: the first fetch is full and asks for a session, the next ones
name only what changed and what is forgotten; a session error, a request without an answer
or an answer that does not fit the request starts over with a full fetch."""

from __future__ import annotations

import uuid

from samsa.broker.replication.follower_session import FetchPosition, FollowerFetchSession
from samsa.protocol.errors import ErrorCode

TOPIC = uuid.uuid4()
A, B, C = (TOPIC, 0), (TOPIC, 1), (TOPIC, 2)


def _at(offset: int, epoch: int = 3) -> FetchPosition:
    return FetchPosition(epoch, offset, epoch, 0, 1 << 20)


def _opened(session_id: int = 77) -> FollowerFetchSession:
    session = FollowerFetchSession(leader_id=2)
    first = session.build({A: _at(0), B: _at(0)})
    assert (first.session_id, first.epoch, first.full) == (0, 0, True)
    assert session.answered(first, ErrorCode.none, session_id, [A, B])
    return session


def test_the_first_fetch_is_full_and_the_next_names_only_what_moved() -> None:
    session = _opened()
    second = session.build({A: _at(5), B: _at(0)})
    assert (second.session_id, second.epoch, second.full) == (77, 1, False)
    assert second.to_send == {A: _at(5)} and second.forgotten == []
    assert session.answered(second, ErrorCode.none, 77, [A])
    third = session.build({A: _at(5), B: _at(0)})
    assert (third.epoch, third.to_send, third.forgotten) == (2, {}, [])
    assert session.answered(third, ErrorCode.none, 77, [])  # nothing new: an empty answer


def test_a_partition_added_is_sent_and_one_no_longer_fetched_is_forgotten() -> None:
    session = _opened()
    fetch = session.build({A: _at(0), C: _at(9)})
    assert fetch.to_send == {C: _at(9)} and fetch.forgotten == [B]
    # a new leader epoch, or a new last fetched epoch, is sent as well as a new offset
    assert session.answered(fetch, ErrorCode.none, 77, [C])
    assert session.build({A: _at(0, epoch=4), C: _at(9)}).to_send == {A: _at(0, epoch=4)}


def test_an_unknown_session_starts_a_new_one() -> None:
    session = _opened()
    fetch = session.build({A: _at(1), B: _at(0)})
    assert not session.answered(fetch, ErrorCode.fetch_session_id_not_found, 0, [])
    again = session.build({A: _at(1), B: _at(0)})
    assert (again.session_id, again.epoch, set(again.to_send)) == (0, 0, {A, B})


def test_a_wrong_epoch_closes_the_session_with_a_full_fetch() -> None:
    session = _opened()
    fetch = session.build({A: _at(1), B: _at(0)})
    assert not session.answered(fetch, ErrorCode.invalid_fetch_session_epoch, 0, [])
    again = session.build({A: _at(1), B: _at(0)})
    # the old id with epoch 0: the leader closes that session and opens another
    assert (again.session_id, again.epoch, set(again.to_send)) == (77, 0, {A, B})
    assert session.answered(again, ErrorCode.none, 78, [A, B])
    assert session.build({A: _at(1), B: _at(0)}).session_id == 78


def test_a_fetch_without_an_answer_is_followed_by_a_full_one() -> None:
    session = _opened()
    session.build({A: _at(1), B: _at(0)})
    session.failed()
    again = session.build({A: _at(1), B: _at(0)})
    assert (again.session_id, again.epoch, set(again.to_send)) == (77, 0, {A, B})


def test_a_leader_without_room_for_a_session_is_fetched_from_in_full() -> None:
    session = FollowerFetchSession(leader_id=2)
    first = session.build({A: _at(0)})
    assert session.answered(first, ErrorCode.none, 0, [A])  # answered, no session
    second = session.build({A: _at(4)})
    assert (second.session_id, second.epoch, second.to_send) == (0, 0, {A: _at(4)})


def test_answers_that_do_not_fit_the_request_are_not_applied() -> None:
    session = FollowerFetchSession(leader_id=2)
    first = session.build({A: _at(0), B: _at(0)})
    assert not session.answered(first, ErrorCode.none, 77, [A])  # a full answer lacking B
    assert session.build({A: _at(0), B: _at(0)}).full
    session = _opened()
    fetch = session.build({A: _at(2), B: _at(0)})
    assert not session.answered(fetch, ErrorCode.none, 77, [C])  # C is not in the session
    assert session.build({A: _at(2), B: _at(0)}).full


def test_a_leader_that_closes_the_session_is_asked_for_a_new_one() -> None:
    session = _opened()
    fetch = session.build({A: _at(2), B: _at(0)})
    assert session.answered(fetch, ErrorCode.none, 0, [A])  # applied, then start over
    again = session.build({A: _at(3), B: _at(0)})
    assert (again.session_id, again.epoch, again.full) == (0, 0, True)


def test_an_answer_thrown_away_is_asked_again_in_full() -> None:
    session = _opened()
    fetch = session.build({A: _at(2), B: _at(0)})
    assert session.answered(fetch, ErrorCode.none, 77, [A])
    session.resend_all()  # (the fetcher did not apply A's answer: its log moved meanwhile)
    again = session.build({A: _at(1), B: _at(0)})
    assert (again.session_id, again.epoch, set(again.to_send)) == (77, 0, {A, B})
