"""Broker-side schema validation (confluent.value/key.schema.validation): a batch with a record
that does not carry a schema id registered under its subject is refused with INVALID_RECORD
and an error per such record (KIP-467), nothing of it appended; a registered one is accepted."""

from __future__ import annotations

import json
import struct
import time
import uuid

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from samsa.protocol.records import build_batch
from tests.protocol.wire import WireClient

from .conftest import RegistryBroker

PRODUCE, LIST_OFFSETS, INVALID_RECORD = 0, 2, 87
STRATEGIES = "io.confluent.kafka.serializers.subject."
USER = json.dumps({"type": "record", "name": "User", "namespace": "samsa.test",
                   "fields": [{"name": "name", "type": "string"}]})


def create(rb: RegistryBroker, configs: dict[str, str]) -> str:
    topic = f"validated-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": rb.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    return topic


def produce(c: WireClient, topic: str, records: list[tuple[bytes | None, bytes | None]],
            version: int = 9, compression: int = 0) -> object:
    now = int(time.time() * 1000)
    batch = build_batch([(k, v, None, now) for k, v in records], compression=compression)
    resp = c.call(PRODUCE, version, {
        "transactional_id": None, "acks": -1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return resp.responses[0].partition_responses[0]


def log_end(c: WireClient, topic: str) -> int:
    resp = c.call(LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return int(resp.topics[0].partitions[0].offset)


def framed(schema_id: int, payload: bytes = b"x") -> bytes:
    return b"\x00" + struct.pack(">i", schema_id) + payload


def test_values_must_carry_an_id_of_the_topics_subject(shared_registry: RegistryBroker) -> None:
    rb = shared_registry
    topic = create(rb, {"confluent.value.schema.validation": "true"})
    sr = SchemaRegistryClient({"url": rb.url})
    good = sr.register_schema(f"{topic}-value", Schema(USER, "AVRO"))
    other = sr.register_schema(f"{topic}-other", Schema('{"type": "string"}', "AVRO"))
    with WireClient(rb.bootstrap) as c:
        p = produce(c, topic, [(None, framed(good)), (None, b"plain"), (None, framed(other)),
                               (None, framed(good)), (None, framed(99999))])
        assert p.error_code == INVALID_RECORD
        assert [e.batch_index for e in p.record_errors] == [1, 2, 4]
        messages = [e.batch_index_error_message for e in p.record_errors]
        assert "does not start with a schema id" in messages[0]
        assert f"not registered under subject {topic}-value" in messages[1]
        assert "99999, which is not registered" in messages[2]
        assert p.base_offset == -1
        assert log_end(c, topic) == 0  # nothing of the batch
        assert produce(c, topic, [(None, b"plain")], version=7).error_code == INVALID_RECORD
        # registered ids, a tombstone and an unchecked key pass
        ok = produce(c, topic, [(b"any key", framed(good)), (b"k", None)])
        assert ok.error_code == 0
        assert log_end(c, topic) == 2
        # compressed batches (gzip) are checked record by record too
        gzip = produce(c, topic, [(None, framed(good)), (None, b"plain")], compression=1)
        assert (gzip.error_code, [e.batch_index for e in gzip.record_errors]) == (
            INVALID_RECORD, [1])
        assert produce(c, topic, [(None, framed(good))] * 3, compression=1).error_code == 0
        assert log_end(c, topic) == 5


def test_keys_and_the_record_name_strategy(shared_registry: RegistryBroker) -> None:
    rb = shared_registry
    topic = create(rb, {"confluent.key.schema.validation": "true",
                        "confluent.key.subject.name.strategy": STRATEGIES + "RecordNameStrategy"})
    sr = SchemaRegistryClient({"url": rb.url})
    by_name = sr.register_schema("samsa.test.User", Schema(USER, "AVRO"))
    by_topic = sr.register_schema(f"{topic}-key", Schema('{"type": "long"}', "AVRO"))
    with WireClient(rb.bootstrap) as c:
        assert produce(c, topic, [(framed(by_name), b"v")]).error_code == 0
        refused = produce(c, topic, [(framed(by_topic), b"v")])
        assert refused.error_code == INVALID_RECORD
        assert "under subject None" not in refused.record_errors[0].batch_index_error_message
        assert log_end(c, topic) == 1


def test_a_serializing_producer_is_accepted_a_plain_one_refused(
        shared_registry: RegistryBroker) -> None:
    rb = shared_registry
    topic = create(rb, {"confluent.value.schema.validation": "true"})
    sr = SchemaRegistryClient({"url": rb.url})
    serialize = AvroSerializer(sr, USER)
    results: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": rb.bootstrap, "linger.ms": 50})
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer.produce(topic, serialize({"name": "ann"}, ctx),
                     on_delivery=lambda err, msg: results.append(err))
    assert producer.flush(30) == 0
    producer.produce(topic, b"not framed", on_delivery=lambda err, msg: results.append(err))
    assert producer.flush(30) == 0
    assert results[0] is None
    assert results[1] is not None and results[1].code() == KafkaError.INVALID_RECORD
