"""A TLS listener's key and trust stores changed while the broker runs (Kafka's dynamic
listener.name.<listener>.ssl.* broker configs): checked before they are stored, then served to
new connections while the open ones keep theirs."""

from __future__ import annotations

import shutil
import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)
from cryptography import x509

from tests.security.certs import Certs, Pair, issue, other_ca
from tests.security.clients import roundtrip, ssl_settings
from tests.support.broker import BrokerProcess, free_port
from tests.support.java import run_java_tool

P12_PASSWORD = "dyn-p12-secret"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[BrokerProcess]:
    plain, tls, mtls = free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("dyntls") / "data", port=plain, name="dyn-tls",
                      settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},"
                     f"MTLS://127.0.0.1:{mtls}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.keystore.location": str(certs.broker.both),
        "ssl.truststore.location": str(certs.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "inter.broker.listener.name": "SSL",
    })
    b.tls_port, b.mtls_port = tls, mtls  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


def _alter(b: BrokerProcess, configs: dict[str, str]) -> str | None:
    """IncrementalAlterConfigs SET on broker 0: None, or the error's name and message."""
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    try:
        admin.incremental_alter_configs([resource])[resource].result(30)
    except KafkaException as exc:
        err = exc.args[0]
        return f"{err.name()}: {err.str()}"
    return None


def _alter_default(b: BrokerProcess, configs: dict[str, str]) -> str:
    """kafka-configs --entity-default --alter (the Python clients cannot name the cluster
    default): what it prints."""
    res = run_java_tool("kafka.admin.ConfigCommand", [
        "--bootstrap-server", b.bootstrap, "--entity-type", "brokers", "--entity-default",
        "--alter", "--add-config", ",".join(f"{k}={v}" for k, v in configs.items())])
    return res.stdout + res.stderr


def _connect(port: int, certs: Certs, client: Pair | None = None) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if client is not None:
        ctx.load_cert_chain(str(client.cert), str(client.key))
    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                           server_hostname="127.0.0.1")


def _serial(s: ssl.SSLSocket) -> int:
    der = s.getpeercert(binary_form=True)
    assert der is not None
    return int(x509.load_der_x509_certificate(der).serial_number)


def _serial_of(pair: Pair) -> int:
    return int(x509.load_pem_x509_certificate(pair.cert.read_bytes()).serial_number)


def _new_serial(b: BrokerProcess, certs: Certs) -> int:
    with _connect(b.tls_port, certs) as s:  # type: ignore[attr-defined]
        return _serial(s)


def _answers(s: ssl.SSLSocket) -> bool:
    """An ApiVersions round trip on an open connection."""
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    s.sendall(struct.pack(">i", len(body)) + body)
    head = b""
    while len(head) < 8:
        chunk = s.recv(8 - len(head))
        if not chunk:
            return False
        head += chunk
    return struct.unpack(">ii", head)[1] == 7


def _wait_serial(b: BrokerProcess, certs: Certs, want: int) -> None:
    deadline = time.monotonic() + 10
    while _new_serial(b, certs) != want:
        assert time.monotonic() < deadline, "the new certificate was never served"
        time.sleep(0.2)


def test_refused_key_stores_change_nothing(broker: BrokerProcess, certs: Certs,
                                           tmp_path: Path) -> None:
    before = _new_serial(broker, certs)
    stranger = issue(certs, "stranger", "/CN=stranger")  # another subject DN
    assert _alter(broker, {"listener.name.ssl.ssl.keystore.location": str(stranger.both)}) \
        == "INVALID_REQUEST: Invalid dynamic configuration"
    assert "Keystore DistinguishedName does not match" in broker.log_tail(50)
    # A PKCS12 key store with a wrong password.
    p12 = tmp_path / "wrong.p12"
    subprocess.run(["openssl", "pkcs12", "-export", "-in", str(certs.broker.cert), "-inkey",
                    str(certs.broker.key), "-out", str(p12), "-passout",
                    f"pass:{P12_PASSWORD}"], check=True, capture_output=True, timeout=60)
    assert _alter(broker, {"listener.name.ssl.ssl.keystore.type": "PKCS12",
                           "listener.name.ssl.ssl.keystore.location": str(p12),
                           "listener.name.ssl.ssl.keystore.password": "wrong"}) \
        == "INVALID_REQUEST: Invalid dynamic configuration"
    # Kafka's refusals of the other forms.
    assert _alter(broker, {"ssl.keystore.location": str(certs.broker.both)}) == (
        "INVALID_REQUEST: These security configs can be dynamically updated only per-listener "
        "using the listener prefix: Set(ssl.keystore.location)")
    assert "InvalidRequestException: Cannot update these configs at default cluster level, " \
        "broker id must be specified: Set(listener.name.ssl.ssl.keystore.location)" in \
        _alter_default(broker, {"listener.name.ssl.ssl.keystore.location": str(certs.broker.both)})
    assert _alter(broker, {"listener.name.mtls.ssl.client.auth": "none"}) \
        == "INVALID_REQUEST: Invalid dynamic configuration"
    assert "Configs cannot be updated dynamically for existing listener ListenerName(MTLS)" \
        in broker.log_tail(50)
    # Nor does Kafka change a listener's SASL settings live.
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'
    assert _alter(broker, {"listener.name.ssl.plain.sasl.jaas.config": jaas}) \
        == "INVALID_REQUEST: Invalid dynamic configuration"
    assert _new_serial(broker, certs) == before
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(30)
    assert not [k for k in entries if k.startswith("listener.name.ssl.")]


