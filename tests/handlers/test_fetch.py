"""Fetch (1): each partition's records from an offset, with its high watermark, last stable
offset and log start; a partition's errors are its own, the request's only for sessions."""

from __future__ import annotations

import uuid

from samsa.protocol.errors import ErrorCode

from .harness import ALICE, begin_transaction, eventually, values_of


def _fetch(topic: str, partition: int, offset: int, **fields: object) -> dict:
    p = {"partition": partition, "fetch_offset": offset, "current_leader_epoch": -1,
         "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    p.update(fields)
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [p]}]}


async def test_reads_from_the_offset_asked(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a", b"b"])
    await handlers.produce("t", 0, [b"c"])
    p = await handlers.fetch("t", 0, offset=2)
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (
        ErrorCode.none, 3, 3, 0)
    assert values_of(p.records) == [b"c"]


async def test_at_the_high_watermark_answers_no_records(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a"])
    p = await handlers.fetch("t", 0, offset=1)
    assert (p.error_code, p.high_watermark, values_of(p.records)) == (ErrorCode.none, 1, [])


async def test_offset_out_of_range(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a"])
    p = await handlers.fetch("t", 0, offset=7)
    # Kafka's error answer: offsets unknown (librdkafka takes them as the partition's, and
    # from a follower an offset above -1 sends it back to the leader)
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (
        ErrorCode.offset_out_of_range, -1, -1, -1)


async def test_unknown_topic_or_partition(handlers):
    r = await handlers.call("Fetch", 12, _fetch("nope", 0, 0))
    assert r.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_unknown_topic_id_from_v13(handlers):
    body = _fetch("", 0, 0)
    body["topics"] = [{"topic_id": uuid.uuid4(), "partitions": body["topics"][0]["partitions"]}]
    r = await handlers.call("Fetch", 13, body)
    assert r.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_id


async def test_v18_answers_as_v17_whatever_high_watermark_the_client_knows(handlers):
    """KIP-1166's HighWatermark (v18) is KRaft's: a broker's partition ignores it."""
    created = await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"a", b"b"])
    answers = []
    for version, known in ((17, None), (18, None), (18, -1), (18, 1), (18, 2**63 - 1)):
        body = _fetch("", 0, 0)
        del body["replica_id"]  # v15+: in replica_state, a consumer's by default
        if known is not None:
            body["topics"][0]["partitions"][0]["high_watermark"] = known
        body["topics"] = [{"topic_id": created.topic_id,
                           "partitions": body["topics"][0]["partitions"]}]
        r = await handlers.call("Fetch", version, body)
        p = r.responses[0].partitions[0]
        answers.append((p.error_code, p.high_watermark, values_of(p.records)))
    assert answers == [(ErrorCode.none, 2, [b"a", b"b"])] * 5


async def test_a_leader_epoch_newer_than_the_leaders_is_unknown(handlers):
    await handlers.create_topic("t")
    epoch = handlers.broker.replicas.get("t", 0).leader_epoch
    newer = await handlers.call("Fetch", 12, _fetch("t", 0, 0, current_leader_epoch=epoch + 1))
    assert newer.responses[0].partitions[0].error_code == ErrorCode.unknown_leader_epoch


async def test_read_committed_stops_at_an_open_transaction(handlers):
    await handlers.create_topic("t")
    await handlers.produce("t", 0, [b"plain"])
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    pending = await handlers.produce("t", 0, [b"pending"], "tx", producer_id=pid,
                                     producer_epoch=epoch, base_sequence=0)
    assert pending.error_code == ErrorCode.none
    committed = await handlers.fetch("t", 0, isolation_level=1)
    assert (committed.high_watermark, committed.last_stable_offset) == (2, 1)
    assert values_of(committed.records) == [b"plain"]


async def test_topic_authorization_failed(secured):
    await secured.create_topic("t")
    await secured.produce("t", 0, [b"secret"])
    r = await secured.call("Fetch", 12, _fetch("t", 0, 0), principal=ALICE)
    p = r.responses[0].partitions[0]
    assert (p.error_code, values_of(p.records)) == (ErrorCode.topic_authorization_failed, [])


async def test_read_committed_lists_the_aborted_transactions(handlers):
    await handlers.create_topic("t")
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    await handlers.produce("t", 0, [b"dropped"], "tx", producer_id=pid, producer_epoch=epoch,
                           base_sequence=0)
    end = await handlers.call("EndTxn", 3, {"transactional_id": "tx", "producer_id": pid,
                                            "producer_epoch": epoch, "committed": False})
    assert end.error_code == ErrorCode.none

    async def aborted() -> bool:
        p = await handlers.fetch("t", 0, isolation_level=1)
        return p.last_stable_offset == 2 and [
            (a.producer_id, a.first_offset) for a in p.aborted_transactions or ()] == [(pid, 0)]
    await eventually(aborted)


async def test_the_last_stable_offset_is_at_least_the_log_start(handlers):
    """An open transaction whose first records were deleted (DeleteRecords) holds the last
    stable offset at the log start, not below it (Kafka's maybeIncrementFirstUnstableOffset)."""
    await handlers.create_topic("t")
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    await handlers.produce("t", 0, [b"open"], "tx", producer_id=pid, producer_epoch=epoch,
                           base_sequence=0)
    await handlers.produce("t", 0, [b"a", b"b", b"c"])
    deleted = await handlers.call("DeleteRecords", 2, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "offset": 2}]}], "timeout": 5000})
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.none
    p = await handlers.fetch("t", 0, offset=2, isolation_level=1)
    assert (p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
            values_of(p.records)) == (ErrorCode.none, 4, 2, 2, [])
