"""Two broker processes of one host without ZooKeeper (issue 51): `samsa serve` as brokers 1
and 2 on their own ports and log dirs, sharing their metadata through one SQLite file
(samsa.metadata.shared.file). A topic spreads over both, is produced to and consumed from
partitions led by each, a config changed through one is seen through the other, a SCRAM user
and an ACL made through one let a client in and write through the other, and a process
killed with SIGKILL loses its registration at once (its pid is gone): the partitions it led
with a replica on the other process move there, those it alone holds are offline (as Kafka)
until it starts again."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from samsa.testing import SamsaBroker, free_port
from tests.cluster.cluster import wait_until
from tests.node.test_node import NODE_SETTINGS

pytestmark = [pytest.mark.timeout(300)]

# the node tests' settings: quick failure detection, internal topics on both processes
LEASE_MS = int(str(NODE_SETTINGS["zookeeper.session.timeout.ms"]))


# Each process also has a SCRAM listener; the authorizer is on, with the PLAINTEXT
# listener's principal (ANONYMOUS: the clients of most tests, and the processes' own
# connections to each other) a super user.
SECURITY: dict[str, object] = {
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, SamsaBroker]]:
    node = tmp_path_factory.mktemp("node")
    settings = {**NODE_SETTINGS, **SECURITY,
                "samsa.metadata.shared.file": str(node / "samsa-metadata.db")}
    brokers = {}
    for i in (1, 2):
        port, sasl = free_port(), free_port()
        brokers[i] = SamsaBroker(
            {**settings, "listeners": f"PLAINTEXT://127.0.0.1:{port},"
                                      f"SASL_PLAINTEXT://127.0.0.1:{sasl}"},
            data_dir=node / f"broker-{i}", broker_id=i, port=port, name=f"broker-{i}")
        SASL_PORTS[i] = sasl
    try:
        for b in brokers.values():
            b.start()
        wait_until(lambda: _brokers(brokers[1]) == {1, 2}, 30, "both processes registered")
        yield brokers
    finally:
        for b in brokers.values():
            b.close()


SASL_PORTS: dict[int, int] = {}  # broker id -> its SCRAM listener's port


def _admin(broker: SamsaBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _brokers(broker: SamsaBroker) -> set[int]:
    return set(_admin(broker).list_topics(timeout=10).brokers)


def _leaders(broker: SamsaBroker, topic: str) -> dict[int, int]:
    md = _admin(broker).list_topics(topic, timeout=10).topics[topic]
    return {p: m.leader for p, m in md.partitions.items()}


def _create(broker: SamsaBroker, topic: str, partitions: int, rf: int) -> dict[int, int]:
    admin = _admin(broker)  # kept until the futures are done
    for f in admin.create_topics([NewTopic(topic, partitions, rf)]).values():
        f.result(timeout=30)
    wait_until(lambda: sorted(p for p, v in _leaders(broker, topic).items() if v >= 0)
               == list(range(partitions)), 30, f"leaders of {topic}")
    return _leaders(broker, topic)


def _produce(broker: SamsaBroker, topic: str, values: list[str], partitions: list[int]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    errors: list[object] = []
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=partitions[i % len(partitions)],
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert errors == []


def _consume(broker: SamsaBroker, topic: str, count: int, group: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(100, 0.2) if m.error() is None]
    finally:
        c.close()
    return got


def test_one_cluster_of_two_processes(processes: dict[int, SamsaBroker]) -> None:
    ids = set()
    for b in processes.values():
        admin = _admin(b)  # kept until the future is done
        described = admin.describe_cluster().result(timeout=10)
        assert {n.id for n in described.nodes} == {1, 2}
        assert described.controller.id in (1, 2)
        ids.add(described.cluster_id)
    assert len(ids) == 1  # one cluster id, from the one file


def test_partitions_led_by_each_process_are_produced_and_consumed(
        processes: dict[int, SamsaBroker]) -> None:
    leaders = _create(processes[1], "spread", 4, 1)
    assert sorted(Counter(leaders.values()).values()) == [2, 2]
    values = [f"v{i}" for i in range(200)]
    _produce(processes[1], "spread", values, [0, 1, 2, 3])
    got = _consume(processes[2], "spread", 200, "g-spread")
    assert sorted(got) == sorted(v.encode() for v in values)


def test_a_config_changed_through_one_process_is_seen_through_the_other(
        processes: dict[int, SamsaBroker]) -> None:
    _create(processes[1], "configured", 1, 2)
    resource = ConfigResource("topic", "configured", incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    admin = _admin(processes[1])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(timeout=30)
    other = _admin(processes[2])

    def seen() -> str | None:
        described = other.describe_configs([ConfigResource("topic", "configured")])
        entries = next(iter(described.values())).result(timeout=10)
        return entries["retention.ms"].value

    wait_until(lambda: seen() == "123456", 10, "the config through process 2")


def test_a_scram_user_and_acls_made_through_one_process_hold_on_the_other(
        processes: dict[int, SamsaBroker]) -> None:
    leaders = _create(processes[1], "secured", 2, 1)
    assert set(leaders.values()) == {1, 2}
    _create(processes[1], "unsecured", 2, 1)
    admin = _admin(processes[1])
    upsert = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(timeout=30)
    write = AclBinding(ResourceType.TOPIC, "secured", ResourcePatternType.LITERAL, "User:alice",
                       "*", AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in admin.create_acls([write]).values():
        f.result(timeout=30)
    sent: dict[str, list[object]] = {"ok": [], "refused": []}

    def produce(topic: str) -> None:
        p = Producer({"bootstrap.servers": f"127.0.0.1:{SASL_PORTS[2]}",
                      "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                      "sasl.username": "alice", "sasl.password": "alice-secret",
                      "message.timeout.ms": 10000})
        for part in (0, 1):
            p.produce(topic, b"x", partition=part, on_delivery=lambda err, _m: sent[
                "ok" if err is None else "refused"].append(err))
        p.flush(20)

    # through process 2 (its SASL listener), to the partitions led by each process
    wait_until(lambda: produce("secured") or len(sent["ok"]) >= 2, 30, "alice's writes")
    sent["refused"].clear()
    produce("unsecured")  # no ACL for alice there
    assert sent["refused"] and all(
        e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in sent["refused"])


def test_kill_9_of_a_process(processes: dict[int, SamsaBroker]) -> None:
    """Its registration goes, and the controller moves what it led."""
    single = _create(processes[1], "single", 4, 1)  # one replica: offline while it is gone
    double = _create(processes[1], "double", 2, 2)
    assert set(single.values()) == {1, 2}
    _produce(processes[1], "single", [f"s{i}" for i in range(40)], [0, 1, 2, 3])
    processes[2].kill()
    wait_until(lambda: _brokers(processes[1]) == {1}, 5 * LEASE_MS / 1000,
               "process 2's registration gone")
    wait_until(lambda: set(_leaders(processes[1], "double").values()) == {1}, 30,
               "process 1 leads every partition of the replicated topic")
    assert {p for p, leader in _leaders(processes[1], "single").items() if leader == -1} == \
        {p for p, leader in single.items() if leader == 2}
    _produce(processes[1], "double", [f"d{i}" for i in range(20)], [0, 1])
    _produce(processes[1], "single", [f"t{i}" for i in range(20)],
             [p for p, leader in single.items() if leader == 1])
    processes[2].start()
    wait_until(lambda: _leaders(processes[1], "single") == single, 30,
               "process 2 leads its partitions again")
    got = _consume(processes[1], "single", 60, "g-single")
    assert sorted(got) == sorted([f"s{i}".encode() for i in range(40)]
                                 + [f"t{i}".encode() for i in range(20)])
    assert sorted(_consume(processes[2], "double", 20, "g-double")) == \
        sorted(f"d{i}".encode() for i in range(20))
    assert double  # both partitions had a leader before the kill
