"""SSL listeners: real clients produce and consume over TLS, mutual TLS names the client by
its certificate, and bad handshakes are closed without harming the broker."""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Iterator

import pytest

from tests.security.certs import Certs
from tests.security.clients import CLIENTS, roundtrip, ssl_settings
from tests.support.broker import BrokerProcess, free_port


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs
               ) -> Iterator[BrokerProcess]:
    plain, tls, mtls, inline, p12 = (free_port() for _ in range(5))
    b = BrokerProcess(tmp_path_factory.mktemp("tls") / "data", port=plain, name="tls-broker",
                      settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},"
                     f"MTLS://127.0.0.1:{mtls},INLINE://127.0.0.1:{inline},"
                     f"P12://127.0.0.1:{p12}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,INLINE:SSL,"
                                          "P12:SSL",
        # A listener whose key store is given inline (ssl.keystore.type=PEM).
        "listener.name.inline.ssl.keystore.location": "",
        "listener.name.inline.ssl.keystore.key": certs.broker.key.read_text(),
        "listener.name.inline.ssl.keystore.certificate.chain": certs.broker.cert.read_text(),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.broker.both),
        "ssl.truststore.location": str(certs.ca),
        "ssl.truststore.password": "never-shown",  # (a PEM trust store ignores it)
        "listener.name.mtls.ssl.client.auth": "required",
        # PKCS12 key and trust stores, client certificates required.
        "listener.name.p12.ssl.keystore.type": "PKCS12",
        "listener.name.p12.ssl.keystore.location": str(certs.broker_p12),
        "listener.name.p12.ssl.keystore.password": certs.p12_password,
        "listener.name.p12.ssl.truststore.type": "PKCS12",
        "listener.name.p12.ssl.truststore.location": str(certs.ca_p12),
        "listener.name.p12.ssl.truststore.password": certs.p12_password,
        "listener.name.p12.ssl.client.auth": "required",
    })
    b.tls_port, b.mtls_port = tls, mtls  # type: ignore[attr-defined]
    b.inline_port, b.p12_port = inline, p12  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_consume_over_ssl(tls_broker: BrokerProcess, certs: Certs, client: str) -> None:
    bootstrap = f"127.0.0.1:{tls_broker.tls_port}"  # type: ignore[attr-defined]
    got = roundtrip(client, bootstrap, ssl_settings(client, str(certs.ca)))
    assert got == [f"{client}-{i}".encode() for i in range(5)]


def test_mutual_tls_principal_is_the_certificate_subject(
    tls_broker: BrokerProcess, certs: Certs
) -> None:
    bootstrap = f"127.0.0.1:{tls_broker.mtls_port}"  # type: ignore[attr-defined]
    security = ssl_settings("confluent-kafka", str(certs.ca), str(certs.alice.cert),
                            str(certs.alice.key))
    assert roundtrip("confluent-kafka", bootstrap, security, n=2) == [
        b"confluent-kafka-0", b"confluent-kafka-1"]
    # Kafka's DEFAULT principal mapping: the subject's distinguished name as RFC 2253 writes it.
    assert "authenticated as User:CN=alice,OU=eng,O=Samsa Test,C=US" in tls_broker.log_tail(200)


@pytest.mark.parametrize("cert", [None, "rogue"])
def test_mutual_tls_refuses_clients_without_a_trusted_certificate(
    tls_broker: BrokerProcess, certs: Certs, cert: str | None
) -> None:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if cert == "rogue":
        ctx.load_cert_chain(str(certs.rogue.cert), str(certs.rogue.key))
    port = tls_broker.mtls_port  # type: ignore[attr-defined]
    with pytest.raises((ssl.SSLError, ConnectionError)):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                # TLS 1.3: the server's refusal of the certificate arrives after the handshake.
                s.sendall(_api_versions_request())
                if not s.recv(4):
                    raise ConnectionError("closed")
    _assert_serving(tls_broker, certs)


def test_inline_pem_key_store(tls_broker: BrokerProcess, certs: Certs) -> None:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    port = tls_broker.inline_port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(_api_versions_request())
            assert struct.unpack(">ii", _recv_exactly(s, 8))[1] == 7


def test_pkcs12_key_and_trust_stores(tls_broker: BrokerProcess, certs: Certs) -> None:
    port = tls_broker.p12_port  # type: ignore[attr-defined]
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    ctx.load_cert_chain(str(certs.alice.cert), str(certs.alice.key))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(_api_versions_request())
            assert struct.unpack(">ii", _recv_exactly(s, 8))[1] == 7
    assert "on listener P12 authenticated as User:CN=alice,OU=eng,O=Samsa Test,C=US" in \
        tls_broker.log_tail(100)


def _wait_for_log(b: BrokerProcess, text: str) -> None:
    """The broker may log a closed connection just after the client saw it close."""
    deadline = time.monotonic() + 5
    while text not in b.log_tail(200):
        assert time.monotonic() < deadline, f"{text!r} not logged:\n{b.log_tail(30)}"
        time.sleep(0.05)


def _api_versions_request() -> bytes:
    client_id = b"probe"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def _assert_serving(b: BrokerProcess, certs: Certs) -> None:
    """ApiVersions answered over TLS, and over PLAINTEXT."""
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    port = b.tls_port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(_api_versions_request())
            assert struct.unpack(">ii", _recv_exactly(s, 8))[1] == 7
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(_api_versions_request())
        assert struct.unpack(">ii", _recv_exactly(s, 8))[1] == 7


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def test_plaintext_client_on_ssl_port_is_closed(tls_broker: BrokerProcess, certs: Certs) -> None:
    port = tls_broker.tls_port  # type: ignore[attr-defined]
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        s.sendall(_api_versions_request())
        data = b""
        while chunk := s.recv(100):  # read until the broker closes (at most a TLS alert)
            data += chunk
    assert data[4:8] != struct.pack(">i", 7)  # never a Kafka answer
    assert time.monotonic() - started < 12
    _wait_for_log(tls_broker, "SSL handshake failed on listener SSL")
    _assert_serving(tls_broker, certs)


def test_tls_hello_on_plaintext_port_is_closed(tls_broker: BrokerProcess, certs: Certs) -> None:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with socket.create_connection(("127.0.0.1", tls_broker.port), timeout=10) as raw:
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    _assert_serving(tls_broker, certs)


def test_metadata_answers_with_the_listener_of_the_request(
    tls_broker: BrokerProcess, certs: Certs
) -> None:
    from kafka import KafkaAdminClient

    for port, security in [
        (tls_broker.tls_port, ssl_settings("kafka-python", str(certs.ca))),  # type: ignore
        (tls_broker.port, {}),
    ]:
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", **security)
        try:
            brokers = admin.describe_cluster()["brokers"]
        finally:
            admin.close()
        assert [(b["host"], b["port"]) for b in brokers] == [("127.0.0.1", port)]


def test_passwords_are_not_described(tls_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": tls_broker.bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")]).values()
    entry = future.result(timeout=20)["ssl.truststore.password"]
    assert entry.is_sensitive and entry.value is None
