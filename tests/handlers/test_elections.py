"""ElectLeaders (43) on a broker that is its own cluster (no ZooKeeper): every partition is led
by its one replica, the preferred one, so an election is never needed. As in Kafka: v0 asks
for preferred elections only; an unknown election type is INVALID_REQUEST for each partition
named; with all partitions asked for (null), the partitions whose election is not needed are
left out of the answer; a partition named twice is answered once."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode

PREFERRED, UNCLEAN = 0, 1


def _results(r: Any) -> dict[tuple[str, int], ErrorCode]:
    return {(t.topic, p.partition_id): p.error_code
            for t in r.replica_election_results for p in t.partition_result}


async def test_v0_is_a_preferred_election(handlers):
    await handlers.create_topic("t")
    r = await handlers.call("ElectLeaders", 0, {"topic_partitions": [
        {"topic": "t", "partitions": [0]}], "timeout": 5000})
    assert _results(r) == {("t", 0): ErrorCode.election_not_needed}


async def test_an_unclean_election_with_a_live_leader_is_not_needed(handlers):
    await handlers.create_topic("t", 2)
    r = await handlers.call("ElectLeaders", 2, {"election_type": UNCLEAN, "topic_partitions": [
        {"topic": "t", "partitions": [0, 1]}], "timeout": 5000})
    assert r.error_code == ErrorCode.none
    assert _results(r) == {("t", 0): ErrorCode.election_not_needed,
                           ("t", 1): ErrorCode.election_not_needed}


async def test_an_unknown_election_type_is_an_invalid_request(handlers):
    await handlers.create_topic("t")
    r = await handlers.call("ElectLeaders", 2, {"election_type": 5, "topic_partitions": [
        {"topic": "t", "partitions": [0]}], "timeout": 5000})
    assert r.error_code == ErrorCode.invalid_request
    assert _results(r) == {("t", 0): ErrorCode.invalid_request}


async def test_all_partitions_leave_out_those_not_needing_an_election(handlers):
    await handlers.create_topic("t", 3)
    r = await handlers.call("ElectLeaders", 2, {"election_type": PREFERRED,
                                                "topic_partitions": None, "timeout": 5000})
    assert (r.error_code, _results(r)) == (ErrorCode.none, {})


async def test_an_unknown_topic_and_a_partition_named_twice(handlers):
    await handlers.create_topic("t")
    r = await handlers.call("ElectLeaders", 2, {"election_type": PREFERRED, "topic_partitions": [
        {"topic": "t", "partitions": [0, 0]}, {"topic": "nope", "partitions": [0]}],
        "timeout": 5000})
    assert _results(r) == {("t", 0): ErrorCode.election_not_needed,
                           ("nope", 0): ErrorCode.unknown_topic_or_partition}
    assert sum(len(t.partition_result) for t in r.replica_election_results) == 2
