"""Failed authentication: garbage SASL tokens and wrong passwords are answered with Kafka's
error, the connection closed after connection.failed.authentication.delay.ms (the broker
serving others meanwhile), and every attempt is counted per listener in Kafka's
successful-/failed-authentication-total (/metrics)."""

from __future__ import annotations

import re
import socket
import ssl
import struct
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.security.certs import Certs
from tests.security.test_sasl import _frame, _handshake, _header, _plain_token, _read_frame
from tests.support.broker import BrokerProcess, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret";')
DELAY_MS = 600
OK = "kafka_server_socket_server_metrics_successful_authentication_total"
FAILED = "kafka_server_socket_server_metrics_failed_authentication_total"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[BrokerProcess]:
    plain, sasl, tls, metrics = free_port(), free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("authfail") / "data", port=plain,
                      name="authfail-broker", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                     f"SSL://127.0.0.1:{tls}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.location": str(certs.broker.both),
        "connection.failed.authentication.delay.ms": DELAY_MS,
        "metrics.port": metrics,
    })
    b.sasl_port, b.tls_port, b.metrics_port = sasl, tls, metrics  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


def counters(b: BrokerProcess) -> dict[str, float]:
    """(metric, listener) -> value of the authentication counters."""
    port = b.metrics_port  # type: ignore[attr-defined]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for m in re.finditer(r'^(kafka_server_socket_server_metrics_\w+)\{listener="(\w+)"\} (\S+)$',
                         text, re.M):
        out[f"{m[1]}:{m[2]}"] = float(m[3])
    return out


def _authenticate(s: socket.socket, token: bytes, correlation: int = 2) -> tuple[int, bytes]:
    """SaslAuthenticate v1 with `token`: (error code, error message)."""
    s.sendall(_frame(_header(36, 1, correlation) + struct.pack(">i", len(token)) + token))
    resp = _read_frame(s)
    code, msg_len = struct.unpack(">hh", resp[4:8])
    return code, resp[8:8 + max(msg_len, 0)]


def _served_quickly(b: BrokerProcess) -> float:
    """Seconds an ApiVersions on another connection takes to be answered."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(_frame(_header(18, 0, 3)))
        assert struct.unpack(">i", _read_frame(s)[:4])[0] == 3
    return time.monotonic() - started


@pytest.mark.parametrize("mechanism,token,message", [
    (b"PLAIN", _plain_token("alice", "wrong"),
     b"Authentication failed: Invalid username or password"),
    (b"PLAIN", b"\xff\xfe garbage without separators",
     b"Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"SCRAM-SHA-512", b"\x00\x01 not a client-first message",
     b"Authentication failed during authentication due to invalid credentials with SASL "
     b"mechanism SCRAM-SHA-512"),
    (b"SCRAM-SHA-512", b"n,,n=nobody,r=abcdefgh",  # a well-formed message, no such user
     b"Authentication failed during authentication due to invalid credentials with SASL "
     b"mechanism SCRAM-SHA-512"),
])
def test_bad_tokens_fail_closed_after_the_delay(broker: BrokerProcess, mechanism: bytes,
                                                token: bytes, message: bytes) -> None:
    before = counters(broker)
    with socket.create_connection(("127.0.0.1", broker.sasl_port),  # type: ignore[attr-defined]
                                  timeout=10) as s:
        assert _handshake(s, mechanism) == 0
        code, msg = _authenticate(s, token)
        answered = time.monotonic()
        assert (code, msg) == (58, message)  # SASL_AUTHENTICATION_FAILED
        assert _served_quickly(broker) < DELAY_MS / 1000  # others are served meanwhile
        assert s.recv(10) == b""
        assert time.monotonic() - answered >= DELAY_MS / 1000 * 0.9
    after = counters(broker)
    assert after[f"{FAILED}:SASL_PLAINTEXT"] == before.get(f"{FAILED}:SASL_PLAINTEXT", 0) + 1
    assert after.get(f"{OK}:SASL_PLAINTEXT") == before.get(f"{OK}:SASL_PLAINTEXT")
    assert "Failed authentication with 127.0.0.1:" in broker.log_tail(50)


def test_malformed_sasl_authenticate_closes(broker: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", broker.sasl_port),  # type: ignore[attr-defined]
                                  timeout=10) as s:
        assert _handshake(s, b"PLAIN") == 0
        # a SaslAuthenticate whose bytes field claims more than the frame holds
        s.sendall(_frame(_header(36, 1, 2) + struct.pack(">i", 1000) + b"short"))
        assert s.recv(10) == b""
    assert "malformed SaslAuthenticate v1 request" in broker.log_tail(50)
    assert _served_quickly(broker) < 5


def test_successes_and_tls_failures_are_counted(broker: BrokerProcess, certs: Certs) -> None:
    before = counters(broker)
    with socket.create_connection(("127.0.0.1", broker.sasl_port),  # type: ignore[attr-defined]
                                  timeout=10) as s:
        assert _handshake(s, b"PLAIN") == 0
        assert _authenticate(s, _plain_token("alice", "alice-secret")) == (0, b"")
    port = broker.tls_port  # type: ignore[attr-defined]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(_frame(_header(18, 0, 4)))
            assert struct.unpack(">i", _read_frame(s)[:4])[0] == 4
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(_frame(_header(18, 0, 5)))  # plaintext on the TLS port: handshake fails
        while s.recv(100):
            pass
    deadline = time.monotonic() + 5
    while True:
        after = counters(broker)
        want = {f"{OK}:SASL_PLAINTEXT": 1, f"{OK}:SSL": 1, f"{FAILED}:SSL": 1}
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in want}
        if delta == want or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert delta == want


def test_tls_client_hello_on_the_plaintext_port(broker: BrokerProcess, certs: Certs) -> None:
    """Read as a request size, the ClientHello's first bytes exceed socket.request.max.bytes:
    closed and logged (Kafka's InvalidReceiveException), others still served."""
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as raw:
            ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    assert re.search(r"closing connection from 127\.0\.0\.1:\d+: frame of \d+ bytes exceeds "
                     r"socket\.request\.max\.bytes", broker.log_tail(50))
    assert _served_quickly(broker) < 5