def test_new_key_store_for_new_connections(broker: BrokerProcess, certs: Certs,
                                           tmp_path: Path) -> None:
    """kafka-configs sets a PKCS12 key store with a new certificate of the same subject: new
    TLS clients see it, the connections already open keep working."""
    old = _connect(broker.tls_port, certs)  # type: ignore[attr-defined]
    old_serial = _serial(old)
    producer = Producer(ssl_settings("confluent-kafka", str(certs.ca))
                        | {"bootstrap.servers": f"127.0.0.1:{broker.tls_port}"})  # type: ignore[attr-defined]
    producer.produce("dyn-tls", b"before")
    assert producer.flush(30) == 0
    renewed = issue(certs, "renewed", "/CN=localhost")
    p12 = tmp_path / "renewed.p12"
    subprocess.run(["openssl", "pkcs12", "-export", "-in", str(renewed.cert), "-inkey",
                    str(renewed.key), "-out", str(p12), "-passout", f"pass:{P12_PASSWORD}"],
                   check=True, capture_output=True, timeout=60)
    run_java_tool("kafka.admin.ConfigCommand", [
        "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", "--entity-name",
        "0", "--alter", "--add-config",
        f"listener.name.ssl.ssl.keystore.type=PKCS12,listener.name.ssl.ssl.keystore.location="
        f"{p12},listener.name.ssl.ssl.keystore.password={P12_PASSWORD}"]).check()
    _wait_serial(broker, certs, _serial_of(renewed))
    assert old_serial != _serial_of(renewed)
    assert _serial(old) == old_serial and _answers(old)
    old.close()
    producer.produce("dyn-tls", b"after")
    assert producer.flush(30) == 0
    bootstrap = f"127.0.0.1:{broker.tls_port}"  # type: ignore[attr-defined]
    assert roundtrip("kafka-python", bootstrap, ssl_settings("kafka-python", str(certs.ca)),
                     n=1) == [b"kafka-python-0"]
    described = run_java_tool("kafka.admin.ConfigCommand", [
        "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", "--entity-name",
        "0", "--describe"]).check().stdout
    assert f"listener.name.ssl.ssl.keystore.location={p12} sensitive=false" in described
    assert "listener.name.ssl.ssl.keystore.password=null sensitive=true" in described
    assert P12_PASSWORD not in described


def test_key_store_file_rewritten_is_read_when_altered_again(
        broker: BrokerProcess, certs: Certs, tmp_path: Path) -> None:
    """Kafka re-reads a key store file changed in place when the same config is set again."""
    first, second = (issue(certs, n, "/CN=localhost") for n in ("first", "second"))
    path = tmp_path / "keystore.pem"
    shutil.copy(first.both, path)
    entries = {"listener.name.ssl.ssl.keystore.type": "PEM",
               "listener.name.ssl.ssl.keystore.location": str(path),
               "listener.name.ssl.ssl.keystore.password": ""}
    assert _alter(broker, entries) is None
    _wait_serial(broker, certs, _serial_of(first))
    shutil.copy(second.both, path)
    time.sleep(1)
    assert _new_serial(broker, certs) == _serial_of(first)  # not before it is altered again
    assert _alter(broker, entries) is None
    _wait_serial(broker, certs, _serial_of(second))


def _accepted(port: int, certs: Certs, client: Pair) -> bool:
    """Whether the listener serves a client presenting `client`'s certificate (with TLS 1.3
    a refused client certificate shows as a closed connection after the handshake)."""
    try:
        with _connect(port, certs, client) as s:
            return _answers(s)
    except (ssl.SSLError, OSError):
        return False


def test_trust_store_change_accepts_a_new_client_ca(broker: BrokerProcess, certs: Certs,
                                                    tmp_path: Path) -> None:
    port = broker.mtls_port  # type: ignore[attr-defined]
    assert not _accepted(port, certs, certs.rogue)
    with _connect(port, certs, certs.alice) as kept:
        bundle = tmp_path / "cas.pem"
        bundle.write_text(certs.ca.read_text() + other_ca(certs).read_text())
        assert _alter(broker, {"listener.name.mtls.ssl.truststore.location": str(bundle)}) \
            is None
        deadline = time.monotonic() + 10
        while not _accepted(port, certs, certs.rogue):
            assert time.monotonic() < deadline, "the new client CA was never trusted"
            time.sleep(0.2)
        assert _accepted(port, certs, certs.alice)
        assert _answers(kept)


def test_inter_broker_key_store_must_be_trusted(broker: BrokerProcess, certs: Certs) -> None:
    """On the inter-broker listener (SSL here) Kafka also checks that the new key store and
    the trust store still accept each other; another listener takes such a key store."""
    untrusted = issue(certs, "untrusted", "/CN=localhost", by_other_ca=True)
    before = _new_serial(broker, certs)
    assert _alter(broker, {"listener.name.ssl.ssl.keystore.location": str(untrusted.both)}) \
        == "INVALID_REQUEST: Invalid dynamic configuration"
    assert "SSLHandshakeException" in broker.log_tail(50)
    assert _new_serial(broker, certs) == before
    assert _alter(broker, {"listener.name.mtls.ssl.keystore.location": str(untrusted.both)}) \
        is None
