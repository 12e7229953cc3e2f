"""Iceberg topics in tests: a transactional producer's committed and aborted transactions, the
table as pyiceberg reads it, and a read_committed consumer's view."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess

SETTINGS = {"iceberg.catalog.commit.interval.ms": 200}


def start_broker(data_dir: Path) -> BrokerProcess:
    return BrokerProcess(data_dir, name="iceberg-broker", settings=SETTINGS).start()


def create_iceberg_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config={
        "samsa.iceberg.mode": "key_value"})])
    futures[topic].result(30)


def produce_transactions(bootstrap: str, topic: str, first: int, count: int,
                         per_txn: int = 20) -> set[bytes]:
    """Transactions first..first+count-1 of `per_txn` records each; every third aborted. The
    keys of the committed records."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-tx",
                  "linger.ms": 2})
    p.init_transactions(30)
    committed: set[bytes] = set()
    for t in range(first, first + count):
        p.begin_transaction()
        keys = [f"t{t}-r{r}".encode() for r in range(per_txn)]
        for k in keys:
            p.produce(topic, key=k, value=b"v-" + k, headers=[("h", b"x")])
        if t % 3 == 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed.update(keys)
    return committed


def table_keys(data_dir: Path, topic: str) -> list[bytes]:
    from pyiceberg.catalog.sql import SqlCatalog
    root = data_dir / "iceberg"
    catalog = SqlCatalog("samsa", uri=f"sqlite:///{root / 'catalog.db'}",
                         warehouse=(root / "warehouse").as_uri())
    try:
        table = catalog.load_table(("samsa", topic))
    except Exception:  # not created yet
        return []
    return [bytes(k) for k in table.scan(selected_fields=("key",)).to_arrow()["key"].to_pylist()]


def wait_for_table(data_dir: Path, topic: str, expected: int, timeout: float = 60) -> list[bytes]:
    deadline = time.monotonic() + timeout
    keys = table_keys(data_dir, topic)
    while len(keys) < expected and time.monotonic() < deadline:
        time.sleep(0.3)
        keys = table_keys(data_dir, topic)
    return keys


def read_committed_keys(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    ends = {}
    for p in range(partitions):
        _, ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    done: set[int] = set()
    deadline = time.monotonic() + 30
    while len(done) < partitions and time.monotonic() < deadline:
        for m in c.consume(500, timeout=0.5):
            if m.error():
                raise KafkaException(m.error())
            out.append(m.key() or b"")
        for p in range(partitions):
            (pos,) = c.position([TopicPartition(topic, p)])
            if pos.offset >= ends[p]:
                done.add(p)
    c.close()
    return out
