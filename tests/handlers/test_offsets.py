"""ListOffsets (2), DeleteRecords (21), OffsetForLeaderEpoch (23): a partition's offsets by
timestamp, its log start moved forward, and the end offset of a leader epoch."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE

LATEST, EARLIEST = -1, -2


def _list(topic: str, partition: int, timestamp: int) -> dict:
    return {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": timestamp}]}]}


async def _offset(h, topic: str, partition: int, timestamp: int):
    r = await h.call("ListOffsets", 7, _list(topic, partition, timestamp))
    return r.topics[0].partitions[0]


async def test_earliest_latest_and_by_timestamp(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a"], default_timestamp=1_000)
    await handlers.produce("t", 0, [b"b"], default_timestamp=2_000)
    earliest = await _offset(handlers, "t", 0, EARLIEST)
    latest = await _offset(handlers, "t", 0, LATEST)
    at = await _offset(handlers, "t", 0, 1_500)
    assert (earliest.error_code, earliest.offset) == (ErrorCode.none, 0)
    assert latest.offset == 2
    assert (at.offset, at.timestamp) == (1, 2_000)


async def test_list_offsets_of_an_unknown_partition(handlers):
    await handlers.create_topic("t")
    p = await _offset(handlers, "t", 3, LATEST)
    assert p.error_code == ErrorCode.unknown_topic_or_partition


async def test_delete_records_moves_the_log_start(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a", b"b", b"c"])
    r = await handlers.call("DeleteRecords", 2, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "offset": 2}]}], "timeout": 5000})
    p = r.topics[0].partitions[0]
    assert (p.error_code, p.low_watermark) == (ErrorCode.none, 2)
    assert (await _offset(handlers, "t", 0, EARLIEST)).offset == 2


async def test_delete_records_beyond_the_high_watermark(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a"])
    r = await handlers.call("DeleteRecords", 2, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "offset": 9}]}], "timeout": 5000})
    assert r.topics[0].partitions[0].error_code == ErrorCode.offset_out_of_range


async def test_offset_for_leader_epoch(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a", b"b"])
    epoch = handlers.broker.replicas.get("t", 0).leader_epoch
    r = await handlers.call("OffsetForLeaderEpoch", 4, {"replica_id": -1, "topics": [
        {"topic": "t", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": epoch},
            {"partition": 7, "current_leader_epoch": -1, "leader_epoch": epoch}]}]})
    found, missing = r.topics[0].partitions
    assert (found.error_code, found.leader_epoch, found.end_offset) == (ErrorCode.none, epoch, 2)
    assert missing.error_code == ErrorCode.unknown_topic_or_partition


async def test_authorization_failed(secured):
    await secured.create_topic("t")
    listed = await secured.call("ListOffsets", 7, _list("t", 0, LATEST), principal=ALICE)
    deleted = await secured.call("DeleteRecords", 2, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout": 5000}, principal=ALICE)
    assert listed.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
