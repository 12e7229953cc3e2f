"""A listener's key store changed live on ZooKeeper brokers: its password is stored in
/config/brokers/<id> encrypted with password.encoder.secret (Kafka's encoding), read back after
a restart, and refused by a broker without the secret."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from cryptography import x509
from kazoo.client import KazooClient

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import CLUSTER_SETTINGS
from tests.security.certs import Certs, issue, make_certs
from tests.support.broker import BrokerProcess, free_port

P12_PASSWORD = "zk-p12-secret"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _broker(zookeeper: ZooKeeperProcess, chroot: str, base: Path, certs: Certs,
            broker_id: int, **extra: object) -> BrokerProcess:
    plain, tls = free_port(), free_port()
    b = BrokerProcess(base / f"broker{broker_id}", broker_id=broker_id, port=plain,
                      name=f"broker{broker_id}", settings={
        **CLUSTER_SETTINGS, **extra,
        "zookeeper.connect": f"{zookeeper.connect_string}/{chroot}",
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}",
        "ssl.keystore.location": str(certs.broker.both),
        "ssl.truststore.location": str(certs.ca)})
    b.tls_port = tls  # type: ignore[attr-defined]
    return b


def _alter(b: BrokerProcess, configs: dict[str, str]) -> str | None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, str(b.broker_id), incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    try:
        admin.incremental_alter_configs([resource])[resource].result(30)
    except KafkaException as exc:
        return f"{exc.args[0].name()}: {exc.args[0].str()}"
    return None


def _connect(port: int, timeout: float = 30) -> socket.socket:
    """A connection to the SSL listener: start() waits for the first listener (PLAINTEXT)
    only, and the broker binds the next one just after it (refused meanwhile, seen once on a
    loaded machine)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, f"nothing listens on {port} after {timeout} s"
            time.sleep(0.1)


def _serial(b: BrokerProcess, certs: Certs) -> int:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    port = b.tls_port  # type: ignore[attr-defined]
    with ctx.wrap_socket(_connect(port), server_hostname="127.0.0.1") as s:
        der = s.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def test_key_store_password_encrypted_in_zookeeper(zookeeper: ZooKeeperProcess, certs: Certs,
                                                   tmp_path: Path) -> None:
    chroot = f"samsa-{uuid.uuid4().hex[:8]}"
    b0 = _broker(zookeeper, chroot, tmp_path, certs, 0,
                 **{"password.encoder.secret": "encoder-secret"})
    b1 = _broker(zookeeper, chroot, tmp_path, certs, 1)
    renewed = issue(certs, "renewed", "/CN=localhost")
    p12 = tmp_path / "renewed.p12"
    subprocess.run(["openssl", "pkcs12", "-export", "-in", str(renewed.cert), "-inkey",
                    str(renewed.key), "-out", str(p12), "-passout", f"pass:{P12_PASSWORD}"],
                   check=True, capture_output=True, timeout=60)
    want = int(x509.load_pem_x509_certificate(renewed.cert.read_bytes()).serial_number)
    configs = {"listener.name.ssl.ssl.keystore.type": "PKCS12",
               "listener.name.ssl.ssl.keystore.location": str(p12),
               "listener.name.ssl.ssl.keystore.password": P12_PASSWORD}
    zk = KazooClient(hosts=f"{zookeeper.connect_string}/{chroot}")
    try:
        b0.start()
        b1.start()
        assert _alter(b1, configs) == "INVALID_CONFIG: Password encoder secret not configured"
        assert _alter(b0, configs) is None
        zk.start(10)
        stored = json.loads(zk.get("/config/brokers/0")[0])["config"]
        assert not zk.exists("/config/brokers/1")
        password = stored["listener.name.ssl.ssl.keystore.password"]
        assert P12_PASSWORD not in password and "encryptedPassword:" in password
        assert stored["listener.name.ssl.ssl.keystore.location"] == str(p12)
        deadline = time.monotonic() + 10
        while _serial(b0, certs) != want:
            assert time.monotonic() < deadline, "the new key store was never served"
            time.sleep(0.2)
        assert _serial(b1, certs) != want
        b0.stop()
        b0.start()  # the password decoded from ZooKeeper
        assert _serial(b0, certs) == want
    finally:
        zk.stop()
        b0.close()
        b1.close()


