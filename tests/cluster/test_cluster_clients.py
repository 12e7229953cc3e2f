"""Every client against a 3-broker cluster (issue 6, first acceptance bullet).

One cluster for the module (own chroot in the session's ZooKeeper); every topic has
replication factor 3 and 3 partitions led by 3 different brokers, and every test uses its own
topics, groups and transactional ids:

- kafka-python, aiokafka and confluent-kafka produce (acks=all, idempotent) and read back
  exactly what they produced with assign() + seek to beginning; the Java client does the same
  through tests/java/src/ClientSmoke.java;
- consumer groups: two confluent-kafka members split a topic, commit, and a restarted member
  resumes from the committed offsets; the same with a Java ConsoleConsumer as one member;
  FindCoordinator(group) is the leader of the group's __consumer_offsets partition;
- consume-transform-produce with send_offsets_to_transaction where the group coordinator and
  the transaction coordinator are different brokers, into partitions led by all three.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from samsa.coordinator.internal_log import partition_for
from tests.clients import pyclients
from tests.cluster.cluster import (
    CLUSTER_SETTINGS,
    GROUP_KEY,
    TRANSACTION_KEY,
    Cluster,
    create_topic,
    find_coordinators,
    wait_until,
)
from tests.groups.clients import Member, poll_until, split_evenly
from tests.support.java import (
    JAVA_SRC,
    JVM_ARGS,
    REPO_ROOT,
    classpath_dir,
    compile_java,
    jar_version,
    java_executable,
    run_java_tool,
)

pytestmark = pytest.mark.timeout(240)

BROKERS = {0, 1, 2}
INTERNAL_PARTITIONS = 6  # offsets.topic.num.partitions / transaction.state.log.num.partitions
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
assert CLUSTER_SETTINGS["offsets.topic.num.partitions"] == INTERNAL_PARTITIONS
assert CLUSTER_SETTINGS["transaction.state.log.num.partitions"] == INTERNAL_PARTITIONS


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(zookeeper, tmp_path_factory.mktemp("cluster-clients")).start()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def logs_on_failure(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    """Print the brokers' log tails (shown with the failure) when the test failed."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:  # the call's report is already counted
        print(cluster.logs_tail())


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _spread_topic(cluster: Cluster, topic: str) -> None:
    """3 partitions at replication factor 3, led by the 3 brokers, every replica in sync."""
    create_topic(cluster, topic, 3)
    assert set(cluster.leaders(topic).values()) == BROKERS, cluster.leaders(topic)
    wait_until(lambda: all(isr == [0, 1, 2] for isr in cluster.isr(topic).values()), 20,
               f"every replica of {topic} in sync")


def _assert_replicas_identical(cluster: Cluster, topic: str) -> None:
    """Every partition has its 3 replicas in sync, with logs of the same size."""
    wait_until(lambda: all(isr == [0, 1, 2] for isr in cluster.isr(topic).values()), 20,
               f"every replica of {topic} in sync")
    for p in range(3):
        wait_until(lambda p=p: len(cluster.log_sizes(topic, p)) == 3
                   and len(set(cluster.log_sizes(topic, p).values())) == 1, 20,
                   f"the 3 replicas of {topic}-{p} identical in size")


def _produce(cluster: Cluster, topic: str, values: list[str]) -> None:
    """acks=all, idempotent; value i goes to partition i % 3 (values are 'v<i>')."""
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5,
                  "message.timeout.ms": 60000})
    for v in values:
        p.produce(topic, v.encode(), partition=int(v[1:]) % 3,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors


def _committed(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=20)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


def _end_offsets(cluster: Cluster, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "ends-" + _uid()})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1]
                for p in range(3)}
    finally:
        c.close()


def _coordinator_of(cluster: Cluster, internal_topic: str, key: str) -> int:
    return cluster.leaders(internal_topic)[partition_for(key, INTERNAL_PARTITIONS)]


# =========================================================================== python clients
@pytest.mark.parametrize(("client", "codec"), [("kafka-python", "gzip"), ("aiokafka", "lz4"),
                                               ("confluent-kafka", "zstd")])
