"""KIP-714 client telemetry end to end: a subscription made with kafka-client-metrics
(org.apache.kafka.tools.ClientMetricsCommand) narrows what librdkafka and the Java client push,
and what they push shows on the broker's /metrics with the client's labels."""

from __future__ import annotations

import re
import time
import urllib.request

from confluent_kafka import Producer

from tests.support.broker import free_port
from tests.support.java import JavaResult, run_java_tool

CLIENT_METRICS_COMMAND = "org.apache.kafka.tools.ClientMetricsCommand"
PREFIX = "org.apache.kafka.producer.record.queue.time"
PROM_PREFIX = PREFIX.replace(".", "_")
# asked of Java clients only (a match on the software name their ApiVersions gives)
JAVA_PREFIX = "org.apache.kafka.producer.connection.creation"


def _tool(bootstrap: str, *args: str) -> JavaResult:
    return run_java_tool(CLIENT_METRICS_COMMAND, ["--bootstrap-server", bootstrap, *args])


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def _pushed(port: int, software: str) -> list[str]:
    """The names of the pushed metrics of clients of this software name."""
    return [line.split("{", 1)[0] for line in _scrape(port).splitlines()
            if line.startswith("org_apache_kafka_")
            and f'client_software_name="{software}"' in line]


def _wait_pushed(port: int, software: str, timeout: float = 20) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = _pushed(port, software)
        if names:
            return names
        time.sleep(0.2)
    raise AssertionError(f"no metrics pushed by {software}:\n{_scrape(port)[-3000:]}")


def test_subscription_from_the_tool_narrows_what_clients_push(broker_factory, unique_topic):
    port = free_port()
    b = broker_factory({"metrics.port": port})
    _tool(b.bootstrap, "--alter", "--name", "queue-time", "--metrics", PREFIX,
          "--interval", "100").check()
    _tool(b.bootstrap, "--alter", "--name", "java-connections", "--metrics", JAVA_PREFIX,
          "--match", "client_software_name=apache-kafka-java", "--interval", "100").check()
    listed = _tool(b.bootstrap, "--list").check()
    assert sorted(listed.stdout.split()) == ["java-connections", "queue-time"], listed.describe()
    described = _tool(b.bootstrap, "--describe", "--name", "queue-time").check()
    assert f"metrics={PREFIX}" in described.stdout, described.describe()
    assert "interval.ms=100" in described.stdout, described.describe()

    # librdkafka: pushes once the interval passes, only the subscribed metrics
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "rdkafka-telemetry"})
    deadline = time.monotonic() + 20
    names: list[str] = []
    while not names and time.monotonic() < deadline:
        p.produce(unique_topic, b"x")
        p.poll(0.2)
        names = _pushed(port, "confluent-kafka-python")
    assert names, _scrape(port)[-3000:]
    assert all(n.startswith(PROM_PREFIX) for n in names), names
    assert p.flush(30) == 0
    text = _scrape(port)
    assert re.search(rf'{PROM_PREFIX}\w*{{.*client_id="rdkafka-telemetry"', text)

    # the Java client (kafka-producer-perf-test's producer, Java 4.x): the same subscription.
    # It pushes only once a push interval after its subscription (a close before that sends
    # nothing): the shortest interval, and records for seconds after a slow JVM start.
    perf = run_java_tool("org.apache.kafka.tools.ProducerPerformance", [
        "--topic", unique_topic, "--num-records", "500", "--throughput", "100",
        "--record-size", "10", "--producer-props", f"bootstrap.servers={b.bootstrap}",
        "client.id=java-telemetry"])
    perf.check()
    names = _wait_pushed(port, "apache-kafka-java")
    assert all(n.startswith((PROM_PREFIX, JAVA_PREFIX.replace(".", "_"))) for n in names), names
    assert any(n.startswith(JAVA_PREFIX.replace(".", "_")) for n in names), names
    # librdkafka's still only what matched it
    names = _pushed(port, "confluent-kafka-python")
    assert names and all(n.startswith(PROM_PREFIX) for n in names), names
