"""The Kafka sink: a streaming query writes to a Samsa topic with the connector's default
producer (kafka-clients 3.9: enable.idempotence=true, acks=all, so InitProducerId + idempotent
Produce), with keys, headers and explicit partitions; the records are read back exactly."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.spark.helpers import (
    TIMEOUT_S,
    Rec,
    create_topics,
    produce,
    run_available_now,
    source_options,
)
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.timeout(300)


def read_all(bs: str, topic: str, partitions: int, expect: int) -> list[Any]:
    """Every record of the topic through an independent client (librdkafka)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": f"sinkcheck-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(out) < expect and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m)
        # anything beyond `expect` would be a duplicate: give it a moment to show up
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m)
        return out
    finally:
        c.close()


def test_streaming_kafka_sink(spark: Any, spark_broker: BrokerProcess, tmp_path: Path) -> None:
    bs = spark_broker.bootstrap
    u = uuid.uuid4().hex[:8]
    src, dst = f"sink-src-{u}", f"sink-dst-{u}"
    create_topics(bs, {src: 2, dst: 3})
    recs = produce(bs, [
        Rec(src, i % 2, f"value-{i}".encode(), key=f"key-{i}".encode(),
            headers=[("n", str(i).encode()), ("src", b"samsa")] if i % 3 else [])
        for i in range(30)
    ])

    df = (
        spark.readStream.format("kafka")
        .options(**source_options(bs, subscribe=src, startingOffsets="earliest",
                                  includeHeaders=True))
        .load()
        # keys and values transformed by Spark; headers extended; partition chosen by Spark
        .selectExpr(
            "concat(key, cast('!' as binary)) AS key",
            "upper(cast(value AS string)) AS value",
            "concat(coalesce(headers, array()), "
            "array(named_struct('key', 'from-offset', 'value', cast(cast(offset AS string) "
            "AS binary)))) AS headers",
            "cast(offset % 3 AS int) AS partition",
        )
    )
    q = run_available_now(df, fmt="kafka", checkpoint=tmp_path / "ck",
                          options={"kafka.bootstrap.servers": bs, "topic": dst})
    assert sum(p["numInputRows"] for p in q.recentProgress) == 30

    got = read_all(bs, dst, 3, expect=30)
    actual = sorted(
        (m.partition(), m.key(), m.value(), tuple(m.headers() or ())) for m in got
    )
    expected = sorted(
        (
            r.offset % 3,
            r.key + b"!",
            r.value.decode().upper().encode(),
            tuple(r.headers) + (("from-offset", str(r.offset).encode()),),
        )
        for r in recs
    )
    assert actual == expected
    # idempotent producer: one batch sequence per partition, offsets dense from 0
    for p in range(3):
        offs = sorted(m.offset() for m in got if m.partition() == p)
        assert offs == list(range(len(offs)))

    # And Spark reads back what Spark wrote, headers included.
    back = (
        spark.read.format("kafka")
        .options(**source_options(bs, subscribe=dst, includeHeaders=True)).load().collect()
    )
    assert sorted(
        (r["partition"], bytes(r["key"]), bytes(r["value"]),
         tuple((h["key"], bytes(h["value"])) for h in r["headers"] or []))
        for r in back
    ) == expected


def test_batch_write_topic_column(spark: Any, spark_broker: BrokerProcess) -> None:
    """df.write.format("kafka") with the topic taken from a `topic` column and no partition:
    the producer's default partitioner places the keys."""
    bs = spark_broker.bootstrap
    u = uuid.uuid4().hex[:8]
    a, b = f"bw-a-{u}", f"bw-b-{u}"
    create_topics(bs, {a: 1, b: 2})
    rows = [(a if i % 2 else b, f"k{i}", f"v{i}") for i in range(20)]
    (
        spark.createDataFrame(rows, "topic string, key string, value string")
        .write.format("kafka").option("kafka.bootstrap.servers", bs).save()
    )
    back = (
        spark.read.format("kafka")
        .options(**source_options(bs, subscribe=f"{a},{b}")).load()
        .selectExpr("topic", "cast(key AS string) k", "cast(value AS string) v").collect()
    )
    assert sorted((r["topic"], r["k"], r["v"]) for r in back) == sorted(rows)
