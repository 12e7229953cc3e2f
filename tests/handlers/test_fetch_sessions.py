"""Incremental fetch sessions (KIP-227): a full Fetch of session epoch 0 opens one, the
fetcher's next requests name only what changed and are answered only the partitions with
something new; session errors; a full fetch naming a session closes it; the cache's size."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from samsa.broker.network.quotas import UndoableAnswer, throttled_fetch_response
from samsa.broker.replication.fetch_sessions import (
    FetchContext,
    FetchSessionCache,
    SessionPartition,
)
from samsa.protocol.codec import build, request_type
from samsa.protocol.errors import ErrorCode

from .harness import ADMIN, Handlers, begin_transaction, eventually, values_of


def _partition(index: int, offset: int, max_bytes: int = 1 << 20) -> dict[str, Any]:
    return {"partition": index, "fetch_offset": offset, "current_leader_epoch": -1,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": max_bytes}


async def _fetch(h: Handlers, session_id: int, epoch: int,
                 topics: list[tuple[uuid.UUID, list[dict[str, Any]]]],
                 forgotten: Sequence[tuple[uuid.UUID, list[int]]] = (),
                 max_bytes: int = 1 << 20, version: int = 13, isolation: int = 0) -> Any:
    return await h.call("Fetch", version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes,
        "isolation_level": isolation, "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic_id": t, "partitions": ps} for t, ps in topics],
        "forgotten_topics_data": [{"topic_id": t, "partitions": ps} for t, ps in forgotten],
        "rack_id": ""}, principal=ADMIN)


def _answered(r: Any) -> dict[int, Any]:
    """The answer's partitions by index (one topic)."""
    return {p.partition_index: p for t in r.responses for p in t.partitions}


async def _topic(h: Handlers, name: str, partitions: int) -> uuid.UUID:
    created = await h.create_topic(name, partitions)
    return created.topic_id


async def test_an_incremental_fetch_answers_only_what_is_new(handlers):
    t = await _topic(handlers, "t", 3)
    await handlers.produce("t", 0, [b"a"])
    r = await _fetch(handlers, 0, 0, [(t, [_partition(i, 0) for i in range(3)])])
    assert r.error_code == ErrorCode.none and r.session_id != 0
    assert sorted(_answered(r)) == [0, 1, 2]  # a full answer: every partition
    session = r.session_id
    # the fetcher moved past partition 0's record: nothing is new, no partitions answered
    r = await _fetch(handlers, session, 1, [(t, [_partition(0, 1)])])
    assert (r.error_code, r.session_id, _answered(r)) == (ErrorCode.none, session, {})
    # a record on partition 2, read from the offset the session keeps for it
    await handlers.produce("t", 2, [b"x", b"y"])
    r = await _fetch(handlers, session, 2, [])
    answered = _answered(r)
    assert list(answered) == [2]
    assert (answered[2].high_watermark, values_of(answered[2].records)) == (2, [b"x", b"y"])
    # told: not answered again while nothing changes
    r = await _fetch(handlers, session, 3, [(t, [_partition(2, 2)])])
    assert _answered(r) == {}


async def test_a_partition_not_yet_moved_past_is_read_again(handlers):
    t = await _topic(handlers, "t", 2)
    r = await _fetch(handlers, 0, 0, [(t, [_partition(0, 0), _partition(1, 0)])])
    session = r.session_id
    await handlers.produce("t", 1, [b"a"])
    r = await _fetch(handlers, session, 1, [])
    assert values_of(_answered(r)[1].records) == [b"a"]
    # the fetcher did not take the record (its offset for partition 1 is still 0): the next
    # incremental fetch reads it again, as records are always answered
    r = await _fetch(handlers, session, 2, [])
    assert list(_answered(r)) == [1] and values_of(_answered(r)[1].records) == [b"a"]


