"""Zero-copy Fetch (samsa.fetch.sendfile.enable): records sent from the segment files with
sendfile on a plaintext listener are byte for byte the Fetch responses a TLS listener of the
same broker writes from memory, and real clients consume through sendfile.

One broker, a PLAINTEXT and an SSL listener, small segments; one topic whose partitions hold
plain batches, batches of every compression codec, and committed and aborted transactions.
The same Fetch requests go over both listeners (read_uncommitted and read_committed, topics
by name and by id, a response limit that ends inside a batch, fetches from every position
until the end) and the response frames are compared whole. The broker's
samsa_network_sendfile_bytes_total counter shows the plaintext answers were sent with
sendfile and the TLS ones were not.
"""

from __future__ import annotations

import os
import socket
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from samsa.protocol.codec import reader, response_type
from samsa.protocol.records import decode_records, iter_batches
from tests.protocol.wire import WireClient
from tests.security.certs import Certs, make_certs
from tests.support.broker import BrokerProcess, free_port

FETCH, METADATA = 1, 3
TOPIC = "zero-copy"
PARTITIONS = 3
SENT = "samsa_network_sendfile_bytes_total"
VALUE = 1000  # bytes per record value


def _value(i: int) -> bytes:
    """Half random (so compression leaves big batches), half compressible; unique per i."""
    return (b"%08d" % i) + os.urandom(VALUE // 2 - 8) + b"z" * (VALUE // 2)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[BrokerProcess]:
    plain, tls, metrics = free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("zero-copy") / "data", port=plain,
                      name="zero-copy-broker", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "ssl.keystore.location": str(certs.broker.both),
        "samsa.fetch.sendfile.enable": True,
        "log.segment.bytes": 200_000,  # a few hundred KB of data spans several segments
        "metrics.port": metrics,
    })
    b.tls_port, b.metrics_port = tls, metrics  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def data(broker: BrokerProcess) -> dict[int, list[bytes]]:
    """Partition -> the committed values in order. 0: plain batches; 1: a run of batches of
    each codec; 2: transactions, every other one aborted."""
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    n = 0

    def produce(conf: dict[str, Any], partition: int, count: int) -> list[bytes]:
        nonlocal n
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 100,
                      "batch.size": 120_000, **conf})
        values = [_value(n + i) for i in range(count)]
        n += count
        for v in values:
            p.produce(TOPIC, v, partition=partition)
        assert p.flush(30) == 0
        return values

    expected[0] += produce({}, 0, 600)
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        expected[1] += produce({"compression.type": codec}, 1, 250)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": "zero-copy-txn",
                    "linger.ms": 100, "batch.size": 120_000})
    txn.init_transactions(30)
    for t in range(5):
        txn.begin_transaction()
        values = [_value(n + i) for i in range(150)]
        n += 150
        for v in values:
            txn.produce(TOPIC, v, partition=2)
        assert txn.flush(30) == 0  # written before the abort, not purged by it
        if t % 2:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
            expected[2] += values
    return expected


class _TlsWireClient(WireClient):
    def __init__(self, port: int, ca: str) -> None:
        context = ssl.create_default_context(cafile=ca)
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        self._correlation = 0


def _sent_from_file(broker: BrokerProcess) -> dict[str, float]:
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"  # type: ignore[attr-defined]
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(SENT + "{"):
            listener = line.split('listener="', 1)[1].split('"', 1)[0]
            out[listener] = float(line.rsplit(" ", 1)[1])
    return out


def _fetch_body(version: int, topic: str, topic_id: uuid.UUID, offsets: dict[int, int],
                isolation: int, max_bytes: int, partition_max_bytes: int) -> dict[str, Any]:
    partitions = [{"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                   "last_fetched_epoch": -1, "log_start_offset": -1,
                   "partition_max_bytes": partition_max_bytes}
                  for p, offset in offsets.items()]
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes,
            "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
            "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "topic_id": topic_id, "partitions": partitions}]}


def _exchange(client: WireClient, version: int, body: dict[str, Any]) -> tuple[bytes, Any]:
    """The response frame without its correlation id, and the decoded response."""
    _, data = client.encode_request(FETCH, version, body)
    client.send_raw(data)
    frame = client.read_frame()
    resp_type = response_type(FETCH, version)
    start = 5 if resp_type.__flexible__ else 4
    decoded, _ = reader(resp_type)(frame, start)
    return frame[4:], decoded


def _next_offset(records: bytes, current: int) -> int:
    end = current
    for _pos, h in iter_batches(records):
        end = max(end, h.base_offset + h.last_offset_delta + 1)
    return end


