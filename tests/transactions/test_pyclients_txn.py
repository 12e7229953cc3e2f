"""Transactions with aiokafka and kafka-python producers, read back by read_committed consumers."""

from __future__ import annotations

import asyncio

from .clients import consume_all, create_topic, unique


def test_aiokafka_transactions(shared_broker):
    from aiokafka import AIOKafkaProducer

    topic, txn = unique("aio-txn")
    bs = shared_broker.bootstrap
    create_topic(bs, topic)

    async def run() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=bs,
            transactional_id=txn,
            enable_idempotence=True,
            request_timeout_ms=10000,
        )
        await p.start()
        try:
            async with p.transaction():
                for i in range(3):
                    await p.send_and_wait(topic, f"aio-commit-{i}".encode(), partition=0)
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aio-abort", partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-commit-last", partition=0)
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(run(), 60))
    want = [b"aio-commit-0", b"aio-commit-1", b"aio-commit-2", b"aio-commit-last"]
    assert consume_all(bs, topic, "read_committed", expect=4) == want
    assert b"aio-abort" in consume_all(bs, topic, "read_uncommitted", expect=5)


def test_kafka_python_transactions(shared_broker):
    from kafka import KafkaProducer

    topic, txn = unique("kp-txn")
    bs = shared_broker.bootstrap
    create_topic(bs, topic)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=txn, request_timeout_ms=10000)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"kp-commit", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"kp-abort", partition=0).get(10)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"kp-commit-2", partition=0)
        p.commit_transaction()
    finally:
        p.close(5)
    assert consume_all(bs, topic, "read_committed", expect=2) == [b"kp-commit", b"kp-commit-2"]
    assert b"kp-abort" in consume_all(bs, topic, "read_uncommitted", expect=3)
