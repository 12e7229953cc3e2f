"""Requests with topics by id: Produce v13 (KIP-516), OffsetCommit v10 and OffsetFetch v10
(KIP-848). Over the wire, and with the Java 4.x clients, which use them once advertised (the
producer; the consumer with group.protocol=consumer, its classic consumer stays on v9)."""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest

from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch
from tests.groups.clients import FAST, create_topic, produce
from tests.support.broker import free_port
from tests.support.java import JAVA_SRC, compile_java, run_java_tool

from .wire import WireClient

PRODUCE, COMMIT, OFFSET_FETCH, FIND_COORDINATOR, CREATE_TOPICS, DELETE_TOPICS = 0, 8, 9, 10, 19, 20


def _coordinator_ready(c: WireClient, group: str) -> None:
    for _ in range(100):
        if c.call(FIND_COORDINATOR, 3, {"key": group, "key_type": 0}).error_code == 0:
            return
        time.sleep(0.1)
    raise AssertionError("no group coordinator")


def _create(c: WireClient, topic: str, partitions: int) -> uuid.UUID:
    resp = c.call(CREATE_TOPICS, 7, {"topics": [{"name": topic, "num_partitions": partitions,
                                                 "replication_factor": 1, "assignments": [],
                                                 "configs": []}],
                                     "timeout": 10_000, "validate_only": False})
    assert resp.topics[0].error_code == 0, resp
    return resp.topics[0].topic_id


def _commit_v10(c: WireClient, group: str, topics: list[tuple[uuid.UUID, dict[int, int]]]):
    resp = c.call(COMMIT, 10, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None,
        "topics": [{"topic_id": tid, "partitions": [
            {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
             "committed_metadata": f"m{o}"} for p, o in parts.items()]}
            for tid, parts in topics]})
    return {(t.topic_id, p.partition_index): p.error_code
            for t in resp.topics for p in t.partitions}


