"""The registry's state in the `_schemas` topic, in Confluent's key and value format."""

from __future__ import annotations

import json
import uuid
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from .conftest import RegistryBroker
from .test_rest import Rest


def topic_records(rb: RegistryBroker) -> list[tuple[dict[str, Any], Any]]:
    consumer = Consumer({"bootstrap.servers": rb.bootstrap, "group.id": uuid.uuid4().hex,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition("_schemas", 0, OFFSET_BEGINNING)])
    out = []
    try:
        while (msg := consumer.poll(10)) is not None and msg.error() is None:
            out.append((json.loads(msg.key()), msg.value() and json.loads(msg.value())))
    finally:
        consumer.close()
    return out


def test_records_in_confluents_format(shared_registry: RegistryBroker) -> None:
    rest, subject = Rest(shared_registry.url), f"t-{uuid.uuid4().hex[:10]}"
    sid = rest.ok("POST", f"/subjects/{subject}/versions",
                  {"schema": '{"type": "string"}'})["id"]
    json_schema = {"schemaType": "JSON", "schema": '{"type": "object"}'}
    assert rest.error("POST", f"/subjects/{subject}/versions", json_schema) == (409, 409)
    rest.ok("PUT", f"/config/{subject}", {"compatibility": "NONE"})
    rest.ok("POST", f"/subjects/{subject}/versions", json_schema)
    rest.ok("PUT", f"/mode/{subject}", {"mode": "READWRITE"})
    rest.ok("DELETE", f"/subjects/{subject}/versions/2")
    rest.ok("DELETE", f"/subjects/{subject}/versions/2?permanent=true")
    rest.ok("DELETE", f"/subjects/{subject}")
    rest.ok("DELETE", f"/subjects/{subject}?permanent=true")
    mine = [(k, v) for k, v in topic_records(shared_registry) if k.get("subject") == subject]
    assert mine == [
        ({"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1},
         {"subject": subject, "version": 1, "id": sid, "schema": '{"type": "string"}',
          "deleted": False}),
        ({"keytype": "CONFIG", "subject": subject, "magic": 0}, {"compatibilityLevel": "NONE"}),
        ({"keytype": "SCHEMA", "subject": subject, "version": 2, "magic": 1},
         {"subject": subject, "version": 2, "id": sid + 1, "schemaType": "JSON",
          "schema": '{"type": "object"}', "deleted": False}),
        ({"keytype": "MODE", "subject": subject, "magic": 0}, {"mode": "READWRITE"}),
        ({"keytype": "SCHEMA", "subject": subject, "version": 2, "magic": 1},
         {"subject": subject, "version": 2, "id": sid + 1, "schemaType": "JSON",
          "schema": '{"type": "object"}', "deleted": True}),
        ({"keytype": "SCHEMA", "subject": subject, "version": 2, "magic": 1}, None),
        ({"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1},
         {"subject": subject, "version": 1, "id": sid, "schema": '{"type": "string"}',
          "deleted": True}),
        ({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0},
         {"subject": subject, "version": 1}),
        # the permanent delete: tombstones of every key of the subject
        ({"keytype": "SCHEMA", "subject": subject, "version": 1, "magic": 1}, None),
        ({"keytype": "CONFIG", "subject": subject, "magic": 0}, None),
        ({"keytype": "MODE", "subject": subject, "magic": 0}, None),
        ({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0}, None),
    ]


def test_the_topic_is_compacted(shared_registry: RegistryBroker) -> None:
    Rest(shared_registry.url).ok("GET", "/subjects")  # the first request creates it
    admin = AdminClient({"bootstrap.servers": shared_registry.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "_schemas")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact"
