"""Spark's Kafka streaming source (spark-sql-kafka-0-10) against Samsa.

Every query is a real micro-batch stream; most use Trigger.AvailableNow to stay short. Topics are
unique per test on one session-wide broker; data is written with librdkafka (confluent-kafka) so
the expected offsets come from its delivery reports.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import (
    Rec,
    add_partitions,
    admin,
    create_topics,
    data_progress,
    expected_rows,
    kafka_rows,
    produce,
    run_available_now,
    source_end_offsets,
    source_options,
    wait_until,
)
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.timeout(300)

BASE_TS = 1_700_000_000_000


def topic_name(prefix: str = "spark") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def fill(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str = "v",
         start: int = 0) -> list[Rec]:
    """per_partition records in each partition, keyed, values `<tag>-<p>-<i>`."""
    recs = [
        Rec(topic, p, f"{tag}-{p}-{i}".encode(), key=f"k{p}-{i}".encode())
        for i in range(start, start + per_partition)
        for p in range(partitions)
    ]
    return produce(bootstrap, recs)


def stream(spark: Any, bootstrap: str, **options: object) -> Any:
    reader = spark.readStream.format("kafka")
    for k, v in source_options(bootstrap, **options).items():
        reader = reader.option(k, v)
    return reader.load()


def list_group_ids(bs: str) -> list[str]:
    client = admin(bs)  # must outlive the future
    result = client.list_consumer_groups().result(timeout=20)
    assert not result.errors, result.errors
    return [g.group_id for g in result.valid]


def memory_rows(spark: Any, name: str) -> list[Any]:
    return spark.sql(f"SELECT * FROM {name}").collect()


def qname() -> str:
    return f"q_{uuid.uuid4().hex[:10]}"


def read_available(spark: Any, bootstrap: str, **options: object) -> tuple[Any, list[Any]]:
    """A Trigger.AvailableNow query of the source into a memory sink: (the query, its rows)."""
    name = qname()
    q = run_available_now(stream(spark, bootstrap, **options), name=name)
    return q, memory_rows(spark, name)


# ----------------------------------------------------------------------------- subscriptions
def test_subscribe_earliest(spark: Any, spark_broker: BrokerProcess, offset_path: str) -> None:
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 3})
    recs = fill(bs, topic, 3, 7)

    q, rows = read_available(spark, bs, subscribe=topic, startingOffsets="earliest")
    assert kafka_rows(rows) == expected_rows(recs)
    assert {r["timestampType"] for r in rows} == {0}  # CreateTime
    assert source_end_offsets(q) == {topic: {"0": 7, "1": 7, "2": 7}}


def test_subscribe_pattern(spark: Any, spark_broker: BrokerProcess, offset_path: str) -> None:
    bs = spark_broker.bootstrap
    prefix = f"pat-{uuid.uuid4().hex[:8]}"
    a, b, other = f"{prefix}-a", f"{prefix}-b", f"other-{prefix}"
    create_topics(bs, {a: 2, b: 1, other: 1})
    recs = fill(bs, a, 2, 4, "a") + fill(bs, b, 1, 3, "b")
    fill(bs, other, 1, 5, "other")

    _, rows = read_available(spark, bs, subscribePattern=re.escape(prefix) + r"-.*",
                             startingOffsets="earliest")
    assert kafka_rows(rows) == expected_rows(recs)


def test_assign(spark: Any, spark_broker: BrokerProcess, offset_path: str) -> None:
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 3})
    recs = fill(bs, topic, 3, 5)

    _, rows = read_available(spark, bs, assign=json.dumps({topic: [0, 2]}),
                             startingOffsets="earliest")
    assert kafka_rows(rows) == expected_rows(
        r for r in recs if r.partition in (0, 2)
    )


# ----------------------------------------------------------------------------- starting offsets
def test_starting_offsets_latest(spark: Any, spark_broker: BrokerProcess,
                                 offset_path: str) -> None:
    """`latest` skips what is in the topic when the query starts and reads what comes after."""
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 2})
    fill(bs, topic, 2, 5, "before")

    name = qname()
    prefix = f"gp-{uuid.uuid4().hex[:8]}"
    q = (
        stream(spark, bs, subscribe=topic, startingOffsets="latest", groupIdPrefix=prefix)
        .writeStream.format("memory").queryName(name)
        .trigger(processingTime="500 milliseconds").start()
    )
    try:
        q.processAllAvailable()  # the initial offsets (5, 5) are now fixed in the offset log
        assert memory_rows(spark, name) == []
        # Which offset reader ran: only the deprecated one is a group member (its driver
        # consumer subscribes); executors never join a group. ListGroups shows it.
        all_groups = list_group_ids(bs)
        driver_groups = [g for g in all_groups if g.startswith(prefix)]
        if offset_path == "consumer":
            assert len(driver_groups) == 1 and driver_groups[0].endswith("-driver-0"), (
                all_groups
            )
        else:
            assert driver_groups == []
        after = fill(bs, topic, 2, 3, "after", start=5)
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    assert kafka_rows(memory_rows(spark, name)) == expected_rows(after)
    assert [r.offset for r in after if r.partition == 0] == [5, 6, 7]


def test_starting_offsets_json(spark: Any, spark_broker: BrokerProcess) -> None:
    """Per-partition offsets: an exact offset, -2 (earliest) and -1 (latest)."""
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 3})
    recs = fill(bs, topic, 3, 6)

    _, rows = read_available(spark, bs, subscribe=topic,
                             startingOffsets=json.dumps({topic: {"0": 2, "1": -2, "2": -1}}))
    want = [r for r in recs if (r.partition == 0 and r.offset >= 2) or r.partition == 1]
    assert kafka_rows(rows) == expected_rows(want)


def test_starting_offsets_by_timestamp(spark: Any, spark_broker: BrokerProcess,
                                       offset_path: str) -> None:
    """ListOffsets by timestamp: the first offset whose timestamp is >= the one asked for."""
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 2})
    # Partition p, record i has CreateTime BASE_TS + 1000*i (the records share batches).
    recs = produce(bs, [
        Rec(topic, p, f"t-{p}-{i}".encode(), timestamp_ms=BASE_TS + 1000 * i)
        for i in range(10) for p in range(2)
    ])

    _, rows = read_available(
        spark, bs, subscribe=topic,
        # p0: exactly record 4's timestamp; p1: between records 6 and 7
        startingOffsetsByTimestamp=json.dumps({topic: {"0": BASE_TS + 4000, "1": BASE_TS + 6500}}),
    )
    want = [r for r in recs if (r.partition == 0 and r.offset >= 4)
            or (r.partition == 1 and r.offset >= 7)]
    assert kafka_rows(rows) == expected_rows(want)
    got_ts = sorted((r["partition"], r["offset"], int(r["timestamp"].timestamp() * 1000))
                    for r in rows)
    assert got_ts == sorted((r.partition, r.offset, r.timestamp_ms) for r in want)


# ----------------------------------------------------------------------------- rate / splitting
def test_max_offsets_per_trigger(spark: Any, spark_broker: BrokerProcess) -> None:
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 2})
    recs = fill(bs, topic, 2, 10)

    q, rows = read_available(spark, bs, subscribe=topic, startingOffsets="earliest",
                             maxOffsetsPerTrigger=6)
    assert kafka_rows(rows) == expected_rows(recs)
    sizes = [p["numInputRows"] for p in data_progress(q)]
    assert sum(sizes) == 20 and max(sizes) <= 6 and len(sizes) >= 4, sizes


def test_min_partitions(spark: Any, spark_broker: BrokerProcess) -> None:
    """minPartitions splits one Kafka partition's range over several Spark tasks (several
    executor consumers read the same partition at different offsets)."""
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 2})
    recs = fill(bs, topic, 2, 12)

    _, rows = read_available(spark, bs, subscribe=topic, startingOffsets="earliest",
                             minPartitions=6)
    assert kafka_rows(rows) == expected_rows(recs)

    batch = (
        spark.read.format("kafka")
        .options(**source_options(bs, subscribe=topic, minPartitions=6))
        .load()
    )
    assert batch.rdd.getNumPartitions() == 6
    assert kafka_rows(batch.collect()) == expected_rows(recs)


def test_include_headers(spark: Any, spark_broker: BrokerProcess) -> None:
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 1})
    specs: list[list[tuple[str, bytes | None]]] = [
        [],
        [("a", b"1")],
        [("a", b"1"), ("b", b"\x00\xff"), ("a", b"again")],  # order and duplicates kept
        [("empty", b""), ("null", None)],
        [("unicode-\u00e9", "\u2603".encode())],
    ]
    recs = produce(bs, [
        Rec(topic, 0, f"h{i}".encode(), key=None if i == 0 else f"k{i}".encode(), headers=h)
        for i, h in enumerate(specs)
    ])

    _, rows = read_available(spark, bs, subscribe=topic, startingOffsets="earliest",
                             includeHeaders=True)
    rows = sorted(rows, key=lambda r: r["offset"])
    assert kafka_rows(rows) == expected_rows(recs)
    got = [
        [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"] or []]
        for r in rows
    ]
    assert got == specs


# ----------------------------------------------------------------------------- restarts
def test_restart_from_checkpoint(spark: Any, spark_broker: BrokerProcess, tmp_path: Path,
                                 offset_path: str) -> None:
    """A query restarted from its checkpoint resumes where it stopped: with an exactly-once
    file sink the output holds every record exactly once."""
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 3})
    ck, out = tmp_path / "ck", tmp_path / "out"

    def run() -> Any:
        df = stream(spark, bs, subscribe=topic, startingOffsets="earliest",
                    maxOffsetsPerTrigger=7)
        return run_available_now(
            df.selectExpr("topic", "partition", "offset", "key", "value"),
            fmt="parquet", checkpoint=ck, path=out,
        )

    first = fill(bs, topic, 3, 6, "first")
    q1 = run()
    assert sum(p["numInputRows"] for p in q1.recentProgress) == 18
    second = fill(bs, topic, 3, 4, "second", start=6)
    q2 = run()
    assert sum(p["numInputRows"] for p in q2.recentProgress) == 12
    q3 = run()  # nothing new: no rows, no duplicates
    assert sum(p["numInputRows"] for p in q3.recentProgress) == 0

    rows = spark.read.parquet(str(out)).collect()
    assert kafka_rows(rows) == expected_rows(first + second)


def test_new_partitions_picked_up(spark: Any, spark_broker: BrokerProcess,
                                  offset_path: str) -> None:
    """Partitions added while the query runs are read from their offset 0 (no data-loss error
    with failOnDataLoss=true)."""
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 2})
    before = fill(bs, topic, 2, 3, "before")

    name = qname()
    q = (
        stream(spark, bs, subscribe=topic, startingOffsets="earliest")
        .writeStream.format("memory").queryName(name)
        .trigger(processingTime="500 milliseconds").start()
    )
    try:
        q.processAllAvailable()
        assert kafka_rows(memory_rows(spark, name)) == expected_rows(before)
        add_partitions(bs, topic, 4)
        after = fill(bs, topic, 4, 2, "after", start=3)
        # The new partitions are written before Spark learns of them: they must be read
        # from offset 0, not from "latest". The driver learns of them on a metadata refresh
        # (kafka.metadata.max.age.ms=1000; on the consumer path, then a rebalance), so a
        # processAllAvailable() may return before that: wait for the rows instead.
        want = expected_rows(before + after)
        wait_until(lambda: q.exception() is not None
                   or len(memory_rows(spark, name)) >= len(want),
                   timeout_s=60, what="rows of the new partitions")
        q.processAllAvailable()
        assert q.exception() is None
        rows = memory_rows(spark, name)
    finally:
        q.stop()
    assert kafka_rows(rows) == expected_rows(before + after)
    assert {r.partition for r in after if r.offset == 0} == {2, 3}


def test_batches_end_on_the_log_end(spark: Any, spark_broker: BrokerProcess) -> None:
    """A running query's endOffset per partition equals the log end offset after each burst."""
    bs = spark_broker.bootstrap
    topic = topic_name()
    create_topics(bs, {topic: 2})
    name = qname()
    q = (
        stream(spark, bs, subscribe=topic, startingOffsets="earliest")
        .writeStream.format("memory").queryName(name)
        .trigger(processingTime="300 milliseconds").start()
    )
    try:
        recs = fill(bs, topic, 2, 4, "one")
        q.processAllAvailable()
        assert source_end_offsets(q) == {topic: {"0": 4, "1": 4}}
        recs += fill(bs, topic, 2, 2, "two", start=4)
        q.processAllAvailable()
        assert source_end_offsets(q) == {topic: {"0": 6, "1": 6}}
        rows = memory_rows(spark, name)
    finally:
        q.stop()
    assert kafka_rows(rows) == expected_rows(recs)