def test_python_client_produces_and_reads_back_across_three_leaders(
        cluster: Cluster, logs_on_failure: None, client: str, codec: str) -> None:
    topic = f"py-{client}-{_uid()}"
    _spread_topic(cluster, topic)
    idempotence = {"kafka-python": {"enable_idempotence": True},
                   "aiokafka": {"enable_idempotence": True},
                   "confluent-kafka": {"enable.idempotence": True}}[client]
    recs = pyclients.make_records(client, codec, 90, int(time.time() * 1000) - 60_000)
    acked = pyclients.produce(client, cluster.bootstrap, topic, codec, recs, **idempotence)
    assert len(acked) == len(recs)
    by_partition: dict[int, list[int]] = {}
    for partition, offset, _rec in acked:
        by_partition.setdefault(partition, []).append(offset)
    assert set(by_partition) == {0, 1, 2}, "the keys should reach every partition (leader)"
    for partition, offsets in by_partition.items():
        assert sorted(offsets) == list(range(len(offsets))), (partition, sorted(offsets))

    count, read = pyclients.consume_all(client, cluster.bootstrap, topic)
    assert count == 3
    got = sorted((r.partition, r.offset, r.rec) for r in read)
    want = sorted(acked, key=lambda a: (a[0], a[1]))
    assert [g[:2] for g in got] == [w[:2] for w in want]  # no gap, no duplicate
    assert got == want
    assert all(r.create_time for r in read)
    _assert_replicas_identical(cluster, topic)


# =========================================================================== java client
@pytest.mark.timeout(300)
@pytest.mark.parametrize("classpath", ["clients39", "kafka4"])
def test_java_client_smoke_on_replicated_topic(cluster: Cluster, logs_on_failure: None,
                                               classpath: str) -> None:
    """ClientSmoke at replication factor 3: admin, idempotent acks=all producer in every
    codec (40 records each), assign + seekToBeginning consumer that checks every record."""
    classes = compile_java([JAVA_SRC / "ClientSmoke.java"], classpath=classpath)
    topic = "java-" + _uid()
    res = run_java_tool("ClientSmoke", [cluster.bootstrap, topic, "40", "3"],
                        classpath=classpath, extra_classpath=[classes], timeout=240)
    assert f"kafka-clients {jar_version(classpath)}" in res.stdout, res.describe()
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("CHECK ")]
    assert not [ln for ln in lines if " FAIL " in ln], res.describe()
    passed = [ln.split()[1] for ln in lines]
    assert passed == ["create_topic", "describe_topic", "list_topics", "alter_configs",
                      "describe_configs", "produce", "list_offsets", "consume",
                      "delete_topic"], res.describe()
    describe = next(ln for ln in lines if ln.startswith("CHECK describe_topic OK"))
    leaders = describe.split("leaders=")[1].strip("[]").split(", ")
    assert sorted(map(int, leaders)) == [0, 1, 2], describe
    assert "records=200" in next(ln for ln in lines if ln.startswith("CHECK consume OK"))
    res.check()


# =========================================================================== groups
def test_confluent_group_splits_commits_and_resumes(cluster: Cluster,
                                                    logs_on_failure: None) -> None:
    u = _uid()
    topic, group = f"grp-{u}", f"grp-{u}"
    _spread_topic(cluster, topic)
    coordinator = find_coordinators(cluster, GROUP_KEY, [group])[group]
    assert coordinator == _coordinator_of(cluster, "__consumer_offsets", group)

    members = [Member("confluent-kafka", cluster.bootstrap, group, topic) for _ in range(2)]
    try:
        poll_until(members, split_evenly(members, 3), 40)
        first = [f"v{i}" for i in range(30)]
        _produce(cluster, topic, first)
        poll_until(members, lambda: sum(len(m.seen) for m in members) >= 30, 30)
        for m in members:
            parts = {p for _t, p in m.assignment()}
            assert m.seen and all(int(v[1:]) % 3 in parts for v in m.seen), (parts, m.seen)
            m.commit()
        assert sorted(v for m in members for v in m.seen) == sorted(first)
    finally:
        for m in members:
            m.close()
    assert _committed(cluster, group, topic) == {0: 10, 1: 10, 2: 10}

    second = [f"v{i}" for i in range(30, 60)]
    _produce(cluster, topic, second)
    again = Member("confluent-kafka", cluster.bootstrap, group, topic)
    try:
        poll_until([again], lambda: len(again.seen) >= 30, 40)
        time.sleep(1)  # nothing more (a member that ignored the commits would read 60)
        assert sorted(again.seen) == sorted(second)
        again.commit()
    finally:
        again.close()
    assert _committed(cluster, group, topic) == {0: 20, 1: 20, 2: 20}
    # The coordinator did not move while the group ran.
    assert find_coordinators(cluster, GROUP_KEY, [group])[group] == coordinator


