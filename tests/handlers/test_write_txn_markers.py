"""WriteTxnMarkers (27) on a leader whose partitions have followers: a marker's partitions are
all appended at once and their ISR waited for together, as Kafka's delayed produce of the
markers' append; not one partition's replication after another."""

from __future__ import annotations

import asyncio

from samsa.protocol.errors import ErrorCode

from .harness import Handlers

PARTITIONS = 3


def _with_a_follower(handlers: Handlers, topic: str) -> int:
    """Each partition of `topic` gets a second replica in its ISR (a broker that only fetches
    when the test says so); its id."""
    follower = -1
    for p in range(PARTITIONS):
        partition = handlers.broker.replicas.get(topic, p)
        assert partition is not None
        follower = partition.broker_id + 1
        replicas = [partition.broker_id, follower]
        partition.make_leader(partition.leader_epoch, replicas, replicas)
    return follower


async def test_a_markers_partitions_are_appended_before_any_is_replicated(handlers):
    await handlers.create_topic("t", PARTITIONS)
    follower = _with_a_follower(handlers, "t")
    answer = asyncio.ensure_future(handlers.call("WriteTxnMarkers", 1, {"markers": [{
        "producer_id": 7, "producer_epoch": 0, "transaction_result": True,
        "topics": [{"name": "t", "partition_indexes": list(range(PARTITIONS))}],
        "coordinator_epoch": 0}]}))
    for _ in range(20):  # the handler runs to its wait for the ISR
        await asyncio.sleep(0)
    partitions = [handlers.broker.replicas.get("t", p) for p in range(PARTITIONS)]
    assert not answer.done()  # acks=all: the follower has fetched nothing yet
    assert [p.log_end_offset for p in partitions] == [1] * PARTITIONS
    for p in partitions:  # the follower fetches each partition's marker
        p.record_follower_fetch(follower, 1)
    r = await asyncio.wait_for(answer, 5)
    assert [x.error_code for x in r.markers[0].topics[0].partitions] == (
        [ErrorCode.none] * PARTITIONS)
    assert [p.high_watermark for p in partitions] == [1] * PARTITIONS
