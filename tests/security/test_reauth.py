"""Re-authentication (KIP-368) with connections.max.reauth.ms: SaslAuthenticate tells the
session lifetime, a client re-authenticates on its connection (same principal, at most once a
second), a session left to expire is closed at its next request, and Kafka's Java client keeps
producing over several lifetimes by re-authenticating on its own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.protocol.wire import WireClient
from tests.security.test_auth_failures import counters
from tests.support.broker import BrokerProcess, free_port
from tests.support.java import compile_java, run_java_tool

pytestmark = pytest.mark.timeout(300)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_bob="bob-secret";')
LIFETIME_MS = 3000
SRC = Path(__file__).parent / "java" / "SecureClient.java"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    plain, sasl, metrics = free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("reauth") / "data", port=plain, name="reauth",
                      settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": LIFETIME_MS,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "num.partitions": 1,
        "metrics.port": metrics,
    })
    b.sasl_port, b.metrics_port = sasl, metrics  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


def login(w: WireClient, user: str) -> tuple[int, str | None, int]:
    assert w.call(17, 1, {"mechanism": "PLAIN"}).error_code == 0
    token = f"\0{user}\0{user}-secret".encode()
    r = w.call(36, 2, {"auth_bytes": token})
    return r.error_code, r.error_message, int(r.session_lifetime.total_seconds() * 1000)


def metadata(w: WireClient) -> int:
    return len(w.call(3, 12, {"topics": None, "allow_auto_topic_creation": False}).brokers)


def test_reauthentication_keeps_the_connection_and_expiry_closes_it(broker: BrokerProcess
                                                                    ) -> None:
    before = counters(broker)
    with WireClient(f"127.0.0.1:{broker.sasl_port}") as w:  # type: ignore[attr-defined]
        assert login(w, "alice") == (0, None, LIFETIME_MS)
        assert metadata(w) == 1
        time.sleep(1.2)
        assert login(w, "alice") == (0, None, LIFETIME_MS)  # re-authenticated
        key = "kafka_server_socket_server_metrics_successful_reauthentication_total"
        assert counters(broker)[f"{key}:SASL_PLAINTEXT"] == \
            before.get(f"{key}:SASL_PLAINTEXT", 0) + 1
        assert metadata(w) == 1
        # Once a second at most: this handshake is an ordinary (illegal) request.
        assert w.call(17, 1, {"mechanism": "PLAIN"}).error_code == 34  # ILLEGAL_SASL_STATE
        time.sleep(1.0)
        assert metadata(w) == 1  # 1 s into the re-authenticated session: not expired
        time.sleep(LIFETIME_MS / 1000)
        correlation, data = w.encode_request(3, 12, {"topics": None,
                                                     "allow_auto_topic_creation": False})
        w.send_raw(data)
        assert w.is_closed()  # expired: closed without an answer
    assert "re-authenticated as User:alice (PLAIN)" in broker.log_tail(200)
    assert "SASL session of User:alice on listener SASL_PLAINTEXT expired" in \
        broker.log_tail(200)


def test_principal_change_on_reauthentication_is_refused(broker: BrokerProcess) -> None:
    with WireClient(f"127.0.0.1:{broker.sasl_port}") as w:  # type: ignore[attr-defined]
        assert login(w, "alice")[0] == 0
        code, message, _ = login(w, "bob")
        assert code == 58  # SASL_AUTHENTICATION_FAILED
        assert message == ("Cannot change principals during re-authentication from "
                           "User.alice: User.bob")
        assert w.is_closed()


def test_java_client_reauthenticates_over_several_lifetimes(broker: BrokerProcess,
                                                             tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text(
        f"bootstrap.servers=127.0.0.1:{broker.sasl_port}\n"  # type: ignore[attr-defined]
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="alice-secret";\n')
    classes = compile_java([SRC], classpath="clients39")
    expired_before = broker.log_tail(2000).count("expired")
    # 20 records over 10 s: more than three session lifetimes on the producer's connection.
    res = run_java_tool("SecureClient", [str(props), "reauth-java", "20", "10"],
                        classpath="clients39", extra_classpath=[classes], timeout=180)
    assert res.returncode == 0 and "CONSUMED 20" in res.stdout, res.describe()
    log = broker.log_tail(2000)
    assert log.count("re-authenticated as User:alice (PLAIN)") >= 3, log
    assert log.count("expired") == expired_before, log  # no session was left to expire


def test_reauthentication_with_another_mechanism_is_refused(broker: BrokerProcess) -> None:
    with WireClient(f"127.0.0.1:{broker.sasl_port}") as w:  # type: ignore[attr-defined]
        assert login(w, "alice")[0] == 0
        # Kafka answers the handshake, then closes at the next token without an answer.
        assert w.call(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == 0
        _, data = w.encode_request(36, 2, {"auth_bytes": b"n,,n=alice,r=abc"})
        w.send_raw(data)
        assert w.is_closed()
    assert ("SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
            "re-authentication of mechanism 'PLAIN'") in broker.log_tail(100)
