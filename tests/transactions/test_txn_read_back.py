"""Read-back acceptance: every client (kafka-python, aiokafka, confluent-kafka, the Java
ConsoleConsumer) in both isolation levels over one partition holding plain, committed and
aborted records; and many concurrent transactional producers interleaving on shared
partitions."""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.java import run_java_tool

from .clients import consume_all, create_topic, txn_producer, unique
from .txnwire import TxnWire, committed_values, markers

ISOLATIONS = ("read_committed", "read_uncommitted")


def _build_mixed_partition(bs: str, topic: str, txn: str) -> None:
    """plain-0 | c1-0 c1-1 C | a2-0 plain-1 a2-1 A | c3-0 C | plain-2 | c4-0 C | a5-0 A
    (one partition; plain-1 is written by a plain producer inside the aborted transaction's
    range, so read_committed must keep it; the log ends with a marker)."""
    plain = Producer({"bootstrap.servers": bs, "enable.idempotence": True})

    def put(value: bytes) -> None:
        plain.produce(topic, value=value, partition=0)
        assert plain.flush(10) == 0

    p = txn_producer(bs, txn)
    p.init_transactions(20)
    put(b"plain-0")
    p.begin_transaction()
    p.produce(topic, value=b"c1-0", partition=0)
    p.produce(topic, value=b"c1-1", partition=0)
    p.commit_transaction(20)
    p.begin_transaction()
    p.produce(topic, value=b"a2-0", partition=0)
    p.flush(10)
    put(b"plain-1")
    p.produce(topic, value=b"a2-1", partition=0)
    p.flush(10)
    p.abort_transaction(20)
    p.begin_transaction()
    p.produce(topic, value=b"c3-0", partition=0)
    p.commit_transaction(20)
    put(b"plain-2")
    p.begin_transaction()
    p.produce(topic, value=b"c4-0", partition=0)
    p.commit_transaction(20)
    p.begin_transaction()
    p.produce(topic, value=b"a5-0", partition=0)
    p.flush(10)
    p.abort_transaction(20)


def _expected(bs: str, topic: str) -> tuple[int, dict[str, list[tuple[int, bytes]]]]:
    """(end offset, {isolation: [(offset, value)]}) from a raw fetch of the partition."""
    from samsa.protocol.records import decode_records, iter_batches

    with TxnWire(bs) as c:
        deadline = time.monotonic() + 15
        while (part := c.fetch(topic, 0, 0, 1)).last_stable_offset != part.high_watermark:
            assert time.monotonic() < deadline, "markers never written"
            time.sleep(0.05)
        everything = c.fetch(topic, 0, 0, 0)
    data = []
    for pos, h in iter_batches(everything.records):
        if not h.is_control:
            data += [(r.offset, r.value) for r in decode_records(everything.records, pos, h)]
    visible = set(committed_values(part))
    assert len(markers(part.records)) == 5
    return part.high_watermark, {
        "read_uncommitted": data,
        "read_committed": [(o, v) for o, v in data if v in visible],
    }


def _kafka_python(bs: str, topic: str, isolation: str, n: int) -> tuple[list, int]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bs, isolation_level=isolation, enable_auto_commit=False,
                      fetch_max_wait_ms=100)
    try:
        tp = KTP(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(out) < n:
            for recs in c.poll(200).values():
                out += [(r.offset, r.value) for r in recs]
        for _ in range(5):  # anything extra (or a control record) would show up here
            for recs in c.poll(200).values():
                out += [(r.offset, r.value) for r in recs]
        return out, c.position(tp)
    finally:
        c.close()


def _aiokafka(bs: str, topic: str, isolation: str, n: int) -> tuple[list, int]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def run() -> tuple[list, int]:
        c = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level=isolation,
                             enable_auto_commit=False, fetch_max_wait_ms=100)
        await c.start()
        try:
            tp = ATP(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            out: list[tuple[int, bytes]] = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and len(out) < n:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    out += [(r.offset, r.value) for r in recs]
            for _ in range(5):
                for recs in (await c.getmany(timeout_ms=200)).values():
                    out += [(r.offset, r.value) for r in recs]
            return out, await c.position(tp)
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), 60))


def _confluent(bs: str, topic: str, isolation: str, n: int) -> tuple[list, int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"rb-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "fetch.wait.max.ms": 100, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, -2)])
        out: list[tuple[int, bytes]] = []
        eof = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (len(out) < n or not eof):
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is None:
                out.append((m.offset(), m.value()))
            elif m.error().code() == -191:  # _PARTITION_EOF: the fetch position reached the end
                eof += 1
        for _ in range(5):  # anything extra would show up here
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.value()))
        return out, c.position([TopicPartition(topic, 0)])[0].offset
    finally:
        c.close()


READERS = {"kafka-python": _kafka_python, "aiokafka": _aiokafka, "confluent-kafka": _confluent}