def _fetch(c: WireClient, version: int, group: str, topics: list | None):
    resp = c.call(OFFSET_FETCH, version, {
        "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                    "topics": topics}], "require_stable": True})
    (g,) = resp.groups
    assert g.error_code == 0, g
    key = "topic_id" if version >= 10 else "name"
    return {(getattr(t, key), p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in g.topics for p in t.partitions}


def test_offsets_committed_and_fetched_by_topic_id(shared_broker, unique_topic):
    group = f"g-{unique_topic}"
    stranger = uuid.uuid4()
    with WireClient(shared_broker.bootstrap) as c:
        tid = _create(c, unique_topic, 2)
        _coordinator_ready(c, group)
        errors = _commit_v10(c, group, [(tid, {0: 5, 1: 7}), (stranger, {0: 1})])
        assert errors == {(tid, 0): ErrorCode.none, (tid, 1): ErrorCode.none,
                          (stranger, 0): ErrorCode.unknown_topic_id}
        # the same offsets, by name (v9) and by id (v10), asked for or the whole group's
        assert _fetch(c, 9, group, [{"name": unique_topic, "partition_indexes": [0, 1]}]) == {
            (unique_topic, 0): (5, "m5", 0), (unique_topic, 1): (7, "m7", 0)}
        by_id = {(tid, 0): (5, "m5", 0), (tid, 1): (7, "m7", 0)}
        assert _fetch(c, 10, group, None) == by_id
        asked = _fetch(c, 10, group, [{"topic_id": tid, "partition_indexes": [0, 1]},
                                      {"topic_id": stranger, "partition_indexes": [3]}])
        assert asked == {**by_id, (stranger, 3): (-1, "", ErrorCode.unknown_topic_id)}

        # a topic deleted since: its id is unknown, and the group's offsets leave it out
        resp = c.call(DELETE_TOPICS, 6, {"topics": [{"name": unique_topic, "topic_id": None}],
                                         "timeout": 10_000})
        assert resp.responses[0].error_code == 0
        assert _commit_v10(c, group, [(tid, {0: 9})]) == {(tid, 0): ErrorCode.unknown_topic_id}
        assert _fetch(c, 10, group, None) == {}


def requests_by_version(port: int, api: str) -> dict[int, float]:
    """How many requests of `api` the broker served, per version (its /metrics)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[int, float] = {}
    for line in text.splitlines():
        if (line.startswith("kafka_network_requestmetrics_requestspersec_total{")
                and f'request="{api}"' in line):
            version = int(line.split('version="', 1)[1].split('"', 1)[0])
            out[version] = out.get(version, 0) + float(line.rsplit(" ", 1)[1])
    return out


@pytest.mark.timeout(200)
def test_java_consumer_commits_and_resumes_by_topic_id(broker_factory, unique_topic):
    port = free_port()
    b = broker_factory(settings=dict(FAST, **{"metrics.port": port})).bootstrap
    classes = compile_java([JAVA_SRC / "GroupMembers.java"], classpath="kafka4")
    create_topic(b, unique_topic, 2)
    produce(b, unique_topic, 2, 10)
    group = f"g-{unique_topic}"

    def resume(expect: int) -> list[str]:
        res = run_java_tool("GroupMembers", ["resume", b, unique_topic, group, str(expect)],
                            extra_classpath=[classes], timeout=150,
                            jvm_args=["-Dgroup.protocol=consumer"])
        assert not res.timed_out and res.returncode == 0, res.describe()
        line = next(x for x in res.stdout.splitlines() if x.startswith("VALUES "))
        return [v for v in line[len("VALUES "):].split(",") if v]

    assert sorted(resume(10)) == sorted(f"v{i}" for i in range(10))
    produce(b, unique_topic, 2, 4, start=10)
    # the second run starts from the offsets the first committed by id: only the new records
    assert sorted(resume(4)) == [f"v{i}" for i in range(10, 14)]
    commits, fetches = (requests_by_version(port, api) for api in ("OffsetCommit", "OffsetFetch"))
    assert set(commits) == {10} and set(fetches) == {10}, (commits, fetches)


def _produce(c: WireClient, version: int, topic: str | uuid.UUID, value: bytes,
             partition: int = 1):
    key = "topic_id" if version >= 13 else "name"
    resp = c.call(PRODUCE, version, {"acks": -1, "timeout": 5000, "transactional_id": None,
                                     "topic_data": [{key: topic, "partition_data": [
                                         {"index": partition, "records": build_batch(
                                             [(None, value, [], 1000)])}]}]})
    (t,) = resp.responses
    (p,) = t.partition_responses
    return getattr(t, key), p.error_code, p.base_offset


def test_produce_by_topic_id(shared_broker, unique_topic):
    stranger = uuid.uuid4()
    with WireClient(shared_broker.bootstrap) as c:
        tid = _create(c, unique_topic, 2)
        assert _produce(c, 13, tid, b"a") == (tid, ErrorCode.none, 0)
        assert _produce(c, 13, tid, b"b") == (tid, ErrorCode.none, 1)
        assert _produce(c, 12, unique_topic, b"c") == (unique_topic, ErrorCode.none, 2)
        assert _produce(c, 13, stranger, b"x") == (stranger, ErrorCode.unknown_topic_id, -1)


@pytest.mark.timeout(200)
def test_java_producer_uses_topic_ids(broker_factory, unique_topic):
    port = free_port()
    b = broker_factory(settings={"metrics.port": port}).bootstrap
    create_topic(b, unique_topic, 2)
    res = run_java_tool("org.apache.kafka.tools.ProducerPerformance", [
        "--topic", unique_topic, "--num-records", "200", "--record-size", "50",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={b}", "acks=all"],
        timeout=150)
    assert not res.timed_out and res.returncode == 0, res.describe()
    produced = requests_by_version(port, "Produce")
    assert set(produced) == {13}, produced
    with WireClient(b) as c:  # all 200 records are in the log
        ends = [_produce(c, 12, unique_topic, b"end", p)[2] for p in (0, 1)]
    assert sum(ends) == 200, ends
