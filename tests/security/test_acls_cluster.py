"""ACLs in a ZooKeeper cluster: stored in Kafka's layout (/kafka-acl, /kafka-acl-extended,
change notifications), every broker's cache follows them, and an ACL created through one
broker is enforced by another; replication keeps working with the authorizer on when the
PLAINTEXT inter-broker listener's principal (ANONYMOUS) is a super user."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient

from samsa.broker.cluster.metadata_store import BrokerInfo
from samsa.broker.cluster.zk.process import ZooKeeperProcess
from samsa.broker.cluster.zk.store import ZkMetadataStore
from samsa.broker.security.authorizer import (
    AccessControlEntry,
    AclBindingFilter,
    PatternType,
    PermissionType,
    ResourcePattern,
)
from samsa.broker.security.authorizer import AclBinding as Binding
from samsa.broker.security.authorizer import AclOperation as Op
from samsa.broker.security.authorizer import ResourceType as RT
from tests.cluster.cluster import CLUSTER_SETTINGS
from tests.support.broker import BrokerProcess, free_port

pytestmark = pytest.mark.timeout(300)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"), free_port()).start()
    try:
        yield zk
    finally:
        zk.stop()


async def _until(cond: Callable[[], bool], what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_acls_in_zookeeper_reach_every_store(zookeeper: ZooKeeperProcess) -> None:
    connect = f"{zookeeper.connect_string}/acl{uuid.uuid4().hex[:8]}"

    def store(i: int) -> ZkMetadataStore:
        return ZkMetadataStore(connect, BrokerInfo(i, "127.0.0.1", 9000 + i), 4000)

    a, b = store(1), store(2)
    await a.start()
    await b.start()
    c = None
    lit = Binding(ResourcePattern(RT.TOPIC, "orders", PatternType.LITERAL),
                  AccessControlEntry("User:alice", "*", Op.READ, PermissionType.ALLOW))
    pre = Binding(ResourcePattern(RT.GROUP, "team-", PatternType.PREFIXED),
                  AccessControlEntry("User:bob", "10.0.0.1", Op.ALL, PermissionType.DENY))
    try:
        assert await a.create_acls([lit, pre]) == [None, None]
        await _until(lambda: set(b.acls().bindings()) == {lit, pre}, "b sees a's ACLs")
        # Kafka's layout and JSON, and a change notification per resource.
        zk = a.session.zk
        assert json.loads(zk.get("/kafka-acl/Topic/orders")[0]) == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
             "host": "*"}]}
        assert json.loads(zk.get("/kafka-acl-extended/prefixed/Group/team-")[0])["acls"] == [
            {"principal": "User:bob", "permissionType": "Deny", "operation": "All",
             "host": "10.0.0.1"}]
        assert zk.get_children("/kafka-acl-changes") and \
            zk.get_children("/kafka-acl-extended-changes")
        c = store(3)  # a broker started later reads them all
        await c.start()
        assert set(c.acls().bindings()) == {lit, pre}
        any_group = AclBindingFilter(RT.GROUP, None, PatternType.ANY, None, None, Op.ANY,
                                     PermissionType.ANY)
        assert await b.delete_acls([any_group]) == [[pre]]
        await _until(lambda: set(a.acls().bindings()) == {lit}, "a sees b's deletion")
        await _until(lambda: set(c.acls().bindings()) == {lit}, "c sees b's deletion")
        assert not zk.exists("/kafka-acl-extended/prefixed/Group/team-")
        # An ACL this broker has not heard of (written without a notification) is still
        # deleted by a filter naming its resource exactly, as Kafka's AclAuthorizer does.
        zk.create("/kafka-acl/Topic/unseen", json.dumps({"version": 1, "acls": [
            {"principal": "User:carol", "permissionType": "Allow", "operation": "Write",
             "host": "*"}]}).encode())
        exact = AclBindingFilter(RT.TOPIC, "unseen", PatternType.LITERAL, None, None, Op.ANY,
                                 PermissionType.ANY)
        assert [x.entry.principal for x in (await b.delete_acls([exact]))[0]] == ["User:carol"]
        assert not zk.exists("/kafka-acl/Topic/unseen")
        # A name that cannot be a znode is refused, as Kafka's AclAuthorizer does.
        bad = Binding(ResourcePattern(RT.TOPIC, "a/b", PatternType.LITERAL), lit.entry)
        assert (await a.create_acls([bad]))[0] is not None
    finally:
        for s in (a, b, c):
            if s is not None:
                await s.close()


def test_acl_created_through_one_broker_is_enforced_by_another(
        zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    chroot = f"samsa-{uuid.uuid4().hex[:8]}"
    ports = [{"PLAINTEXT": free_port(), "SASL_PLAINTEXT": free_port()} for _ in range(2)]
    brokers = [
        BrokerProcess(tmp_path / f"b{i}" / "data", broker_id=i, port=p["PLAINTEXT"],
                      name=f"broker{i}", settings={
            **CLUSTER_SETTINGS,
            "zookeeper.connect": f"{zookeeper.connect_string}/{chroot}",
            "listeners": ",".join(f"{n}://127.0.0.1:{port}" for n, port in p.items()),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            # the PLAINTEXT inter-broker listener's principal
            "super.users": "User:ANONYMOUS",
        })
        for i, p in enumerate(ports)
    ]
    try:
        for b in brokers:
            b.start()
        admin0 = AdminClient({"bootstrap.servers": brokers[0].bootstrap})  # ANONYMOUS: super
        topic = f"x-{uuid.uuid4().hex[:6]}"
        # Led by broker 1, followed by broker 0 (a follower fetch needs CLUSTER_ACTION).
        admin0.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 0]])])[topic].result(20)
        for f in admin0.create_acls([AclBinding(
                ResourceType.TOPIC, "x-", ResourcePatternType.PREFIXED, "User:alice", "*",
                AclOperation.WRITE, AclPermissionType.ALLOW)]).values():
            f.result(20)

        def produce() -> KafkaError | None:
            errors: list[KafkaError | None] = []
            p = Producer({"bootstrap.servers": f"127.0.0.1:{ports[1]['SASL_PLAINTEXT']}",
                          "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                          "sasl.username": "alice", "sasl.password": "alice-secret",
                          "acks": "all", "message.timeout.ms": 10000})
            p.produce(topic, b"v", on_delivery=lambda err, _m: errors.append(err))
            p.flush(20)
            return errors[0] if errors else KafkaError(KafkaError._TIMED_OUT)

        deadline = time.monotonic() + 20
        while (err := produce()) is not None and time.monotonic() < deadline:
            time.sleep(0.2)  # until broker 1 has the ALLOW (and the topic's leader)
        assert err is None, err  # acks=all: broker 0 replicated it
        for f in admin0.create_acls([AclBinding(
                ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                AclOperation.WRITE, AclPermissionType.DENY)]).values():
            f.result(20)
        deadline = time.monotonic() + 20
        while (err := produce()) is None and time.monotonic() < deadline:
            time.sleep(0.2)  # until broker 1 has the DENY
        assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
        zk = KazooClient(hosts=f"{zookeeper.connect_string}/{chroot}")
        zk.start()
        try:
            assert json.loads(zk.get(f"/kafka-acl/Topic/{topic}")[0])["acls"][0][
                "permissionType"] == "Deny"
        finally:
            zk.stop()
            zk.close()
    finally:
        for b in brokers:
            b.close()
