"""The admin commands' connection settings, named as in librdkafka and Kafka's tools
(`-X key=value`, `--command-config FILE`): SASL PLAIN and SCRAM over SASL_PLAINTEXT, SCRAM over
SASL_SSL with the CA in ssl.ca.location, and a wrong password refused with Kafka's error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.admin.conftest import Samsa
from tests.security.certs import Certs, make_certs
from tests.security.test_sasl import JAAS, _add_scram_user
from tests.support.broker import BrokerProcess, free_port


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("admin-certs"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[BrokerProcess]:
    plain, sasl, sasl_ssl, mtls = free_port(), free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("admin-sasl") / "data", port=plain,
                      name="admin-sasl", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                     f"SASL_SSL://127.0.0.1:{sasl_ssl},MTLS://127.0.0.1:{mtls}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                          "SASL_SSL:SASL_SSL,MTLS:SSL",
        "ssl.truststore.location": str(certs.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(certs.broker.both),
    })
    b.sasl, b.sasl_ssl = f"127.0.0.1:{sasl}", f"127.0.0.1:{sasl_ssl}"  # type: ignore[attr-defined]
    b.mtls = f"127.0.0.1:{mtls}"  # type: ignore[attr-defined]
    b.start()
    try:
        _add_scram_user(b.bootstrap, "carol", "carol-secret")
        yield b
    finally:
        b.close()


def _x(**props: str) -> list[str]:
    return [arg for k, v in props.items() for arg in ("-X", f"{k.replace('_', '.')}={v}")]


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "carol", "carol-secret"),
    ("SCRAM-SHA-512", "carol", "carol-secret")])
def test_sasl_plaintext(secured: BrokerProcess, samsa: Samsa, mechanism: str, user: str,
                        password: str) -> None:
    bootstrap = secured.sasl  # type: ignore[attr-defined]
    args = _x(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
              sasl_username=user, sasl_password=password)
    d = samsa("cluster", "describe", *args, "--format", "json", bootstrap=bootstrap).json()
    assert d["brokers"][0]["id"] == 0
    assert f"authenticated as User:{user} ({mechanism})" in secured.log_tail(300)


def test_command_config_file_over_sasl_ssl(secured: BrokerProcess, certs: Certs,
                                            samsa: Samsa, tmp_path: Path,
                                            unique_topic: str) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "# as for kafka-topics.sh --command-config\n"
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="carol" password="carol-secret";\n'
        f"ssl.ca.location = {certs.ca}\n")
    bootstrap = secured.sasl_ssl  # type: ignore[attr-defined]
    r = samsa("topic", "create", unique_topic, "--command-config", str(config),
              bootstrap=bootstrap)
    assert r.rc == 0, r.err
    topics = samsa("topic", "list", "--command-config", str(config), "--format", "json",
                   bootstrap=bootstrap).json()
    assert unique_topic in {t["name"] for t in topics}
    # -X wins over the file: a wrong password is refused
    r = samsa("topic", "list", "--command-config", str(config), "-X", "sasl.password=wrong",
              bootstrap=bootstrap)
    assert r.rc == 1 and r.err.startswith("samsa: SASL_AUTHENTICATION_FAILED: "), r.err
    # without the CA, the broker's certificate is not trusted
    r = samsa("topic", "list", *_x(security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                                   sasl_username="a", sasl_password="b"), bootstrap=bootstrap)
    assert r.rc == 1 and "CERTIFICATE_VERIFY_FAILED" in r.err, r.err


def test_wrong_password_and_mechanism(secured: BrokerProcess, samsa: Samsa) -> None:
    bootstrap = secured.sasl  # type: ignore[attr-defined]
    r = samsa("topic", "list", *_x(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                   sasl_username="alice", sasl_password="nope"),
              bootstrap=bootstrap)
    assert r.rc == 1 and r.err.startswith("samsa: SASL_AUTHENTICATION_FAILED: "), r.err
    r = samsa("topic", "list", *_x(security_protocol="SASL_PLAINTEXT",
                                   sasl_mechanism="GSSAPI"), bootstrap=bootstrap)
    assert r.rc == 1 and r.err.startswith("samsa: UNSUPPORTED_SASL_MECHANISM: "), r.err


def test_ssl_with_a_client_certificate(secured: BrokerProcess, certs: Certs,
                                       samsa: Samsa) -> None:
    bootstrap = secured.mtls  # type: ignore[attr-defined]
    tls = _x(security_protocol="SSL", ssl_ca_location=str(certs.ca))
    mine = _x(ssl_certificate_location=str(certs.alice.cert),
              ssl_key_location=str(certs.alice.key))
    d = samsa("cluster", "describe", *tls, *mine, "--format", "json", bootstrap=bootstrap).json()
    assert d["brokers"][0]["id"] == 0
    r = samsa("cluster", "describe", *tls, bootstrap=bootstrap)  # no certificate: refused
    assert r.rc == 1 and r.err.startswith("samsa: NETWORK_EXCEPTION: "), r.err
