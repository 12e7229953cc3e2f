"""Produce and consume (in a consumer group) with each Python client, given its security
settings, bounded in time."""

from __future__ import annotations

import asyncio
import ssl
import time
import uuid
from typing import Any

CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka")
TIMEOUT = 30.0


def roundtrip(client: str, bootstrap: str, security: dict[str, Any], n: int = 5) -> list[bytes]:
    """Produce n values to a new topic, read them back through a consumer group; returns
    the values read."""
    topic = f"sec-{client}-{uuid.uuid4().hex[:8]}"
    values = [f"{client}-{i}".encode() for i in range(n)]
    fn = {"kafka-python": _kafka_python, "aiokafka": _aiokafka,
          "confluent-kafka": _confluent}[client]
    return fn(bootstrap, security, topic, values)


def _kafka_python(bootstrap: str, security: dict[str, Any], topic: str,
                  values: list[bytes]) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                             request_timeout_ms=int(TIMEOUT * 1000), **security)
    try:
        for v in values:
            producer.send(topic, v).get(timeout=TIMEOUT)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                             auto_offset_reset="earliest", consumer_timeout_ms=1000, **security)
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(got) < len(values) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(m.value for m in batch)
        consumer.commit()
    finally:
        consumer.close()
    return got


def _aiokafka(bootstrap: str, security: dict[str, Any], topic: str,
              values: list[bytes]) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **security)
        await producer.start()
        try:
            for v in values:
                await producer.send_and_wait(topic, v)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", **security)
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < len(values):
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in batch)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    return asyncio.run(asyncio.wait_for(run(), TIMEOUT))


def _confluent(bootstrap: str, security: dict[str, Any], topic: str,
               values: list[bytes]) -> list[bytes]:
    from confluent_kafka import Consumer, KafkaException, Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "error_cb": errors.append, **security})
    for v in values:
        producer.produce(topic, v)
    if producer.flush(TIMEOUT) != 0:
        raise KafkaException(f"produce did not finish: {errors}")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         **security})
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        consumer.subscribe([topic])
        while len(got) < len(values) and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def ssl_settings(client: str, ca: str, cert: str | None = None,
                 key: str | None = None) -> dict[str, Any]:
    """TLS settings of each client: trust the CA, optionally present a client certificate."""
    if client == "kafka-python":
        out: dict[str, Any] = {"security_protocol": "SSL", "ssl_cafile": ca}
        if cert:
            out |= {"ssl_certfile": cert, "ssl_keyfile": key}
        return out
    if client == "aiokafka":
        ctx = ssl.create_default_context(cafile=ca)
        if cert:
            ctx.load_cert_chain(cert, key)
        return {"security_protocol": "SSL", "ssl_context": ctx}
    out = {"security.protocol": "SSL", "ssl.ca.location": ca}
    if cert:
        out |= {"ssl.certificate.location": cert, "ssl.key.location": key}
    return out


def sasl_settings(client: str, mechanism: str, user: str, password: str,
                  ca: str | None = None) -> dict[str, Any]:
    """SASL settings of each client; over TLS (SASL_SSL) when `ca` is given."""
    protocol = "SASL_SSL" if ca else "SASL_PLAINTEXT"
    if client == "confluent-kafka":
        out: dict[str, Any] = {"security.protocol": protocol, "sasl.mechanisms": mechanism,
                               "sasl.username": user, "sasl.password": password}
        if ca:
            out["ssl.ca.location"] = ca
        return out
    out = {"security_protocol": protocol, "sasl_mechanism": mechanism,
           "sasl_plain_username": user, "sasl_plain_password": password}
    if ca and client == "kafka-python":
        out["ssl_cafile"] = ca
    elif ca:
        out["ssl_context"] = ssl.create_default_context(cafile=ca)
    return out


def transactions(client: str, bootstrap: str, security: dict[str, Any]) -> list[bytes]:
    """On a new topic: a transaction committed (with a group's offset sent to it), one aborted,
    one committed ("end"); returns what a read_committed consumer of the same client reads
    (b"committed", b"end" when all is well)."""
    topic = f"sec-txn-{client}-{uuid.uuid4().hex[:8]}"
    fn = {"kafka-python": _kafka_python_txn, "aiokafka": _aiokafka_txn,
          "confluent-kafka": _confluent_txn}[client]
    return fn(bootstrap, security, topic)


def _kafka_python_txn(bootstrap: str, security: dict[str, Any], topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-txn",
                      request_timeout_ms=int(TIMEOUT * 1000), **security)
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"committed", partition=0)
        p.send_offsets_to_transaction(
            {TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)}, f"{topic}-g")
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"aborted", partition=0).get(TIMEOUT)
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"end", partition=0)
        p.commit_transaction()
    finally:
        p.close(timeout=5)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"{topic}-g",
                      isolation_level="read_committed", enable_auto_commit=False, **security)
    tp = TopicPartition(topic, 0)
    try:
        assert c.committed(tp) == 1, "the transaction's offset"
        c.assign([tp])
        c.seek_to_beginning(tp)
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while b"end" not in got and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=200).values():
                got.extend(m.value for m in batch)
        return got
    finally:
        c.close()


def _aiokafka_txn(bootstrap: str, security: dict[str, Any], topic: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{topic}-txn",
                             **security)
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"committed", partition=0)
                await p.send_offsets_to_transaction({TopicPartition(topic, 0): 1}, f"{topic}-g")
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aborted", partition=0)
            await p.abort_transaction()
            async with p.transaction():
                await p.send_and_wait(topic, b"end", partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=f"{topic}-g",
                             isolation_level="read_committed", enable_auto_commit=False,
                             **security)
        await c.start()
        tp = TopicPartition(topic, 0)
        try:
            assert await c.committed(tp) == 1, "the transaction's offset"
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got: list[bytes] = []
            while b"end" not in got:
                for batch in (await c.getmany(timeout_ms=200)).values():
                    got.extend(m.value for m in batch)
            return got
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), TIMEOUT))


def _confluent_txn(bootstrap: str, security: dict[str, Any], topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn",
                  **security})
    p.init_transactions(TIMEOUT)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-g",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  **security})
    try:
        p.begin_transaction()
        p.produce(topic, b"committed", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)],
                                      c.consumer_group_metadata(), TIMEOUT)
        p.commit_transaction(TIMEOUT)
        p.begin_transaction()
        p.produce(topic, b"aborted", partition=0)
        p.flush(TIMEOUT)
        p.abort_transaction(TIMEOUT)
        p.begin_transaction()
        p.produce(topic, b"end", partition=0)
        p.commit_transaction(TIMEOUT)
        tp = TopicPartition(topic, 0)
        assert c.committed([tp], TIMEOUT)[0].offset == 1, "the transaction's offset"
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while b"end" not in got and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()
