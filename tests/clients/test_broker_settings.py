"""Broker properties that shape connections and responses, checked over real sockets:
max.connections, max.connections.per.ip, connections.max.idle.ms, socket buffer sizes,
fetch.max.bytes, broker.rack, and a refused property stopping start-up with its name."""

from __future__ import annotations

import re
import shutil
import socket
import struct
import subprocess
import time

import pytest

from samsa.protocol.records import build_batch, iter_batches
from tests.protocol.wire import WireClient
from tests.support.broker import BrokerStartError, free_port

pytestmark = pytest.mark.timeout(120)

PRODUCE, FETCH, METADATA = 0, 1, 3


def _api_versions_frame(correlation: int) -> bytes:
    # ApiVersions v0: api key 18, version 0, correlation id, null client id, empty body
    body = struct.pack(">hhih", 18, 0, correlation, -1)
    return struct.pack(">i", len(body)) + body


def _connect(bootstrap: str, source: str = "127.0.0.1") -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5, source_address=(source, 0))


def _answered(sock: socket.socket, wait_s: float) -> bool | None:
    """Send ApiVersions; True if answered within wait_s, False if not, None if closed."""
    sock.settimeout(wait_s)
    try:
        sock.sendall(_api_versions_frame(7))
        return _read_frame(sock)[:4] == struct.pack(">i", 7)
    except TimeoutError:
        return False
    except (ConnectionError, EOFError):
        return None


def _read_frame(sock: socket.socket) -> bytes:
    """One whole response frame (size prefix stripped)."""
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data
    return exactly(struct.unpack(">i", exactly(4))[0])


def test_connection_limits(broker_factory):
    b = broker_factory(settings={"max.connections": 3, "max.connections.per.ip": 2})
    # (not from 127.0.0.1, where the harness's readiness probe came from)
    first = [_connect(b.bootstrap, "127.0.0.4"), _connect(b.bootstrap, "127.0.0.4")]
    assert [_answered(s, 5) for s in first] == [True, True]
    # A third from the same address is closed as soon as it is accepted (Kafka's per-IP
    # quota), one from another address is served.
    third_same_ip = _connect(b.bootstrap, "127.0.0.4")
    assert _answered(third_same_ip, 5) is None
    other_ip = _connect(b.bootstrap, "127.0.0.2")
    assert _answered(other_ip, 5) is True
    # Broker-wide limit reached: a fourth is not accepted (it waits in the listen backlog)
    # until a connection closes.
    waiting = _connect(b.bootstrap, "127.0.0.3")
    assert _answered(waiting, 1.5) is False
    first[0].close()
    waiting.settimeout(10)
    assert _read_frame(waiting)[:4] == struct.pack(">i", 7)
    assert "Rejected connection from 127.0.0.4" in b.log_text()
    for s in (first[1], other_ip, waiting, third_same_ip):
        s.close()


def test_idle_connections_are_closed_busy_ones_kept(broker_factory):
    b = broker_factory(settings={"connections.max.idle.ms": 1000})
    idle, busy = _connect(b.bootstrap), _connect(b.bootstrap)
    assert _answered(idle, 5) and _answered(busy, 5)
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:  # a request every 300 ms keeps a connection open
        assert _answered(busy, 5) is True
        time.sleep(0.3)
    idle.settimeout(5)
    assert idle.recv(1) == b""  # closed by the broker after 1 s without a request
    busy.close()
    idle.close()


@pytest.mark.skipif(shutil.which("ss") is None,
                    reason="needs ss (iproute2) to read the broker socket's buffer sizes")
def test_socket_buffers_are_set(broker_factory):
    b = broker_factory(settings={"socket.send.buffer.bytes": 40960,
                                 "socket.receive.buffer.bytes": 61440})
    client = _connect(b.bootstrap)
    assert _answered(client, 5)
    local_port = client.getsockname()[1]
    out = subprocess.run(["ss", "-tmnH", "state", "established", f"( dport = :{local_port} )"],
                         capture_output=True, text=True, check=True).stdout
    # The broker's end of this connection; Linux doubles what setsockopt asks for.
    assert "rb122880" in out and "tb81920" in out, out
    client.close()


