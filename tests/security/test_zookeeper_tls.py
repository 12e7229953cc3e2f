"""Brokers reach a ZooKeeper served on its TLS port only (Netty, client certificates required)
with Kafka's zookeeper.ssl.* properties, create their znodes with zookeeper.set.acl's secure
ACLs, and serve clients; a broker that does not trust ZooKeeper's certificate does not start
and says why."""

from __future__ import annotations

import ssl
import uuid
from pathlib import Path
from typing import Any

import pytest
from kazoo.exceptions import NoAuthError

from samsa.broker.cluster.zk.client import ZkClientSettings
from samsa.broker.cluster.zk.process import ServerTls, ZooKeeperProcess
from samsa.config.schema import BrokerConfig
from tests.cluster.cluster import Cluster, create_topic, wait_until
from tests.security.certs import Certs, make_certs
from tests.support.broker import BrokerProcess, BrokerStartError, free_port

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("zk-certs"))


@pytest.fixture(scope="module")
def secure_zookeeper(certs: Certs, tmp_path_factory: pytest.TempPathFactory):
    ready = ssl.create_default_context(cafile=str(certs.ca))
    ready.load_cert_chain(str(certs.broker.both))
    tls = ServerTls(certs.broker_p12, certs.p12_password, certs.ca, ready, client_auth="need")
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zk-tls"), free_port(), tls=tls).start()
    yield zk
    zk.stop()


def zk_tls(certs: Certs, keystore: Path, **more: Any) -> dict[str, Any]:
    return {"zookeeper.ssl.client.enable": True,
            "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
            "zookeeper.ssl.keystore.location": str(keystore),
            "zookeeper.ssl.truststore.location": str(certs.ca), **more}


def test_cluster_over_zookeeper_tls_with_secure_acls(secure_zookeeper: ZooKeeperProcess,
                                                     certs: Certs, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    settings = zk_tls(certs, certs.broker_p12, **{
        "zookeeper.ssl.keystore.password": certs.p12_password, "zookeeper.set.acl": True,
        "offsets.topic.replication.factor": 2, "transaction.state.log.replication.factor": 2})
    cluster = Cluster(secure_zookeeper, tmp_path, size=2, **settings)
    # the second broker's key store is PEM (key and chain in one file)
    cluster.brokers[1].settings.update(zk_tls(certs, certs.broker.both))
    cluster.start()
    try:
        topic = f"zk-tls-{uuid.uuid4().hex[:6]}"
        create_topic(cluster, topic, 2, rf=2)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(10):
            p.produce(topic, f"m{i}".encode(), partition=i % 2)
        assert p.flush(20) == 0
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

        # Another certificate from the same CA (CN=alice): reads what is not sensitive,
        # changes nothing, reads nothing under /config/users.
        other = ZkClientSettings(BrokerConfig(zk_tls(certs, certs.alice.both)))
        zk = other.client(f"{secure_zookeeper.connect_string}/{cluster.chroot}")
        zk.start(timeout=10)
        try:
            # (a broker whose session expired on a loaded machine is away until it has
            # registered again: wait for that, not for the first look)
            wait_until(lambda: sorted(zk.get_children("/brokers/ids")) == ["0", "1"], 30,
                       "both brokers' registrations, as another certificate reads them")
            acls, _ = zk.get_acls(f"/brokers/topics/{topic}")
            assert {(a.id.scheme, a.id.id, a.perms) for a in acls} == {
                ("x509", "CN=localhost", 31), ("world", "anyone", 1)}
            with pytest.raises(NoAuthError):
                zk.set(f"/brokers/topics/{topic}", b"{}")
            with pytest.raises(NoAuthError):
                zk.get_children("/config/users")
        finally:
            zk.stop()
    finally:
        cluster.close()


def test_broker_that_does_not_trust_zookeeper_fails_to_start(
        secure_zookeeper: ZooKeeperProcess, certs: Certs, tmp_path: Path) -> None:
    untrusted = make_certs(tmp_path / "other").ca  # a CA that did not sign ZooKeeper's cert
    b = BrokerProcess(tmp_path / "data", settings={
        "zookeeper.connect": f"{secure_zookeeper.connect_string}/wrong-trust",
        "zookeeper.connection.timeout.ms": 3000,
        **zk_tls(certs, certs.broker.both, **{
            "zookeeper.ssl.truststore.location": str(untrusted)})})
    with pytest.raises(BrokerStartError):
        b.start(timeout=60)
    log = b.log_text()
    assert "Timed out waiting for a connection to ZooKeeper" in log
    assert "CERTIFICATE_VERIFY_FAILED" in log, log


def test_client_settings(certs: Certs) -> None:
    from samsa.broker.cluster.zk.client import tls_context
    from samsa.config.schema import ConfigError

    def ctx(**props: Any) -> ssl.SSLContext:
        made = tls_context(BrokerConfig(zk_tls(certs, certs.broker.both, **props)))
        assert made is not None
        return made

    assert tls_context(BrokerConfig({})) is None
    tls12 = ctx()  # Kafka's zookeeper.ssl.protocol default: TLSv1.2
    assert (tls12.maximum_version, tls12.check_hostname) == (ssl.TLSVersion.TLSv1_2, True)
    tls13 = ctx(**{"zookeeper.ssl.enabled.protocols": "TLSv1.3",
                   "zookeeper.ssl.endpoint.identification.algorithm": ""})
    assert (tls13.minimum_version, tls13.check_hostname) == (ssl.TLSVersion.TLSv1_3, False)
    with pytest.raises(ConfigError, match="zookeeper.ssl.keystore.location"):
        ctx(**{"zookeeper.ssl.keystore.location": str(certs.ca)})  # no private key
    with pytest.raises(ConfigError, match="zookeeper.set.acl is true"):
        ZkClientSettings(BrokerConfig({"zookeeper.set.acl": True}))
    with pytest.raises(ConfigError, match="JKS"):
        ZkClientSettings(BrokerConfig({"zookeeper.ssl.client.enable": True,
                                       "zookeeper.ssl.truststore.location": "/x/trust.jks"}))
