"""`samsa produce` and `samsa consume` against a Samsa broker: keys, headers, partitions by
key as librdkafka's Java-compatible murmur2 partitioner puts them, acks=0, a transaction,
read_committed hiding an aborted transaction, -n and a group's offsets, in both formats."""

from __future__ import annotations

import io
import threading
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from samsa.broker.admin import messages
from samsa.broker.admin.client import Admin, Settings
from tests.admin.conftest import Samsa, parse_table
from tests.admin.test_groups import wait_for
from tests.support.broker import BrokerProcess

RECORD_KEYS = {"topic", "partition", "offset", "timestamp", "key", "value", "headers"}


def _produce(samsa: Samsa, monkeypatch: pytest.MonkeyPatch, b: str, text: str,
             *args: str) -> Any:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    return samsa("produce", *args, bootstrap=b)


def _consume(samsa: Samsa, b: str, *args: str) -> list[dict[str, Any]]:
    rows = samsa("consume", *args, "--format", "json", bootstrap=b).json()
    assert all(set(r) == RECORD_KEYS for r in rows)
    return rows


def _librdkafka_reads(b: str, t: str, count: int, isolation: str = "read_uncommitted"
                      ) -> list[bytes]:
    """The values a librdkafka consumer reads from the start of `t` (up to `count`)."""
    c = Consumer({"bootstrap.servers": b, "group.id": f"check-{t}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation})
    c.subscribe([t])
    seen: list[bytes] = []
    for _ in range(100):
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.value())
        if len(seen) == count:
            break
    c.close()
    return seen


def test_produce_and_consume_keys_and_headers(shared_broker: BrokerProcess, samsa: Samsa,
                                              monkeypatch: pytest.MonkeyPatch,
                                              unique_topic: str) -> None:
    b, t = shared_broker.bootstrap, unique_topic
    assert samsa("topic", "create", t, "-p", "3", bootstrap=b).rc == 0
    keys = [f"user-{i}" for i in range(12)]
    text = "".join(f"{k}:value {i}\n" for i, k in enumerate(keys))
    r = _produce(samsa, monkeypatch, b, text, t, "-K", ":", "-H", "source=cli", "-H", "v=1",
                 "--format", "json")
    produced = r.json()
    assert (produced["topic"], produced["records"], produced["transactional_id"]) == (
        t, 12, None)
    assert sum(p["count"] for p in produced["partitions"]) == 12

    rows = _consume(samsa, b, t, "--from-beginning")
    assert sorted((r["key"], r["value"]) for r in rows) == sorted(
        (k, f"value {i}") for i, k in enumerate(keys))
    assert all(r["headers"] == {"source": "cli", "v": "1"} for r in rows)
    # the partition of each key is the one librdkafka's Java-compatible partitioner picks
    p = Producer({"bootstrap.servers": b, "partitioner": "murmur2"})
    delivered: dict[str, int] = {}
    for k in keys:
        p.produce(t, b"x", key=k.encode(),
                  on_delivery=lambda err, m: delivered.update({m.key().decode(): m.partition()}))
    assert p.flush(30) == 0
    assert {r["key"]: r["partition"] for r in rows} == delivered
    assert {messages.partition_for(k.encode(), 3, 0) for k in keys} == {0, 1, 2}

    assert [r["offset"] for r in _consume(samsa, b, t, "-p", "1", "--offset", "1", "-n",
                                          "2")] == [1, 2]
    assert _consume(samsa, b, t) == []  # from the end: nothing new
    out = samsa("consume", t, "-p", "0", "--from-beginning", "--print-key", "-n", "1",
                bootstrap=b).out
    first = [r for r in rows if r["partition"] == 0][0]
    assert out == f"{first['key']}\t{first['value']}\n"

    r = _produce(samsa, monkeypatch, b, "a\nb\nc\n", t, "-p", "2")
    lines = r.out.splitlines()
    assert lines[0] == f"Produced 3 records to {t}."
    (row,) = parse_table(lines[1:])
    assert (row["PARTITION"], row["COUNT"]) == ("2", "3")
    r = _produce(samsa, monkeypatch, b, "no separator\n", t, "-K", ":")
    assert (r.rc, r.err) == (1, "samsa: INVALID_RECORD: no key separator ':' in "
                                "'no separator'\n")


def test_acks_zero_and_a_transaction(shared_broker: BrokerProcess, samsa: Samsa,
                                     monkeypatch: pytest.MonkeyPatch, unique_topic: str) -> None:
    b, t = shared_broker.bootstrap, unique_topic
    assert samsa("topic", "create", t, "-p", "1", bootstrap=b).rc == 0
    assert _produce(samsa, monkeypatch, b, "fire\nforget\n", t, "--acks", "0").rc == 0
    produced = _produce(samsa, monkeypatch, b, "in\ntxn\n", t, "--transactional-id",
                        f"txn-{t}", "--format", "json").json()
    assert produced["transactional_id"] == f"txn-{t}"
    # an aborted transaction between them (librdkafka)
    p = Producer({"bootstrap.servers": b, "transactional.id": f"abort-{t}"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(t, b"aborted")
    p.flush(30)
    p.abort_transaction(30)
    assert _produce(samsa, monkeypatch, b, "after\n", t).rc == 0

    committed = [r["value"] for r in _consume(samsa, b, t, "--from-beginning", "--isolation",
                                              "read_committed")]
    assert committed == ["fire", "forget", "in", "txn", "after"]
    everything = [r["value"] for r in _consume(samsa, b, t, "--from-beginning")]
    assert everything == ["fire", "forget", "in", "txn", "aborted", "after"]
    assert _librdkafka_reads(b, t, 5, "read_committed") == [
        b"fire", b"forget", b"in", b"txn", b"after"]


def test_consume_with_a_group(shared_broker: BrokerProcess, samsa: Samsa,
                              monkeypatch: pytest.MonkeyPatch, unique_topic: str) -> None:
    b, t, g = shared_broker.bootstrap, unique_topic, f"g-{unique_topic}"
    assert samsa("topic", "create", t, "-p", "1", bootstrap=b).rc == 0
    assert _produce(samsa, monkeypatch, b, "1\n2\n3\n4\n5\n", t).rc == 0
    assert [r["value"] for r in _consume(samsa, b, t, "-g", g, "--from-beginning", "-n",
                                         "2")] == ["1", "2"]
    (desc,) = samsa("group", "describe", g, "--format", "json", bootstrap=b).json()
    assert [(o["current_offset"], o["lag"]) for o in desc["offsets"]] == [(2, 3)]
    assert [r["value"] for r in _consume(samsa, b, t, "-g", g)] == ["3", "4", "5"]
    assert _consume(samsa, b, t, "-g", g) == []
    (desc,) = samsa("group", "describe", g, "--format", "json", bootstrap=b).json()
    assert [(o["current_offset"], o["lag"]) for o in desc["offsets"]] == [(5, 0)]
    assert desc["state"] == "Empty"  # the command left the group
    r = samsa("consume", t, "-g", g, "-p", "0", bootstrap=b)
    assert (r.rc, r.err) == (1, "samsa: INVALID_CONFIG: --partition and --group exclude each "
                                "other: the group assigns the partitions\n")


def test_consume_shares_a_group_with_another_member(shared_broker: BrokerProcess,
                                                    samsa: Samsa,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    unique_topic: str) -> None:
    """With a librdkafka member in the group, the range assignment gives the command one of
    the two partitions, and its commit is accepted as a member's."""
    b, t, g = shared_broker.bootstrap, unique_topic, f"g-{unique_topic}"
    assert samsa("topic", "create", t, "-p", "2", bootstrap=b).rc == 0
    assert _produce(samsa, monkeypatch, b, "a\nb\nc\nd\n", t).rc == 0  # round robin
    other = Consumer({"bootstrap.servers": b, "group.id": g, "group.protocol": "classic",
                      "enable.auto.commit": False, "session.timeout.ms": 10000})
    other.subscribe([t])
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            other.poll(0.1)

    wait_for("the other member's assignment", lambda: len(other.assignment()) == 2,
             lambda: other.poll(0.2))
    thread = threading.Thread(target=serve)  # it rejoins while the command joins
    thread.start()
    try:
        rows = _consume(samsa, b, t, "-g", g, "--from-beginning")
    finally:
        stop.set()
        thread.join()
        other.close()
    assert len({r["partition"] for r in rows}) == 1 and len(rows) == 2
    (desc,) = samsa("group", "describe", g, "--format", "json", bootstrap=b).json()
    assert [(o["partition"], o["current_offset"]) for o in desc["offsets"]] == [
        (rows[0]["partition"], 2)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_produce_compressed(shared_broker: BrokerProcess, samsa: Samsa,
                            monkeypatch: pytest.MonkeyPatch, unique_topic: str,
                            codec: str) -> None:
    """--compression writes batches with the codec's attribute (read back raw), and both the
    command and librdkafka read the records."""
    b, t = shared_broker.bootstrap, unique_topic
    assert samsa("topic", "create", t, "-p", "1", bootstrap=b).rc == 0
    text = "".join(f"k{i}:{'value ' * 20}{i}\n" for i in range(30))
    assert _produce(samsa, monkeypatch, b, text, t, "-K", ":", "--compression", codec).rc == 0
    with Admin(Settings({"bootstrap.servers": b})) as admin:
        leader = messages._layout(admin, t)[0]
        fetched, _ = messages.fetch(admin.node(leader), (t, 0), 0, 0)
    assert {h.compression for _, h in fetched["batches"]} == {messages.CODECS[codec]}
    rows = _consume(samsa, b, t, "--from-beginning")
    assert [(r["key"], r["value"]) for r in rows] == [
        (f"k{i}", f"{'value ' * 20}{i}") for i in range(30)]
    assert _librdkafka_reads(b, t, 30)[-1] == f"{'value ' * 20}29".encode()
    r = _produce(samsa, monkeypatch, b, "x\n", t, "--compression", "brotli")
    assert r.rc == 2  # argparse refuses an unknown codec