async def test_forgotten_partitions_leave_the_session(handlers):
    t = await _topic(handlers, "t", 2)
    r = await _fetch(handlers, 0, 0, [(t, [_partition(0, 0), _partition(1, 0)])])
    session = r.session_id
    r = await _fetch(handlers, session, 1, [], forgotten=[(t, [1])])
    await handlers.produce("t", 0, [b"a"])
    await handlers.produce("t", 1, [b"b"])
    r = await _fetch(handlers, session, 2, [])
    assert list(_answered(r)) == [0]
    # added back: answered in full (its high watermark is new to the session)
    r = await _fetch(handlers, session, 3, [(t, [_partition(0, 1), _partition(1, 0)])])
    assert list(_answered(r)) == [1] and values_of(_answered(r)[1].records) == [b"b"]
    # forgetting every partition ends the session
    r = await _fetch(handlers, session, 4, [], forgotten=[(t, [0, 1])])
    assert (r.error_code, r.session_id) == (ErrorCode.none, 0)
    r = await _fetch(handlers, session, 5, [])
    assert r.error_code == ErrorCode.fetch_session_id_not_found


async def test_a_partition_answered_records_goes_to_the_back(handlers):
    """The byte limit reaches only the first partition read: the next fetch reads the other
    first, so one busy partition does not starve the rest (as Kafka's session order)."""
    t = await _topic(handlers, "t", 2)
    r = await _fetch(handlers, 0, 0, [(t, [_partition(0, 0), _partition(1, 0)])])
    session = r.session_id
    await handlers.produce("t", 0, [b"a"])
    await handlers.produce("t", 1, [b"b"])
    r = await _fetch(handlers, session, 1, [], max_bytes=1)
    assert [p for p, a in _answered(r).items() if a.records] == [0]
    r = await _fetch(handlers, session, 2, [(t, [_partition(0, 1)])], max_bytes=1)
    assert [p for p, a in _answered(r).items() if a.records] == [1]


async def test_a_new_log_start_is_answered_to_a_consumer_at_the_end(handlers):
    """A consumer at the high watermark that knows it is passed over unread, until the log
    start offset moves (DeleteRecords) or its own fetch's leader epoch is wrong."""
    t = await _topic(handlers, "t", 1)
    await handlers.produce("t", 0, [b"a", b"b"])
    session = (await _fetch(handlers, 0, 0, [(t, [_partition(0, 2)])])).session_id
    assert _answered(await _fetch(handlers, session, 1, [])) == {}
    deleted = await handlers.call("DeleteRecords", 2, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "offset": 1}]}], "timeout": 5000})
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    answered = _answered(await _fetch(handlers, session, 2, []))
    assert [(i, p.log_start_offset, p.high_watermark) for i, p in answered.items()] == [
        (0, 1, 2)]
    assert _answered(await _fetch(handlers, session, 3, [])) == {}
    stale = _partition(0, 2) | {"current_leader_epoch": 7}
    answered = _answered(await _fetch(handlers, session, 4, [(t, [stale])]))
    assert answered[0].error_code == ErrorCode.unknown_leader_epoch


async def test_read_committed_consumer_in_a_session(handlers):
    """read_committed: an open transaction moves the high watermark (answered, no records);
    the consumer waits at the last stable offset, passed over, until the commit."""
    t = await _topic(handlers, "t", 1)
    session = (await _fetch(handlers, 0, 0, [(t, [_partition(0, 0)])],
                            isolation=1)).session_id
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    await handlers.produce("t", 0, [b"x"], "tx", producer_id=pid, producer_epoch=epoch,
                           base_sequence=0)
    answered = _answered(await _fetch(handlers, session, 1, [], isolation=1))
    assert [(p.high_watermark, p.last_stable_offset, values_of(p.records))
            for p in answered.values()] == [(1, 0, [])]
    assert _answered(await _fetch(handlers, session, 2, [], isolation=1)) == {}
    end = await handlers.call("EndTxn", 3, {"transactional_id": "tx", "producer_id": pid,
                                            "producer_epoch": epoch, "committed": True})
    assert end.error_code == ErrorCode.none
    epochs = iter(range(3, 100))

    async def committed() -> bool:
        answered = _answered(await _fetch(handlers, session, next(epochs), [], isolation=1))
        return bool(answered) and values_of(answered[0].records) == [b"x"]
    await eventually(committed)


