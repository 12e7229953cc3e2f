"""Brokers log in to a ZooKeeper that requires SASL (DIGEST-MD5, its JAAS Server section) with
the JAAS Client section Kafka's brokers read, named by java.security.auth.login.config (as a
broker property, or in KAFKA_OPTS), on its plain and on its TLS port; with zookeeper.set.acl
their znodes belong to sasl:<username>; a broker with a wrong password, or with no login, does
not start and says why."""

from __future__ import annotations

import ssl
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import NoAuthError

from samsa.broker.cluster.zk.client import ZkClientSettings
from samsa.broker.cluster.zk.process import ServerSasl, ServerTls, ZooKeeperProcess
from samsa.config.schema import BrokerConfig
from samsa.testing import _tail
from tests.cluster.cluster import Cluster, create_topic, wait_until
from tests.security.certs import Certs, make_certs
from tests.support.broker import BrokerProcess, BrokerStartError, free_port

pytestmark = pytest.mark.timeout(300)

USERS = {"broker": "broker-secret", "alice": "alice-secret"}


def client_jaas(path: Path, user: str, password: str, context: str = "Client") -> Path:
    path.write_text(
        f"// the ZooKeeper login\n{context} {{\n"
        f"  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  username="{user}"\n  password="{password}";\n}};\n')
    return path


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("zk-sasl-certs"))


@pytest.fixture(scope="module", params=["plain", "tls"])
def sasl_zookeeper(request: pytest.FixtureRequest, certs: Certs,
                   tmp_path_factory: pytest.TempPathFactory):
    """A ZooKeeper that requires SASL; on its TLS port only (no client certificates, so the
    only identity is the SASL one) for "tls"."""
    tls = None
    if request.param == "tls":
        ready = ssl.create_default_context(cafile=str(certs.ca))
        tls = ServerTls(certs.broker_p12, certs.p12_password, certs.ca, ready, client_auth="none")
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zk-sasl"), free_port(), tls=tls,
                          sasl=ServerSasl(USERS)).start()
    yield zk
    zk.stop()


def zk_settings(zk: ZooKeeperProcess, certs: Certs) -> dict[str, Any]:
    if zk.tls is None:
        return {}
    return {"zookeeper.ssl.client.enable": True,
            "zookeeper.ssl.truststore.location": str(certs.ca)}


