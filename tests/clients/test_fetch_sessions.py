"""Incremental fetch sessions (KIP-227) with the clients that open them, kafka-python and the
Java consumer (librdkafka and aiokafka fetch without one): records produced while they consume
many partitions arrive once each and in order, the broker keeps their sessions, and a session
lost with a broker restart is opened again."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from tests.support.broker import free_port
from tests.support.java import JavaResult, run_java_tool

PARTITIONS = 12
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in the scrape")


def _create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    """Values first..first+count-1, each to partition value % PARTITIONS, a few at a time."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for i in range(first, first + count):
        p.produce(topic, str(i).encode(), partition=i % PARTITIONS)
        if i % 7 == 0:
            p.flush(10)
    assert p.flush(30) == 0


def _check_order(received: dict[int, list[int]]) -> None:
    """Each partition's values arrive once each and in the order they were produced."""
    for partition, values in received.items():
        assert values == sorted(set(values)), f"partition {partition}: {values}"


def test_kafka_python_consumes_over_a_session(broker_factory, unique_topic):
    port = free_port()
    b = broker_factory({"metrics.port": port})
    _create(b.bootstrap, unique_topic)
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, fetch_max_wait_ms=100,
                             request_timeout_ms=20_000)
    consumer.assign([TopicPartition(unique_topic, i) for i in range(PARTITIONS)])
    consumer.seek_to_beginning()
    received: dict[int, list[int]] = {i: [] for i in range(PARTITIONS)}

    def consume_until(total: int, budget_s: float = 60) -> None:
        deadline = time.monotonic() + budget_s
        while sum(map(len, received.values())) < total:
            assert time.monotonic() < deadline, f"{sum(map(len, received.values()))} of {total}"
            for tp, records in consumer.poll(timeout_ms=200).items():
                received[tp.partition] += [int(r.value) for r in records]

    try:
        for round_ in range(3):  # new records on some partitions at a time, while it fetches
            _produce(b.bootstrap, unique_topic, round_ * 100, 100)
            consume_until((round_ + 1) * 100)
        assert _metric(port, SESSIONS) == 1
        assert _metric(port, CACHED) == PARTITIONS
        # the restarted broker has no session: the consumer is told so and opens another
        b.restart()
        _produce(b.bootstrap, unique_topic, 300, 100)
        consume_until(400)
        _check_order(received)
        assert sorted(v for vs in received.values() for v in vs) == list(range(400))
        assert _metric(port, SESSIONS) == 1
    finally:
        consumer.close()


def _run_while(work: Callable[[], JavaResult], background: Callable[[], None]) -> JavaResult:
    """`work()` (a client process) while `background()` runs in a thread beside it."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            background()
        except BaseException as exc:  # reported by the test
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        return work()
    finally:
        thread.join(120)
        assert not failure, failure[0]


@pytest.mark.timeout(300)
def test_java_consumer_consumes_over_a_session(broker_factory, unique_topic):
    port = free_port()
    b = broker_factory({"metrics.port": port})
    _create(b.bootstrap, unique_topic)
    seen: list[tuple[float, float]] = []  # (sessions, partitions cached) while it consumes

    def produce_in_rounds() -> None:
        deadline = time.monotonic() + 90
        while _metric(port, SESSIONS) == 0:  # the consumer has joined its group and fetches
            assert time.monotonic() < deadline, "the consumer opened no fetch session"
            time.sleep(0.2)
        for round_ in range(6):
            _produce(b.bootstrap, unique_topic, round_ * 100, 100)
            if round_ < 5:  # (after the last, it may have read everything and closed)
                seen.append((_metric(port, SESSIONS), _metric(port, CACHED)))
                time.sleep(1)  # the consumer fetches between the rounds

    result = _run_while(lambda: run_java_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", [
        "--bootstrap-server", b.bootstrap, "--topic", unique_topic, "--from-beginning",
        "--max-messages", "600", "--timeout-ms", "30000",
        "--formatter-property", "print.partition=true",
        "--command-property", "fetch.max.wait.ms=100"], timeout=180), produce_in_rounds)
    assert not result.timed_out and result.returncode == 0, result.describe()
    received: dict[int, list[int]] = {i: [] for i in range(PARTITIONS)}
    for line in result.stdout.splitlines():
        if not line.startswith("Partition:"):
            continue
        partition, value = line.split("\t")
        received[int(partition.removeprefix("Partition:"))].append(int(value))
    _check_order(received)
    assert sorted(v for vs in received.values() for v in vs) == list(range(600))
    # its session stood while it fetched: one, with some of the partitions (a partition
    # whose records the consumer still holds is left out of its fetches until it has them)
    assert {sessions for sessions, _ in seen} == {1}, seen
    assert all(0 < cached <= PARTITIONS for _, cached in seen), seen