async def test_an_offset_below_the_log_start_is_out_of_range_in_a_session(handlers):
    """read_committed: an open transaction older than the log start holds the last stable
    offset below it; a consumer that moves there is told OFFSET_OUT_OF_RANGE, as without a
    session, though it knows the partition's high watermark and log start."""
    t = await _topic(handlers, "t", 1)
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    await handlers.produce("t", 0, [b"x"], "tx", producer_id=pid, producer_epoch=epoch,
                           base_sequence=0)
    await handlers.produce("t", 0, [b"a", b"b", b"c", b"d", b"e"])
    deleted = await handlers.call("DeleteRecords", 2, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "offset": 3}]}], "timeout": 5000})
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    session = (await _fetch(handlers, 0, 0, [(t, [_partition(0, 3)])],
                            isolation=1)).session_id
    answered = _answered(await _fetch(handlers, session, 1, [(t, [_partition(0, 0)])],
                                      isolation=1))
    assert answered[0].error_code == ErrorCode.offset_out_of_range


async def test_errors_are_answered_every_time(handlers):
    unknown = uuid.uuid4()
    r = await _fetch(handlers, 0, 0, [(unknown, [_partition(0, 0)])])
    session = r.session_id
    assert session != 0
    for epoch in (1, 2):
        r = await _fetch(handlers, session, epoch, [])
        assert _answered(r)[0].error_code == ErrorCode.unknown_topic_id


async def test_session_errors(handlers):
    t = await _topic(handlers, "t", 1)
    r = await _fetch(handlers, 0, 0, [(t, [_partition(0, 0)])])
    session = r.session_id
    r = await _fetch(handlers, session, 5, [])
    assert (r.error_code, r.session_id, r.responses) == (
        ErrorCode.invalid_fetch_session_epoch, 0, ())
    r = await _fetch(handlers, session + 1, 1, [])
    assert r.error_code == ErrorCode.fetch_session_id_not_found
    # opened with topic ids (v13): a request by names cannot use it
    r = await handlers.call("Fetch", 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": session, "session_epoch": 1, "topics": [],
        "forgotten_topics_data": [], "rack_id": ""}, principal=ADMIN)
    assert r.error_code == ErrorCode.fetch_session_topic_id_error
    # the epoch did not move on any of those
    r = await _fetch(handlers, session, 1, [])
    assert r.error_code == ErrorCode.none


async def test_a_full_fetch_closes_the_session_it_names(handlers):
    t = await _topic(handlers, "t", 1)
    session = (await _fetch(handlers, 0, 0, [(t, [_partition(0, 0)])])).session_id
    r = await _fetch(handlers, session, -1, [(t, [_partition(0, 0)])])
    assert (r.error_code, r.session_id, list(_answered(r))) == (ErrorCode.none, 0, [0])
    assert (await _fetch(handlers, session, 1, [])).error_code == \
        ErrorCode.fetch_session_id_not_found
    # epoch 0 naming one: closed, and a new one opened
    session = (await _fetch(handlers, 0, 0, [(t, [_partition(0, 0)])])).session_id
    r = await _fetch(handlers, session, 0, [(t, [_partition(0, 0)])])
    assert r.session_id not in (0, session)


async def test_sessions_by_topic_name_before_v13(handlers):
    await handlers.create_topic("t", 2)
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": 0,
            "topics": [{"topic": "t", "partitions": [_partition(0, 0), _partition(1, 0)]}],
            "forgotten_topics_data": [], "rack_id": ""}
    r = await handlers.call("Fetch", 12, body, principal=ADMIN)
    assert r.session_id != 0
    await handlers.produce("t", 1, [b"a"])
    body.update(session_id=r.session_id, session_epoch=1, topics=[])
    r = await handlers.call("Fetch", 12, body, principal=ADMIN)
    assert [(t.topic, [p.partition_index for p in t.partitions]) for t in r.responses] == [
        ("t", [1])]
    # sessionless: epoch -1, and versions before 7
    body.update(session_id=0, session_epoch=-1,
                topics=[{"topic": "t", "partitions": [_partition(0, 0)]}])
    assert (await handlers.call("Fetch", 12, body, principal=ADMIN)).session_id == 0


async def test_the_cache_holds_the_configured_number_of_sessions(tmp_path: Path):
    h = await Handlers.open(tmp_path / "data",
                            {"max.incremental.fetch.session.cache.slots": 1})
    try:
        t = await _topic(h, "t", 3)
        first = (await _fetch(h, 0, 0, [(t, [_partition(0, 0)])])).session_id
        assert first != 0
        # full: a new session may not take the place of one used in the last two minutes,
        # not even a larger one; the fetch is answered in full without one
        r = await _fetch(h, 0, 0, [(t, [_partition(i, 0) for i in range(3)])])
        assert (r.session_id, sorted(_answered(r))) == (0, [0, 1, 2])
        assert (await _fetch(h, first, 1, [])).error_code == ErrorCode.none
    finally:
        await h.close()


