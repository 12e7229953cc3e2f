"""Transactions on the transaction coordinator: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers (27), DescribeProducers (61),
DescribeTransactions (65), ListTransactions (66)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from samsa.broker.network.signals import CloseConnection
from samsa.protocol.errors import ErrorCode

from .harness import ADMIN, ALICE, Handlers, begin_transaction, eventually, values_of


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


# ---- KIP-939 two-phase commit (InitProducerId v6, unstable in Kafka 4.4) ---------------------
UNSTABLE = {"unstable.api.versions.enable": True}
TWO_PC = UNSTABLE | {"transaction.two.phase.commit.enable": True}
TRANSACTIONAL_ID, LITERAL, ALLOW = 5, 3, 3
WRITE, TWO_PHASE_COMMIT = 4, 15


def _init_v6(transactional_id: str, timeout_ms: int = 60_000, *, enable_2pc: bool = True,
             keep_prepared: bool = False) -> dict:
    return _init(transactional_id, timeout_ms) | {"enable2_pc": enable_2pc,
                                                  "keep_prepared_txn": keep_prepared}


async def _advertised(h: Handlers) -> tuple[int, int]:
    versions = await h.call("ApiVersions", 3, {"client_software_name": "t",
                                               "client_software_version": "1"})
    return next((k.min_version, k.max_version) for k in versions.api_keys if k.api_key == 22)


@pytest.fixture
async def two_pc(tmp_path: Path) -> AsyncIterator[Handlers]:
    h = await Handlers.open(tmp_path / "data", TWO_PC)
    try:
        yield h
    finally:
        await h.close()


async def test_init_v6_neither_listed_nor_served_without_the_unstable_switch(handlers):
    assert await _advertised(handlers) == (0, 5)
    await handlers.find_coordinator("tx", key_type=1)
    with pytest.raises(CloseConnection):
        await handlers.call("InitProducerId", 6, _init_v6("tx", enable_2pc=False))


async def test_two_phase_commit_refused_where_the_broker_does_not_allow_it(tmp_path):
    h = await Handlers.open(tmp_path / "data", UNSTABLE)
    try:
        assert await _advertised(h) == (0, 6)
        await h.find_coordinator("tx", key_type=1)
        refused = await h.retry_call("InitProducerId", 6, _init_v6("tx"))
        plain = await h.retry_call("InitProducerId", 6, _init_v6("tx", enable_2pc=False))
    finally:
        await h.close()
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed
    assert plain.error_code == ErrorCode.none
    assert (plain.ongoing_txn_producer_id, plain.ongoing_txn_producer_epoch) == (-1, -1)


async def test_a_two_phase_commit_transaction_has_no_timeout(two_pc):
    await two_pc.find_coordinator("tx", key_type=1)
    # a 2PC producer's own timeout is not checked: the transaction never times out
    r = await two_pc.retry_call("InitProducerId", 6, _init_v6("tx", timeout_ms=10**9))
    assert r.error_code == ErrorCode.none and r.producer_id >= 0
    described = await two_pc.call("DescribeTransactions", 0, {"transactional_ids": ["tx"]},
                                  principal=ADMIN)
    timeout = described.transaction_states[0].transaction_timeout
    assert timeout.total_seconds() * 1000 == 2**31 - 1
    kept = await two_pc.retry_call("InitProducerId", 6, _init_v6("tx", keep_prepared=True))
    assert kept.error_code == ErrorCode.unsupported_version  # not served yet, as in Kafka 4.4


async def test_two_phase_commit_needs_its_acl_operation(tmp_path):
    h = await Handlers.open(tmp_path / "data", TWO_PC, authorizer=True)

    async def allow(operation: int) -> None:
        created = await h.call("CreateAcls", 3, {"creations": [{
            "resource_type": TRANSACTIONAL_ID, "resource_name": "tx",
            "resource_pattern_type": LITERAL, "principal": str(ALICE), "host": "*",
            "operation": operation, "permission_type": ALLOW}]}, principal=ADMIN)
        assert created.results[0].error_code == ErrorCode.none

    try:
        await h.find_coordinator("tx", key_type=1)
        await allow(WRITE)
        write_only = await h.retry_call("InitProducerId", 6, _init_v6("tx"), principal=ALICE)
        plain = await h.retry_call("InitProducerId", 6, _init_v6("tx", enable_2pc=False),
                                   principal=ALICE)
        await allow(TWO_PHASE_COMMIT)
        both = await h.retry_call("InitProducerId", 6, _init_v6("tx"), principal=ALICE)
    finally:
        await h.close()
    assert write_only.error_code == ErrorCode.transactional_id_authorization_failed
    assert plain.error_code == ErrorCode.none
    assert both.error_code == ErrorCode.none