@pytest.mark.timeout(240)
def test_every_client_reads_back_both_isolation_levels(shared_broker):
    bs = shared_broker.bootstrap
    topic, txn = unique("readback")
    create_topic(bs, topic)
    _build_mixed_partition(bs, topic, txn)
    end, want = _expected(bs, topic)
    assert end == 15
    assert [v for _, v in want["read_committed"]] == [
        b"plain-0", b"c1-0", b"c1-1", b"plain-1", b"c3-0", b"plain-2", b"c4-0"]
    assert len(want["read_uncommitted"]) == 10

    def java(isolation: str):
        # --timeout-ms counts from the first poll, which waits out the group's join (the
        # shared broker keeps Kafka's group.initial.rebalance.delay.ms of 3 s)
        group = f"rb-java-{isolation}-{uuid.uuid4().hex[:6]}"
        res = run_java_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", [
            "--bootstrap-server", bs, "--topic", topic, "--from-beginning", "--group", group,
            "--isolation-level", isolation, "--timeout-ms", "10000",
            "--property", "print.offset=true"], timeout=120)
        return group, res

    with ThreadPoolExecutor(2) as pool:  # the JVMs start while the Python clients read
        javas = {iso: pool.submit(java, iso) for iso in ISOLATIONS}
        got = {(name, iso): fn(bs, topic, iso, len(want[iso]))
               for name, fn in READERS.items() for iso in ISOLATIONS}
        java_out = {iso: f.result() for iso, f in javas.items()}

    for (name, iso), (records, position) in got.items():
        # aborted records never reach read_committed, control records never reach anyone, and
        # every record keeps its log offset (the marker offsets are gaps)
        assert records == want[iso], (name, iso)
        # the position past the last record also skips the trailing markers
        assert position == end, (name, iso, position)
    for iso, (group, res) in java_out.items():
        assert not res.timed_out and res.returncode == 0, res.describe()
        rows = re.findall(r"^Offset:(\d+)\s+(\S+)$", res.stdout, re.M)
        assert [(int(o), v.encode()) for o, v in rows] == want[iso], (iso, res.describe())
        # the consumer's committed position on close accounts for the marker offsets
        with TxnWire(bs) as c:
            r = c.call(9, 7, {"group_id": group, "topics": [
                {"name": topic, "partition_indexes": [0]}], "require_stable": True})
        assert r.topics[0].partitions[0].committed_offset == end, (iso, res.describe())


PRODUCERS, TXNS, PARTITIONS, PER_PARTITION = 6, 6, 3, 3


@pytest.mark.timeout(240)
def test_concurrent_transactional_producers_interleave(shared_broker):
    """6 transactional producers (threads) write to the same 3 partitions at once, aborting
    every third transaction: read_committed returns exactly the committed records, each
    producer's records in its own order on every partition."""
    bs = shared_broker.bootstrap
    topic, txn = unique("concurrent")
    create_topic(bs, topic, partitions=PARTITIONS)
    start = threading.Barrier(PRODUCERS)
    errors: list[BaseException] = []
    committed: list[bytes] = []
    aborted: list[bytes] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        try:
            p = txn_producer(bs, f"{txn}-{i}")
            p.init_transactions(30)
            start.wait(30)
            rnd = random.Random(i)
            for j in range(TXNS):
                p.begin_transaction()
                values = []
                for k in range(PER_PARTITION):
                    for part in range(PARTITIONS):
                        v = f"{i}:{j}:{k}:{part}".encode()
                        p.produce(topic, value=v, partition=part)
                        values.append(v)
                    p.poll(0)
                    time.sleep(rnd.random() * 0.01)
                if j % 3 == 1:
                    p.flush(20)  # the aborted records are in the log, not just in the client
                    p.abort_transaction(30)
                    target = aborted
                else:
                    p.commit_transaction(30)
                    target = committed
                with lock:
                    target.extend(values)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not any(t.is_alive() for t in threads), "producers hung"
    assert not errors, errors
    total = PRODUCERS * TXNS * PER_PARTITION * PARTITIONS
    assert len(committed) + len(aborted) == total and len(aborted) == total // 3

    c = Consumer({"bootstrap.servers": bs, "group.id": f"cc-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "fetch.wait.max.ms": 100})
    per_partition: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 30
        idle_since = time.monotonic()
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                per_partition[m.partition()].append(m.value())
                idle_since = time.monotonic()
            elif (sum(map(len, per_partition.values())) >= len(committed)
                  and time.monotonic() - idle_since > 1.5):
                break
    finally:
        c.close()
    got = [v for vs in per_partition.values() for v in vs]
    assert sorted(got) == sorted(committed)  # no aborted record, none lost, none twice
    for part, values in per_partition.items():
        for i in range(PRODUCERS):
            mine = [tuple(map(int, v.split(b":")[1:3])) for v in values
                    if v.startswith(f"{i}:".encode())]
            assert mine == sorted(mine), (part, i)  # (txn, k) order of producer i kept
            assert all(v.endswith(f":{part}".encode()) for v in values)
    # the producers really interleaved: some transaction's records on a partition are split
    # by another producer's (serialized producers would give one run per transaction)
    runs = [1 + sum(vs[n].split(b":")[:2] != vs[n + 1].split(b":")[:2]
                    for n in range(len(vs) - 1))
            for vs in per_partition.values()]
    assert max(runs) > PRODUCERS * TXNS * 2 // 3, runs
    # read_uncommitted sees every record that was written, exactly once
    everything = consume_all(bs, topic, "read_uncommitted", partitions=PARTITIONS,
                             expect=total, timeout=30)
    assert sorted(everything) == sorted(committed + aborted)
