"""AlterPartitionReassignments (45) on a broker that is its own cluster: each partition's
target is checked as Kafka's controller checks it (ReplicationControlManager): a partition
that does not exist, a replica list empty, repeated or negative (INVALID_REPLICA_ASSIGNMENT),
a broker that is not alive; v1 (KIP-860) echoes whether the replication factor may change.
Each partition is answered on its own."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode


def _alter(targets: dict[int, list[int] | None], topic: str = "t") -> dict[str, Any]:
    return {"timeout": 5000, "topics": [{"name": topic, "partitions": [
        {"partition_index": i, "replicas": r} for i, r in targets.items()]}]}


def _codes(r: Any) -> dict[int, ErrorCode]:
    return {p.partition_index: p.error_code for p in r.responses[0].partitions}


async def test_an_invalid_replica_list_is_refused(handlers):
    await handlers.create_topic("t", 3)
    r = await handlers.call("AlterPartitionReassignments", 0,
                            _alter({0: [], 1: [0, 0], 2: [-1]}))
    assert r.error_code == ErrorCode.none
    assert _codes(r) == {i: ErrorCode.invalid_replica_assignment for i in range(3)}


async def test_a_partition_that_does_not_exist(handlers):
    await handlers.create_topic("t")
    r = await handlers.call("AlterPartitionReassignments", 0, _alter({4: [0]}))
    missing = await handlers.call("AlterPartitionReassignments", 0, _alter({0: [0]}, "nope"))
    assert _codes(r) == {4: ErrorCode.unknown_topic_or_partition}
    assert _codes(missing) == {0: ErrorCode.unknown_topic_or_partition}


async def test_v1_echoes_whether_the_replication_factor_may_change(handlers):
    await handlers.create_topic("t")
    r = await handlers.call("AlterPartitionReassignments", 1, dict(
        _alter({0: [0]}), allow_replication_factor_change=False))
    assert _codes(r) == {0: ErrorCode.none}
    assert r.allow_replication_factor_change is False


async def test_each_partition_is_answered_on_its_own(handlers):
    await handlers.create_topic("t", 2)
    r = await handlers.call("AlterPartitionReassignments", 0, _alter({0: [0], 1: [7]}))
    assert _codes(r) == {0: ErrorCode.none, 1: ErrorCode.invalid_replica_assignment}
