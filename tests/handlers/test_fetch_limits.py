"""Fetch (1): the size limits of KIP-74 and the log start. A response holds whole batches; the
first batch of the first partition with data is returned even when it is larger than
max_bytes or partition_max_bytes (so a consumer always makes progress); after it, a batch
that would pass a limit is left for the next fetch. An offset below the log start is out of
range."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode

from .harness import Handlers, values_of

KB = 1024


def _partition(index: int, partition_max_bytes: int) -> dict[str, Any]:
    return {"partition": index, "fetch_offset": 0, "current_leader_epoch": -1,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": partition_max_bytes}


async def _fetch(h: Handlers, max_bytes: int, partition_max_bytes: int,
                 partitions: tuple[int, ...] = (0,)) -> Any:
    r = await h.call("Fetch", 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "t", "partitions": [_partition(i, partition_max_bytes)
                                                 for i in partitions]}]})
    return {p.partition_index: p for p in r.responses[0].partitions}


async def _two_batches(h: Handlers, partition: int = 0) -> None:
    """Two batches of one 2 KiB record each."""
    await h.produce("t", partition, [b"a" * 2 * KB])
    await h.produce("t", partition, [b"b" * 2 * KB])


async def test_a_first_batch_larger_than_the_limits_is_returned_whole(handlers):
    await handlers.create_topic("t")
    await _two_batches(handlers)
    p = (await _fetch(handlers, max_bytes=100, partition_max_bytes=100))[0]
    assert p.error_code == ErrorCode.none
    assert values_of(p.records) == [b"a" * 2 * KB]


async def test_partition_max_bytes_leaves_the_next_batch(handlers):
    await handlers.create_topic("t")
    await _two_batches(handlers)
    limited = (await _fetch(handlers, max_bytes=1 << 20, partition_max_bytes=3 * KB))[0]
    both = (await _fetch(handlers, max_bytes=1 << 20, partition_max_bytes=8 * KB))[0]
    assert len(values_of(limited.records)) == 1
    assert len(values_of(both.records)) == 2


async def test_max_bytes_spent_on_one_partition_leaves_the_next_empty(handlers):
    await handlers.create_topic("t", 2)
    await _two_batches(handlers, 0)
    await _two_batches(handlers, 1)
    answer = await _fetch(handlers, max_bytes=3 * KB, partition_max_bytes=1 << 20,
                          partitions=(0, 1))
    assert len(values_of(answer[0].records)) == 1
    assert (answer[1].error_code, values_of(answer[1].records)) == (ErrorCode.none, [])
    assert answer[1].high_watermark == 2  # the partition is answered, its records left


async def test_an_offset_below_the_log_start_is_out_of_range(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a", b"b", b"c"])
    deleted = await handlers.call("DeleteRecords", 2, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "offset": 2}]}], "timeout": 5000})
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    p = await handlers.fetch("t", 0, offset=1)
    assert (p.error_code, p.log_start_offset) == (ErrorCode.offset_out_of_range, -1)  # Kafka's