def test_fetch_max_bytes_caps_every_fetch(broker_factory):
    b = broker_factory(settings={"fetch.max.bytes": 1024})
    topic = "capped"
    with WireClient(b.bootstrap) as c:
        c.call(METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        for i in range(4):  # four batches of about 700 bytes
            batch = build_batch([(b"k", bytes([65 + i]) * 600, [], 0)])
            r = c.call(PRODUCE, 8, {"acks": -1, "timeout": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
            assert r.responses[0].partition_responses[0].error_code == 0
        r = c.call(FETCH, 11, {"max_wait": 0, "min_bytes": 0, "max_bytes": 50 << 20,
                               "topics": [{"topic": topic, "partitions": [
                                   {"partition": 0, "fetch_offset": 0,
                                    "partition_max_bytes": 50 << 20}]}]})
        records = r.responses[0].partitions[0].records
        # 1024 bytes hold one batch, not two: the broker's cap beat the client's 50 MiB
        assert len(list(iter_batches(records))) == 1


def test_broker_rack_in_metadata(broker_factory):
    b = broker_factory(settings={"broker.rack": "rack-a"})
    with WireClient(b.bootstrap) as c:
        r = c.call(METADATA, 9, {"topics": [], "allow_auto_topic_creation": False})
    assert [(x.node_id, x.rack) for x in r.brokers] == [(b.broker_id, "rack-a")]


def test_refused_property_stops_start_up_naming_it(broker_factory):
    with pytest.raises(BrokerStartError) as e:
        broker_factory(settings={"compression.type": "zstd"})
    assert re.search(r"compression\.type.*batches are stored as the producer compressed",
                     str(e.value)), str(e.value)


def test_ignored_property_warns_at_start_up(broker_factory):
    b = broker_factory(settings={"num.replica.fetchers": 2})
    assert "num.replica.fetchers is set but has no effect" in b.log_text()


def _compacted_topic_with_duplicates(bootstrap: str) -> str:
    """A compacted topic whose closed segments hold 5 keys written 40 times each."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "compacted"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "internal.segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(40):  # one batch of the 5 keys at a time: segments of a few batches each
        for key in range(5):
            producer.produce(topic, key=f"k{key}".encode(), value=b"v" * 40)
        assert producer.flush(30) == 0
    return topic


def _count_records(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "count",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    count, deadline = 0, time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return count
                raise AssertionError(msg.error())
            count += 1
    finally:
        consumer.close()
    raise AssertionError("did not reach the end of the partition")


def _compactions(b) -> int:
    return len(re.findall(r"compacted compacted-0 ", b.log_text()))


@pytest.mark.parametrize(("enable", "backoff_ms", "cleaned"), [
    (True, 200, True),  # cleaned within a few backoff periods
    (False, 200, False),  # log.cleaner.enable=false: compacted topics are not cleaned
    (True, 600_000, False),  # the first look for a dirty log is a backoff away
])
def test_log_cleaner_enable_and_backoff(broker_factory, enable, backoff_ms, cleaned):
    b = broker_factory(settings={"log.cleaner.enable": enable,
                                 "log.cleaner.backoff.ms": backoff_ms})
    topic = _compacted_topic_with_duplicates(b.bootstrap)
    deadline = time.monotonic() + (10 if cleaned else 3)
    while time.monotonic() < deadline and not _compactions(b):
        time.sleep(0.1)
    assert bool(_compactions(b)) is cleaned, b.log_tail()
    # What a consumer reads: 200 records, or after cleaning about one per key (plus the
    # uncleaned active segment).
    count = _count_records(b.bootstrap, topic)
    # With a 200 ms backoff the cleaner can first run while the producer still writes; a later
    # run (within a few backoffs) takes the segments written after it
    deadline = time.monotonic() + 10
    while cleaned and count >= 50 and time.monotonic() < deadline:
        time.sleep(0.5)
        count = _count_records(b.bootstrap, topic)
    assert count < 50 if cleaned else count == 200


def test_timestamp_bounds_reject_the_batch(broker_factory):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    # The broker bounds future timestamps; one topic also bounds past ones.
    b = broker_factory(settings={"log.message.timestamp.after.max.ms": 60_000})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for future in admin.create_topics([
            NewTopic("bounded", 1, 1, config={"message.timestamp.before.max.ms": "60000"}),
            NewTopic("loose", 1, 1)]).values():
        future.result(30)
    now, hour = int(time.time() * 1000), 3_600_000
    results: list[tuple[str, int, int | None]] = []

    def sent(topic: str, ts: int) -> None:
        p = Producer({"bootstrap.servers": b.bootstrap, "retries": 0})
        p.produce(topic, b"v", timestamp=ts, on_delivery=lambda err, msg: results.append(
            (topic, ts, None if err is None else err.code())))
        assert p.flush(30) == 0

    for topic, ts in (("bounded", now), ("bounded", now - hour), ("bounded", now + hour),
                      ("loose", now - hour), ("loose", now + hour)):
        sent(topic, ts)
    invalid = KafkaError.INVALID_TIMESTAMP
    assert results == [("bounded", now, None), ("bounded", now - hour, invalid),
                       ("bounded", now + hour, invalid), ("loose", now - hour, None),
                       ("loose", now + hour, invalid)]


def test_zookeeper_connection_timeout(broker_factory):
    # Nothing listens at that port: start-up gives up after the connection timeout.
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(BrokerStartError) as e:
        broker_factory(settings={"zookeeper.connect": dead,
                                 "zookeeper.connection.timeout.ms": 1000})
    assert f"ZooKeeper at {dead} within 1000 ms" in str(e.value), str(e.value)


def _checkpoint_lines(b, name: str) -> set[str]:
    try:
        return set((b.data_dir / name).read_text().splitlines()[2:])
    except FileNotFoundError:
        return set()


def test_checkpoint_intervals(broker_factory):
    # Defaults are 5 s and 60 s: written every 100 ms, the files follow within a second.
    b = broker_factory(settings={"replica.high.watermark.checkpoint.interval.ms": 100,
                                 "log.flush.start.offset.checkpoint.interval.ms": 100})
    with WireClient(b.bootstrap) as c:
        c.call(METADATA, 9, {"topics": [{"name": "cp"}], "allow_auto_topic_creation": True})
        batch = build_batch([(b"k", b"v", [], 0)] * 5)
        c.call(PRODUCE, 8, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": "cp", "partition_data": [{"index": 0, "records": batch}]}]})
        r = c.call(21, 2, {"topics": [{"name": "cp", "partitions": [  # DeleteRecords
            {"partition_index": 0, "offset": 3}]}], "timeout_ms": 5000})
        assert r.topics[0].partitions[0].low_watermark == 3
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and not (
            "cp 0 5" in _checkpoint_lines(b, "replication-offset-checkpoint")
            and "cp 0 3" in _checkpoint_lines(b, "log-start-offset-checkpoint")):
        time.sleep(0.1)
    assert "cp 0 5" in _checkpoint_lines(b, "replication-offset-checkpoint")
    assert "cp 0 3" in _checkpoint_lines(b, "log-start-offset-checkpoint")