def _renewed_p12(certs: Certs, tmp_path: Path, name: str) -> tuple[Path, int]:
    """A new PKCS12 key store for the broker (same subject) and its certificate's serial."""
    renewed = issue(certs, name, "/CN=localhost")
    p12 = tmp_path / f"{name}.p12"
    subprocess.run(["openssl", "pkcs12", "-export", "-in", str(renewed.cert), "-inkey",
                    str(renewed.key), "-out", str(p12), "-passout", f"pass:{P12_PASSWORD}"],
                   check=True, capture_output=True, timeout=60)
    return p12, int(x509.load_pem_x509_certificate(renewed.cert.read_bytes()).serial_number)


def _rotated_live(b: BrokerProcess, certs: Certs, p12: Path, want: int) -> None:
    assert _alter(b, {"listener.name.ssl.ssl.keystore.type": "PKCS12",
                      "listener.name.ssl.ssl.keystore.location": str(p12),
                      "listener.name.ssl.ssl.keystore.password": P12_PASSWORD}) is None
    deadline = time.monotonic() + 10
    while _serial(b, certs) != want:
        assert time.monotonic() < deadline, "the new key store was never served"
        time.sleep(0.2)


def test_starts_on_dynamic_key_store_without_the_static_one(
        zookeeper: ZooKeeperProcess, certs: Certs, tmp_path: Path) -> None:
    """Kafka reads /config/brokers/<id> before it makes its listeners: a key store altered
    live serves from the first accept after a restart, and the static one it replaced may
    be gone."""
    static = tmp_path / "static.pem"
    static.write_bytes(certs.broker.both.read_bytes())
    b = _broker(zookeeper, f"samsa-{uuid.uuid4().hex[:8]}", tmp_path, certs, 0,
                **{"password.encoder.secret": "encoder-secret"})
    b.settings["ssl.keystore.location"] = str(static)
    p12, want = _renewed_p12(certs, tmp_path, "renewed")
    try:
        b.start()
        _rotated_live(b, certs, p12, want)
        b.stop()
        static.unlink()
        b.start()
        assert _serial(b, certs) == want
    finally:
        b.close()


def test_old_encoder_secret_re_encodes_the_stored_passwords(
        zookeeper: ZooKeeperProcess, certs: Certs, tmp_path: Path) -> None:
    """password.encoder.old.secret: at start-up the broker decodes its stored passwords with
    the old secret and writes them back to ZooKeeper encoded with the new one (and the
    encoder's cipher now configured)."""
    chroot = f"samsa-{uuid.uuid4().hex[:8]}"
    static = tmp_path / "static.pem"
    static.write_bytes(certs.broker.both.read_bytes())
    b = _broker(zookeeper, chroot, tmp_path, certs, 0, **{"password.encoder.secret": "old"})
    b.settings["ssl.keystore.location"] = str(static)
    p12, want = _renewed_p12(certs, tmp_path, "renewed-again")
    key = "listener.name.ssl.ssl.keystore.password"
    zk = KazooClient(hosts=f"{zookeeper.connect_string}/{chroot}")
    try:
        b.start()
        _rotated_live(b, certs, p12, want)
        zk.start(10)
        before = json.loads(zk.get("/config/brokers/0")[0])["config"]
        b.stop()
        static.unlink()  # the broker starts only if it can read the dynamic key store
        b.settings.update({"password.encoder.secret": "new", "password.encoder.old.secret": "old",
                           "password.encoder.cipher.algorithm": "AES/GCM/NoPadding"})
        b.start()
        assert _serial(b, certs) == want
        after = json.loads(zk.get("/config/brokers/0")[0])["config"]
        assert "cipherAlgorithm:AES/CBC/PKCS5Padding" in before[key]
        assert "cipherAlgorithm:AES/GCM/NoPadding" in after[key]
        assert P12_PASSWORD not in after[key]
        assert {k: v for k, v in after.items() if k != key} == \
            {k: v for k, v in before.items() if k != key}
        b.stop()
        del b.settings["password.encoder.old.secret"]
        b.start()  # the new secret alone reads what ZooKeeper holds now
        assert _serial(b, certs) == want
    finally:
        zk.stop()
        b.close()
