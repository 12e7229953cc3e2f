"""A ZooKeeper cluster whose only listener is SASL_SSL with client certificates required: the
brokers reach each other over it (TLS verified against the trust store, their key store
presented, SASL/PLAIN as User:broker from the listener's JAAS configuration), so with an
authorizer `super.users=User:broker` is all the brokers need. Replication (RF 3), a transaction
over partitions led by different brokers (markers between brokers), Kafka's Java client, and
reading on after a leader is killed."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import CLUSTER_SETTINGS
from tests.security.certs import make_certs
from tests.support.broker import BrokerProcess, free_port
from tests.support.java import compile_java, run_java_tool

pytestmark = pytest.mark.timeout(600)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="broker" password="broker-secret" '
        'user_broker="broker-secret" user_alice="alice-secret";')
SRC = Path(__file__).parent / "java" / "SecureClient.java"
TIMEOUT = 30


def wait_for(what: str, check: Any, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_sasl_ssl_only_cluster(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    certs = make_certs(tmp_path / "certs")
    zk = ZooKeeperProcess(tmp_path / "zk", free_port()).start()
    chroot = f"{zk.connect_string}/samsa-{uuid.uuid4().hex[:8]}"
    ports = [free_port() for _ in range(3)]
    brokers = [BrokerProcess(tmp_path / f"b{i}", broker_id=i, port=port, name=f"broker{i}",
                             settings={
        **CLUSTER_SETTINGS,
        "zookeeper.connect": chroot,
        "listeners": f"SASL_SSL://127.0.0.1:{port}",
        "security.inter.broker.protocol": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.location": str(certs.broker.both),
        "ssl.truststore.location": str(certs.ca),
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker",
        "default.replication.factor": 3,
        "min.insync.replicas": 2,
    }) for i, port in enumerate(ports)]
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)

    def security(user: str) -> dict[str, Any]:
        return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanisms": "PLAIN", "sasl.username": user,
                "sasl.password": f"{user}-secret", "ssl.ca.location": str(certs.ca),
                "ssl.certificate.location": str(certs.alice.cert),
                "ssl.key.location": str(certs.alice.key)}

    try:
        for b in brokers:
            b.start()
        admin = AdminClient(security("broker"))
        wait_for("3 brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3)
        topic = "ib-topic"
        (f,) = admin.create_topics([NewTopic(topic, 2, replica_assignment=[
            [0, 1, 2], [1, 2, 0]])]).values()
        f.result(timeout=TIMEOUT)
        acls = [AclBinding(rtype, "ib-", ResourcePatternType.PREFIXED, "User:alice", "*",
                           AclOperation.ALL, AclPermissionType.ALLOW)
                for rtype in (ResourceType.TOPIC, ResourceType.GROUP,
                              ResourceType.TRANSACTIONAL_ID)]
        for f in admin.create_acls(acls).values():
            f.result(timeout=TIMEOUT)

        def isr() -> dict[int, list[int]]:
            md = admin.list_topics(topic, timeout=10).topics[topic]
            return {p: sorted(pm.isrs) for p, pm in md.partitions.items()}

        def leaders() -> dict[int, int]:
            md = admin.list_topics(topic, timeout=10).topics[topic]
            return {p: pm.leader for p, pm in md.partitions.items()}

        wait_for("leaders 0 and 1", lambda: leaders() == {0: 0, 1: 1})

        # A transaction over partition 0 (led by broker 0) and 1 (led by broker 1), as alice.
        p = Producer({**security("alice"), "transactional.id": "ib-txn"})
        p.init_transactions(TIMEOUT)
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, f"txn-{i}".encode(), partition=i % 2)
        p.commit_transaction(TIMEOUT)
        # The followers copied both partitions over SASL_SSL.
        wait_for("full ISR", lambda: isr() == {0: [0, 1, 2], 1: [0, 1, 2]})

        def read_committed(group: str, n: int) -> list[bytes]:
            c = Consumer({**security("alice"), "group.id": group,
                          "isolation.level": "read_committed",
                          "auto.offset.reset": "earliest"})
            c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            got: list[bytes] = []
            deadline = time.monotonic() + TIMEOUT
            try:
                while len(got) < n and time.monotonic() < deadline:
                    m = c.poll(0.5)
                    if m is not None and m.error() is None:
                        got.append(m.value())
            finally:
                c.close()
            return sorted(got)

        # Committed on both leaders: the markers reached them (at least one from another
        # broker, the coordinator being on one of them).
        assert read_committed("ib-g1", 4) == [f"txn-{i}".encode() for i in range(4)]

        # Kafka's Java client over SASL_SSL, as alice.
        props = tmp_path / "client.properties"
        props.write_text(
            f"bootstrap.servers={bootstrap}\nsecurity.protocol=SASL_SSL\n"
            "sasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="alice" password="alice-secret";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n"
            f"ssl.keystore.type=PEM\nssl.keystore.location={certs.alice.both}\n")
        classes = compile_java([SRC], classpath="clients39")
        res = run_java_tool("SecureClient", [str(props), "ib-java", "10", "0"],
                            classpath="clients39", extra_classpath=[classes], timeout=240)
        assert res.returncode == 0 and "CONSUMED 10" in res.stdout, res.describe()

        # Kill partition 0's leader: another broker takes over and the data is still there.
        brokers[0].kill9()
        wait_for("a new leader", lambda: leaders()[0] in (1, 2))
        p2 = Producer({**security("alice"), "acks": "all"})
        p2.produce(topic, b"after", partition=0)
        assert p2.flush(TIMEOUT) == 0
        got = read_committed("ib-g2", 5)
        assert got == sorted([b"after", *(f"txn-{i}".encode() for i in range(4))])
        for b in brokers[1:]:
            assert "authenticated as User:broker (PLAIN)" in b.log_tail(2000)
    finally:
        for b in brokers:
            b.close()
        zk.stop()
