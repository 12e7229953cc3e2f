"""Client helpers for the transaction tests: real producers and read_committed consumers."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT = 20.0


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)
    futures[topic].result(timeout=TIMEOUT)


def txn_producer(bootstrap: str, txn_id: str, **extra: object) -> Producer:
    conf = {
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": 30000,
        "linger.ms": 5,
        "retry.backoff.ms": 50,
    }
    conf.update(extra)
    return Producer(conf)


def open_transaction(bootstrap: str, txn_id: str, topic: str, partition: int) -> Producer:
    """A transactional producer with one record written to `partition` and its transaction
    left open (its coordinator knows it: not hanging)."""
    live = txn_producer(bootstrap, txn_id)
    live.init_transactions(20)
    live.begin_transaction()
    live.produce(topic, value=b"live", partition=partition)
    assert live.flush(20) == 0
    return live


def consume_all(
    bootstrap: str,
    topic: str,
    isolation: str,
    *,
    partitions: int = 1,
    expect: int | None = None,
    idle_s: float = 1.5,
    timeout: float = TIMEOUT,
) -> list[bytes]:
    """Values read from the start of every partition until `expect` values arrived (or, with
    expect=None, until nothing new came for `idle_s`)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])  # -2 = beginning
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        last_new = time.monotonic()
        while time.monotonic() < deadline:
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                out.append(msg.value())
                last_new = time.monotonic()
                continue
            if expect is not None and len(out) >= expect:
                break
            if expect is None and time.monotonic() - last_new > idle_s:
                break
        return out
    finally:
        c.close()


def unique(prefix: str) -> tuple[str, str]:
    u = uuid.uuid4().hex[:8]
    return f"{prefix}-{u}", f"{prefix}-txn-{u}"