def _open(cache: FetchSessionCache, privileged: bool, size: int) -> int:
    """A session of `size` partitions opened in `cache`: its id (0: none)."""
    parts = (((f"t{len(cache.sessions)}", i), SessionPartition(i, 0, 1)) for i in range(size))
    return cache.open(FetchContext(opens=True, privileged=privileged), parts)


def test_eviction_follows_kafkas_order():
    """A session unused for the eviction time goes first; else a follower's session may take
    a consumer's place, and a larger one the place of a smaller one older than that time."""
    now = [0]
    cache = FetchSessionCache(2, eviction_ms=1000, clock=lambda: now[0])
    small, large = _open(cache, False, 1), _open(cache, False, 5)
    assert small and large
    now[0] = 500
    assert _open(cache, False, 9) == 0  # both too new for a consumer's session to evict
    now[0] = 600
    follower = _open(cache, True, 1)  # a follower's takes the smaller consumer session's place
    assert follower and small not in cache.sessions and cache.evictions == 1
    now[0] = 1500
    # large, opened at 0 and used at 1500, is old enough to make way for a larger session,
    # not for one of its size; the follower's (opened at 600) is not
    cache.sessions[large].last_used_ms = cache.sessions[follower].last_used_ms = 1500
    assert _open(cache, False, 5) == 0
    larger = _open(cache, False, 6)
    assert larger and large not in cache.sessions and cache.evictions == 2
    # the follower's session, unused since 1500, is stale at 2501: any new one takes its place
    cache.sessions[larger].last_used_ms = 2400
    now[0] = 2501
    assert _open(cache, False, 1) and follower not in cache.sessions


def test_an_unsent_session_gives_back_the_place_it_took():
    """A throttled answer opens no session: the one its session evicted is back."""
    now = [0]
    cache = FetchSessionCache(1, eviction_ms=1000, clock=lambda: now[0])
    old = _open(cache, False, 1)
    now[0] = 5000  # stale
    new = _open(cache, False, 1)
    assert new and old not in cache.sessions and cache.evictions == 1
    cache.unopen(new)
    assert list(cache.sessions) == [old] and cache.evictions == 0


async def _handle(h: Handlers, topic_id: uuid.UUID, session_id: int, epoch: int,
                  partitions: list[dict[str, Any]]) -> Any:
    """The Fetch handler's own answer (before the dispatcher's quotas and encoding)."""
    request = build(request_type(1, 13), {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic_id": topic_id, "partitions": partitions}] if partitions else [],
        "forgotten_topics_data": [], "rack_id": ""})
    return await h.registry.get(1).handler(h.context("Fetch", 13, principal=ADMIN), request)


async def test_a_throttled_answer_tells_the_session_nothing(handlers):
    """A quota that throttles a Fetch sends none of its answer: a session it would have
    opened is not kept, and what an incremental answer would have told is answered again."""
    t = await _topic(handlers, "t", 1)
    answer = await _handle(handlers, t, 0, 0, [_partition(0, 0)])
    assert isinstance(answer, UndoableAnswer) and answer["session_id"] != 0
    throttled = throttled_fetch_response(answer, 100)
    assert (throttled["session_id"], throttled["responses"]) == (0, [])
    assert (await _fetch(handlers, answer["session_id"], 1, [])).error_code == \
        ErrorCode.fetch_session_id_not_found
    session = (await _fetch(handlers, 0, 0, [(t, [_partition(0, 0)])])).session_id
    await handlers.produce("t", 0, [b"a"])
    answer = await _handle(handlers, t, session, 1, [_partition(0, 1)])  # its HW is now 1
    assert [p["high_watermark"] for tp in answer["responses"] for p in tp["partitions"]] == [1]
    assert throttled_fetch_response(answer, 100)["session_id"] == session
    r = await _fetch(handlers, session, 2, [])
    assert [(i, p.high_watermark) for i, p in _answered(r).items()] == [(0, 1)]
