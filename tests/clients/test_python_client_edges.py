"""Paths clients take besides the happy produce/fetch: each test runs with all three clients.

- ListOffsets by timestamp (offsets_for_times)
- Fetch at an offset past the end: OFFSET_OUT_OF_RANGE, then auto.offset.reset=earliest
- Fetch long-poll: a consumer waiting at the end gets a record produced later, promptly
- A batch over max.message.bytes: MESSAGE_TOO_LARGE reaches the producer as an error
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from .pyclients import CLIENTS, OP_TIMEOUT, create_topic, make_records, produce, unique_name

pytestmark = pytest.mark.timeout(300)

N = 20
STEP_MS = 10


@pytest.fixture(scope="module")
def timed_topic(shared_broker) -> tuple[str, int]:
    """One partition, N records with CreateTime base + i*STEP_MS."""
    topic = unique_name("py-edges")
    create_topic("confluent-kafka", shared_broker.bootstrap, topic, 1)
    base = int(time.time() * 1000) - 60_000
    recs = make_records("confluent-kafka", "none", N, 0)
    recs = [type(r)(r.key, r.value, r.headers, base + i * STEP_MS) for i, r in enumerate(recs)]
    acks = produce("confluent-kafka", shared_broker.bootstrap, topic, "none", recs)
    assert sorted(o for _, o, _ in acks) == list(range(N))
    return topic, base


# --------------------------------------------------------------------------- offsets_for_times
def _offsets_for_times(client: str, bootstrap: str, topic: str, ts: int) -> int | None:
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        try:
            tp = TopicPartition(topic, 0)
            res = c.offsets_for_times({tp: ts})[tp]
            return None if res is None else res.offset
        finally:
            c.close()
    if client == "aiokafka":

        async def go():
            from aiokafka import AIOKafkaConsumer, TopicPartition

            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
            await c.start()
            try:
                tp = TopicPartition(topic, 0)
                res = (await c.offsets_for_times({tp: ts}))[tp]
                return None if res is None else res.offset
            finally:
                await c.stop()

        return asyncio.run(asyncio.wait_for(go(), OP_TIMEOUT))
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("unused")})
    try:
        (res,) = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=OP_TIMEOUT)
        assert res.error is None, res.error
        return None if res.offset < 0 else res.offset
    finally:
        c.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_offsets_for_times(shared_broker, timed_topic, client):
    topic, base = timed_topic
    b = shared_broker.bootstrap
    assert _offsets_for_times(client, b, topic, base) == 0
    assert _offsets_for_times(client, b, topic, base + 5 * STEP_MS) == 5
    assert _offsets_for_times(client, b, topic, base + 5 * STEP_MS + 1) == 6
    assert _offsets_for_times(client, b, topic, base - 1_000_000) == 0
    assert _offsets_for_times(client, b, topic, base + N * STEP_MS + 1) is None


# --------------------------------------------------------------------------- out of range
def _first_offset_after_seek(client: str, bootstrap: str, topic: str, seek_to: int) -> int:
    deadline = time.monotonic() + OP_TIMEOUT
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek(tp, seek_to)
            while time.monotonic() < deadline:
                for msgs in c.poll(timeout_ms=500).values():
                    return msgs[0].offset
            raise TimeoutError("kafka-python read nothing")
        finally:
            c.close()
    if client == "aiokafka":

        async def go():
            from aiokafka import AIOKafkaConsumer, TopicPartition

            c = AIOKafkaConsumer(
                bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest"
            )
            await c.start()
            try:
                tp = TopicPartition(topic, 0)
                c.assign([tp])
                c.seek(tp, seek_to)
                while time.monotonic() < deadline:
                    for msgs in (await c.getmany(timeout_ms=500)).values():
                        return msgs[0].offset
                raise TimeoutError("aiokafka read nothing")
            finally:
                await c.stop()

        return asyncio.run(asyncio.wait_for(go(), OP_TIMEOUT * 2))
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique_name("unused"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition(topic, 0, seek_to)])
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            return m.offset()
        raise TimeoutError("confluent-kafka read nothing")
    finally:
        c.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_fetch_out_of_range_resets_to_earliest(shared_broker, timed_topic, client):
    topic, _ = timed_topic
    assert _first_offset_after_seek(client, shared_broker.bootstrap, topic, 1000) == 0
    assert _first_offset_after_seek(client, shared_broker.bootstrap, topic, 7) == 7


# --------------------------------------------------------------------------- long poll
def _wait_for_new_record(client: str, bootstrap: str, topic: str, produce_later) -> float:
    """Start at the end of partition 0; produce_later() fires in 1 s; returns seconds from
    the start of that produce to the record arriving."""
    produced_at: list[float] = []

    def fire():
        time.sleep(1.0)
        produced_at.append(time.monotonic())  # before: the consumer may see it before the ack
        produce_later()

    t = threading.Thread(target=fire, daemon=True)
    deadline = time.monotonic() + OP_TIMEOUT
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=500)
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            c.seek_to_end(tp)
            c.position(tp)
            t.start()
            while time.monotonic() < deadline:
                if c.poll(timeout_ms=200):
                    return time.monotonic() - produced_at[0]
        finally:
            c.close()
    elif client == "aiokafka":

        async def go():
            from aiokafka import AIOKafkaConsumer, TopicPartition

            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=500)
            await c.start()
            try:
                tp = TopicPartition(topic, 0)
                c.assign([tp])
                await c.seek_to_end(tp)
                await c.position(tp)
                t.start()
                while time.monotonic() < deadline:
                    if await c.getmany(timeout_ms=200):
                        return time.monotonic() - produced_at[0]
            finally:
                await c.stop()

        got = asyncio.run(go())
        if got is not None:
            return got
    else:
        from confluent_kafka import OFFSET_END, Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": unique_name("unused"),
                "fetch.wait.max.ms": 500,
                "enable.auto.commit": False,
            }
        )
        try:
            c.assign([TopicPartition(topic, 0, OFFSET_END)])
            c.poll(0.5)  # let it resolve the end offset before the produce
            t.start()
            while time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None:
                    assert m.error() is None, m.error()
                    return time.monotonic() - produced_at[0]
        finally:
            c.close()
    raise TimeoutError(f"{client}: the record produced after 1 s never arrived")


@pytest.mark.parametrize("client", CLIENTS)
def test_fetch_long_poll_delivers_new_record_promptly(shared_broker, client):
    topic = unique_name(f"py-longpoll-{client}")
    b = shared_broker.bootstrap
    create_topic("confluent-kafka", b, topic, 1)
    produce("confluent-kafka", b, topic, "none", make_records("x", "none", 3, 0))
    late = make_records("late", "none", 1, int(time.time() * 1000))
    latency = _wait_for_new_record(
        client, b, topic, lambda: produce("confluent-kafka", b, topic, "none", late)
    )
    # fetch.max.wait is 500 ms: a broker that parks fetches until the wait expires instead of
    # answering when data arrives would still pass under 2 s; one that never answers fails.
    assert latency < 2.0, f"{client}: record arrived {latency:.2f}s after it was produced"


# --------------------------------------------------------------------------- too large
@pytest.mark.parametrize("client", CLIENTS)
def test_batch_over_max_message_bytes_is_rejected(shared_broker, client):
    topic = unique_name(f"py-toolarge-{client}")
    b = shared_broker.bootstrap
    create_topic("confluent-kafka", b, topic, 1)
    big = [make_records(client, "none", 1, int(time.time() * 1000))[0]]
    big = [type(big[0])(b"k", b"x" * 1_500_000, (), big[0].timestamp)]
    extra = {
        "kafka-python": {"max_request_size": 5_000_000},
        "aiokafka": {"max_request_size": 5_000_000},
        "confluent-kafka": {"message.max.bytes": 5_000_000},
    }[client]
    with pytest.raises(Exception) as info:
        produce(client, b, topic, "none", big, **extra)
    text = f"{type(info.value).__name__}: {info.value}".lower()
    assert "too" in text and ("large" in text or "size" in text), text
    # and the broker still serves that topic afterwards
    ok = produce(client, b, topic, "none", make_records(client, "none", 2, 0))
    assert sorted(o for _, o, _ in ok) == [0, 1]
