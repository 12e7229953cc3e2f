"""confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and Protobuf serializers
against Samsa's registry: they register, evolve (a compatible change accepted, an incompatible
one refused with 409) and round-trip records through the broker; a restart keeps the schemas
and their ids."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from .conftest import RegistryBroker

Field = descriptor_pb2.FieldDescriptorProto


def client(rb: RegistryBroker) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": rb.url})


def round_trip(rb: RegistryBroker, topic: str, serialize: Callable[[Any, Any], bytes],
               deserialize: Callable[[bytes, Any], Any], values: list[Any]) -> list[Any]:
    """Produce the values serialized, consume them back and deserialize them."""
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": rb.bootstrap})
    for v in values:
        producer.produce(topic, serialize(v, ctx))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": rb.bootstrap, "group.id": uuid.uuid4().hex})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # one partition, by default
    out: list[Any] = []
    try:
        while len(out) < len(values):
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(out)} of {len(values)} records came back"
            assert msg.error() is None, msg.error()
            out.append(deserialize(msg.value(), ctx))
    finally:
        consumer.close()
    return out


def schema_id(data: bytes) -> int:
    assert data[0] == 0  # Confluent's framing: magic byte, then the id
    return int.from_bytes(data[1:5], "big")


USER_V1 = {"type": "record", "name": "User", "namespace": "samsa.test",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
USER_V2 = USER_V1 | {"fields": USER_V1["fields"] + [
    {"name": "email", "type": ["null", "string"], "default": None}]}
USER_BAD = USER_V1 | {"fields": USER_V1["fields"] + [{"name": "email", "type": "string"}]}


def test_avro_registers_evolves_and_round_trips(shared_registry: RegistryBroker) -> None:
    rb, topic = shared_registry, f"users-{uuid.uuid4().hex[:8]}"
    sr = client(rb)
    v1 = AvroSerializer(sr, json.dumps(USER_V1))
    records = [{"name": "ann", "age": 31}, {"name": "bob", "age": 42}]
    back = round_trip(rb, topic, v1, AvroDeserializer(sr), records)
    assert back == records
    first = sr.get_latest_version(f"{topic}-value")
    assert (first.version, json.loads(first.schema.schema_str)) == (1, USER_V1)

    # a field added with a default: accepted (BACKWARD), a new version and id
    v2 = AvroSerializer(sr, json.dumps(USER_V2))
    ctx = SerializationContext(topic, MessageField.VALUE)
    data = v2({"name": "cy", "age": 5, "email": "c@x"}, ctx)
    assert schema_id(data) != first.schema_id
    assert sr.get_versions(f"{topic}-value") == [1, 2]
    # old data read with the new schema as reader: the default fills the new field
    reader = AvroDeserializer(sr, json.dumps(USER_V2))
    assert reader(v1(records[0], ctx), ctx) == records[0] | {"email": None}

    # email no longer nullable: V2's nulls cannot be read, refused with Confluent's 409
    with pytest.raises(SchemaRegistryError) as e:
        sr.register_schema(f"{topic}-value", Schema(json.dumps(USER_BAD), "AVRO"))
    assert (e.value.http_status_code, e.value.error_code) == (409, 409)
    assert "TYPE_MISMATCH at /fields/2/type/0/" in e.value.error_message
    assert sr.get_versions(f"{topic}-value") == [1, 2]


ORDER_V1 = {"type": "object", "title": "Order", "additionalProperties": False,
            "properties": {"id": {"type": "string"}, "qty": {"type": "integer"}},
            "required": ["id"]}
ORDER_V2 = ORDER_V1 | {"properties": ORDER_V1["properties"] | {"note": {"type": "string"}}}
ORDER_BAD = ORDER_V1 | {"properties": ORDER_V1["properties"] | {"qty": {"type": "string"}}}


def test_json_schema_registers_evolves_and_round_trips(shared_registry: RegistryBroker) -> None:
    rb, topic = shared_registry, f"orders-{uuid.uuid4().hex[:8]}"
    sr = client(rb)
    records = [{"id": "a", "qty": 1}, {"id": "b", "qty": 2}]
    back = round_trip(rb, topic, JSONSerializer(json.dumps(ORDER_V1), sr),
                      JSONDeserializer(None, schema_registry_client=sr), records)
    assert back == records
    # a property added to a closed model: compatible
    added = sr.register_schema(f"{topic}-value", Schema(json.dumps(ORDER_V2), "JSON"))
    assert added > sr.get_version(f"{topic}-value", 1).schema_id
    with pytest.raises(SchemaRegistryError) as e:
        sr.register_schema(f"{topic}-value", Schema(json.dumps(ORDER_BAD), "JSON"))
    assert (e.value.http_status_code, e.value.error_code) == (409, 409)
    assert sr.get_latest_version(f"{topic}-value").schema.schema_type == "JSON"


def _order_class(fields: list[tuple[str, int, int]]) -> Any:
    """A generated-like message class of package samsa.test (no protoc on the machine)."""
    fd = descriptor_pb2.FileDescriptorProto(name=f"order_{uuid.uuid4().hex}.proto",
                                            package="samsa.test", syntax="proto3")
    msg = fd.message_type.add(name="Order")
    for name, number, type_ in fields:
        msg.field.add(name=name, number=number, type=type_, label=Field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("samsa.test.Order"))


def test_protobuf_registers_evolves_and_round_trips(shared_registry: RegistryBroker) -> None:
    rb, topic = shared_registry, f"pb-{uuid.uuid4().hex[:8]}"
    sr = client(rb)
    order = _order_class([("id", 1, Field.TYPE_STRING), ("qty", 2, Field.TYPE_INT32)])
    conf = {"use.deprecated.format": False}
    records = [order(id="a", qty=1), order(id="b", qty=2)]
    back = round_trip(rb, topic, ProtobufSerializer(order, sr, conf),
                      ProtobufDeserializer(order, conf), records)
    assert back == records
    registered = sr.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"

    # a field added, and qty widened within the varint group: compatible
    wider = _order_class([("id", 1, Field.TYPE_STRING), ("qty", 2, Field.TYPE_INT64),
                          ("note", 3, Field.TYPE_STRING)])
    ctx = SerializationContext(topic, MessageField.VALUE)
    data = ProtobufSerializer(wider, sr, conf)(wider(id="c", qty=3, note="n"), ctx)
    assert schema_id(data) != registered.schema_id
    # qty as a string: refused
    bad = _order_class([("id", 1, Field.TYPE_STRING), ("qty", 2, Field.TYPE_STRING)])
    with pytest.raises(Exception) as e:
        ProtobufSerializer(bad, sr, conf)(bad(id="d", qty="x"), ctx)
    assert "409" in str(e.value) and "FIELD_SCALAR_KIND_CHANGED" in str(e.value)


def test_a_restart_keeps_the_schemas_and_their_ids(registry_broker: RegistryBroker) -> None:
    sr = client(registry_broker)
    ids = [sr.register_schema(s, Schema(json.dumps(USER_V1), "AVRO")) for s in ("a", "b")]
    v2 = sr.register_schema("a", Schema(json.dumps(USER_V2), "AVRO"))
    assert ids[0] == ids[1]  # the same schema in two subjects: one id
    sr.set_compatibility("b", "NONE")

    registry_broker.broker.restart()
    sr = client(registry_broker)  # no cache
    assert sr.get_subjects() == ["a", "b"]
    assert json.loads(sr.get_schema(v2).schema_str) == USER_V2
    assert sr.lookup_schema("a", Schema(json.dumps(USER_V1), "AVRO")).version == 1
    assert sr.get_compatibility("b") == "NONE"
    # ids go on from the last one; an incompatible change is still refused in "a"
    other = {"type": "record", "name": "Other", "fields": []}
    assert sr.register_schema("c", Schema(json.dumps(other), "AVRO")) == v2 + 1
    with pytest.raises(SchemaRegistryError) as e:
        sr.register_schema("a", Schema(json.dumps(USER_BAD), "AVRO"))
    assert e.value.http_status_code == 409
