"""SASL listeners: PLAIN from the listener's JAAS configuration, SCRAM-SHA-256/512 users
added with AlterUserScramCredentials; nothing is served before authentication, and a wrong
password is refused with Kafka's error and message, then the connection closed."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest

from tests.security.certs import Certs
from tests.security.clients import CLIENTS, roundtrip, sasl_settings
from tests.support.broker import BrokerProcess, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";')


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs
                ) -> Iterator[BrokerProcess]:
    plain, sasl, sasl_ssl = free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("sasl") / "data", port=plain, name="sasl-broker",
                      settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                     f"SASL_SSL://127.0.0.1:{sasl_ssl}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(certs.broker.both),
    })
    b.sasl_port, b.sasl_ssl_port = sasl, sasl_ssl  # type: ignore[attr-defined]
    b.start()
    try:
        _add_scram_user(b.bootstrap, "carol", "carol-secret")
        yield b
    finally:
        b.close()


def _add_scram_user(bootstrap: str, user: str, password: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(m, 4096), password.encode())
        for m in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
    ])
    for f in futures.values():
        f.result(timeout=20)


@pytest.mark.parametrize("client", CLIENTS)
def test_plain_over_sasl_plaintext(sasl_broker: BrokerProcess, client: str) -> None:
    bootstrap = f"127.0.0.1:{sasl_broker.sasl_port}"  # type: ignore[attr-defined]
    security = sasl_settings(client, "PLAIN", "alice", "alice-secret")
    assert roundtrip(client, bootstrap, security) == [f"{client}-{i}".encode() for i in range(5)]
    assert "authenticated as User:alice (PLAIN)" in sasl_broker.log_tail(300)


@pytest.mark.parametrize("client", CLIENTS)
def test_scram_sha_512_over_sasl_ssl(sasl_broker: BrokerProcess, certs: Certs,
                                     client: str) -> None:
    bootstrap = f"127.0.0.1:{sasl_broker.sasl_ssl_port}"  # type: ignore[attr-defined]
    security = sasl_settings(client, "SCRAM-SHA-512", "carol", "carol-secret", str(certs.ca))
    assert roundtrip(client, bootstrap, security) == [f"{client}-{i}".encode() for i in range(5)]
    assert "authenticated as User:carol (SCRAM-SHA-512)" in sasl_broker.log_tail(300)


def test_scram_sha_256_and_describe_credentials(sasl_broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    bootstrap = f"127.0.0.1:{sasl_broker.sasl_port}"  # type: ignore[attr-defined]
    security = sasl_settings("confluent-kafka", "SCRAM-SHA-256", "carol", "carol-secret")
    assert roundtrip("confluent-kafka", bootstrap, security, n=1) == [b"confluent-kafka-0"]
    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})
    described = admin.describe_user_scram_credentials(["carol"])
    infos = described["carol"].result(timeout=20).scram_credential_infos
    assert sorted((i.mechanism.name, i.iterations) for i in infos) == [
        ("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)]


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _header(api_key: int, version: int, correlation_id: int) -> bytes:
    client_id = b"probe"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def _read_frame(s: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def _handshake(s: socket.socket, mechanism: bytes, version: int = 1) -> int:
    s.sendall(_frame(_header(17, version, 1) + struct.pack(">h", len(mechanism)) + mechanism))
    resp = _read_frame(s)
    return int(struct.unpack(">h", resp[4:6])[0])


def _plain_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def test_wrong_password_is_refused_and_the_connection_closed(sasl_broker: BrokerProcess
                                                              ) -> None:
    port = sasl_broker.sasl_port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        assert _handshake(s, b"PLAIN") == 0
        token = _plain_token("alice", "wrong")
        s.sendall(_frame(_header(36, 1, 2) + struct.pack(">i", len(token)) + token))
        resp = _read_frame(s)
        started = time.monotonic()
        code, msg_len = struct.unpack(">hh", resp[4:8])
        assert code == 58  # SASL_AUTHENTICATION_FAILED
        assert resp[8:8 + msg_len] == b"Authentication failed: Invalid username or password"
        assert s.recv(10) == b""  # closed after connection.failed.authentication.delay.ms
        assert time.monotonic() - started >= 0.05


def test_wrong_scram_password_fails_the_client(sasl_broker: BrokerProcess) -> None:
    from confluent_kafka import Producer

    bootstrap = f"127.0.0.1:{sasl_broker.sasl_port}"  # type: ignore[attr-defined]
    errors: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, "error_cb": errors.append,
                  **sasl_settings("confluent-kafka", "SCRAM-SHA-512", "carol", "not-carols")})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert any("Authentication failed during authentication due to invalid credentials with "
               "SASL mechanism SCRAM-SHA-512" in str(e) for e in errors), errors


def test_nothing_but_sasl_before_authentication(sasl_broker: BrokerProcess) -> None:
    port = sasl_broker.sasl_port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(_frame(_header(3, 1, 5) + struct.pack(">i", 0)))  # Metadata v1, no topics
        assert s.recv(10) == b""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(_frame(_header(18, 0, 6)))  # ApiVersions is served
        assert struct.unpack(">i", _read_frame(s)[:4])[0] == 6
        assert _handshake(s, b"GSSAPI") == 33  # UNSUPPORTED_SASL_MECHANISM, then closed
        assert s.recv(10) == b""
    assert "Unexpected Kafka request of type Metadata during SASL handshake" in \
        sasl_broker.log_tail(300)


def test_big_request_before_authentication_closes(sasl_broker: BrokerProcess) -> None:
    # sasl.server.max.receive.size (512 KiB): closed at the size prefix, nothing more read.
    port = sasl_broker.sasl_port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", 600_000))
        assert s.recv(10) == b""
    assert "exceeds sasl.server.max.receive.size=524288" in sasl_broker.log_tail(100)


def test_handshake_v0_then_raw_tokens(sasl_broker: BrokerProcess) -> None:
    port = sasl_broker.sasl_port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        assert _handshake(s, b"PLAIN", version=0) == 0
        s.sendall(_frame(_plain_token("a", "b")))  # a token shorter than a request header
        assert s.recv(10) == b""  # refused (no such user), then closed
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        assert _handshake(s, b"PLAIN", version=0) == 0
        s.sendall(_frame(_plain_token("admin", "admin-secret")))
        assert _read_frame(s) == b""  # PLAIN's empty answer
        s.sendall(_frame(_header(3, 1, 9) + struct.pack(">i", 0)))  # now Metadata is served
        assert struct.unpack(">i", _read_frame(s)[:4])[0] == 9
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        assert _handshake(s, b"PLAIN", version=0) == 0
        s.sendall(_frame(_plain_token("admin", "bad")))
        assert s.recv(10) == b""


def test_sasl_requests_after_authentication_or_without_sasl(sasl_broker: BrokerProcess
                                                            ) -> None:
    with socket.create_connection(("127.0.0.1", sasl_broker.port), timeout=10) as s:
        assert _handshake(s, b"PLAIN") == 34  # ILLEGAL_SASL_STATE on a PLAINTEXT listener


def test_scram_credential_alterations_are_checked(sasl_broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": sasl_broker.bootstrap})

    def error_of(alteration: object) -> str:
        (future,) = admin.alter_user_scram_credentials([alteration]).values()
        with pytest.raises(KafkaException) as e:
            future.result(timeout=20)
        return str(e.value)

    sha512 = ScramMechanism.SCRAM_SHA_512
    assert "Too few iterations" in error_of(
        UserScramCredentialUpsertion("frank", ScramCredentialInfo(sha512, 1000), b"pw"))
    assert "Too many iterations" in error_of(
        UserScramCredentialUpsertion("frank", ScramCredentialInfo(sha512, 20000), b"pw"))
    assert "Attempt to delete a user credential that does not exist" in error_of(
        UserScramCredentialDeletion("frank", sha512))
    (future,) = admin.describe_user_scram_credentials(["frank"]).values()
    with pytest.raises(KafkaException, match="does not exist"):
        future.result(timeout=20)
    # A deleted credential no longer authenticates.
    (future,) = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("grace", ScramCredentialInfo(sha512, 4096), b"grace-pw")
    ]).values()
    future.result(timeout=20)
    (future,) = admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("grace", sha512)]).values()
    future.result(timeout=20)
    (future,) = admin.describe_user_scram_credentials(["grace"]).values()
    with pytest.raises(KafkaException, match="does not exist"):
        future.result(timeout=20)
