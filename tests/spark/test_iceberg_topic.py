"""PySpark reads an Iceberg topic's table through Spark's JDBC catalog over the broker's SQLite
catalog (examples/spark_iceberg_topic.py): after two kill -9 of the broker mid-stream,
spark.table(...) holds the same records as a read_committed consumer, each once, none of an
aborted transaction; a field added to the value's Avro schema is a new column in Spark."""

from __future__ import annotations

import importlib.util
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.lakehouse.helpers import (
    SETTINGS,
    create_iceberg_topic,
    read_committed_keys,
    stream_through_kills,
    wait_for_table,
)
from tests.lakehouse.test_value_schema import V1, V2, produce_avro
from tests.spark.helpers import REPO_ROOT
from tests.support.broker import BrokerProcess, free_port


def load_example() -> ModuleType:
    path = REPO_ROOT / "examples" / "spark_iceberg_topic.py"
    spec = importlib.util.spec_from_file_location("spark_iceberg_topic", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@dataclass
class IcebergBroker:
    broker: BrokerProcess
    registry_url: str
    example: ModuleType


@pytest.fixture(scope="module")
def iceberg(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[IcebergBroker]:
    """One broker (with its schema registry) for the module: Spark keeps the catalog it first
    opened under a name, so every test reads the one data dir's catalog."""
    data = tmp_path_factory.mktemp("iceberg") / "data"
    url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(data, name="iceberg-broker",
                           settings={**SETTINGS, "schema.registry.listeners": url}).start()
    example = load_example()
    example.configure_catalog(spark, data)
    spark.conf.set("spark.sql.catalog.samsa.cache-enabled", "false")
    try:
        yield IcebergBroker(broker, url, example)
    finally:
        broker.close()


def test_spark_reads_exactly_the_committed_records(spark: Any, iceberg: IcebergBroker) -> None:
    broker, example = iceberg.broker, iceberg.example
    create_iceberg_topic(broker.bootstrap, "payments", 2)
    committed, aborted = stream_through_kills(broker, "payments")
    consumed = read_committed_keys(broker.bootstrap, "payments", 2)
    wait_for_table(broker.data_dir, "payments", len(consumed))
    example.report(spark, "payments")  # the example job runs too
    rows = spark.table(example.table_name("payments")).select("key").collect()
    keys = [bytes(r["key"]) for r in rows]
    twice = [k for k, n in Counter(keys).items() if n > 1]
    assert not twice, f"{len(twice)} records twice in Spark, e.g. {twice[:3]}"
    assert sorted(keys) == sorted(consumed)
    assert committed <= set(keys)
    assert not aborted & set(keys)


def test_a_new_optional_field_is_a_new_column_in_spark(spark: Any,
                                                       iceberg: IcebergBroker) -> None:
    broker, url = iceberg.broker, iceberg.registry_url
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("avro_orders", 1, 1, config={
        "samsa.iceberg.mode": "value_schema_id_prefix"})])["avro_orders"].result(30)
    produce_avro(broker.bootstrap, url, "avro_orders", V1, [{"id": 1, "item": "tea"}], "a1")
    wait_for_table(broker.data_dir, "avro_orders", 1, key="id")
    table = iceberg.example.table_name("avro_orders")
    assert "note" not in spark.table(table).columns
    produce_avro(broker.bootstrap, url, "avro_orders", V2,
                 [{"id": 2, "item": "cake", "note": "fresh"}], "a2")
    wait_for_table(broker.data_dir, "avro_orders", 2, key="id")
    rows = spark.table(table).orderBy("id").collect()
    assert spark.table(table).columns == ["partition", "offset", "timestamp", "id", "item",
                                          "note"]
    assert [(r["id"], r["item"], r["note"]) for r in rows] == [(1, "tea", None),
                                                                (2, "cake", "fresh")]
