"""Real clients with `group.protocol=consumer` (KIP-848) against the group coordinator: the
Java KafkaConsumer 4.x (split, takeover on close, resume from committed offsets after a
restart), librdkafka (confluent-kafka), and kafka-consumer-groups on a consumer group."""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter

import pytest

from tests.groups.clients import FAST, create_topic, produce
from tests.support.java import JAVA_SRC, compile_java, run_java_tool

GROUPS_CMD = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
SETTINGS = dict(FAST, **{"group.consumer.heartbeat.interval.ms": 1000})


def _values(res) -> list[str]:
    line = next((x for x in res.stdout.splitlines() if x.startswith("VALUES ")), None)
    assert line is not None, res.describe()
    return [v for v in line[len("VALUES "):].split(",") if v]


def _java(classes, *args: str):
    res = run_java_tool("GroupMembers", list(args), extra_classpath=[classes], timeout=150,
                        jvm_args=["-Dgroup.protocol=consumer"])
    assert not res.timed_out and res.returncode == 0, res.describe()
    return res


@pytest.mark.timeout(300)
def test_java_consumer_protocol_split_takeover_resume(broker_factory):
    broker = broker_factory(settings=SETTINGS)
    b = broker.bootstrap
    classes = compile_java([JAVA_SRC / "GroupMembers.java"], classpath="kafka4")
    u = uuid.uuid4().hex[:8]
    topic, group = f"k848-{u}", f"k848-group-{u}"
    create_topic(b, topic, 4)
    produce(b, topic, 4, 40)
    # 2 members split 4 partitions (no partition owned twice), read and commit v0..v39;
    # member 1 closes; member 0 takes all 4 and reads the 8 records produced next
    res = _java(classes, "takeover", b, topic, group, "4", "2", "40", "8")
    checks = re.findall(r"^CHECK (\S+) (OK|FAIL)", res.stdout, re.M)
    assert checks == [("split", "OK"), ("leave", "OK"), ("takeover", "OK"),
                      ("survivors_read", "OK"), ("close", "OK")], res.describe()
    assert Counter(_values(res)) == Counter(f"v{i}" for i in range(48)), res.describe()
    assignments = re.findall(r"^ASSIGNMENT (\d+) \[([\d, ]*)\]", res.stdout, re.M)
    assert [len(p.split(",")) for _, p in assignments] == [2, 2, 4], res.describe()
    # the committed offsets survive a restart of the coordinator: exactly the new records
    produce(b, topic, 4, 8, start=48)
    broker.stop()
    broker.start()
    res = _java(classes, "resume", b, topic, group, "8")
    assert sorted(_values(res)) == sorted(f"v{i}" for i in range(48, 56)), res.describe()
    # the members did use the consumer protocol: the coordinator assigned them
    assert "target assignment computed by uniform for 2 members" in broker.log_text()


@pytest.mark.timeout(120)
def test_librdkafka_consumer_protocol_consumes_and_commits(broker_factory):
    from confluent_kafka import Consumer, TopicPartition

    broker = broker_factory(settings=SETTINGS)
    b = broker.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"rdk848-{u}", f"rdk848-group-{u}"
    create_topic(b, topic, 4)
    produce(b, topic, 4, 40)
    c = Consumer({"bootstrap.servers": b, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got: list[str] = []
        deadline = time.monotonic() + 30
        while len(got) < 40 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
        assert sorted(got) == sorted(f"v{i}" for i in range(40))
        assert sorted(tp.partition for tp in c.assignment()) == [0, 1, 2, 3]
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
        assert [tp.offset for tp in committed] == [10, 10, 10, 10]
        # kafka-consumer-groups describes the consumer group: its offsets, members, state
        res = run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--describe", "--group",
                                         group])
        assert res.returncode == 0, res.describe()
        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
        rows = sorted(line.split() for line in res.stdout.splitlines()
                      if line.startswith(group))
        assert [(r[2], r[3], r[5]) for r in rows] == [(str(p), "10", "0") for p in range(4)], \
            res.describe()
        assert len({r[6] for r in rows}) == 1 and rows[0][6] != "-", res.describe()
        res = run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--describe", "--group",
                                         group, "--members", "--verbose"])
        assert res.returncode == 0, res.describe()
        rows = [line.split() for line in res.stdout.splitlines() if line.startswith(group)]
        assert len(rows) == 1, res.describe()
        # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT ...
        assert rows[0][4] == "4" and rows[0][5] == "1", res.describe()
        res = run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--describe", "--group",
                                         group, "--state"])
        assert res.returncode == 0 and re.search(r"\buniform\b.*\bStable\b", res.stdout), \
            res.describe()
        res = run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--list", "--type"])
        assert re.search(rf"^{group}\s+Consumer\b", res.stdout, re.M | re.I), res.describe()
    finally:
        c.close()
    res = run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--delete", "--group", group])
    assert res.returncode == 0 and "successful" in res.stdout, res.describe()
    res = run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--list"])
    assert group not in res.stdout.split(), res.describe()


@pytest.mark.timeout(120)
def test_librdkafka_consumer_protocol_offsets_in_a_transaction(broker_factory):
    """send_offsets_to_transaction with a consumer-protocol member: TxnOffsetCommit carries its
    member id and epoch, which the coordinator checks."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker = broker_factory(settings=SETTINGS)
    b = broker.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"rdtx-{u}", f"rdtx-group-{u}"
    create_topic(b, topic, 1)
    produce(b, topic, 1, 5)
    c = Consumer({"bootstrap.servers": b, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    p = Producer({"bootstrap.servers": b, "transactional.id": f"tid-{u}"})
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 5 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        assert got == 5
        p.init_transactions(20)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 5)],
                                      c.consumer_group_metadata(), 20)
        p.commit_transaction(20)
        deadline = time.monotonic() + 15
        while True:
            [tp] = c.committed([TopicPartition(topic, 0)], timeout=10)
            if tp.offset == 5 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert tp.offset == 5
    finally:
        c.close()
        p.flush()
