"""Fetch (1) from a follower, as the replica fetcher sends it (v15, the follower's id in
replica_state): its fetch offset acknowledges what it has, which moves the high watermark,
completes acks=all produces, keeps it in the ISR (its last caught-up time) and lets it join
the ISR once caught up; a partition it is caught up on answers no records with the leader's
current offsets. The partition is given a second replica, a broker that does not exist, as
the leader's side of a cluster sees it (the ISR changes apply at once: no ZooKeeper)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from samsa.broker.handlers import fetch as fetch_handler
from samsa.broker.replication.partition import Partition
from samsa.protocol.encoder import encode_entity
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch

from .harness import ADMIN, Handlers, values_of

FETCH_VERSION = 15  # broker/replication/replica_fetcher.py's


async def _led_with(h: Handlers, followers: list[int], in_sync: list[int] | None = None,
                    ) -> Partition:
    """Topic t's partition 0, led here with `followers` as its other replicas, `in_sync` of
    them in the ISR (all by default)."""
    await h.create_topic("t")
    p = h.broker.replicas.get("t", 0)
    assert p is not None
    isr = [p.broker_id, *(followers if in_sync is None else in_sync)]
    p.make_leader(p.leader_epoch, isr, [p.broker_id, *followers])
    return p


async def _produce(h: Handlers, values: list[bytes], acks: int = 1) -> Any:
    records = bytes(build_batch([(None, v) for v in values]))
    r = await h.call("Produce", 9, {
        "transactional_id": None, "acks": acks, "timeout": 5000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]},
        principal=ADMIN)
    return r.responses[0].partition_responses[0]


async def _follower_fetch(h: Handlers, p: Partition, replica: int, offset: int,
                         epoch: int | None = None) -> Any:
    """One follower fetch of the partition from `offset`, no wait; the partition's answer.
    `epoch`: the current leader epoch it carries (the partition's by default)."""
    r = await h.call("Fetch", FETCH_VERSION, {
        "replica_state": {"replica_id": replica, "replica_epoch": -1},
        "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic_id": p.topic_id, "partitions": [{
            "partition": 0, "fetch_offset": offset,
            "current_leader_epoch": p.leader_epoch if epoch is None else epoch,
            "last_fetched_epoch": p.leader_epoch if offset > 0 else -1,
            "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""}, principal=ADMIN)
    assert r.error_code == ErrorCode.none
    return r.responses[0].partitions[0]


async def test_a_follower_fetching_again_at_the_log_end_counts_as_caught_up_now(handlers):
    """Kafka's lastCaughtUpTimeMs: each fetch at the log end sets it, a repeated one at the
    same offset on an idle partition too; the follower's lag once it falls behind counts
    from there (replica.lag.time.max.ms)."""
    p = await _led_with(handlers, [2])
    await _produce(handlers, [b"a", b"b"])
    await _follower_fetch(handlers, p, 2, 0)
    assert values_of((await _follower_fetch(handlers, p, 2, 2)).records) == []
    time.sleep(0.3)
    await _follower_fetch(handlers, p, 2, 2)  # nothing new: at the log end again
    await _produce(handlers, [b"c"])  # now behind, caught up a moment ago
    p.shrink_isr_if_lagging(lag_ms=200)
    assert p.isr == [p.broker_id, 2]
    time.sleep(0.3)
    p.shrink_isr_if_lagging(lag_ms=200)  # behind for longer than the lag time
    assert p.isr == [p.broker_id]


async def test_a_replica_outside_the_assignment_is_answered_an_error_and_not_recorded(
        handlers):
    """Kafka's followerReplicaOrThrow: a fetch from a broker the leader does not know as a
    replica of the partition (a reassignment's new replica before the leader learned of it)
    is answered UNKNOWN_LEADER_EPOCH, which the follower retries (NOT_LEADER_OR_FOLLOWER
    without an epoch), with no records and unknown offsets; its offset acknowledges nothing."""
    p = await _led_with(handlers, [2])
    produce = asyncio.create_task(_produce(handlers, [b"a"], acks=-1))
    await asyncio.sleep(0.01)
    stranger = await _follower_fetch(handlers, p, 3, 1)
    assert (stranger.error_code, stranger.high_watermark, values_of(stranger.records)) == (
        ErrorCode.unknown_leader_epoch, -1, [])
    old = await _follower_fetch(handlers, p, 3, 1, epoch=-1)
    assert old.error_code == ErrorCode.not_leader_or_follower
    await asyncio.sleep(0.01)
    assert not produce.done() and p.high_watermark == 0 and p.isr == [p.broker_id, 2]
    assert (await _follower_fetch(handlers, p, 2, 1)).error_code == ErrorCode.none
    assert (await asyncio.wait_for(produce, 1)).error_code == ErrorCode.none


async def test_a_follower_out_of_range_is_given_the_leaders_log_start(handlers):
    """A follower below the leader's log start starts over there: the OFFSET_OUT_OF_RANGE
    answer to a follower carries the leader's log start offset and high watermark (replica
    fetcher's `_apply`; a consumer's carries -1, as Kafka's)."""
    p = await _led_with(handlers, [2])
    await _produce(handlers, [b"a", b"b", b"c"])
    await _follower_fetch(handlers, p, 2, 3)  # all replicated: the high watermark is 3
    deleted = await handlers.call("DeleteRecords", 2, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "offset": 2}]}], "timeout": 5000}, principal=ADMIN)
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    behind = await _follower_fetch(handlers, p, 2, 1)
    assert (behind.error_code, behind.log_start_offset, behind.high_watermark) == (
        ErrorCode.offset_out_of_range, 2, 3)


