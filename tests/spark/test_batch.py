"""Batch queries: spark.read.format("kafka") with startingOffsets / endingOffsets."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.spark.helpers import (
    Rec,
    create_topics,
    expected_rows,
    kafka_rows,
    produce,
    source_options,
)
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.timeout(300)

BASE_TS = 1_700_000_000_000


def read(spark: Any, bs: str, **options: object) -> list[tuple[str, int, int, bytes | None, bytes]]:
    df = spark.read.format("kafka").options(**source_options(bs, **options)).load()
    return kafka_rows(df.collect())


@pytest.fixture
def topic_with_data(spark_broker: BrokerProcess) -> tuple[str, list[Rec]]:
    """3 partitions x 8 records; record i has CreateTime BASE_TS + 1000*i."""
    topic = f"batch-{uuid.uuid4().hex[:10]}"
    create_topics(spark_broker.bootstrap, {topic: 3})
    recs = produce(spark_broker.bootstrap, [
        Rec(topic, p, f"b-{p}-{i}".encode(), key=f"{i}".encode(), timestamp_ms=BASE_TS + 1000 * i)
        for i in range(8) for p in range(3)
    ])
    return topic, recs


def test_batch_defaults_earliest_to_latest(spark: Any, spark_broker: BrokerProcess,
                                           topic_with_data: tuple[str, list[Rec]],
                                           offset_path: str) -> None:
    topic, recs = topic_with_data
    bs = spark_broker.bootstrap
    assert read(spark, bs, subscribe=topic) == expected_rows(recs)
    assert read(spark, bs, subscribe=topic, startingOffsets="earliest",
                endingOffsets="latest") == expected_rows(recs)


def test_batch_json_offsets(spark: Any, spark_broker: BrokerProcess,
                            topic_with_data: tuple[str, list[Rec]], offset_path: str) -> None:
    topic, recs = topic_with_data
    bs = spark_broker.bootstrap
    starting = {topic: {"0": 3, "1": -2, "2": 5}}
    ending = {topic: {"0": 6, "1": 2, "2": -1}}
    got = read(spark, bs, subscribe=topic, startingOffsets=json.dumps(starting),
               endingOffsets=json.dumps(ending))
    want = [r for r in recs
            if (r.partition == 0 and 3 <= r.offset < 6)
            or (r.partition == 1 and r.offset < 2)
            or (r.partition == 2 and r.offset >= 5)]
    assert got == expected_rows(want)

    # assign + explicit ranges over a subset of partitions; an empty range reads nothing
    got = read(spark, bs, assign=json.dumps({topic: [1, 2]}),
               startingOffsets=json.dumps({topic: {"1": 4, "2": 8}}),
               endingOffsets=json.dumps({topic: {"1": 8, "2": 8}}))
    assert got == expected_rows(r for r in recs if r.partition == 1 and r.offset >= 4)


def test_batch_by_timestamp(spark: Any, spark_broker: BrokerProcess,
                            topic_with_data: tuple[str, list[Rec]]) -> None:
    topic, recs = topic_with_data
    bs = spark_broker.bootstrap
    # [ts of record 2, ts of record 5.5) in every partition -> offsets 2..5
    got = read(spark, bs, subscribe=topic, startingTimestamp=BASE_TS + 2000,
               endingTimestamp=BASE_TS + 5500)
    assert got == expected_rows(r for r in recs if 2 <= r.offset <= 5)
    # an ending timestamp after the last record resolves to latest
    got = read(spark, bs, subscribe=topic,
               startingOffsetsByTimestamp=json.dumps({topic: {str(p): BASE_TS + 7000
                                                              for p in range(3)}}),
               endingOffsetsByTimestamp=json.dumps({topic: {str(p): BASE_TS + 99_000
                                                            for p in range(3)}}))
    assert got == expected_rows(r for r in recs if r.offset == 7)


def test_batch_subscribe_pattern_and_columns(spark: Any, spark_broker: BrokerProcess) -> None:
    bs = spark_broker.bootstrap
    prefix = f"bpat-{uuid.uuid4().hex[:8]}"
    create_topics(bs, {f"{prefix}-x": 1, f"{prefix}-y": 2})
    recs = produce(bs, [
        Rec(f"{prefix}-x", 0, b"x0", key=None, timestamp_ms=BASE_TS),
        Rec(f"{prefix}-y", 1, b"y1", key=b"k", timestamp_ms=BASE_TS + 1),
    ])
    df = (spark.read.format("kafka")
          .options(**source_options(bs, subscribePattern=f"{prefix}-.*")).load())
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"
    ]
    rows = df.collect()
    assert kafka_rows(rows) == expected_rows(recs)
    assert sorted(int(r["timestamp"].timestamp() * 1000) for r in rows) == [BASE_TS, BASE_TS + 1]
