"""Spark's Kafka source with kafka.isolation.level=read_committed over a transactional topic.

The topic (one partition, so that every offset is known in advance) holds, written by
librdkafka transactional producers and a plain producer:

    offsets  content                                   visible to read_committed
    0-4      T1 committed (5 records), 5 = COMMIT      0-4
    6-10     T2 aborted (5 records),  11 = ABORT       -
    12-14    plain non-transactional writes            12-14
    15 16    single-record txn + COMMIT                15
    17 18    single-record txn + COMMIT                17
    19 20    single-record txn + COMMIT                19
    21       x: transaction OPEN (LSO stays at 21)     - (aborted later)
    22 23    y: another producer's txn + COMMIT        only once x ended (LSO moves)
    24       ABORT of x
    25       z: transaction OPEN, committed later      only after 26
    26       COMMIT of z

Spark must return exactly the committed records with their offsets, never an aborted one,
stop at the LSO (endOffset 21) while x is open, and continue after it ends, with
failOnDataLoss=true and no "Cannot fetch record" timeouts. A read_uncommitted batch read
does see the aborted records, so the test is not vacuous.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.cluster.cluster import Cluster
from tests.spark.helpers import (
    TIMEOUT_S,
    Rec,
    create_topics,
    produce,
    run_available_now,
    source_end_offsets,
    source_options,
    wait_until,
)
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.timeout(300)


class TxnProducer:
    """A librdkafka transactional producer that records each delivered offset."""

    def __init__(self, bootstrap: str, txn_id: str) -> None:
        self.p = Producer({
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
            "linger.ms": 5,
        })
        self.p.init_transactions(TIMEOUT_S)
        self.errors: list[str] = []
        # for the partition's high watermark (read_uncommitted: not the LSO) only: it never
        # subscribes or commits
        self.watermarks = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{txn_id}",
                                    "isolation.level": "read_uncommitted"})

    def send(self, topic: str, values: list[bytes]) -> list[Rec]:
        recs = [Rec(topic, 0, v, key=v[:1]) for v in values]
        for r in recs:
            def cb(err: Any, msg: Any, r: Rec = r) -> None:
                if err is not None:
                    self.errors.append(str(err))
                else:
                    r.offset = msg.offset()

            self.p.produce(topic, r.value, r.key, partition=0, on_delivery=cb)
        assert self.p.flush(TIMEOUT_S) == 0 and not self.errors, self.errors
        return recs

    def txn(self, topic: str, values: list[bytes], commit: bool = True) -> list[Rec]:
        self.p.begin_transaction()
        recs = self.send(topic, values)
        self.end(topic, commit)
        return recs

    def end(self, topic: str, commit: bool) -> None:
        """Commit or abort, then wait for the marker on the topic's partition 0. A coordinator
        answers once its decision is durable and writes the markers after (Kafka's does too,
        and in a cluster they cross brokers), so another producer's next write could otherwise
        take the offset the scenario has for this marker. Nothing else writes meanwhile: the
        marker is the one record the high watermark gains."""
        tp = TopicPartition(topic, 0)
        before = self.watermarks.get_watermark_offsets(tp, TIMEOUT_S)[1]
        if commit:
            self.p.commit_transaction(TIMEOUT_S)
        else:
            self.p.abort_transaction(TIMEOUT_S)
        wait_until(lambda: self.watermarks.get_watermark_offsets(tp, TIMEOUT_S)[1] > before,
                   what=f"the marker after offset {before}")


Row = tuple[int, bytes]


class Scenario:
    def __init__(self, bootstrap: str, replication: int = 1) -> None:
        self.bs = bootstrap
        u = uuid.uuid4().hex[:8]
        self.topic = f"rc-{u}"
        create_topics(bootstrap, {self.topic: 1}, replication)
        self.p1 = TxnProducer(bootstrap, f"rc-p1-{u}")
        self.p_open = TxnProducer(bootstrap, f"rc-open-{u}")
        self.p2 = TxnProducer(bootstrap, f"rc-p2-{u}")

    def phase1(self) -> tuple[list[Row], list[Row]]:
        """Everything up to the open transaction x; returns (visible, invisible) rows."""
        t = self.topic
        c1 = self.p1.txn(t, [f"c1-{i}".encode() for i in range(5)])
        a1 = self.p1.txn(t, [f"a1-{i}".encode() for i in range(5)], commit=False)
        plain = produce(self.bs, [Rec(t, 0, f"p-{i}".encode(), key=b"p") for i in range(3)])
        singles = [r for i in range(3) for r in self.p1.txn(t, [f"s-{i}".encode()])]
        self.p_open.p.begin_transaction()
        x = self.p_open.send(t, [b"x-open-then-aborted"])
        y = self.p2.txn(t, [b"y-after-open"])
        assert [r.offset for r in c1 + a1 + plain + singles + x + y] == [
            0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14, 15, 17, 19, 21, 22
        ], "unexpected offsets: each control marker must take exactly one offset"
        self.y = y
        visible = rows(c1 + plain + singles)
        invisible = rows(a1 + x + y)
        return visible, invisible

    def phase2(self) -> tuple[list[Row], list[Row]]:
        """Abort x (LSO moves past y), open z. Returns (newly visible, still invisible)."""
        self.p_open.end(self.topic, commit=False)
        self.p_open.p.begin_transaction()
        self.z = self.p_open.send(self.topic, [b"z-open-then-committed"])
        assert [r.offset for r in self.z] == [25]
        return rows(self.y), rows(self.z)

    def phase3(self) -> list[Row]:
        self.p_open.end(self.topic, commit=True)
        return rows(self.z)

    def close(self) -> None:
        for p in (self.p1, self.p_open, self.p2):
            p.p.flush(1)
            p.watermarks.close()


def rows(recs: list[Rec]) -> list[Row]:
    return sorted((r.offset, r.value) for r in recs)


def spark_rows(spark_rows: list[Any]) -> list[Row]:
    return sorted((r["offset"], bytes(r["value"])) for r in spark_rows)


@pytest.fixture
def scenario(spark_broker: BrokerProcess) -> Iterator[Scenario]:
    s = Scenario(spark_broker.bootstrap)
    try:
        yield s
    finally:
        s.close()


def batch_read(spark: Any, bs: str, topic: str, isolation: str, **extra: object) -> list[Row]:
    df = (
        spark.read.format("kafka")
        .options(**source_options(bs, subscribe=topic, **{"kafka.isolation.level": isolation},
                                  **extra))
        .load()
    )
    return spark_rows(df.collect())


@pytest.mark.parametrize("max_offsets", [None, 3], ids=["unlimited", "maxOffsets3"])
def test_streaming_read_committed(spark: Any, spark_broker: BrokerProcess, scenario: Scenario,
                                  offset_path: str, max_offsets: int | None,
                                  tmp_path: Path) -> None:
    check_streaming_read_committed(spark, scenario, max_offsets, tmp_path)


def test_streaming_read_committed_cluster(spark_cluster: Cluster, spark: Any, offset_path: str,
                                          tmp_path: Path) -> None:
    """The same over a 3-broker cluster: the topic has replication factor 3 (its HW, and so
    its LSO, move with the followers' fetches), and the partition leader, the transaction
    coordinators and the deprecated offset reader's group coordinator may each be a different
    broker (markers are written across brokers)."""
    s = Scenario(spark_cluster.bootstrap, replication=3)
    try:
        check_streaming_read_committed(spark, s, 3, tmp_path)
    finally:
        s.close()


def check_streaming_read_committed(spark: Any, scenario: Scenario, max_offsets: int | None,
                                   tmp_path: Path) -> None:
    bs, topic = scenario.bs, scenario.topic
    ck, out = tmp_path / "ck", tmp_path / "out"
    extra: dict[str, object] = {"kafka.isolation.level": "read_committed"}
    if max_offsets is not None:
        extra["maxOffsetsPerTrigger"] = max_offsets

    def run() -> tuple[Any, list[Row]]:
        df = (
            spark.readStream.format("kafka")
            .options(**source_options(bs, subscribe=topic, startingOffsets="earliest", **extra))
            .load()
            .selectExpr("offset", "value")
        )
        q = run_available_now(df, fmt="parquet", checkpoint=ck, path=out)
        return q, spark_rows(spark.read.parquet(str(out)).collect())

    visible1, invisible1 = scenario.phase1()
    q, got = run()
    assert got == visible1
    assert source_end_offsets(q) == {topic: {"0": 21}}, "the query must stop at the LSO"
    if max_offsets is not None:
        sizes = [p["numInputRows"] for p in q.recentProgress]
        assert max(sizes) <= max_offsets

    new2, _open_z = scenario.phase2()
    q, got = run()
    assert got == sorted(visible1 + new2)
    assert source_end_offsets(q) == {topic: {"0": 25}}
    assert sum(p["numInputRows"] for p in q.recentProgress) == 1

    new3 = scenario.phase3()
    q, got = run()
    assert got == sorted(visible1 + new2 + new3)
    assert source_end_offsets(q) == {topic: {"0": 27}}
    aborted = [r for r in invisible1 if r not in new2]  # T2 and x
    assert len(aborted) == 6 and not set(got) & set(aborted)


def test_batch_read_committed_vs_uncommitted(spark: Any, spark_broker: BrokerProcess,
                                             scenario: Scenario) -> None:
    bs, topic = spark_broker.bootstrap, scenario.topic
    visible1, invisible1 = scenario.phase1()

    # read_committed: exactly the committed records below the LSO (x at 21 is open).
    assert batch_read(spark, bs, topic, "read_committed") == visible1
    # ... also when the range is split so that sub-ranges start inside transactions/markers.
    assert batch_read(spark, bs, topic, "read_committed", minPartitions=5) == visible1
    # read_uncommitted sees the aborted and the open records too: the test is not vacuous.
    uncommitted = batch_read(spark, bs, topic, "read_uncommitted")
    assert uncommitted == sorted(visible1 + invisible1)

    new2, open2 = scenario.phase2()
    assert batch_read(spark, bs, topic, "read_committed") == sorted(visible1 + new2)
    # an explicit end offset on the COMMIT marker of y (23): y at 22 is in, the marker not
    ending = json.dumps({topic: {"0": 23}})
    assert batch_read(spark, bs, topic, "read_committed", endingOffsets=ending) == sorted(
        visible1 + new2
    )
    new3 = scenario.phase3()
    assert new3 == open2
    assert batch_read(spark, bs, topic, "read_committed", minPartitions=4) == sorted(
        visible1 + new2 + new3
    )


class JavaTxnProducer:
    """The reference Java client (the kafka-clients jar Spark itself loads), driven through
    py4j: initTransactions / beginTransaction / send().get() / commit or abort."""

    def __init__(self, spark: Any, bootstrap: str, txn_id: str) -> None:
        jvm = spark._jvm
        props = jvm.java.util.Properties()
        ser = "org.apache.kafka.common.serialization.ByteArraySerializer"
        for k, v in {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "key.serializer": ser,
            "value.serializer": ser,
            "transaction.timeout.ms": "60000",
            "max.block.ms": "20000",
        }.items():
            props.setProperty(k, v)
        self.jvm = jvm
        self.p = jvm.org.apache.kafka.clients.producer.KafkaProducer(props)
        self.p.initTransactions()

    def txn(self, topic: str, values: list[tuple[int, bytes]], commit: bool) -> list[Row3]:
        self.p.beginTransaction()
        out: list[Row3] = []
        for partition, v in values:
            rec = self.jvm.org.apache.kafka.clients.producer.ProducerRecord(
                topic, partition, v[:2], v
            )
            md = self.p.send(rec).get()
            out.append((md.partition(), md.offset(), v))
        if commit:
            self.p.commitTransaction()
        else:
            self.p.abortTransaction()
        return out

    def close(self) -> None:
        self.p.close()


Row3 = tuple[int, int, bytes]


def test_java_transactional_producer(spark: Any, spark_broker: BrokerProcess,
                                     tmp_path: Path) -> None:
    """Transactions written by the reference Java producer over two partitions; Spark streams
    them with read_committed in micro-batches of at most 2 offsets."""
    bs = spark_broker.bootstrap
    topic = f"rc-java-{uuid.uuid4().hex[:8]}"
    create_topics(bs, {topic: 2})
    p = JavaTxnProducer(spark, bs, f"rc-java-{uuid.uuid4().hex[:8]}")
    try:
        committed = p.txn(topic, [(i % 2, f"jc1-{i}".encode()) for i in range(6)], True)
        aborted = p.txn(topic, [(i % 2, f"ja-{i}".encode()) for i in range(4)], False)
        committed += p.txn(topic, [(1, b"jc2-single")], True)
        committed += p.txn(topic, [(0, b"jc3-0"), (1, b"jc3-1")], True)
    finally:
        p.close()
    # 3 + marker, 2 aborted + marker, (p1: 1 + marker), 1 + marker in each partition
    assert sorted((pp, o) for pp, o, _ in committed) == [
        (0, 0), (0, 1), (0, 2), (0, 7), (1, 0), (1, 1), (1, 2), (1, 7), (1, 9)
    ]

    df = (
        spark.readStream.format("kafka")
        .options(**source_options(bs, subscribe=topic, startingOffsets="earliest",
                                  maxOffsetsPerTrigger=2,
                                  **{"kafka.isolation.level": "read_committed"}))
        .load().selectExpr("partition", "offset", "value")
    )
    q = run_available_now(df, fmt="parquet", checkpoint=tmp_path / "ck", path=tmp_path / "out")
    got = sorted((r["partition"], r["offset"], bytes(r["value"]))
                 for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert got == sorted(committed)
    assert source_end_offsets(q) == {topic: {"0": 9, "1": 11}}

    everything = (
        spark.read.format("kafka")
        .options(**source_options(bs, subscribe=topic,
                                  **{"kafka.isolation.level": "read_uncommitted"}))
        .load().collect()
    )
    assert sorted((r["partition"], r["offset"], bytes(r["value"])) for r in everything) == sorted(
        committed + aborted
    )
