"""Thin, uniform wrappers over kafka-python, aiokafka and confluent-kafka for the client tests.

Every function takes a bootstrap string and is bounded in time (OP_TIMEOUT seconds): a broker
that does not answer makes the call raise, never hang.
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

OP_TIMEOUT = 20.0
CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


@dataclass(frozen=True)
class ReadRec:
    partition: int
    offset: int
    rec: Rec
    create_time: bool  # timestamp type is CreateTime


def make_records(client: str, codec: str, n: int, base_ts: int) -> list[Rec]:
    """Keyed records with varied headers and values, including the edge cases that matter."""
    out = []
    for i in range(n):
        key = f"{client}/{codec}/key-{i % 17}".encode()
        if i == 3:
            key = b""  # empty key is not a null key
        if i % 10 == 9:
            value = None  # tombstone
        elif i % 10 == 5:
            value = b""  # empty value is not a null value
        else:
            # compressible and long enough that codecs actually do something
            value = (f"{client}|{codec}|{i}|" * (1 + i % 13 * 20)).encode()
        headers: Headers = ()
        if i % 4 != 0:
            headers = (
                ("client", client.encode()),
                ("seq", str(i).encode()),
                ("dup", b"first"),
                ("dup", b"second"),
                ("empty", b""),
                ("ключ", bytes(range(256)) if i % 4 == 1 else "значение".encode()),
            )
        out.append(Rec(key, value, headers, base_ts + i))
    return out


def _codec(client: str, codec: str):
    if codec == "none":
        return None if client != "confluent-kafka" else "none"
    return codec


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# =========================================================================== admin: create topic
def create_topic(client: str, bootstrap: str, topic: str, partitions: int) -> None:
    if client == "kafka-python":
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap, request_timeout_ms=int(OP_TIMEOUT * 1000)
        )
        try:
            admin.create_topics(
                {topic: {"num_partitions": partitions, "replication_factor": 1}},
                timeout_ms=int(OP_TIMEOUT * 1000),
            )
        finally:
            admin.close()
    elif client == "aiokafka":

        async def go() -> None:
            from aiokafka.admin import AIOKafkaAdminClient, NewTopic

            admin = AIOKafkaAdminClient(
                bootstrap_servers=bootstrap, request_timeout_ms=int(OP_TIMEOUT * 1000)
            )
            await admin.start()
            try:
                resp = await admin.create_topics(
                    [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                    timeout_ms=int(OP_TIMEOUT * 1000),
                )
                for t in getattr(resp, "topic_errors", getattr(resp, "topics", [])):
                    code = t[1]
                    if code != 0:
                        raise RuntimeError(f"aiokafka create_topics error: {t}")
            finally:
                await admin.close()

        asyncio.run(asyncio.wait_for(go(), OP_TIMEOUT * 2))
    elif client == "confluent-kafka":
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
            operation_timeout=OP_TIMEOUT,
            request_timeout=OP_TIMEOUT,
        )
        futures[topic].result(timeout=OP_TIMEOUT)
    else:
        raise ValueError(client)


# =========================================================================== produce
def produce(
    client: str, bootstrap: str, topic: str, codec: str, recs: list[Rec], **extra: object
) -> list[tuple[int, int, Rec]]:
    """Produce recs with one producer using `codec`; returns (partition, offset, rec) per ack."""
    if client == "kafka-python":
        return _produce_kafka_python(bootstrap, topic, codec, recs, extra)
    if client == "aiokafka":
        return asyncio.run(
            asyncio.wait_for(_produce_aiokafka(bootstrap, topic, codec, recs, extra), OP_TIMEOUT)
        )
    if client == "confluent-kafka":
        return _produce_confluent(bootstrap, topic, codec, recs, extra)
    raise ValueError(client)


def _produce_kafka_python(bootstrap, topic, codec, recs, extra):
    from kafka import KafkaProducer

    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=_codec("kafka-python", codec),
        acks="all",
        linger_ms=5,
        max_block_ms=int(OP_TIMEOUT * 1000),
        request_timeout_ms=int(OP_TIMEOUT * 1000 / 2),
        **extra,
    )
    try:
        futs = [
            (
                r,
                p.send(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers),
                    timestamp_ms=r.timestamp,
                ),
            )
            for r in recs
        ]
        p.flush(timeout=OP_TIMEOUT)
        out = []
        for r, f in futs:
            md = f.get(timeout=1)
            out.append((md.partition, md.offset, r))
        return out
    finally:
        p.close(timeout=5)


async def _produce_aiokafka(bootstrap, topic, codec, recs, extra):
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=_codec("aiokafka", codec),
        acks="all",
        linger_ms=5,
        request_timeout_ms=int(OP_TIMEOUT * 1000 / 2),
        **extra,
    )
    await p.start()
    try:
        futs = [
            await p.send(
                topic,
                key=r.key,
                value=r.value,
                headers=list(r.headers),
                timestamp_ms=r.timestamp,
            )
            for r in recs
        ]
        await p.flush()
        mds = await asyncio.gather(*futs)
        return [(md.partition, md.offset, r) for md, r in zip(mds, recs, strict=True)]
    finally:
        await p.stop()


def _produce_confluent(bootstrap, topic, codec, recs, extra):
    from confluent_kafka import Producer

    conf = {
        "bootstrap.servers": bootstrap,
        "compression.type": _codec("confluent-kafka", codec),
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": int(OP_TIMEOUT * 1000),
    }
    conf.update(extra)
    p = Producer(conf)
    results: list[tuple[int, int, Rec] | Exception] = []

    def cb(rec):
        def on_delivery(err, msg):
            if err is not None:
                results.append(RuntimeError(f"delivery failed: {err}"))
            else:
                results.append((msg.partition(), msg.offset(), rec))

        return on_delivery

    for r in recs:
        p.produce(
            topic,
            key=r.key,
            value=r.value,
            headers=list(r.headers),
            timestamp=r.timestamp,
            on_delivery=cb(r),
        )
        p.poll(0)
    left = p.flush(OP_TIMEOUT)
    if left:
        raise TimeoutError(f"confluent-kafka: {left} messages not delivered in {OP_TIMEOUT}s")
    errors = [e for e in results if isinstance(e, Exception)]
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(recs)} deliveries failed; first: {errors[0]}")
    return results  # type: ignore[return-value]


# =========================================================================== consume
def consume_all(client: str, bootstrap: str, topic: str) -> tuple[int, list[ReadRec]]:
    """Read every partition of `topic` from offset 0 to its end offset with manual assignment.

    Returns (partition count seen in metadata, records in read order).
    """
    if client == "kafka-python":
        return _consume_kafka_python(bootstrap, topic)
    if client == "aiokafka":
        return asyncio.run(asyncio.wait_for(_consume_aiokafka(bootstrap, topic), OP_TIMEOUT * 2))
    if client == "confluent-kafka":
        return _consume_confluent(bootstrap, topic)
    raise ValueError(client)


def _hdrs(h) -> Headers:
    return tuple((k, bytes(v) if v is not None else None) for k, v in (h or ()))


def _consume_kafka_python(bootstrap, topic):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=int(OP_TIMEOUT * 1000 / 2),
    )
    try:
        deadline = time.monotonic() + OP_TIMEOUT
        parts = None
        while parts is None and time.monotonic() < deadline:
            parts = c.partitions_for_topic(topic)
            if parts is None:
                time.sleep(0.2)
        if not parts:
            raise RuntimeError(f"kafka-python: no metadata for {topic}")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        out: list[ReadRec] = []
        while any(c.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                pos = {tp.partition: c.position(tp) for tp in tps}
                raise TimeoutError(f"kafka-python: stuck at {pos}, ends {ends}")
            for tp, msgs in c.poll(timeout_ms=500).items():
                for m in msgs:
                    rec = Rec(m.key, m.value, _hdrs(m.headers), m.timestamp)
                    out.append(ReadRec(tp.partition, m.offset, rec, m.timestamp_type == 0))
        return len(parts), out
    finally:
        c.close()


async def _consume_aiokafka(bootstrap, topic):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    c = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=int(OP_TIMEOUT * 1000 / 2),
    )
    await c.start()
    try:
        deadline = time.monotonic() + OP_TIMEOUT
        parts = None
        while not parts and time.monotonic() < deadline:
            # partitions_for_topic() only knows subscribed topics: ask the cluster directly.
            cluster = await c._client.fetch_all_metadata()
            parts = cluster.partitions_for_topic(topic)
            if not parts:
                await asyncio.sleep(0.2)
        if not parts:
            raise RuntimeError(f"aiokafka: no metadata for {topic}")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        ends = await c.end_offsets(tps)
        out: list[ReadRec] = []
        while True:
            positions = {tp: await c.position(tp) for tp in tps}
            if all(positions[tp] >= ends[tp] for tp in tps):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"aiokafka: stuck at {positions}, ends {ends}")
            batches = await c.getmany(timeout_ms=500)
            for tp, msgs in batches.items():
                for m in msgs:
                    rec = Rec(m.key, m.value, _hdrs(m.headers), m.timestamp)
                    out.append(ReadRec(tp.partition, m.offset, rec, m.timestamp_type == 0))
        return len(parts), out
    finally:
        await c.stop()


def _consume_confluent(bootstrap, topic):
    from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # librdkafka insists on a group.id even for assign(); nothing is committed.
            "group.id": unique_name("samsa-test-unused"),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        md = c.list_topics(topic, timeout=OP_TIMEOUT)
        tmd = md.topics.get(topic)
        if tmd is None or tmd.error is not None:
            raise RuntimeError(f"confluent-kafka: metadata for {topic}: {tmd and tmd.error}")
        parts = sorted(tmd.partitions)
        ends = {}
        for p in parts:
            _lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=OP_TIMEOUT)
            ends[p] = hi
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[ReadRec] = []
        next_off = {p: 0 for p in parts}
        deadline = time.monotonic() + OP_TIMEOUT
        while any(next_off[p] < ends[p] for p in parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"confluent-kafka: stuck at {next_off}, ends {ends}")
            for m in c.consume(num_messages=500, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() == -191:  # _PARTITION_EOF (not enabled, but be safe)
                        continue
                    raise RuntimeError(f"confluent-kafka consume error: {m.error()}")
                ts_type, ts = m.timestamp()
                rec = Rec(m.key(), m.value(), _hdrs(m.headers()), ts)
                create_time = ts_type == TIMESTAMP_CREATE_TIME
                out.append(ReadRec(m.partition(), m.offset(), rec, create_time))
                next_off[m.partition()] = m.offset() + 1
        return len(parts), out
    finally:
        c.close()

def stored_codecs(data_dir: Path, topic: str) -> Counter[int]:
    """Codec ids (attributes & 7) of the record batches in the topic's segment files."""
    seen: Counter[int] = Counter()
    for seg in sorted(data_dir.glob(f"{topic}-*/*.log")):
        buf = seg.read_bytes()
        pos = 0
        while pos + 61 <= len(buf):
            (length,) = struct.unpack_from(">i", buf, pos + 8)
            if length <= 0 or pos + 12 + length > len(buf):
                break
            magic = buf[pos + 16]
            assert magic == 2, f"{seg}: batch at byte {pos} has magic {magic}"
            (attributes,) = struct.unpack_from(">h", buf, pos + 21)
            seen[attributes & 7] += 1
            pos += 12 + length
    return seen
