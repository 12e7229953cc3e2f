"""Fetch v13+ (topics by id, KIP-516) and v15-v18, over the wire and with librdkafka."""

from __future__ import annotations

import urllib.request
import uuid

from confluent_kafka import Consumer, Producer

from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import decode_records, iter_batches
from tests.support.broker import free_port

from .wire import WireClient

FETCH, METADATA, CREATE_TOPICS, DELETE_TOPICS = 1, 3, 19, 20


def _topic_id(c: WireClient, topic: str) -> uuid.UUID:
    t = c.call(METADATA, 12, {"topics": [{"name": topic}],
                              "allow_auto_topic_creation": False}).topics[0]
    assert t.error_code == 0, t
    return t.topic_id


def _create(c: WireClient, topic: str) -> uuid.UUID:
    resp = c.call(CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": 1,
                                                 "replication_factor": 1, "assignments": [],
                                                 "configs": []}],
                                     "timeout": 10_000, "validate_only": False})
    assert resp.topics[0].error_code == 0, resp
    return resp.topics[0].topic_id


def _fetch(c: WireClient, version: int, topic_id: uuid.UUID, offset: int = 0):
    body: dict = {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                  "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [],
                  "rack_id": "",
                  "topics": [{"topic_id": topic_id, "partitions": [
                      {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
                       "last_fetched_epoch": -1, "log_start_offset": -1,
                       "partition_max_bytes": 1 << 20}]}]}
    if version < 15:
        body["replica_id"] = -1
    resp = c.call(FETCH, version, body)
    assert resp.error_code == 0 and resp.session_id == 0
    (topic,) = resp.responses
    assert topic.topic_id == topic_id
    (partition,) = topic.partitions
    return partition


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, b"v%d" % i)
    assert p.flush(20) == 0


def test_fetch_by_topic_id_and_a_reused_name_is_a_new_topic(shared_broker, unique_topic):
    with WireClient(shared_broker.bootstrap) as c:
        old = _create(c, unique_topic)
        _produce(shared_broker.bootstrap, unique_topic, 3)
        for version in (13, 14, 15, 16, 17, 18):
            p = _fetch(c, version, old)
            assert (p.error_code, p.high_watermark) == (ErrorCode.none, 3), version
            data = bytes(p.records)
            records = [r for pos, h in iter_batches(data) for r in decode_records(data, pos, h)]
            assert [r.value for r in records] == [b"v0", b"v1", b"v2"], version
        unknown = _fetch(c, 13, uuid.uuid4())
        assert (unknown.error_code, unknown.high_watermark) == (ErrorCode.unknown_topic_id, -1)

        resp = c.call(DELETE_TOPICS, 6, {"topics": [{"name": unique_topic, "topic_id": None}],
                                         "timeout": 10_000})
        assert resp.responses[0].error_code == 0
        new = _create(c, unique_topic)
        assert new != old and _topic_id(c, unique_topic) == new
        assert _fetch(c, 16, old).error_code == ErrorCode.unknown_topic_id
        fresh = _fetch(c, 16, new)
        assert (fresh.error_code, fresh.high_watermark) == (ErrorCode.none, 0)


def _fetch_requests(port: int) -> dict[int, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[int, float] = {}
    for line in text.splitlines():
        if (line.startswith("kafka_network_requestmetrics_requestspersec_total{")
                and 'request="Fetch"' in line):
            version = int(line.split('version="', 1)[1].split('"', 1)[0])
            out[version] = out.get(version, 0) + float(line.rsplit(" ", 1)[1])
    return out


def test_librdkafka_consumes_with_fetch_by_topic_id(broker_factory, unique_topic):
    port = free_port()
    b = broker_factory({"metrics.port": port})
    _produce(b.bootstrap, unique_topic, 20)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": unique_topic,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([unique_topic])
        got: list[bytes] = []
        for _ in range(100):
            if len(got) == 20:
                break
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    assert got == [b"v%d" % i for i in range(20)]
    assert any(v >= 13 for v in _fetch_requests(port)), _fetch_requests(port)
