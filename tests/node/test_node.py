"""A node of two broker processes (`samsa serve --processes 2`), with ZooKeeper and without
(the processes then share the metadata in one SQLite file), as the clients see it: a topic
spread over both processes, a consumer group, a transaction across partitions led by each, and
the exactly-once copy while one process is killed with SIGKILL (the node's supervisor starts it
again)."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from prometheus_client.parser import text_string_to_metric_families

import samsa.testing
from samsa.testing._node import SamsaNode
from tests.cluster.cluster import wait_until
from tests.cluster.test_eos_failover import PARTITIONS, RECORDS, _copier, _fill, _read_committed

pytestmark = pytest.mark.timeout(420)

# Quick failure detection and internal topics on both processes, so that either may go.
NODE_SETTINGS: dict[str, object] = {
    "zookeeper.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 4000,
    "offsets.topic.num.partitions": 4,
    "offsets.topic.replication.factor": 2,
    "transaction.state.log.num.partitions": 4,
    "transaction.state.log.replication.factor": 2,
    "transaction.state.log.min.isr": 1,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "controlled.shutdown.retry.backoff.ms": 500,
    "leader.imbalance.check.interval.seconds": 1,
    "share.coordinator.state.topic.num.partitions": 4,
    "share.coordinator.state.topic.replication.factor": 2,
    "share.coordinator.state.topic.min.isr": 1,
}


@pytest.fixture(scope="module", params=[
    pytest.param(True, id="zookeeper", marks=pytest.mark.skipif(
        not samsa.testing.zookeeper_available(), reason="needs ZooKeeper")),
    pytest.param(False, id="shared-file"),
])
def node(request: pytest.FixtureRequest) -> Iterator[SamsaNode]:
    with samsa.testing.node(2, NODE_SETTINGS, zookeeper=request.param, metrics=True) as n:
        wait_until(lambda: len(_admin(n).list_topics(timeout=10).brokers) == 2, 30,
                   "both processes registered")
        yield n


def _admin(node: SamsaNode) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def _create(node: SamsaNode, topic: str, partitions: int, rf: int = 2) -> dict[int, int]:
    """The topic's leader of each partition, once every process knows one for each."""
    admin = _admin(node)  # kept until the futures are done
    for f in admin.create_topics([NewTopic(topic, partitions, rf)]).values():
        f.result(timeout=30)
    admins = [AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}) for port in node.ports]
    seen: list[dict[int, int]] = []

    def every_process_knows() -> bool:
        seen[:] = [{p: m.leader for p, m in a.list_topics(topic, timeout=10).topics[topic]
                    .partitions.items() if m.leader >= 0} for a in admins]
        return all(len(s) == partitions for s in seen) and all(s == seen[0] for s in seen)

    wait_until(every_process_knows, 30, f"leaders of {topic} known to every process")
    return seen[0]


def test_a_topic_spreads_over_both_processes_of_one_rack(node: SamsaNode) -> None:
    leaders = _create(node, "spread", 4)
    assert sorted(Counter(leaders.values()).values()) == [2, 2]
    admin = _admin(node)
    described = admin.describe_cluster().result(timeout=10)
    assert {(n.id, n.rack) for n in described.nodes} == {(0, socket.gethostname()),
                                                          (1, socket.gethostname())}


def test_one_metrics_endpoint_for_the_node(node: SamsaNode) -> None:
    leaders = _create(node, "measured", 4)
    url = f"http://127.0.0.1:{node.metrics_port}/metrics"

    def leader_counts() -> dict[str, float]:
        with urllib.request.urlopen(url, timeout=10) as resp:
            families = text_string_to_metric_families(resp.read().decode())
        return {s.labels["process"]: s.value for f in families
                if f.name == "kafka_server_replicamanager_leadercount" for s in f.samples}

    # every process's series, labelled by it (each leads two of this topic's partitions)
    wait_until(lambda: set(leader_counts()) == {"0", "1"}, 20, "both processes scraped")
    assert Counter(leaders.values()) == {0: 2, 1: 2}
    assert all(count >= 2 for count in leader_counts().values())


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_consumer_group_over_both_processes(node: SamsaNode, protocol: str) -> None:
    topic = f"grouped-{protocol}"
    _create(node, topic, 4)
    members = [Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"g-{protocol}",
                         "group.protocol": protocol, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
               for _ in range(2)]
    got: list[list[bytes]] = [[], []]
    errors: list[str] = []  # what the members reported (an unbalanced group's why)

    def poll() -> None:
        for i, m in enumerate(members):
            for r in m.consume(100, 0.2):
                if r.error() is None:
                    got[i].append(r.value())
                else:
                    errors.append(str(r.error()))

    try:
        for m in members:
            m.subscribe([topic])

        def balanced() -> bool:
            poll()
            return all(len(m.assignment()) == 2 for m in members)

        try:
            wait_until(balanced, 60, "two partitions for each member")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: assignments {[m.assignment() for m in members]}, "
                                 f"the members' last errors {errors[-5:]}") from None
        p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
        for i in range(200):
            p.produce(topic, f"v{i}".encode(), partition=i % 4)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 60
        while sum(map(len, got)) < 200 and time.monotonic() < deadline:
            poll()
        for m in members:
            m.commit(asynchronous=False)
        committed = members[0].committed([TopicPartition(topic, i) for i in range(4)], 10)
    finally:
        for m in members:
            m.close()
    assert sorted(v for vs in got for v in vs) == sorted(f"v{i}".encode() for i in range(200))
    assert [len(vs) for vs in got] == [100, 100]
    assert sum(tp.offset for tp in committed) == 200


