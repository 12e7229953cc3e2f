"""Fetch (1) long polls: a fetch with nothing to answer parks on its partitions; woken by one of
them it reads again only the partitions that woke it (the others, which had nothing, keep
what was read, so a consumer of many partitions at a low rate does not read them all twice
for each record); a time-out reads every partition again, and a change of leadership
answers the partition's error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from samsa.protocol.errors import ErrorCode

from .harness import Handlers, values_of


def _parked_fetch(partitions: int, max_wait_ms: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": "t", "partitions": [
                {"partition": i, "fetch_offset": 0, "current_leader_epoch": -1,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20} for i in range(partitions)]}]}


def _count_reads(h: Handlers, monkeypatch: pytest.MonkeyPatch, partitions: int) -> list[int]:
    """How many times each partition of t is read (the real read, counted)."""
    reads = [0] * partitions
    for i in range(partitions):
        partition = h.broker.replicas.get("t", i)
        assert partition is not None
        real = partition.read

        def counted(*args: Any, _i: int = i, _real: Any = real, **kwargs: Any) -> Any:
            reads[_i] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(partition, "read", counted)
    return reads


async def _until_parked(h: Handlers, index: int) -> None:
    partition = h.broker.replicas.get("t", index)
    assert partition is not None
    for _ in range(500):
        if partition.waiters._fetches:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the fetch did not park")


async def test_a_wake_reads_again_only_the_partition_that_woke_it(
        handlers: Handlers, monkeypatch: pytest.MonkeyPatch) -> None:
    await handlers.create_topic("t", partitions=4)
    reads = _count_reads(handlers, monkeypatch, 4)
    fetch = asyncio.create_task(handlers.call("Fetch", 12, _parked_fetch(4, 10_000)))
    await _until_parked(handlers, 0)
    assert reads == [1, 1, 1, 1]
    await handlers.produce("t", 2, [b"x"])
    r = await asyncio.wait_for(fetch, 5)
    assert reads == [1, 1, 2, 1]
    answers = {p.partition_index: p for p in r.responses[0].partitions}
    assert values_of(answers[2].records) == [b"x"]
    assert answers[2].high_watermark == 1
    for i in (0, 1, 3):  # answered as read before the wake: nothing, at the high watermark 0
        assert (answers[i].error_code, answers[i].high_watermark, values_of(answers[i].records)
                ) == (ErrorCode.none, 0, [])


async def test_a_time_out_reads_every_partition_again(
        handlers: Handlers, monkeypatch: pytest.MonkeyPatch) -> None:
    await handlers.create_topic("t", partitions=3)
    reads = _count_reads(handlers, monkeypatch, 3)
    r = await handlers.call("Fetch", 12, _parked_fetch(3, 200))
    assert reads == [2, 2, 2]
    assert [len(values_of(p.records)) for p in r.responses[0].partitions] == [0, 0, 0]


async def test_a_partition_that_loses_its_leadership_answers_its_error_after_a_wake(
        handlers: Handlers) -> None:
    await handlers.create_topic("t", partitions=2)
    fetch = asyncio.create_task(handlers.call("Fetch", 12, _parked_fetch(2, 10_000)))
    await _until_parked(handlers, 1)
    partition = handlers.broker.replicas.get("t", 1)
    assert partition is not None
    partition.make_follower(7, partition.leader_epoch + 1, [7, partition.broker_id],
                            [7, partition.broker_id])
    r = await asyncio.wait_for(fetch, 5)
    codes = {p.partition_index: p.error_code for p in r.responses[0].partitions}
    assert codes == {0: ErrorCode.none, 1: ErrorCode.not_leader_or_follower}
