"""A single broker's data directory carried over to a node (issue 51): `samsa serve --data-dir D`
runs as broker 0, keeps a topic with records, a topic config, committed transactions and an
aborted one, a consumer group's committed offsets, a SCRAM user and an ACL; it stops, and
`samsa serve --data-dir D --processes 2` starts over the same directory, with ZooKeeper and
without (its metadata then carried from the single broker's file into the node's shared one).
A real client reads everything back: the same topic id, every committed record and none of the
aborted, the group's offsets, the config, the transactional id's producer id and epoch (from
its coordinator), the SCRAM user that writes where the ACL allows and nowhere else; the
carried partitions stay broker 0's and a new topic spreads over both processes. Stopped, the
node's directory refuses to start as one process."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

import samsa.testing
from samsa.testing import SamsaBroker, samsa_command
from samsa.testing._node import SamsaNode
from tests.cluster.cluster import wait_until
from tests.protocol.wire import WireClient
from tests.security.test_sasl import _add_scram_user

pytestmark = pytest.mark.timeout(300)

TOPIC, GROUP, TXN = "orders", "g-orders", "tx-orders"
PARTITIONS = 3
RETENTION = "86400001"
SETTINGS: dict[str, object] = {
    "zookeeper.session.timeout.ms": 3000,
    "offsets.topic.num.partitions": 4,
    "transaction.state.log.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
    "controlled.shutdown.retry.backoff.ms": 500,
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@dataclass
class Before:
    """What the single broker held, as its clients saw it."""

    topic_id: str = ""
    committed: list[bytes] = field(default_factory=list)
    offsets: dict[int, int] = field(default_factory=dict)
    transaction: tuple[int, int, str] = (-1, -1, "")
    sasl_ports: list[int] = field(default_factory=list)


@pytest.fixture(scope="module", params=[
    pytest.param(True, id="zookeeper", marks=pytest.mark.skipif(
        not samsa.testing.zookeeper_available(), reason="needs ZooKeeper")),
    pytest.param(False, id="shared-file"),
])
def carried(request: pytest.FixtureRequest) -> Iterator[tuple[SamsaNode, Before]]:
    n = SamsaNode(2, SETTINGS, zookeeper=request.param)
    before = Before()
    try:
        sasl = n.free_ports(2)
        before.sasl_ports = [sasl, sasl + 1]
        n.settings["listeners"] = (f"PLAINTEXT://127.0.0.1:{n.ports[0]},"
                                   f"SASL_PLAINTEXT://127.0.0.1:{sasl}")
        zookeeper = n._zookeeper_connect()
        single = SamsaBroker({**n.settings, **({"zookeeper.connect": zookeeper} if zookeeper
                                               else {})},
                             data_dir=n.dir / "data", port=n.ports[0], broker_id=0,
                             name="single")
        single.start()
        try:
            _fill(single.bootstrap, before)
        except Exception as exc:  # a module fixture's failure gets no broker log attached
            raise AssertionError(f"filling the single broker failed: {exc!r}\n"
                                 f"{single.log_tail(150)}") from exc
        finally:
            single.close()  # a clean stop; its data directory is the node's
        n.start()
        wait_until(lambda: len(_admin(n.ports[1]).list_topics(timeout=10).brokers) == 2, 30,
                   "both processes registered")
        yield n, before
    finally:
        n.close()


def _admin(port: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})


def _erin(port: int) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "erin",
            "sasl.password": "erin-secret"}


def _fill(bootstrap: str, before: Before) -> None:
    """On the single broker: the topic and its config, transactions, offsets, a user, an ACL."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(TOPIC, PARTITIONS, 1, config={"retention.ms": RETENTION})
    for f in admin.create_topics([new]).values():
        f.result(timeout=30)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN})
    p.init_transactions(30)
    for t in range(4):
        p.begin_transaction()
        values = [f"t{t}-{i}".encode() for i in range(10)]
        for i, v in enumerate(values):
            p.produce(TOPIC, v, partition=i % PARTITIONS)
        if t == 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            before.committed += values
    before.committed.sort()
    assert sorted(_read_all(bootstrap)) == before.committed
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    got = 0
    c.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while got < len(before.committed) and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(50, 0.5) if m.error() is None)
    c.commit(asynchronous=False)
    before.offsets = {tp.partition: tp.offset for tp in c.committed(
        [TopicPartition(TOPIC, i) for i in range(PARTITIONS)], timeout=10)}
    c.close()
    assert min(before.offsets.values()) > 0  # every partition's
    before.transaction = _describe_transaction(bootstrap)
    assert before.transaction[2] == "CompleteCommit"
    before.topic_id = str(_topic_id(admin))
    _add_scram_user(bootstrap, "erin", "erin-secret")
    grant = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:erin",
                       "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in admin.create_acls([grant]).values():
        f.result(timeout=20)