def test_cluster_over_zookeeper_sasl_with_secure_acls(sasl_zookeeper: ZooKeeperProcess,
                                                      certs: Certs, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    # broker 0 names its JAAS file with the property; broker 1 as Kafka's users do, in
    # KAFKA_OPTS, with its own login context name
    jaas0 = client_jaas(tmp_path / "broker0_jaas.conf", "broker", USERS["broker"])
    jaas1 = client_jaas(tmp_path / "broker1_jaas.conf", "broker", USERS["broker"],
                        context="ZkLogin")
    cluster = Cluster(sasl_zookeeper, tmp_path, size=2, **{
        **zk_settings(sasl_zookeeper, certs), "zookeeper.set.acl": True,
        "offsets.topic.replication.factor": 2, "transaction.state.log.replication.factor": 2})
    cluster.brokers[0].settings["java.security.auth.login.config"] = str(jaas0)
    cluster.brokers[1].env["KAFKA_OPTS"] = (f"-Xmx1g -Djava.security.auth.login.config={jaas1} "
                                            "-Dzookeeper.sasl.clientconfig=ZkLogin")
    cluster.start()
    try:
        topic = f"zk-sasl-{uuid.uuid4().hex[:6]}"
        create_topic(cluster, topic, 2, rf=2)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(10):
            p.produce(topic, f"m{i}".encode(), partition=i % 2)
        assert p.flush(20) == 0
        del p  # destroyed now, not left reconnecting to this cluster through later tests
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "g",
                      "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got: list[bytes] = []
        for _ in range(60):
            m = c.poll(1)
            if m is not None and not m.error():
                got.append(m.value())
            if len(got) == 10:
                break
        c.close()
        assert sorted(got) == sorted(f"m{i}".encode() for i in range(10))
        for b in cluster.brokers:
            assert "ZooKeeper client login: SASL DIGEST-MD5 as 'broker'" in b.log_text()

        # Another SASL user: reads what is not sensitive, changes nothing, reads nothing
        # under /config/users.
        alice_jaas = client_jaas(tmp_path / "alice_jaas.conf", "alice", USERS["alice"])
        other = ZkClientSettings(BrokerConfig({
            **zk_settings(sasl_zookeeper, certs),
            "java.security.auth.login.config": str(alice_jaas)}), environ={})
        zk = other.client(f"{sasl_zookeeper.connect_string}/{cluster.chroot}")
        zk.start(timeout=10)
        try:
            # (a broker whose session expired on a loaded machine is away until it has
            # registered again: wait for that, not for the first look)
            seen: list[list[str]] = [[]]

            def registered() -> bool:
                seen[0] = sorted(zk.get_children("/brokers/ids"))
                return seen[0] == ["0", "1"]

            try:
                wait_until(registered, 30, "both brokers' registrations, as another user "
                                           "reads them")
            except AssertionError as exc:
                # (the brokers' logs come with every failing test's report: tests/conftest.py)
                raise AssertionError(f"{exc}; last read {seen[0]}\n"
                                     f"{_tail(sasl_zookeeper.log_path)}"
                                     ) from None
            acls, _ = zk.get_acls(f"/brokers/topics/{topic}")
            assert {(a.id.scheme, a.id.id, a.perms) for a in acls} == {
                ("sasl", "broker", 31), ("world", "anyone", 1)}
            with pytest.raises(NoAuthError):
                zk.set(f"/brokers/topics/{topic}", b"{}")
            with pytest.raises(NoAuthError):
                zk.get_children("/config/users")
        finally:
            zk.stop()
    finally:
        cluster.close()


def test_broker_without_a_good_login_fails_to_start(sasl_zookeeper: ZooKeeperProcess,
                                                    certs: Certs, tmp_path: Path) -> None:
    wrong = client_jaas(tmp_path / "wrong_jaas.conf", "broker", "not-the-password")
    cases = {
        "wrong-password": ({"java.security.auth.login.config": str(wrong)},
                           "refused the SASL DIGEST-MD5 as 'broker' (login context 'Client' "
                           f"of {wrong})"),
        "no-login": ({}, "ZooKeeper requires SASL authentication and the broker has no SASL "
                         "login"),
    }
    for name, (login, why) in cases.items():
        b = BrokerProcess(tmp_path / name / "data", name=name, settings={
            "zookeeper.connect": f"{sasl_zookeeper.connect_string}/{name}",
            "zookeeper.connection.timeout.ms": 30000,
            **zk_settings(sasl_zookeeper, certs), **login})
        t0 = time.monotonic()
        with pytest.raises(BrokerStartError):
            b.start(timeout=60)
        log = b.log_text()
        assert ("Auth failed either before or while waiting for connection to ZooKeeper at "
                f"{sasl_zookeeper.connect_string}/{name}: ") in log, log
        assert why in log, log
        # refused at once, not after zookeeper.connection.timeout.ms
        assert time.monotonic() - t0 < 25, log


def test_broker_logs_in_again_after_zookeeper_refused_it_for_a_while(tmp_path: Path) -> None:
    """A login refused once the broker runs (ZooKeeper restarted with the broker's password
    changed) does not end the broker's ZooKeeper client, as kazoo ends one: like Kafka's
    ZooKeeperClient once initialized, it keeps trying, and works again once ZooKeeper takes
    its login again."""
    from confluent_kafka.admin import AdminClient, NewTopic

    port = free_port()
    zk = ZooKeeperProcess(tmp_path / "zk", port, sasl=ServerSasl(USERS)).start()
    jaas = client_jaas(tmp_path / "broker_jaas.conf", "broker", USERS["broker"])
    b = BrokerProcess(tmp_path / "broker" / "data", name="broker", settings={
        "zookeeper.connect": f"{zk.connect_string}/relogin",
        "zookeeper.session.timeout.ms": 3000,
        "java.security.auth.login.config": str(jaas)})
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})

    def controller() -> bool:  # the broker runs the cluster: ZooKeeper works for it
        return admin.list_topics(timeout=10).controller_id == 0

    try:
        wait_until(controller, 30, "the broker controller")
        zk.stop()
        zk = ZooKeeperProcess(tmp_path / "zk", port, sasl=ServerSasl(
            {**USERS, "broker": "rotated"})).start()
        refused = "ZooKeeper refused the SASL DIGEST-MD5 as 'broker'"
        wait_until(lambda: b.log_text().count(refused) >= 3, 30,
                   "the broker's login refused, and tried again")
        zk.stop()
        zk = ZooKeeperProcess(tmp_path / "zk", port, sasl=ServerSasl(USERS)).start()
        # A topic is created (and led) only through a working ZooKeeper session
        wait_until(controller, 30, "the broker controller again")
        admin.create_topics([NewTopic("after-relogin", 1, 1)])["after-relogin"].result(30)

        def led() -> bool:
            parts = admin.list_topics("after-relogin", timeout=10).topics[
                "after-relogin"].partitions
            return bool(parts) and parts[0].leader == 0

        wait_until(led, 30, "the new topic led by the broker")
        assert b.is_running()
    finally:
        b.close()
        zk.stop()