def test_a_share_group_over_both_processes(node: SamsaNode) -> None:
    from confluent_kafka import ShareConsumer

    _create(node, "shared", 2)
    admin = _admin(node)
    earliest = ConfigResource(ConfigResource.Type.GROUP, "sg-node", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([earliest]).values():
        f.result(timeout=10)
    p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
    for i in range(40):
        p.produce("shared", f"s{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    conf = {"bootstrap.servers": node.bootstrap, "group.id": "sg-node"}
    consumers = [ShareConsumer(conf), ShareConsumer(conf)]
    got: list[bytes] = []
    try:
        for c in consumers:
            c.subscribe(["shared"])
        deadline = time.monotonic() + 60
        while len(got) < 40 and time.monotonic() < deadline:
            for c in consumers:
                got += [m.value() for m in c.poll(0.5) if m.error() is None]
                c.commit_sync(10)
    finally:
        for c in consumers:
            c.close()
    assert sorted(got) == sorted(f"s{i}".encode() for i in range(40))


def test_a_transaction_across_partitions_led_by_both_processes(node: SamsaNode) -> None:
    leaders = _create(node, "txn-both", 2)
    assert set(leaders.values()) == {0, 1}
    p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "t-node"})
    p.init_transactions(30)
    for outcome in ("committed", "aborted"):
        p.begin_transaction()
        for part in (0, 1):
            p.produce("txn-both", f"{outcome}-{part}".encode(), partition=part)
        # Written before the end, so that the abort has records on both processes to abort:
        # an abort sent while librdkafka still retries the AddPartitionsToTxn that the last
        # commit's markers hold back (CONCURRENT_TRANSACTIONS) finds the coordinator in
        # CompleteCommit, which Kafka too answers INVALID_TXN_STATE, fatal to the producer
        # (librdkafka's issue 4849: its EndTxn goes once an AddPartitionsToTxn was sent).
        assert p.flush(30) == 0
        if outcome == "committed":
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "v-txn",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("txn-both", part, 0) for part in (0, 1)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            seen += [m.value() for m in c.consume(10, 0.5) if m.error() is None]
        seen += [m.value() for m in c.consume(10, 1.0) if m.error() is None]  # no more
    finally:
        c.close()
    assert sorted(seen) == [b"committed-0", b"committed-1"]


def test_exactly_once_copy_while_a_process_is_killed(node: SamsaNode, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    src, dst = f"in-{suffix}", f"out-{suffix}"
    _create(node, src, PARTITIONS)
    victim = _create(node, dst, PARTITIONS)[0]
    values = _fill(node.bootstrap, src)
    copier = _copier(node.bootstrap, src, dst, f"g-{suffix}", f"copy-{suffix}",
                     tmp_path).start()
    try:
        wait_until(lambda: copier.progress >= RECORDS // 5, 60, "a fifth of the copy")
        old = node.kill_process(victim)
        node.wait_restarted(victim, old)
        assert copier.done.wait(200), (
            f"copy unfinished: {copier.progress} copied\n{copier.stderr_tail()}\n"
            f"{node.log_tail()}")
    finally:
        copier.stop()
    out = _read_committed(node.bootstrap, dst, RECORDS)
    assert not [v for v, n in Counter(out).items() if n > 1], "duplicated records"
    assert set(out) == set(values) and len(out) == RECORDS
    # auto.leader.rebalance.enable: the restarted process leads its preferred partitions again
    wait_until(lambda: _led_by_preferred(node, dst), 60, "preferred leaders back")


def _led_by_preferred(node: SamsaNode, topic: str) -> bool:
    md = _admin(node).list_topics(topic, timeout=10).topics[topic]
    return all(p.leader == p.replicas[0] for p in md.partitions.values())


def test_the_whole_node_killed_comes_back_with_its_records(node: SamsaNode) -> None:
    _create(node, "crashed", 2)
    p = Producer({"bootstrap.servers": node.bootstrap, "acks": "all"})
    for i in range(100):
        p.produce("crashed", f"c{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    node.kill()
    seen = len(node.log_text())
    node.start()
    # a crash, not a stop: no process had begun its clean shutdown when it died
    restarted = node.log_text()[seen:]
    for broker_id in node.broker_ids:
        assert re.search(rf"\[broker {broker_id}\] .*no clean shutdown marker", restarted), (
            f"broker {broker_id} found a clean shutdown marker\n{node.log_tail()}")
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "v-crashed",
                  "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.assign([TopicPartition("crashed", part, 0) for part in (0, 1)])
        deadline = time.monotonic() + 60
        while len(got) < 100 and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(100, 0.5) if m.error() is None]
    finally:
        c.close()
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(100))
