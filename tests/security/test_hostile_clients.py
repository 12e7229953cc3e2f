"""Hostile clients against a real broker process: size prefixes that announce 100 MB and send a
few bytes, frames cut short by a reset (SO_LINGER 0), and a burst of 2,000 connections at once.
The broker's memory is read from /proc/<pid>/status throughout: it must follow the bytes that
arrive (and queued.max.request.bytes), fall back once the attackers are gone, while another
connection's requests are answered; records written before are all read back, once, after
the attacks and after a restart."""

from __future__ import annotations

import resource
import selectors
import socket
import struct
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from tests.support.broker import BrokerProcess, free_port
from tests.support.liveness import Liveness, api_versions_v0, rss_mb

MB = 1 << 20
Factory = Callable[..., BrokerProcess]  # the broker_factory fixture
ATTACKERS = 24
BURST = 2000
_APIVERSIONS_V0 = struct.pack(">hhih", 18, 0, 0, 1) + b"t"  # key, version, correlation, client


def _reset(sock: socket.socket) -> None:
    """Close with a RST instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _big_prefixes(port: int, extra: int) -> list[socket.socket]:
    """ATTACKERS connections, each announcing a 100 MB request and sending `extra` bytes of it
    (as much as the socket takes without waiting)."""
    socks = []
    for _ in range(ATTACKERS):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(struct.pack(">i", 100_000_000) + _APIVERSIONS_V0)
        s.setblocking(False)
        chunk = b"x" * (256 * 1024)
        sent = 0
        while sent < extra:
            try:
                sent += s.send(chunk[:extra - sent])
            except BlockingIOError:
                break
        socks.append(s)
    return socks


def _settle(pid: int, below_mb: float, timeout_s: float = 20.0) -> float:
    """The broker's RSS once under `below_mb` (or the last one read after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    rss = rss_mb(pid)
    while rss >= below_mb and time.monotonic() < deadline:
        time.sleep(0.2)
        rss = rss_mb(pid)
    return rss


def _produce(bootstrap: str, topic: str, n: int) -> list[bytes]:
    values = [b"record-%06d" % i for i in range(n)]
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    return values


def _consume_all(bootstrap: str, topic: str, n: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.time_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            value = msg.value() if msg is not None and msg.error() is None else None
            if value is not None:
                got.append(value)
            elif msg is None and len(got) >= n:
                break
    finally:
        consumer.close()
    return got


def _attack(broker: BrokerProcess, attack: Callable[[], None]) -> tuple[Liveness, float]:
    assert broker.pid is not None
    baseline = rss_mb(broker.pid)
    watch = Liveness(broker.port, broker.pid)
    with watch.running():
        attack()
        time.sleep(0.5)  # answers on the watch's connection with the attackers still there
    return watch, baseline


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text: str = resp.read().decode()
    return text


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in the scrape")


@pytest.mark.timeout(240)
def test_size_prefixes_and_reset_frames_cost_what_arrives(broker_factory: Factory,
                                                          unique_topic: str) -> None:
    metrics_port = free_port()
    broker = broker_factory({"metrics.port": metrics_port})
    pid = broker.pid
    assert pid is not None
    cap_mb = 256  # queued.max.request.bytes's default
    written = _produce(broker.bootstrap, unique_topic, 2000)

    def announce() -> None:  # 24 x 100 MB announced, a few bytes sent, held for a while
        socks = _big_prefixes(broker.port, 0)
        time.sleep(1.5)
        for s in socks:
            s.close()

    watch, baseline = _attack(broker, announce)
    # Before: each prefix got a zero-filled 100 MB buffer, 2.4 GB in all.
    assert watch.peak_mb < baseline + 100, (baseline, watch.peak_mb)

    def truncated() -> None:  # frames cut short by a reset, in rounds
        for _ in range(3):
            socks = _big_prefixes(broker.port, 8 * MB)
            time.sleep(0.5)
            for s in socks:
                _reset(s)

    watch2, _ = _attack(broker, truncated)
    assert watch2.peak_mb < 300 + cap_mb, watch2.peak_mb
    # Memory follows the bytes that arrived, and comes back once the connections are gone.
    assert _settle(pid, baseline + 60) < baseline + 60, (baseline, watch2.peak_mb)
    for w in (watch, watch2):
        assert w.latencies, "no request answered during the attack"
        assert max(w.latencies) < 2.0, sorted(w.latencies)[-5:]

    # The pool ran dry (the 24 prefixes announce 2.4 GB): said once, and counted.
    text = _scrape(metrics_port)
    assert _metric(text, "samsa_network_memorypool_depletions") >= 1
    assert _metric(text, "kafka_network_socketserver_memorypoolused") == 0
    assert broker.log_text().count("memory pool for requests is exhausted") == 1

    assert sorted(_consume_all(broker.bootstrap, unique_topic, len(written))) == written
    broker.restart()
    assert sorted(_consume_all(broker.bootstrap, unique_topic, len(written))) == written


def _raise_open_files(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"the hard open files limit {hard} is below {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _burst(port: int, n: int, timeout_s: float) -> tuple[int, float]:
    """Open `n` connections at once, send ApiVersions on each as soon as it is connected:
    how many were answered within `timeout_s`, and when the last one was."""
    sel = selectors.DefaultSelector()
    socks = []
    started = time.monotonic()
    for i in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE, [i, b""])
    answered = 0
    last = 0.0
    try:
        while answered < n and time.monotonic() - started < timeout_s:
            for key, events in sel.select(0.1):
                conn: Any = key.fileobj
                try:
                    if events & selectors.EVENT_WRITE:
                        conn.send(api_versions_v0(key.data[0]))
                        sel.modify(conn, selectors.EVENT_READ, key.data)
                        continue
                    chunk = conn.recv(65536)
                except OSError:  # refused or reset: never answered
                    chunk = b""
                if not chunk:
                    sel.unregister(conn)
                    continue
                key.data[1] += chunk
                data = key.data[1]
                if len(data) >= 4 and len(data) >= 4 + struct.unpack(">i", data[:4])[0]:
                    answered += 1
                    last = time.monotonic() - started
                    sel.unregister(conn)
    finally:
        sel.close()
        for s in socks:
            s.close()
    return answered, last


@pytest.mark.timeout(120)
def test_a_burst_of_connections_is_accepted_and_answered(broker: BrokerProcess) -> None:
    _raise_open_files(BURST + 500)  # the broker raises its own limit to the hard one
    answered, last = _burst(broker.port, BURST, timeout_s=20)
    assert answered == BURST, f"{BURST - answered} of {BURST} not answered in 20 s"
    assert last < 5.0, f"the last answer came after {last:.1f} s"


@pytest.mark.timeout(120)
def test_connection_creation_rate_makes_the_acceptor_wait(broker_factory: Factory) -> None:
    metrics_port = free_port()
    broker = broker_factory({"max.connection.creation.rate": 20, "metrics.port": metrics_port})
    time.sleep(1.1)  # the readiness probe's connection is a second behind
    answered, last = _burst(broker.port, 60, timeout_s=30)
    # 20 at once (a second's worth), then 20 a second: the last about 2 s later.
    assert answered == 60
    assert last > 1.2, f"60 connections answered in {last:.2f} s at 20 a second"
    text = _scrape(metrics_port)
    assert _metric(text, "kafka_server_socket_server_metrics_connection_count") >= 0
    throttled = [line for line in text.splitlines() if line.startswith(
        "kafka_server_socket_server_metrics_connection_accept_throttle_time_total{")]
    assert throttled and float(throttled[0].rsplit(" ", 1)[1]) > 500, throttled
