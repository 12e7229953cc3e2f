"""Delegation tokens over real sockets: Kafka's kafka-delegation-tokens tool (its Java
AdminClient) creates a token over SASL_SSL with SCRAM-SHA-512, a Java producer and consumer log
in with it (SCRAM, tokenauth=true), the tool describes and renews it, expires it, and the token
no longer logs in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.security.certs import make_certs
from tests.support.broker import BrokerProcess, free_port
from tests.support.java import JavaResult, compile_java, run_java_tool

pytestmark = pytest.mark.timeout(600)

SRC = Path(__file__).parent / "java" / "SaslSmoke.java"
TOOL = "org.apache.kafka.tools.DelegationTokenCommand"  # kafka-delegation-tokens.sh


def _client_properties(path: Path, ca: Path, user: str = "dave",
                       password: str = "dave-secret", extra: str = "") -> Path:
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}"{extra};\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n")
    return path


def test_token_created_by_the_tool_authenticates_java_clients(tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    plain, sasl_ssl = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port=plain, name="tokens", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(certs.broker.both),
        "delegation.token.secret.key": "a-secret-shared-by-the-brokers",
    })
    b.start()
    try:
        res = run_java_tool("kafka.admin.ConfigCommand", [
            "--bootstrap-server", b.bootstrap, "--alter", "--add-config",
            "SCRAM-SHA-512=[iterations=8192,password=dave-secret]",
            "--entity-type", "users", "--entity-name", "dave"])
        assert res.returncode == 0, res.describe()
        config = _client_properties(tmp_path / "client.properties", certs.ca)
        secured = [f"127.0.0.1:{sasl_ssl}"]

        def tool(*args: str) -> JavaResult:
            res = run_java_tool(TOOL, ["--bootstrap-server", *secured,
                                       "--command-config", str(config), *args])
            assert res.returncode == 0, res.describe()
            return res

        created = tool("--create", "--max-life-time-period", "-1",
                       "--renewer-principal", "User:ops")
        token_id = re.search(r"Created delegation token with tokenId : (\S+)",
                             created.stdout)
        assert token_id is not None, created.describe()
        row = re.search(rf"^{re.escape(token_id[1])}\s+(\S+)\s+User:dave", created.stdout,
                        re.M)
        assert row is not None, created.describe()
        token_hmac = row[1]

        # (without --owner-principal the tool asks for an empty list of owners, which Kafka
        # answers with no token)
        described = tool("--describe", "--owner-principal", "User:dave")
        assert token_id[1] in described.stdout and "User:ops" in described.stdout, \
            described.describe()

        classes = compile_java([SRC], classpath="clients39")

        def smoke(topic: str) -> JavaResult:
            return run_java_tool("SaslSmoke", [f"127.0.0.1:{sasl_ssl}", topic, token_id[1],
                                               token_hmac, str(certs.ca), "tokenauth"],
                                 classpath="clients39", extra_classpath=[classes],
                                 timeout=240)

        res = smoke("token-topic")
        assert res.returncode == 0 and "CONSUMED 20" in res.stdout, res.describe()
        # the token's owner is the connection's principal
        assert "authenticated as User:dave (SCRAM-SHA-512, delegation token)" in \
            b.log_tail(400)

        # a client logged in with the token may not ask for tokens
        with_token = _client_properties(tmp_path / "token.properties", certs.ca, token_id[1],
                                        token_hmac, ' tokenauth="true"')
        res = run_java_tool(TOOL, ["--bootstrap-server", *secured, "--command-config",
                                   str(with_token), "--create", "--max-life-time-period", "-1"])
        # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: UnsupportedByAuthenticationException
        assert "Delegation Token requests are not allowed" in res.stdout + res.stderr, \
            res.describe()
        assert "Created delegation token" not in res.stdout, res.describe()

        renewed = tool("--renew", "--hmac", token_hmac, "--renew-time-period", "-1")
        assert "Completed renew operation" in renewed.stdout, renewed.describe()
        expired = tool("--expire", "--hmac", token_hmac, "--expiry-time-period", "-1")
        assert "Completed expire operation" in expired.stdout, expired.describe()
        assert token_id[1] not in tool("--describe", "--owner-principal", "User:dave").stdout

        refused = smoke("token-topic-after")
        assert refused.returncode != 0 and "CONSUMED" not in refused.stdout, refused.describe()
        assert "Authentication failed" in refused.stdout + refused.stderr, refused.describe()
    finally:
        b.close()
