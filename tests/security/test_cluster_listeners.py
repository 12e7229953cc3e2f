"""A ZooKeeper cluster with several listeners: brokers register every endpoint as Kafka does,
Metadata answers with the brokers' addresses on the listener the request came in on, and a
SCRAM user added through one broker authenticates on another."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import CLUSTER_SETTINGS
from tests.security.certs import Certs, make_certs
from tests.security.clients import roundtrip, sasl_settings, ssl_settings
from tests.support.broker import BrokerProcess, free_port

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"), free_port()).start()
    try:
        yield zk
    finally:
        zk.stop()


def _brokers(admin_bootstrap: str, security: dict[str, object]) -> set[tuple[int, int]]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=admin_bootstrap, **security)
    try:
        return {(b["broker_id"], b["port"]) for b in admin.describe_cluster()["brokers"]}
    finally:
        admin.close()


def test_cluster_endpoints_per_listener_and_scram_users_in_zookeeper(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    certs: Certs = make_certs(tmp_path / "certs")
    chroot = f"samsa-{uuid.uuid4().hex[:8]}"
    ports = [{"PLAINTEXT": free_port(), "SSL": free_port(), "SASL_PLAINTEXT": free_port()}
             for _ in range(2)]
    brokers = [
        BrokerProcess(tmp_path / f"b{i}" / "data", broker_id=i, port=p["PLAINTEXT"],
                      name=f"broker{i}", settings={
            **CLUSTER_SETTINGS,
            "zookeeper.connect": f"{zookeeper.connect_string}/{chroot}",
            "listeners": ",".join(f"{n}://127.0.0.1:{port}" for n, port in p.items()),
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "ssl.keystore.location": str(certs.broker.both),
        })
        for i, p in enumerate(ports)
    ]
    try:
        for b in brokers:
            b.start()
        deadline = time.monotonic() + 30
        while len(_brokers(brokers[0].bootstrap, {})) < 2 and time.monotonic() < deadline:
            time.sleep(0.3)
        # Each listener's clients are told every broker's address on that listener.
        for name, security in [("PLAINTEXT", {}), ("SSL", ssl_settings("kafka-python",
                                                                       str(certs.ca)))]:
            for p in ports:
                assert _brokers(f"127.0.0.1:{p[name]}", security) == {
                    (i, q[name]) for i, q in enumerate(ports)}, name
        # Metadata too (librdkafka asks Metadata for the brokers).
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[1]['SSL']}",
                             **ssl_settings("confluent-kafka", str(certs.ca))})
        seen = {(b.id, b.port) for b in admin.list_topics(timeout=20).brokers.values()}
        assert seen == {(i, q["SSL"]) for i, q in enumerate(ports)}
        zk = KazooClient(hosts=f"{zookeeper.connect_string}/{chroot}")
        zk.start(timeout=10)
        try:
            doc = json.loads(zk.get("/brokers/ids/1")[0])
            assert sorted(doc["endpoints"]) == sorted(
                f"{n}://127.0.0.1:{port}" for n, port in ports[1].items())
            assert doc["listener_security_protocol_map"] == {
                "PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT"}

            # A SCRAM user added through broker 0 is stored as Kafka stores it ...
            from tests.security.test_sasl import _add_scram_user

            _add_scram_user(brokers[0].bootstrap, "erin", "erin-secret")
            config = json.loads(zk.get("/config/users/erin")[0])["config"]
            assert set(config) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
            assert config["SCRAM-SHA-256"].startswith("salt=")
            assert ",stored_key=" in config["SCRAM-SHA-256"]
            assert config["SCRAM-SHA-256"].endswith(",iterations=4096")
        finally:
            zk.stop()
            zk.close()
        # ... and authenticates on broker 1.
        security = sasl_settings("confluent-kafka", "SCRAM-SHA-256", "erin", "erin-secret")
        got = roundtrip("confluent-kafka", f"127.0.0.1:{ports[1]['SASL_PLAINTEXT']}", security,
                        n=2)
        assert got == [b"confluent-kafka-0", b"confluent-kafka-1"]
    finally:
        for b in brokers:
            b.close()
