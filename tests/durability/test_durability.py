"""Acknowledged writes survive clean restarts and kill -9; a torn tail is truncated on start-up."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition


def _produce(bootstrap: str, topic: str, start: int, count: int) -> list[int]:
    acked: list[int] = []

    def on_delivery(err, msg):
        assert err is None, err
        acked.append(msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, key=str(i).encode(), value=f"value-{i}".encode(), on_delivery=on_delivery)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(30) == 0
    return acked


def _consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple[int, bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes]] = []
    empty_polls = 0
    while len(out) < expected and empty_polls < 20:
        msgs = c.consume(1000, timeout=1.0)
        if not msgs:
            empty_polls += 1
        for m in msgs:
            assert m.error() is None, m.error()
            out.append((m.offset(), m.value()))
    c.close()
    return out


def _check(records: list[tuple[int, bytes]], count: int) -> None:
    assert [o for o, _ in records] == list(range(count))
    assert [v for _, v in records] == [f"value-{i}".encode() for i in range(count)]


def test_acknowledged_writes_survive_clean_restart(broker):
    topic = "durable-clean"
    acked = _produce(broker.bootstrap, topic, 0, 3000)
    assert len(acked) == 3000
    broker.stop()
    broker.start()
    _check(_consume_all(broker.bootstrap, topic, 3000), 3000)


def test_acknowledged_writes_survive_kill9(broker):
    topic = "durable-kill9"
    _produce(broker.bootstrap, topic, 0, 5000)
    broker.kill9()
    broker.start()
    _check(_consume_all(broker.bootstrap, topic, 5000), 5000)
    # The log continues densely after recovery.
    acked = _produce(broker.bootstrap, topic, 5000, 100)
    assert sorted(acked) == list(range(5000, 5100))


def test_torn_tail_is_truncated_and_broker_starts(broker):
    topic = "durable-torn"
    _produce(broker.bootstrap, topic, 0, 1000)
    broker.kill9()
    segment = sorted((Path(broker.data_dir) / f"{topic}-0").glob("*.log"))[-1]
    size = segment.stat().st_size
    with open(segment, "ab") as f:
        # Half a batch: a plausible header claiming more bytes than follow.
        f.write((0).to_bytes(8, "big") + (500).to_bytes(4, "big") + b"\x00" * 40)
    broker.start()
    _check(_consume_all(broker.bootstrap, topic, 1000), 1000)
    assert segment.stat().st_size == size
    acked = _produce(broker.bootstrap, topic, 1000, 10)
    assert sorted(acked) == list(range(1000, 1010))
