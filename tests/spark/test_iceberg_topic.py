"""PySpark reads an Iceberg topic's table through Spark's JDBC catalog over the broker's SQLite
catalog (examples/spark_iceberg_topic.py): after two kill -9 of the broker mid-stream,
spark.table(...) holds the same records as a read_committed consumer, each once, none of an
aborted transaction."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.lakehouse.helpers import (
    create_iceberg_topic,
    read_committed_keys,
    start_broker,
    stream_through_kills,
    wait_for_table,
)
from tests.spark.helpers import REPO_ROOT


def load_example() -> ModuleType:
    path = REPO_ROOT / "examples" / "spark_iceberg_topic.py"
    spec = importlib.util.spec_from_file_location("spark_iceberg_topic", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_spark_reads_exactly_the_committed_records(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    try:
        create_iceberg_topic(broker.bootstrap, "payments", 2)
        committed, aborted = stream_through_kills(broker, "payments")
        consumed = read_committed_keys(broker.bootstrap, "payments", 2)
        wait_for_table(data, "payments", len(consumed))
        example = load_example()
        example.configure_catalog(spark, data)
        example.report(spark, "payments")  # the example job runs too
        rows = spark.table(example.table_name("payments")).select("key").collect()
    finally:
        broker.close()
    keys = [bytes(r["key"]) for r in rows]
    twice = [k for k, n in Counter(keys).items() if n > 1]
    assert not twice, f"{len(twice)} records twice in Spark, e.g. {twice[:3]}"
    assert sorted(keys) == sorted(consumed)
    assert committed <= set(keys)
    assert not aborted & set(keys)