async def test_an_acks_all_produce_completes_once_the_follower_fetches_past_it(handlers):
    p = await _led_with(handlers, [2])
    produce = asyncio.create_task(_produce(handlers, [b"a", b"b"], acks=-1))
    await asyncio.sleep(0.01)
    assert not produce.done() and p.high_watermark == 0
    fetched = await _follower_fetch(handlers, p, 2, 0)
    assert values_of(fetched.records) == [b"a", b"b"] and fetched.high_watermark == 0
    await _follower_fetch(handlers, p, 2, 0)  # again from 0: acknowledges nothing new
    await asyncio.sleep(0.01)
    assert not produce.done() and p.high_watermark == 0
    caught_up = await _follower_fetch(handlers, p, 2, 2)
    assert caught_up.high_watermark == 2 and values_of(caught_up.records) == []
    answer = await asyncio.wait_for(produce, 1)
    assert (answer.error_code, answer.base_offset) == (ErrorCode.none, 0)


async def test_a_lagging_follower_joins_the_isr_once_caught_up(handlers):
    p = await _led_with(handlers, [2], in_sync=[])
    await _produce(handlers, [b"a", b"b", b"c"])
    assert p.high_watermark == 3  # the ISR is the leader alone
    await _follower_fetch(handlers, p, 2, 0)
    assert p.isr == [p.broker_id]  # behind the high watermark
    await _follower_fetch(handlers, p, 2, 3)
    assert p.isr == [p.broker_id, 2]


async def test_a_caught_up_follower_joins_the_isr_at_a_fetch_at_the_same_offset(handlers):
    """The ISR test is made at each fetch: a follower at the log end that could not join
    (its broker not registered, KIP-903) joins at its next fetch, from the same offset."""
    p = await _led_with(handlers, [2], in_sync=[])
    registered = False
    p.replica_eligible = lambda replica, epoch: registered
    await _produce(handlers, [b"a"])
    await _follower_fetch(handlers, p, 2, 1)
    assert p.isr == [p.broker_id]
    registered = True
    await _follower_fetch(handlers, p, 2, 1)
    assert p.isr == [p.broker_id, 2]


async def test_a_fetch_from_the_same_offset_after_an_append_gets_the_new_records(handlers):
    """A caught-up partition's answer is kept for the next fetch: only while the partition
    has not changed."""
    p = await _led_with(handlers, [2])
    await _produce(handlers, [b"a"])
    await _follower_fetch(handlers, p, 2, 0)
    for _ in range(2):
        empty = await _follower_fetch(handlers, p, 2, 1)
        assert values_of(empty.records) == [] and empty.high_watermark == 1
    await _produce(handlers, [b"b"])
    again = await _follower_fetch(handlers, p, 2, 1)
    assert values_of(again.records) == [b"b"] and again.high_watermark == 1


