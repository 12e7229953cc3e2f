"""Publish orders and read them back, once per Python client."""

from __future__ import annotations

import json
from typing import Any

from config import Settings


def encode(order: dict[str, Any]) -> bytes:
    return json.dumps(order, sort_keys=True).encode()


# ---- confluent-kafka (librdkafka)
def publish_confluent(settings: Settings, orders: list[dict[str, Any]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": settings.bootstrap_servers, "enable.idempotence": True})
    for order in orders:
        p.produce(settings.topic, key=str(order["id"]).encode(), value=encode(order))
    assert p.flush(30) == 0


def read_confluent(settings: Settings, count: int) -> list[dict[str, Any]]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": settings.group_id,
                  "auto.offset.reset": "earliest"})
    c.subscribe([settings.topic])
    out: list[dict[str, Any]] = []
    try:
        for _ in range(300):
            if len(out) >= count:
                break
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                out.append(json.loads(msg.value()))
    finally:
        c.close()
    return out


# ---- aiokafka (asyncio)
async def publish_aiokafka(settings: Settings, orders: list[dict[str, Any]]) -> None:
    from aiokafka import AIOKafkaProducer

    async with AIOKafkaProducer(bootstrap_servers=settings.bootstrap_servers) as p:
        for order in orders:
            await p.send_and_wait(settings.topic, encode(order), key=str(order["id"]).encode())


async def read_aiokafka(settings: Settings, count: int) -> list[dict[str, Any]]:
    from aiokafka import AIOKafkaConsumer

    async with AIOKafkaConsumer(settings.topic, bootstrap_servers=settings.bootstrap_servers,
                                group_id=settings.group_id, auto_offset_reset="earliest") as c:
        out: list[dict[str, Any]] = []
        async for msg in c:
            out.append(json.loads(msg.value))
            if len(out) >= count:
                return out
    return out


# ---- kafka-python
def publish_kafka_python(settings: Settings, orders: list[dict[str, Any]]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=settings.bootstrap_servers)
    for order in orders:
        p.send(settings.topic, encode(order), key=str(order["id"]).encode())
    p.flush(30)
    p.close()


def read_kafka_python(settings: Settings, count: int) -> list[dict[str, Any]]:
    from kafka import KafkaConsumer

    c = KafkaConsumer(settings.topic, bootstrap_servers=settings.bootstrap_servers,
                      group_id=settings.group_id, auto_offset_reset="earliest",
                      consumer_timeout_ms=30_000)
    out: list[dict[str, Any]] = []
    try:
        for msg in c:
            out.append(json.loads(msg.value))
            if len(out) >= count:
                break
    finally:
        c.close()
    return out
