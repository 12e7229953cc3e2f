"""Kafka's own tools and Java client over SASL_SSL with SCRAM-SHA-512: kafka-configs adds the
user (AlterUserScramCredentials), kafka-clients 3.9 produces and consumes in a group."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.certs import make_certs
from tests.support.broker import BrokerProcess, free_port
from tests.support.java import compile_java, run_java_tool

pytestmark = pytest.mark.timeout(600)

SRC = Path(__file__).parent / "java" / "SaslSmoke.java"


def test_java_scram_sha_512_over_sasl_ssl(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    plain, sasl_ssl = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port=plain, name="java-sasl", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(certs.broker.both),
    })
    b.start()
    try:
        res = run_java_tool("kafka.admin.ConfigCommand", [
            "--bootstrap-server", b.bootstrap, "--alter", "--add-config",
            "SCRAM-SHA-512=[iterations=8192,password=dave-secret]",
            "--entity-type", "users", "--entity-name", "dave"])
        assert res.returncode == 0 and "Completed updating config for user dave" in res.stdout, \
            res.describe()
        # (kafka-configs --describe of users also needs DescribeClientQuotas: not served yet)
        classes = compile_java([SRC], classpath="clients39")
        res = run_java_tool("SaslSmoke", [f"127.0.0.1:{sasl_ssl}", "java-sasl", "dave",
                                          "dave-secret", str(certs.ca)],
                            classpath="clients39", extra_classpath=[classes], timeout=240)
        assert res.returncode == 0 and "CONSUMED 20" in res.stdout, res.describe()
        assert "authenticated as User:dave (SCRAM-SHA-512)" in b.log_tail(400)
    finally:
        b.close()
