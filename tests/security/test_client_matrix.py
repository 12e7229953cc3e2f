"""The client matrix over SASL_SSL (SCRAM-SHA-512) and mutual TLS: kafka-python, aiokafka,
confluent-kafka, the Java clients 3.9 and 4.3 and Kafka's command-line tools each produce,
consume in a consumer group and run transactions against one broker (a module fixture with
both listeners). Spark's connector over SASL_SSL: tests/spark/test_sasl_ssl.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.certs import Certs
from tests.security.clients import CLIENTS, roundtrip, sasl_settings, ssl_settings, transactions
from tests.security.test_sasl import _add_scram_user
from tests.support.broker import BrokerProcess, free_port
from tests.support.java import compile_java, run_java_tool

pytestmark = pytest.mark.timeout(600)

SRC = Path(__file__).parent / "java" / "SecureMatrix.java"
TOOLS = "org.apache.kafka.tools"
USER, PASSWORD = "matrix", "matrix-secret"
ALICE_DN = "CN=alice,OU=eng,O=Samsa Test,C=US"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[BrokerProcess]:
    plain, sasl_ssl, mtls = free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("matrix") / "data", port=plain,
                      name="matrix-broker", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl},"
                     f"MTLS://127.0.0.1:{mtls}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(certs.broker.both),
        "ssl.truststore.location": str(certs.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 2,
        "transaction.state.log.num.partitions": 2,
        "num.partitions": 1,
    })
    b.sasl_ssl, b.mtls = sasl_ssl, mtls  # type: ignore[attr-defined]
    b.start()
    try:
        _add_scram_user(b.bootstrap, USER, PASSWORD)
        yield b
    finally:
        b.close()


def python_security(client: str, protocol: str, certs: Certs) -> dict[str, Any]:
    if protocol == "SASL_SSL":
        return sasl_settings(client, "SCRAM-SHA-512", USER, PASSWORD, str(certs.ca))
    return ssl_settings(client, str(certs.ca), str(certs.alice.cert), str(certs.alice.key))


def bootstrap(b: BrokerProcess, protocol: str) -> str:
    port = b.sasl_ssl if protocol == "SASL_SSL" else b.mtls  # type: ignore[attr-defined]
    return f"127.0.0.1:{port}"


def java_properties(path: Path, protocol: str, certs: Certs) -> Path:
    """A Java client (or tool --command-config) properties file."""
    lines = [f"ssl.truststore.type=PEM\nssl.truststore.location={certs.ca}\n"]
    if protocol == "SASL_SSL":
        lines.append(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="{USER}" password="{PASSWORD}";\n')
    else:
        lines.append(f"security.protocol=SSL\nssl.keystore.type=PEM\n"
                     f"ssl.keystore.location={certs.alice.both}\n")
    path.write_text("".join(lines))
    return path


PROTOCOLS = ("SASL_SSL", "MTLS")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("client", CLIENTS)
def test_python_clients(broker: BrokerProcess, certs: Certs, client: str, protocol: str
                        ) -> None:
    security = python_security(client, protocol, certs)
    where = bootstrap(broker, protocol)
    assert roundtrip(client, where, security) == [f"{client}-{i}".encode() for i in range(5)]
    assert transactions(client, where, python_security(client, protocol, certs)) == [
        b"committed", b"end"]
    who = f"User:{USER} (SCRAM-SHA-512)" if protocol == "SASL_SSL" else f"User:{ALICE_DN}"
    assert f"authenticated as {who}" in broker.log_tail(2000)


@pytest.mark.parametrize("classpath", ["clients39", "kafka4"])
def test_java_clients(broker: BrokerProcess, certs: Certs, tmp_path: Path, classpath: str
                      ) -> None:
    files = []
    for protocol in PROTOCOLS:
        props = java_properties(tmp_path / f"{protocol.lower()}.properties", protocol, certs)
        props.write_text(props.read_text()
                         + f"bootstrap.servers={bootstrap(broker, protocol)}\n")
        files.append(str(props))
    classes = compile_java([SRC], classpath=classpath)
    res = run_java_tool("SecureMatrix", [f"java-{classpath}", *files], classpath=classpath,
                        extra_classpath=[classes], timeout=300)
    assert res.returncode == 0, res.describe()
    assert res.stdout.split() == ["OK", "sasl_ssl", "OK", "mtls"], res.describe()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_command_line_tools(broker: BrokerProcess, certs: Certs, tmp_path: Path,
                            protocol: str) -> None:
    """kafka-topics, kafka-console-producer, kafka-console-consumer (in a group) and
    kafka-consumer-groups, each with --command-config."""
    config = str(java_properties(tmp_path / "tool.properties", protocol, certs))
    where = bootstrap(broker, protocol)
    topic, group = f"tools-{uuid.uuid4().hex[:8]}", f"tools-g-{uuid.uuid4().hex[:8]}"
    base = ["--bootstrap-server", where, "--command-config", config]

    def ok(main: str, *args: str, stdin: str | None = None) -> str:
        res = run_java_tool(f"{TOOLS}.{main}", [*base, *args], input=stdin, timeout=120)
        assert res.returncode == 0, res.describe()
        return res.stdout

    ok("TopicCommand", "--create", "--topic", topic, "--partitions", "2")
    assert topic in ok("TopicCommand", "--list").split()
    ok("ConsoleProducer", "--topic", topic, stdin="".join(f"m{i}\n" for i in range(6)))
    out = ok("consumer.ConsoleConsumer", "--topic", topic, "--group", group,
             "--from-beginning", "--max-messages", "6", "--timeout-ms", "30000")
    assert sorted(out.split()) == [f"m{i}" for i in range(6)]
    described = ok("consumer.group.ConsumerGroupCommand", "--describe", "--group", group)
    rows = [line.split() for line in described.splitlines() if topic in line]
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...: everything consumed
    assert len(rows) == 2 and all(r[5] == "0" for r in rows), described
    assert sum(int(r[3]) for r in rows) == 6, described
