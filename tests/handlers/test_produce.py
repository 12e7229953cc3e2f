"""Produce (0): appends each partition's batch to its log and answers its base offset; acks=-1
waits for the ISR (here: the broker alone), acks=0 gets no answer."""

from __future__ import annotations

import logging

import pytest

from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch
from tests.observability.test_txn_metrics import verification_samples

from .harness import ALICE, begin_transaction, values_of


def _request(topic: str, partition: int, values: list[bytes], acks: int = -1) -> dict:
    records = bytes(build_batch([(None, v) for v in values]))
    return {"acks": acks, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


async def test_appends_and_answers_the_base_offset(handlers):
    await handlers.create_topic("t", 2)
    first = await handlers.produce("t", 1, [b"a", b"b"])
    second = await handlers.produce("t", 1, [b"c"])
    assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
    assert (second.error_code, second.base_offset, second.log_start_offset) == (
        ErrorCode.none, 2, 0)
    assert values_of((await handlers.fetch("t", 1)).records) == [b"a", b"b", b"c"]


async def test_acks_zero_gets_no_answer_but_appends(handlers):
    await handlers.create_topic("t")
    assert await handlers.call("Produce", 9, _request("t", 0, [b"x"], acks=0)) is None
    assert (await handlers.fetch("t", 0)).high_watermark == 1


async def test_unknown_topic_or_partition(handlers):
    await handlers.create_topic("t")
    r = await handlers.call("Produce", 9, _request("t", 5, [b"x"]))
    missing = await handlers.call("Produce", 9, _request("nope", 0, [b"x"]))
    assert r.responses[0].partition_responses[0].error_code == (
        ErrorCode.unknown_topic_or_partition)
    assert missing.responses[0].partition_responses[0].error_code == (
        ErrorCode.unknown_topic_or_partition)


async def test_invalid_required_acks(handlers):
    await handlers.create_topic("t")
    r = await handlers.call("Produce", 9, _request("t", 0, [b"x"], acks=2))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks


async def test_duplicate_idempotent_batch_is_not_appended_twice(handlers):
    await handlers.create_topic("t")
    init = await handlers.retry_call("InitProducerId", 4, {
        "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1})
    batch = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch,
             "base_sequence": 0}
    first = await handlers.produce("t", 0, [b"once"], **batch)
    again = await handlers.produce("t", 0, [b"once"], **batch)
    assert (first.error_code, again.error_code) == (ErrorCode.none, ErrorCode.none)
    assert again.base_offset == first.base_offset == 0
    assert values_of((await handlers.fetch("t", 0)).records) == [b"once"]


async def test_out_of_order_sequence(handlers):
    await handlers.create_topic("t")
    init = await handlers.retry_call("InitProducerId", 4, {
        "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1})
    batch = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
    assert (await handlers.produce("t", 0, [b"0"], base_sequence=0, **batch)).error_code == 0
    r = await handlers.produce("t", 0, [b"gap"], base_sequence=5, **batch)
    assert r.error_code == ErrorCode.out_of_order_sequence_number


async def test_a_refusal_is_logged_at_debug_with_its_producer_and_sequences(
        handlers, caplog: pytest.LogCaptureFixture):
    # What a producer was told, and for which of its batches, is the chain an idempotent
    # producer's epoch bump is followed by (issue 45).
    caplog.set_level(logging.DEBUG, logger="samsa.broker.replication.produce_appends")
    await handlers.create_topic("t")
    init = await handlers.retry_call("InitProducerId", 4, {
        "transactional_id": None, "transaction_timeout": 60_000, "producer_id": -1,
        "producer_epoch": -1})
    batch = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch}
    await handlers.produce("t", 0, [b"0"], base_sequence=0, **batch)
    await handlers.produce("t", 0, [b"0"], base_sequence=0, **batch)
    await handlers.produce("t", 0, [b"gap", b"gap"], base_sequence=5, **batch)
    ids = f"producer {init.producer_id} epoch {init.producer_epoch}"
    assert f"produce to t-0 ({ids} seq 0..0): a duplicate of offsets 0-0" in caplog.text
    assert (f"produce to t-0 ({ids} seq 5..6) answered out_of_order_sequence_number"
            in caplog.text)


async def test_topic_authorization_failed(secured):
    await secured.create_topic("t")
    r = await secured.call("Produce", 9, _request("t", 0, [b"x"]), principal=ALICE)
    assert r.responses[0].partition_responses[0].error_code == (
        ErrorCode.topic_authorization_failed)
    assert (await secured.fetch("t", 0)).high_watermark == 0


async def test_acks_all_below_min_insync_replicas(handlers):
    await handlers.create_topic("t", configs={"min.insync.replicas": "2"})
    all_isr = await handlers.produce("t", 0, [b"x"])
    leader_only = await handlers.call("Produce", 9, _request("t", 0, [b"y"], acks=1))
    assert all_isr.error_code == ErrorCode.not_enough_replicas
    assert leader_only.responses[0].partition_responses[0].error_code == ErrorCode.none


async def test_transactional_batch_of_a_partition_not_in_the_transaction(handlers):
    await handlers.create_topic("t", 2)
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    r = await handlers.produce("t", 1, [b"stray"], "tx", producer_id=pid, producer_epoch=epoch,
                               base_sequence=0)
    assert r.error_code == ErrorCode.invalid_txn_state  # KIP-890's verification
    assert (await handlers.fetch("t", 1)).high_watermark == 0


async def test_verifications_are_timed_and_their_refusals_counted(handlers):
    """Kafka's AddPartitionsToTxnManager metrics: every verification is timed, and each
    partition refused counts as a failure (here the coordinator is this broker's)."""
    await handlers.create_topic("t", 2)
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    timed, failed = verification_samples()
    ok = await handlers.produce("t", 0, [b"in"], "tx", producer_id=pid, producer_epoch=epoch,
                                base_sequence=0)
    stray = await handlers.produce("t", 1, [b"stray"], "tx", producer_id=pid,
                                   producer_epoch=epoch, base_sequence=0)
    assert (ok.error_code, stray.error_code) == (ErrorCode.none, ErrorCode.invalid_txn_state)
    assert verification_samples() == (timed + 2, failed + 1)