class _JavaConsoleConsumer:
    """Kafka's ConsoleConsumer as a long-running group member; stdout lines land in `values`."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        cmd = [java_executable(), *JVM_ARGS, "-cp", str(classpath_dir("kafka4") / "*"),
               CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic,
               "--group", group, "--from-beginning",
               "--command-property", "heartbeat.interval.ms=300",
               "--command-property", "session.timeout.ms=10000"]
        self.values: list[str] = []
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=self._stderr)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.values.append(line.decode().strip())

    def stop(self) -> str:
        """SIGTERM: ConsoleConsumer's shutdown hook closes the consumer, which commits.

        Returns its stderr; idempotent."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(10)
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")


@pytest.mark.timeout(300)
def test_java_console_consumer_shares_a_group_and_resumes(cluster: Cluster,
                                                          logs_on_failure: None) -> None:
    u = _uid()
    topic, group = f"jgrp-{u}", f"jgrp-{u}"
    _spread_topic(cluster, topic)
    java = _JavaConsoleConsumer(cluster.bootstrap, topic, group)
    member: Member | None = None
    try:
        member = Member("confluent-kafka", cluster.bootstrap, group, topic)
        admin = cluster.admin()

        def split() -> bool:
            desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
            sets = [{tp.partition for tp in m.assignment.topic_partitions}
                    for m in desc.members]
            return (len(sets) == 2 and all(sets) and set().union(*sets) == {0, 1, 2}
                    and sum(map(len, sets)) == 3 and member is not None
                    and {p for _t, p in member.assignment()} in sets)

        wait_until(split, 60, "the Java and the librdkafka member to split the partitions")
        desc = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert desc.coordinator.id == _coordinator_of(cluster, "__consumer_offsets", group)
        mine = {p for _t, p in member.assignment()}
        first = [f"v{i}" for i in range(30)]
        _produce(cluster, topic, first)
        wait_until(lambda: len(java.values) + len(member.seen) >= 30, 40, "30 records read")
        member.commit()
        err = java.stop()
        assert sorted(java.values + member.seen) == sorted(first), err
        assert java.values and all(int(v[1:]) % 3 not in mine for v in java.values), err
    finally:
        java.stop()
        if member is not None:
            member.close()
    assert _committed(cluster, group, topic) == {0: 10, 1: 10, 2: 10}

    second = [f"v{i}" for i in range(30, 60)]
    _produce(cluster, topic, second)
    res = run_java_tool(CONSOLE_CONSUMER, [
        "--bootstrap-server", cluster.bootstrap, "--topic", topic, "--group", group,
        "--from-beginning", "--max-messages", "30", "--timeout-ms", "30000"], timeout=120)
    res.check()
    assert sorted(res.stdout.split()) == sorted(second), res.describe()
    assert _committed(cluster, group, topic) == {0: 20, 1: 20, 2: 20}


# =========================================================================== transactions
def _ids_on_different_coordinators(cluster: Cluster, u: str) -> tuple[str, str]:
    """A group id and a transactional id whose coordinators are different brokers."""
    # Both internal topics are created on first use: ask once so that they exist.
    find_coordinators(cluster, GROUP_KEY, [f"probe-{u}"])
    find_coordinators(cluster, TRANSACTION_KEY, [f"probe-{u}"])
    for topic in ("__consumer_offsets", "__transaction_state"):
        wait_until(lambda t=topic: len(cluster.leaders(t)) == INTERNAL_PARTITIONS
                   and all(v >= 0 for v in cluster.leaders(t).values()), 20, f"{topic} leaders")
    group = f"eos-g-{u}"
    group_node = _coordinator_of(cluster, "__consumer_offsets", group)
    txn_leaders = cluster.leaders("__transaction_state")
    txn_id = next(t for t in (f"eos-t-{u}-{i}" for i in range(1000))
                  if txn_leaders[partition_for(t, INTERNAL_PARTITIONS)] != group_node)
    return group, txn_id


