"""samsa.testing's embedded broker and its request intercepts: a real client sees the error, the
delay or the dropped connection a test asks for, with no process but the test's."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import samsa.testing
from samsa.protocol.codec import build, reader, request_type, response_type
from samsa.protocol.errors import ErrorCode
from samsa.testing import _wire
from samsa.testing._intercept import error_answer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def embedded() -> Iterator[samsa.testing.EmbeddedBroker]:
    with samsa.testing.embedded_broker(auto_create_topics_enable=False) as b:
        yield b


@pytest.fixture(autouse=True)
def _no_rules_left(embedded: samsa.testing.EmbeddedBroker) -> Iterator[None]:
    yield
    embedded.clear_intercepts()


def _produce(bootstrap: str, topic: str, partition: int, value: bytes) -> object:
    """One record, no retries: the delivery error, None when it was written."""
    results: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, "retries": 0, "acks": "all",
                  "enable.idempotence": False})
    p.produce(topic, value, partition=partition, on_delivery=lambda e, m: results.append(e))
    p.flush(10)
    assert len(results) == 1
    return results[0]


def _end_offset(bootstrap: str, topic: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    finally:
        c.close()


def test_a_producer_sees_the_injected_error_and_nothing_is_written(embedded):
    embedded.create_topic("injected")
    rule = embedded.intercept("Produce", error=ErrorCode.not_enough_replicas, times=1)
    failed = _produce(embedded.bootstrap, "injected", 0, b"refused")
    assert failed is not None and failed.code() == ErrorCode.not_enough_replicas
    assert rule.hits == 1
    assert _end_offset(embedded.bootstrap, "injected", 0) == 0  # the handler never ran
    assert _produce(embedded.bootstrap, "injected", 0, b"served") is None  # times=1 used up
    assert _end_offset(embedded.bootstrap, "injected", 0) == 1


def test_a_predicate_picks_the_requests(embedded):
    embedded.create_topic("picked", partitions=2)
    embedded.intercept(0, when=lambda r: r.request.topic_data[0].partition_data[0].index == 1,
                       error=ErrorCode.message_too_large)
    assert _produce(embedded.bootstrap, "picked", 0, b"p0") is None
    failed = _produce(embedded.bootstrap, "picked", 1, b"p1")
    assert failed is not None and failed.code() == ErrorCode.message_too_large


def _connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def test_delay_answers_late_and_drop_closes_the_connection(embedded):
    embedded.intercept("ApiVersions", delay=0.3, times=1)
    with _connect(embedded.bootstrap) as s:
        started = time.monotonic()
        answer = _wire._call(s, 18, 2, {}, 1)
        assert time.monotonic() - started >= 0.3  # a lower bound only: never flaky
        assert answer.error_code == ErrorCode.none and answer.api_keys
    dropped = embedded.intercept("Metadata", drop=True, times=1)
    with _connect(embedded.bootstrap) as s, pytest.raises(ConnectionError):
        _wire._call(s, 3, 12, {"topics": None}, 2)
    assert dropped.hits == 1
    with _connect(embedded.bootstrap) as s:  # the next connection is served
        assert _wire._call(s, 3, 12, {"topics": None}, 3).brokers


def test_an_answer_built_by_the_test(embedded):
    embedded.intercept("FindCoordinator", answer=lambda r: {
        "coordinators": [{"key": k, "node_id": 7, "host": "elsewhere", "port": 1,
                          "error_code": ErrorCode.none} for k in r.request.coordinator_keys]})
    with _connect(embedded.bootstrap) as s:
        r = _wire._call(s, 10, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]}, 1)
    assert [(c.key, c.node_id, c.host) for c in r.coordinators] == [
        ("a", 7, "elsewhere"), ("b", 7, "elsewhere")]


def _request(api_key: int, version: int, body: dict):
    return build(request_type(api_key, version), body)


def _answer(api_key: int, version: int, body: dict, error: ErrorCode):
    return build(response_type(api_key, version),
                 error_answer(api_key, version, _request(api_key, version, body), error))


def test_error_answers_name_what_the_request_names():
    code = ErrorCode.coordinator_load_in_progress
    fetch = _answer(1, 12, {"topics": [{"topic": "t", "partitions": [
        {"partition": 3, "fetch_offset": 5}, {"partition": 4}]}]}, code)
    assert fetch.error_code == code
    assert [(t.topic, [(p.partition_index, p.error_code, p.high_watermark, p.records)
                       for p in t.partitions]) for t in fetch.responses] == [
        ("t", [(3, code, -1, b""), (4, code, -1, b"")])]
    coordinators = _answer(10, 4, {"key_type": 0, "coordinator_keys": ["g1", "g2"]}, code)
    assert [(c.key, c.error_code, c.node_id) for c in coordinators.coordinators] == [
        ("g1", code, -1), ("g2", code, -1)]
    txn = _answer(24, 3, {"v3_and_below_topics": [{"name": "t", "partitions": [0, 2]}]}, code)
    assert [(t.name, [(p.partition_index, p.partition_error_code)
                      for p in t.results_by_partition])
            for t in txn.results_by_topic_v3_and_below] == [("t", [(0, code), (2, code)])]
    groups = _answer(15, 5, {"groups": ["a"]}, code)
    assert [(g.group_id, g.error_code) for g in groups.groups] == [("a", code)]
    join = _answer(11, 9, {"group_id": "g", "member_id": "m"}, code)
    assert (join.error_code, join.member_id, join.generation_id) == (code, "m", -1)
    # what the broker writes is what a client reads back
    body, _ = samsa.testing._intercept.encode_response(
        response_type(0, 9), error_answer(0, 9, _request(0, 9, {"topic_data": [
            {"name": "t", "partition_data": [{"index": 1, "records": b""}]}]}), code))
    produce, _ = reader(response_type(0, 9))(b"".join(bytes(b) for b in body), 0)
    p = produce.responses[0].partition_responses[0]
    assert (produce.responses[0].name, p.index, p.error_code, p.base_offset) == (
        "t", 1, code, -1)


def test_the_pytest_fixture_of_a_users_project(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent('''
        from samsa.protocol.errors import ErrorCode
        from samsa.testing import _wire

        def test_injected(samsa_embedded_broker):
            b = samsa_embedded_broker
            rule = b.intercept("CreateTopics", error=ErrorCode.policy_violation)
            try:
                b.create_topic("refused")
            except RuntimeError as exc:
                assert "error 44" in str(exc)  # POLICY_VIOLATION
            else:
                raise AssertionError("the intercept did not answer")
            assert rule.hits == 1
    '''))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTEST_ADDOPTS", None)
    res = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                          "-p", "samsa.testing"], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 passed" in res.stdout
