"""Iceberg topics in tests: a transactional producer's committed and aborted transactions, the
table as pyiceberg reads it, and a read_committed consumer's view."""

from __future__ import annotations

import threading
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


class TxnStream:
    """A transactional producer in a thread: transactions of `per_txn` records, every third
    aborted, until stopped or the broker goes away. What it knows of each one's outcome."""

    def __init__(self, bootstrap: str, topic: str, first: int, per_txn: int = 20,
                 count: int | None = None) -> None:
        self.bootstrap, self.topic, self.first = bootstrap, topic, first
        self.per_txn, self.count = per_txn, count
        self.committed: set[bytes] = set()  # commit_transaction returned
        self.aborted: set[bytes] = set()  # abort_transaction returned
        self.uncertain: set[bytes] = set()  # the broker went away before the answer
        self.error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TxnStream:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def wait(self) -> None:
        self._thread.join(120)

    def _run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 2,
                      "transactional.id": f"{self.topic}-tx", "transaction.timeout.ms": 10000})
        t = self.first
        keys: list[bytes] = []
        try:
            p.init_transactions(30)
            while not self._stop.is_set() and (self.count is None or t < self.first + self.count):
                keys = [f"t{t}-r{r}".encode() for r in range(self.per_txn)]
                p.begin_transaction()
                for k in keys:
                    p.produce(self.topic, key=k, value=b"v-" + k, headers=[("h", b"x")])
                # in the log before the marker (an abort drops what is still queued)
                if p.flush(30) != 0:
                    raise KafkaException("records not delivered")
                if t % 3 == 2:
                    p.abort_transaction(30)
                    self.aborted.update(keys)
                else:
                    p.commit_transaction(30)
                    self.committed.update(keys)
                keys = []
                t += 1
        except KafkaException as exc:  # the broker was killed: this one's outcome is unknown
            self.error = exc
            self.uncertain.update(keys)


def produce_transactions(bootstrap: str, topic: str, first: int, count: int) -> TxnStream:
    stream = TxnStream(bootstrap, topic, first, count=count).start()
    stream.wait()
    assert stream.error is None, stream.error
    return stream


def table_keys(data_dir: Path, topic: str, key: str = "key") -> list[bytes]:
    """The `key` column of the topic's table (empty before the table exists)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NoSuchTableError
    from sqlalchemy.exc import SQLAlchemyError
    root = data_dir / "iceberg"
    if not (root / "catalog.db").exists():  # no table yet
        return []
    try:  # opening creates the catalog's tables where missing: it may race the broker's
        catalog = SqlCatalog("samsa", uri=f"sqlite:///{root / 'catalog.db'}",
                             warehouse=(root / "warehouse").as_uri())
        table = catalog.load_table(("samsa", topic))
    except (SQLAlchemyError, NoSuchTableError):  # not created yet
        return []
    column = table.scan(selected_fields=(key,)).to_arrow()[key].to_pylist()
    return [k if isinstance(k, bytes) else str(k).encode() for k in column]


def wait_for_table(data_dir: Path, topic: str, expected: int, timeout: float = 60,
                   key: str = "key") -> list[bytes]:
    deadline = time.monotonic() + timeout
    keys = table_keys(data_dir, topic, key)
    while len(keys) < expected and time.monotonic() < deadline:
        time.sleep(0.3)
        keys = table_keys(data_dir, topic, key)
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


def _wait_for_growth(data: Path, topic: str, above: int, timeout: float = 60) -> int:
    """Until a commit of this broker's life added rows to the table."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = len(table_keys(data, topic))
        if n > above:
            return n
        time.sleep(0.1)
    raise AssertionError(f"the table of {topic} stayed at {above} rows")


def stream_through_kills(broker: BrokerProcess, topic: str,
                         kills: int = 2) -> tuple[set[bytes], set[bytes]]:
    """Transactions streamed into `topic` while the broker is killed -9 `kills` times, each
    time once the table has grown in that life (so it is likely mid-commit); the keys of the
    transactions known committed and known aborted."""
    streams: list[TxnStream] = []
    rows = 0
    try:
        for life in range(kills + 1):
            stream = TxnStream(broker.bootstrap, topic, life * 1000).start()
            streams.append(stream)
            rows = _wait_for_growth(broker.data_dir, topic, rows)
            if life < kills:  # while the producer streams and the broker commits
                time.sleep(0.3)
                broker.kill9()
                broker.start()
                stream.stop()  # it finishes, or learns it failed, against the new life
    finally:
        for s in streams:
            s.stop()
    assert streams[-1].error is None, streams[-1].error
    return (set().union(*(s.committed for s in streams)),
            set().union(*(s.aborted for s in streams)))