def _read_all(bootstrap: str, timeout: float = 30.0) -> list[bytes]:
    """Every committed record of the topic, from its start."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([TopicPartition(TOPIC, i, 0) for i in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < 30 and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(50, 0.5) if m.error() is None]
        got += [m.value() for m in c.consume(50, 1.0) if m.error() is None]  # no more
    finally:
        c.close()
    return got


def _describe_transaction(bootstrap: str) -> tuple[int, int, str]:
    """(producer id, epoch, state) of TXN, from whichever broker coordinates it."""
    for address in bootstrap.split(","):
        with WireClient(address) as w:
            for t in w.call(65, 0, {"transactional_ids": [TXN]}).transaction_states:
                if t.error_code == 0:
                    return t.producer_id, t.producer_epoch, t.transaction_state
    return -1, -1, ""


def _topic_id(admin: AdminClient) -> object:
    from confluent_kafka import TopicCollection

    described = admin.describe_topics(TopicCollection([TOPIC]))[TOPIC].result(timeout=20)
    return described.topic_id


def _leaders(node: SamsaNode, topic: str, partitions: int) -> dict[int, int]:
    admin = _admin(node.ports[0])
    seen: dict[int, int] = {}

    def known() -> bool:
        meta = admin.list_topics(topic, timeout=10).topics[topic].partitions
        seen.update({p: m.leader for p, m in meta.items() if m.leader >= 0})
        return len(seen) == partitions

    wait_until(known, 60, f"leaders of {topic}")
    return seen


def test_the_topic_keeps_its_id_and_broker_0_leads_it(
        carried: tuple[SamsaNode, Before]) -> None:
    node, before = carried
    assert set(_leaders(node, TOPIC, PARTITIONS).values()) == {0}
    assert str(_topic_id(_admin(node.ports[1]))) == before.topic_id
    data = node.dir / "data"
    assert (data / "broker-0" / f"{TOPIC}-0" / "partition.metadata").exists()
    assert not (data / f"{TOPIC}-0").exists()
    assert "moved the single broker's" in node.log_text()


def test_every_committed_record_and_none_aborted(carried: tuple[SamsaNode, Before]) -> None:
    node, before = carried
    _leaders(node, TOPIC, PARTITIONS)
    assert sorted(_read_all(node.bootstrap)) == before.committed


def test_the_group_s_committed_offsets(carried: tuple[SamsaNode, Before]) -> None:
    node, before = carried
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": GROUP})
    try:
        committed = c.committed([TopicPartition(TOPIC, i) for i in range(PARTITIONS)],
                                timeout=30)
    finally:
        c.close()
    assert {tp.partition: tp.offset for tp in committed} == before.offsets


def test_the_topic_config(carried: tuple[SamsaNode, Before]) -> None:
    node, _ = carried
    resource = ConfigResource("TOPIC", TOPIC)
    admin = _admin(node.ports[1])  # kept until the future is done
    configs = admin.describe_configs([resource])[resource].result(timeout=20)
    assert configs["retention.ms"].value == RETENTION


def test_the_transactional_id_keeps_its_producer_id_and_epoch(
        carried: tuple[SamsaNode, Before]) -> None:
    node, before = carried
    _leaders(node, "__transaction_state", 4)
    assert _describe_transaction(node.bootstrap) == before.transaction
    p = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": TXN})
    p.init_transactions(30)  # fences the previous producer: the same id, the next epoch
    p.begin_transaction()  # (an Empty one's description has no start time kio can read)
    p.produce(TOPIC, b"after", partition=0)
    p.commit_transaction(30)
    pid, epoch, _ = before.transaction
    assert _describe_transaction(node.bootstrap) == (pid, epoch + 1, "CompleteCommit")


def test_the_scram_user_writes_where_its_acl_allows(carried: tuple[SamsaNode, Before]) -> None:
    node, before = carried
    admin = _admin(node.ports[0])
    for f in admin.create_topics([NewTopic("unlisted", 1, 1)]).values():
        f.result(timeout=30)
    _leaders(node, "unlisted", 1)
    port = before.sasl_ports[0]
    assert _produce(_erin(port), TOPIC) == [None] * 3
    assert {e.code() if e else None for e in _produce(_erin(port), "unlisted")} == {
        KafkaError.TOPIC_AUTHORIZATION_FAILED}


def _produce(config: dict[str, Any], topic: str) -> list[KafkaError | None]:
    errors: list[KafkaError | None] = []
    p = Producer({**config, "acks": "all", "message.timeout.ms": 10_000})
    for i in range(3):
        p.produce(topic, f"erin-{i}".encode(), on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    return errors


def test_a_new_topic_spreads_over_both_processes(carried: tuple[SamsaNode, Before]) -> None:
    node, _ = carried
    admin = _admin(node.ports[1])
    for f in admin.create_topics([NewTopic("fresh", 4, 1)]).values():
        f.result(timeout=30)
    assert set(_leaders(node, "fresh", 4).values()) == {0, 1}


def test_zz_one_process_over_the_node_s_directory_is_refused(
        carried: tuple[SamsaNode, Before]) -> None:
    node, _ = carried
    node.stop()
    out = subprocess.run(
        [*samsa_command(), "serve", "--data-dir", str(node.dir / "data"),
         "--listen", f"127.0.0.1:{node.ports[0]}"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "--processes N" in out.stderr and "broker-0" in out.stderr
    assert not (node.dir / "data" / "samsa-metadata.json").exists()  # nothing written