def test_sendfile_and_tls_fetch_responses_are_byte_identical(broker, certs, data):
    with WireClient(broker.bootstrap) as plain:
        md = plain.call(METADATA, 12, {"topics": [{"name": TOPIC}],
                                       "allow_auto_topic_creation": False})
        topic_id = md.topics[0].topic_id
        ends = {p.partition_index: -1 for p in md.topics[0].partitions}
    assert len(ends) == PARTITIONS
    before = _sent_from_file(broker)
    tls = _TlsWireClient(broker.tls_port, str(certs.ca))  # type: ignore[attr-defined]
    plain = WireClient(broker.bootstrap)
    compared = with_records = aborted = 0
    try:
        # (version, isolation, max_bytes, partition_max_bytes): names (v4, v11), ids (v13,
        # v17); a response limit (150,000) that ends inside a batch of the second partition.
        for version, isolation, max_bytes, partition_max_bytes in [
            (4, 0, 1 << 20, 1 << 20), (11, 1, 1 << 20, 300_000), (13, 0, 150_000, 1 << 20),
            (17, 1, 150_000, 100_000), (17, 0, 400_000, 250_000),
        ]:
            offsets = dict.fromkeys(range(PARTITIONS), 0)
            while True:
                body = _fetch_body(version, TOPIC, topic_id, offsets, isolation, max_bytes,
                                   partition_max_bytes)
                frame_plain, resp = _exchange(plain, version, body)
                frame_tls, _ = _exchange(tls, version, body)
                assert frame_plain == frame_tls, (version, isolation, offsets)
                compared += 1
                moved = False
                for part in resp.responses[0].partitions:
                    assert part.error_code == 0, part
                    records = bytes(part.records or b"")
                    with_records += bool(records)
                    aborted += len(part.aborted_transactions or ())
                    new = _next_offset(records, offsets[part.partition_index])
                    moved |= new != offsets[part.partition_index]
                    offsets[part.partition_index] = new
                if not moved:
                    break
    finally:
        plain.close()
        tls.close()
    assert compared > 20 and with_records > 20
    assert aborted > 0  # read_committed answers listed the aborted transactions
    after = _sent_from_file(broker)
    # the plaintext answers went out with sendfile, the TLS ones were read into memory
    assert after.get("PLAINTEXT", 0) - before.get("PLAINTEXT", 0) > 1_000_000
    assert after.get("SSL", 0) == before.get("SSL", 0) == 0


def _committed_values_of(records: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for p, v in records:
        out[p].append(v)
    return out


def test_confluent_kafka_consumes_through_sendfile(broker, data):
    before = _sent_from_file(broker).get("PLAINTEXT", 0)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "zero-copy-rdkafka",
                  "enable.auto.commit": False, "isolation.level": "read_committed",
                  "max.partition.fetch.bytes": 300_000})
    c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got: list[tuple[int, bytes]] = []
    total = sum(len(v) for v in data.values())
    try:
        for _ in range(120):
            for m in c.consume(1000, timeout=1):
                assert m.error() is None, m.error()
                got.append((m.partition(), m.value()))
            if len(got) >= total:
                break
    finally:
        c.close()
    assert _committed_values_of(got) == data
    assert _sent_from_file(broker).get("PLAINTEXT", 0) > before


def test_kafka_python_consumes_through_sendfile(broker, data):
    before = _sent_from_file(broker).get("PLAINTEXT", 0)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                      enable_auto_commit=False, max_partition_fetch_bytes=300_000,
                      consumer_timeout_ms=5000)
    parts = [KpTopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    c.assign(parts)
    c.seek_to_beginning(*parts)
    got: list[tuple[int, bytes]] = []
    total = sum(len(v) for v in data.values())
    try:
        while len(got) < total:
            batch = c.poll(timeout_ms=2000, max_records=5000)
            if not batch:
                break
            for tp, messages in batch.items():
                got += [(tp.partition, m.value) for m in messages]
    finally:
        c.close()
    assert _committed_values_of(got) == data
    assert _sent_from_file(broker).get("PLAINTEXT", 0) > before


def test_records_decode_the_same_as_produced(broker, data):
    """The bytes sent by sendfile are the records: decoded from a raw plaintext fetch of the
    uncompressed partition, they are the values produced, in order."""
    values: list[bytes] = []
    offset = 0
    with WireClient(broker.bootstrap) as c:
        while True:
            body = _fetch_body(11, TOPIC, uuid.UUID(int=0), {0: offset}, 0, 1 << 20, 1 << 20)
            _, resp = _exchange(c, 11, body)
            records = bytes(resp.responses[0].partitions[0].records or b"")
            if not records:
                break
            for pos, h in iter_batches(records):
                values += [r.value for r in decode_records(records, pos, h)]
            offset = _next_offset(records, offset)
    assert values == data[0]
