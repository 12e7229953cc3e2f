"""Exactly-once consume-transform-produce (confluent-kafka): output and consumed offsets are
committed atomically through AddOffsetsToTxn + TxnOffsetCommit + markers on __consumer_offsets."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition

from .clients import consume_all, create_topic, txn_producer, unique

N = 20


def _consumer(bs: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )


def _poll(c: Consumer, n: int) -> list:
    out = []
    for _ in range(200):
        if len(out) >= n:
            break
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            out.append(m)
    return out


def test_consume_transform_produce_exactly_once(shared_broker):
    bs = shared_broker.bootstrap
    src, txn = unique("eos-in")
    dst = f"eos-out-{uuid.uuid4().hex[:8]}"
    group = f"eos-group-{uuid.uuid4().hex[:8]}"
    create_topic(bs, src)
    create_topic(bs, dst)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(N):
        plain.produce(src, value=f"m{i}".encode(), partition=0)
    plain.flush(10)

    producer = txn_producer(bs, txn)
    producer.init_transactions(20)
    tp = TopicPartition(src, 0)

    # An aborted round: its output is invisible and its offsets are not committed.
    c = _consumer(bs, group)
    c.assign([tp])
    msgs = _poll(c, 5)[:5]
    producer.begin_transaction()
    for m in msgs:
        producer.produce(dst, value=m.value().upper(), partition=0)
    producer.flush(10)  # abort_transaction would purge records still queued in the client
    producer.send_offsets_to_transaction(
        [TopicPartition(src, 0, msgs[-1].offset() + 1)], c.consumer_group_metadata(), 20
    )
    producer.abort_transaction(20)
    assert c.committed([tp], 10)[0].offset < 0
    c.close()

    # Committed rounds of 7 from the (absent) committed offset, i.e. from the start.
    c = _consumer(bs, group)
    c.assign([tp])
    done = 0
    while done < N:
        msgs = _poll(c, min(7, N - done))
        assert msgs, f"no input after {done}"
        producer.begin_transaction()
        for m in msgs:
            producer.produce(dst, value=m.value().upper(), partition=0)
        producer.send_offsets_to_transaction(
            [TopicPartition(src, 0, msgs[-1].offset() + 1)], c.consumer_group_metadata(), 20
        )
        producer.commit_transaction(20)
        done += len(msgs)
    c.close()

    out = consume_all(bs, dst, "read_committed", expect=N)
    assert out == [f"M{i}".encode() for i in range(N)]
    assert len(consume_all(bs, dst, "read_uncommitted", expect=N + 5)) == N + 5
    check = _consumer(bs, group)
    try:
        assert check.committed([tp], 10)[0].offset == N
    finally:
        check.close()
