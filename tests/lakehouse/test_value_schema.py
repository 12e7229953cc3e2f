"""value_schema_id_prefix: the columns of an Iceberg topic's table come from the value's Avro
schema in the broker's registry; a new optional field registered later becomes a new column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker import BrokerProcess, free_port

from .helpers import SETTINGS, wait_for_table

V1 = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": ["null", "string"],
                                        "default": None}]}


def produce_avro(bootstrap: str, url: str, topic: str, schema: dict[str, Any],
                 orders: list[dict[str, Any]], txn_id: str) -> None:
    serialize = AvroSerializer(SchemaRegistryClient({"url": url}), json.dumps(schema))
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    for order in orders:
        p.produce(topic, value=serialize(order, SerializationContext(
            topic, MessageField.VALUE)))
    p.commit_transaction(30)


def _table_rows(data: Path) -> tuple[list[str], list[dict[str, Any]]]:
    from pyiceberg.catalog.sql import SqlCatalog
    root = data / "iceberg"
    catalog = SqlCatalog("samsa", uri=f"sqlite:///{root / 'catalog.db'}",
                         warehouse=(root / "warehouse").as_uri())
    arrow = catalog.load_table(("samsa", "orders")).scan().to_arrow()
    return arrow.column_names, sorted(arrow.to_pylist(), key=lambda r: r["id"])


def test_columns_from_the_schema_and_its_evolution(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(data, name="iceberg-registry",
                           settings={**SETTINGS, "schema.registry.listeners": url}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("orders", 1, 1, config={
            "samsa.iceberg.mode": "value_schema_id_prefix"})])["orders"].result(30)
        produce_avro(broker.bootstrap, url, "orders", V1, [{"id": 1, "item": "tea"}], "o1")
        wait_for_table(data, "orders", 1, key="id")
        columns, _ = _table_rows(data)
        assert columns == ["partition", "offset", "timestamp", "id", "item"]
        produce_avro(broker.bootstrap, url, "orders", V2,
                     [{"id": 2, "item": "cake", "note": "fresh"}], "o2")
        wait_for_table(data, "orders", 2, key="id")
        columns, rows = _table_rows(data)
    finally:
        broker.close()
    assert columns == ["partition", "offset", "timestamp", "id", "item", "note"]
    assert [(r["id"], r["item"], r["note"], r["offset"]) for r in rows] == [
        (1, "tea", None, 0), (2, "cake", "fresh", 2)]
