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
