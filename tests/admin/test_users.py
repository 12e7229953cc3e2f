"""`samsa user list|describe|set-scram|delete-scram` against a Samsa broker with a SCRAM
listener: credentials salted by the command are good for a SCRAM login (by the admin client and
by librdkafka), and a deleted one no longer is."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from tests.admin.conftest import Samsa, parse_table
from tests.support.broker import BrokerProcess, free_port


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("admin-users") / "data", port=plain,
                      name="admin-users", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"})
    b.sasl = f"127.0.0.1:{sasl}"  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


def _login(samsa: Samsa, b: BrokerProcess, mechanism: str, user: str, password: str) -> str:
    r = samsa("cluster", "describe", "-X", "security.protocol=SASL_PLAINTEXT",
              "-X", f"sasl.mechanism={mechanism}", "-X", f"sasl.username={user}",
              "-X", f"sasl.password={password}", bootstrap=b.sasl)  # type: ignore[attr-defined]
    return "ok" if r.rc == 0 else r.err.split(":")[1].strip()


def _rdkafka_login(b: BrokerProcess, user: str, password: str) -> None:
    admin = AdminClient({"bootstrap.servers": b.sasl,  # type: ignore[attr-defined]
                         "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
                         "sasl.password": password})
    assert admin.list_topics(timeout=20).brokers


def test_set_describe_and_delete_scram_credentials(scram_broker: BrokerProcess, samsa: Samsa,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    b = scram_broker.bootstrap
    r = samsa("user", "set-scram", "alice", "--mechanism", "SCRAM-SHA-256", "--mechanism",
              "scram-sha-512", "--password", "alice-secret", bootstrap=b)
    assert (r.rc, r.out) == (0, "Set the SCRAM-SHA-256,SCRAM-SHA-512 credentials of user "
                                "alice.\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("bob-secret\n"))  # a password from stdin
    assert samsa("user", "set-scram", "bob", "--mechanism", "SCRAM-SHA-512", "--iterations",
                 "8192", "--format", "json", bootstrap=b).json() == {
        "user": "bob", "set": ["SCRAM-SHA-512"], "iterations": 8192}

    listed = samsa("user", "list", "--format", "json", bootstrap=b).json()
    assert listed == [
        {"user": "alice", "credentials": [{"mechanism": "SCRAM-SHA-256", "iterations": 4096},
                                          {"mechanism": "SCRAM-SHA-512", "iterations": 4096}]},
        {"user": "bob", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}]
    rows = parse_table(samsa("user", "describe", "bob", bootstrap=b).out.splitlines())
    assert rows == [{"USER": "bob", "MECHANISM": "SCRAM-SHA-512", "ITERATIONS": "8192"}]

    assert _login(samsa, scram_broker, "SCRAM-SHA-256", "alice", "alice-secret") == "ok"
    assert _login(samsa, scram_broker, "SCRAM-SHA-512", "bob", "bob-secret") == "ok"
    assert _login(samsa, scram_broker, "SCRAM-SHA-512", "bob", "wrong") == (
        "SASL_AUTHENTICATION_FAILED")
    _rdkafka_login(scram_broker, "alice", "alice-secret")

    r = samsa("user", "delete-scram", "alice", "--mechanism", "SCRAM-SHA-256", bootstrap=b)
    assert (r.rc, r.out) == (0, "Deleted the SCRAM-SHA-256 credentials of user alice.\n")
    assert _login(samsa, scram_broker, "SCRAM-SHA-256", "alice", "alice-secret") == (
        "SASL_AUTHENTICATION_FAILED")
    assert _login(samsa, scram_broker, "SCRAM-SHA-512", "alice", "alice-secret") == "ok"
    assert samsa("user", "delete-scram", "bob", "--mechanism", "SCRAM-SHA-512", "--format",
                 "json", bootstrap=b).json() == {"user": "bob", "deleted": ["SCRAM-SHA-512"]}
    r = samsa("user", "describe", "bob", bootstrap=b)
    assert r.rc == 1 and r.err.startswith("samsa: RESOURCE_NOT_FOUND")
    r = samsa("user", "set-scram", "carol", "--mechanism", "SCRAM-SHA-1", "--password", "x",
              bootstrap=b)
    assert (r.rc, r.err) == (1, "samsa: UNSUPPORTED_SASL_MECHANISM: unknown SCRAM mechanism "
                                "'SCRAM-SHA-1': SCRAM-SHA-256 or SCRAM-SHA-512\n")

