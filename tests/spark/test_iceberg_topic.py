"""PySpark reads an Iceberg topic's table through Spark's JDBC catalog over the broker's SQLite
catalog: after two kill -9 of the broker mid-stream, spark.table(...) holds the same records
as a read_committed consumer, each once, none of an aborted transaction."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from tests.lakehouse.helpers import (
    create_iceberg_topic,
    read_committed_keys,
    start_broker,
    stream_through_kills,
    wait_for_table,
)


def iceberg_catalog(spark: Any, data_dir: Path) -> None:
    """The broker's catalog as Spark's catalog `samsa` (docs/lakehouse.md). Its name must be
    the broker's: a SQL catalog keeps it in every row."""
    root = data_dir / "iceberg"
    prefix = "spark.sql.catalog.samsa"
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.type", "jdbc")
    spark.conf.set(f"{prefix}.uri", f"jdbc:sqlite:{root / 'catalog.db'}")
    spark.conf.set(f"{prefix}.warehouse", (root / "warehouse").as_uri())


def test_spark_reads_exactly_the_committed_records(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    try:
        create_iceberg_topic(broker.bootstrap, "payments", 2)
        committed, aborted = stream_through_kills(broker, "payments")
        consumed = read_committed_keys(broker.bootstrap, "payments", 2)
        wait_for_table(data, "payments", len(consumed))
        iceberg_catalog(spark, data)
        rows = spark.table("samsa.samsa.payments").select("key", "partition", "offset").collect()
    finally:
        broker.close()
    keys = [bytes(r["key"]) for r in rows]
    twice = [k for k, n in Counter(keys).items() if n > 1]
    assert not twice, f"{len(twice)} records twice in Spark, e.g. {twice[:3]}"
    assert sorted(keys) == sorted(consumed)
    assert committed <= set(keys)
    assert not aborted & set(keys)
