"""ListOffsets (2) and OffsetForLeaderEpoch (23), beyond the plain lookups: the record with the
largest timestamp (v7+, KIP-734), the last stable offset for read_committed, no record at or
after a timestamp, the leader-epoch checks of the client's current epoch (KIP-320), and an
epoch the log has not seen (Kafka's LeaderEpochFileCache.endOffsetFor)."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode

from .harness import Handlers, begin_transaction

LATEST, MAX_TIMESTAMP = -1, -3
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


async def _list(h: Handlers, timestamp: int, *, isolation: int = READ_UNCOMMITTED,
                current_epoch: int = -1) -> Any:
    r = await h.call("ListOffsets", 7, {"replica_id": -1, "isolation_level": isolation,
                                        "topics": [{"name": "t", "partitions": [{
                                            "partition_index": 0,
                                            "current_leader_epoch": current_epoch,
                                            "timestamp": timestamp}]}]})
    return r.topics[0].partitions[0]


async def _end_of_epoch(h: Handlers, epoch: int, current_epoch: int = -1) -> Any:
    r = await h.call("OffsetForLeaderEpoch", 4, {"replica_id": -1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": current_epoch,
                                       "leader_epoch": epoch}]}]})
    return r.topics[0].partitions[0]


def _epoch(h: Handlers) -> int:
    return int(h.broker.replicas.get("t", 0).leader_epoch)


async def test_max_timestamp_finds_the_record_with_the_largest_timestamp(handlers):
    await handlers.create_topic("t")
    for ts in (1_000, 5_000, 3_000):
        await handlers.produce("t", 0, [b"x"], default_timestamp=ts)
    p = await _list(handlers, MAX_TIMESTAMP)
    assert (p.error_code, p.offset, p.timestamp) == (ErrorCode.none, 1, 5_000)


async def test_no_record_at_or_after_the_timestamp(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"x"], default_timestamp=1_000)
    p = await _list(handlers, 2_000)
    assert (p.error_code, p.offset, p.timestamp) == (ErrorCode.none, -1, -1)


async def test_read_committed_latest_is_the_last_stable_offset(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a"])
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    await handlers.produce("t", 0, [b"b"], transactional_id="tx", producer_id=pid,
                           producer_epoch=epoch, base_sequence=0)
    committed = await _list(handlers, LATEST, isolation=READ_COMMITTED)
    uncommitted = await _list(handlers, LATEST)
    assert (committed.offset, uncommitted.offset) == (1, 2)


async def test_the_clients_current_leader_epoch_is_checked(handlers):
    await handlers.create_topic("t")
    epoch = _epoch(handlers)
    newer = await _list(handlers, LATEST, current_epoch=epoch + 1)
    same = await _list(handlers, LATEST, current_epoch=epoch)
    ahead = await _end_of_epoch(handlers, epoch, current_epoch=epoch + 1)
    assert newer.error_code == ErrorCode.unknown_leader_epoch
    assert same.error_code == ErrorCode.none
    assert ahead.error_code == ErrorCode.unknown_leader_epoch


async def test_an_epoch_after_the_latest_has_no_end_offset(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a"])
    p = await _end_of_epoch(handlers, _epoch(handlers) + 3)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (ErrorCode.none, -1, -1)