def test_consume_transform_produce_across_two_coordinators(cluster: Cluster,
                                                           logs_on_failure: None) -> None:
    u = _uid()
    src, dst = f"eos-in-{u}", f"eos-out-{u}"
    _spread_topic(cluster, src)
    _spread_topic(cluster, dst)
    group, txn_id = _ids_on_different_coordinators(cluster, u)
    group_node = find_coordinators(cluster, GROUP_KEY, [group])[group]
    txn_node = find_coordinators(cluster, TRANSACTION_KEY, [txn_id])[txn_id]
    assert group_node == _coordinator_of(cluster, "__consumer_offsets", group)
    assert txn_node == _coordinator_of(cluster, "__transaction_state", txn_id)
    assert group_node != txn_node

    inputs = [f"v{i}" for i in range(90)]
    _produce(cluster, src, inputs)
    input_ends = _end_offsets(cluster, src)
    assert input_ends == {0: 30, 1: 30, 2: 30}

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 300})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                         "transaction.timeout.ms": 30000, "linger.ms": 5})
    try:
        consumer.subscribe([src])
        producer.init_transactions(30)

        def transform(prefix: str) -> list[TopicPartition]:
            """Read every input record, write prefix+value to the same output partition."""
            read = 0
            deadline = time.monotonic() + 40
            while read < len(inputs):
                assert time.monotonic() < deadline, f"read {read} of {len(inputs)}"
                for msg in consumer.consume(100, 0.5):
                    assert msg.error() is None, msg.error()
                    producer.produce(dst, prefix.encode() + msg.value(),
                                     partition=msg.partition())
                    read += 1
            positions = consumer.position([TopicPartition(src, p) for p in range(3)])
            assert {tp.partition: tp.offset for tp in positions} == input_ends
            return positions

        # An aborted attempt: its records stay invisible and its offsets are not committed.
        producer.begin_transaction()
        positions = transform("aborted:")
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        assert producer.flush(30) == 0  # abort_transaction would otherwise purge unsent records
        producer.abort_transaction(30)
        assert _committed(cluster, group, src) == {0: -1001, 1: -1001, 2: -1001}

        for p in range(3):
            consumer.seek(TopicPartition(src, p, OFFSET_BEGINNING))
        producer.begin_transaction()
        positions = transform("out:")
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    finally:
        consumer.close()

    assert _committed(cluster, group, src) == input_ends
    out = _read(cluster, dst, "read_committed", len(inputs))
    for p in range(3):
        assert out[p] == [f"out:v{i}" for i in range(p, 90, 3)], (p, out[p])
    everything = _read(cluster, dst, "read_uncommitted", 2 * len(inputs))
    assert sorted(v for vs in everything.values() for v in vs) == sorted(
        [f"aborted:{v}" for v in inputs] + [f"out:{v}" for v in inputs])
    _assert_replicas_identical(cluster, dst)


def _read(cluster: Cluster, topic: str, isolation: str, expect: int) -> dict[int, list[str]]:
    """assign + seek to beginning; every value per partition, in offset order."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "read-" + _uid(),
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "fetch.wait.max.ms": 100})
    out: dict[int, list[str]] = {0: [], 1: [], 2: []}

    def drain(seconds: float) -> int:
        for msg in c.consume(1000, seconds):
            assert msg.error() is None, msg.error()
            out[msg.partition()].append(msg.value().decode())
        return sum(map(len, out.values()))

    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
        wait_until(lambda: drain(0.2) >= expect, 40, f"{expect} records of {topic}")
        drain(1.0)  # and nothing beyond them
    finally:
        c.close()
    return out
