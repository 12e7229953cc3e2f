"""Transactions on the transaction coordinator: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), DescribeProducers (61),
DescribeTransactions (65), ListTransactions (66)."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE, begin_transaction, eventually, values_of


def _init(transactional_id: str | None, timeout_ms: int = 60_000) -> dict:
    return {"transactional_id": transactional_id, "transaction_timeout": timeout_ms,
            "producer_id": -1, "producer_epoch": -1}


async def test_idempotent_producer_ids_are_distinct(handlers):
    a = await handlers.retry_call("InitProducerId", 4, _init(None))
    b = await handlers.retry_call("InitProducerId", 4, _init(None))
    assert (a.error_code, b.error_code) == (ErrorCode.none, ErrorCode.none)
    assert a.producer_id >= 0 and b.producer_id != a.producer_id


async def test_transactional_init_bumps_the_epoch(handlers):
    await handlers.find_coordinator("tx", key_type=1)
    first = await handlers.retry_call("InitProducerId", 4, _init("tx"))
    second = await handlers.retry_call("InitProducerId", 4, _init("tx"))
    assert second.producer_id == first.producer_id
    assert second.producer_epoch == first.producer_epoch + 1


async def test_init_with_a_timeout_beyond_the_maximum(handlers):
    await handlers.find_coordinator("tx", key_type=1)
    r = await handlers.retry_call("InitProducerId", 4, _init("tx", timeout_ms=10**9))
    assert r.error_code == ErrorCode.invalid_transaction_timeout


async def test_commit_makes_the_records_readable_committed(handlers):
    await handlers.create_topic("t")
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    await handlers.produce("t", 0, [b"txn"], "tx", producer_id=pid, producer_epoch=epoch,
                           base_sequence=0)
    end = await handlers.call("EndTxn", 3, {"transactional_id": "tx", "producer_id": pid,
                                            "producer_epoch": epoch, "committed": True})
    assert end.error_code == ErrorCode.none

    async def committed() -> bool:
        p = await handlers.fetch("t", 0, isolation_level=1)
        return p.last_stable_offset == 2 and values_of(p.records) == [b"txn"]
    await eventually(committed)


async def test_fenced_epoch_and_state_errors(handlers):
    await handlers.create_topic("t")
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    await handlers.retry_call("InitProducerId", 4, _init("tx"))  # a new instance fences this one
    old = {"transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
           "committed": True}
    fenced = await handlers.call("EndTxn", 3, old)
    fenced_v1 = await handlers.call("EndTxn", 1, old)
    assert fenced.error_code == ErrorCode.producer_fenced
    assert fenced_v1.error_code == ErrorCode.invalid_producer_epoch  # unknown to v0-v1 clients
    await handlers.find_coordinator("idle", key_type=1)
    renewed = await handlers.retry_call("InitProducerId", 4, _init("idle"))
    nothing_open = await handlers.call("EndTxn", 3, {
        "transactional_id": "idle", "producer_id": renewed.producer_id,
        "producer_epoch": renewed.producer_epoch, "committed": True})
    unknown = await handlers.call("EndTxn", 3, {"transactional_id": "none", "producer_id": 1,
                                                "producer_epoch": 0, "committed": False})
    assert nothing_open.error_code == ErrorCode.invalid_txn_state
    assert unknown.error_code == ErrorCode.invalid_producer_id_mapping


async def test_add_partitions_of_an_unknown_topic(handlers):
    await handlers.find_coordinator("tx", key_type=1)
    init = await handlers.retry_call("InitProducerId", 4, _init("tx"))
    r = await handlers.call("AddPartitionsToTxn", 3, {
        "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": init.producer_id,
        "v3_and_below_producer_epoch": init.producer_epoch,
        "v3_and_below_topics": [{"name": "nope", "partitions": [0]}]})
    assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == (
        ErrorCode.unknown_topic_or_partition)


async def test_describe_and_list_transactions_and_producers(handlers):
    await handlers.create_topic("t")
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    await handlers.produce("t", 0, [b"open"], "tx", producer_id=pid, producer_epoch=epoch,
                           base_sequence=0)
    described = await handlers.call("DescribeTransactions", 0, {"transactional_ids": ["tx",
                                                                                      "none"]})
    listed = await handlers.call("ListTransactions", 0, {"state_filters": [],
                                                         "producer_id_filters": []})
    producers = await handlers.call("DescribeProducers", 0, {"topics": [
        {"name": "t", "partition_indexes": [0]}]})
    tx, none = described.transaction_states
    assert (tx.error_code, tx.transaction_state, tx.producer_id) == (
        ErrorCode.none, "Ongoing", pid)
    assert [(t.topic, t.partitions) for t in tx.topics] == [("t", (0,))]
    assert none.error_code == ErrorCode.transactional_id_not_found
    assert [(x.transactional_id, x.transaction_state) for x in listed.transaction_states] == [
        ("tx", "Ongoing")]
    (active,) = producers.topics[0].partitions[0].active_producers
    assert (active.producer_id, active.current_txn_start_offset) == (pid, 0)


async def test_list_transactions_v2_filters_by_a_transactional_id_pattern(handlers):
    """KIP-1152: the pattern matches a whole id (RE2J `matches`); null or empty lists all; a
    pattern that does not compile is INVALID_REGULAR_EXPRESSION and nothing else."""
    for tid in ("app-1", "app-2", "other"):
        await handlers.find_coordinator(tid, key_type=1)
        assert (await handlers.call("InitProducerId", 4, _init(tid))).error_code == 0

    async def listed(pattern: str | None) -> tuple[int, list[str]]:
        r = await handlers.call("ListTransactions", 2, {
            "state_filters": [], "producer_id_filters": [], "duration_filter": -1,
            "transactional_id_pattern": pattern})
        return r.error_code, sorted(x.transactional_id for x in r.transaction_states)

    everything = (ErrorCode.none, ["app-1", "app-2", "other"])
    assert await listed("app-.*") == (ErrorCode.none, ["app-1", "app-2"])
    assert await listed("app") == (ErrorCode.none, [])
    assert await listed(".*-2|oth.r") == (ErrorCode.none, ["app-2", "other"])
    assert await listed(None) == everything
    assert await listed("") == everything
    assert await listed("app-(") == (ErrorCode.invalid_regular_expression, [])


async def test_write_txn_markers_is_a_cluster_action(secured):
    r = await secured.call("WriteTxnMarkers", 1, {"markers": [{
        "producer_id": 1, "producer_epoch": 0, "transaction_result": True,
        "topics": [{"name": "t", "partition_indexes": [0]}], "coordinator_epoch": 0}]},
        principal=ALICE)
    assert r.markers[0].topics[0].partitions[0].error_code == (
        ErrorCode.cluster_authorization_failed)


async def test_transactional_id_authorization_failed(secured):
    await secured.find_coordinator("tx", key_type=1)
    r = await secured.retry_call("InitProducerId", 4, _init("tx"), principal=ALICE)
    assert r.error_code == ErrorCode.transactional_id_authorization_failed