async def test_a_caught_up_follower_is_told_the_high_watermark_another_one_moved(handlers):
    p = await _led_with(handlers, [2, 3])
    await _produce(handlers, [b"a", b"b"])
    for follower in (2, 3):
        await _follower_fetch(handlers, p, follower, 0)
    first = await _follower_fetch(handlers, p, 2, 2)
    assert values_of(first.records) == [] and first.high_watermark == 0  # 3 holds it back
    assert (await _follower_fetch(handlers, p, 3, 2)).high_watermark == 2
    second = await _follower_fetch(handlers, p, 2, 2)  # the same offset as its last fetch
    assert values_of(second.records) == [] and second.high_watermark == 2


async def test_a_caught_up_answer_is_the_one_written_field_by_field(handlers):
    """The kept answer's bytes are those of the partition's answer as the handler builds it
    for records it read (aborted_transactions not set: an empty array)."""
    p = await _led_with(handlers, [2])
    await _produce(handlers, [b"a"])
    await _follower_fetch(handlers, p, 2, 1)
    entity = fetch_handler._partition_entity(FETCH_VERSION)
    answer = p.read_for_follower(1, 1 << 20)
    kept = fetch_handler._caught_up(entity, p, answer, False)
    written = encode_entity(entity, {
        "partition_index": 0, "error_code": ErrorCode.none,
        "high_watermark": answer.high_watermark,
        "last_stable_offset": answer.last_stable_offset,
        "log_start_offset": answer.log_start_offset, "records": b""})
    assert kept.data == written.data


async def _session_fetch(h: Handlers, p: Partition, replica: int, session_id: int, epoch: int,
                         offset: int | None) -> Any:
    """A follower's fetch in a session (`offset` None: the partition not named, as an
    incremental fetch leaves out a partition whose position did not move)."""
    named = [] if offset is None else [{"topic_id": p.topic_id, "partitions": [{
        "partition": 0, "fetch_offset": offset, "current_leader_epoch": p.leader_epoch,
        "last_fetched_epoch": p.leader_epoch if offset > 0 else -1,
        "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]
    r = await h.call("Fetch", FETCH_VERSION, {
        "replica_state": {"replica_id": replica, "replica_epoch": -1},
        "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch, "topics": named,
        "forgotten_topics_data": [], "rack_id": ""}, principal=ADMIN)
    assert r.error_code == ErrorCode.none
    return r


async def test_a_caught_up_follower_passed_over_in_a_session_is_still_recorded(handlers):
    """An incremental fetch passes over a partition whose follower is at the log end and has
    been told everything (no answer entry, no read), but its fetch still counts: it joins
    the ISR there, and its time caught up moves on, as at a fetch that reads."""
    p = await _led_with(handlers, [2], in_sync=[])
    registered = False
    p.replica_eligible = lambda replica, epoch: registered
    await _produce(handlers, [b"a"])
    opened = await _session_fetch(handlers, p, 2, 0, 0, offset=1)
    assert opened.session_id != 0 and p.isr == [p.broker_id]  # not registered yet
    registered = True
    passed = await _session_fetch(handlers, p, 2, opened.session_id, 1, offset=None)
    assert not passed.responses  # nothing new for it ...
    assert p.isr == [p.broker_id, 2]  # ... and its fetch was recorded
    time.sleep(0.3)
    await _session_fetch(handlers, p, 2, opened.session_id, 2, offset=None)
    await _produce(handlers, [b"b"])  # now behind, caught up a moment ago
    p.shrink_isr_if_lagging(lag_ms=200)
    assert p.isr == [p.broker_id, 2]
    moved = await _session_fetch(handlers, p, 2, opened.session_id, 3, offset=None)
    [answer] = moved.responses[0].partitions
    assert values_of(answer.records) == [b"b"]
