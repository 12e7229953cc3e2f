"""Spark's Kafka connector over SASL_SSL with SCRAM-SHA-512 (a PEM trust store): one batch
write, one batch read."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.certs import make_certs
from tests.security.test_sasl import _add_scram_user
from tests.spark.helpers import create_topics, source_options
from tests.support.broker import BrokerProcess, free_port

pytestmark = pytest.mark.timeout(300)

USER, PASSWORD = "spark", "spark-secret"


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("spark-sasl-ssl")
    certs = make_certs(base / "certs")
    plain, sasl_ssl = free_port(), free_port()
    b = BrokerProcess(base / "data", port=plain, name="spark-sasl-ssl", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(certs.broker.both),
    })
    b.sasl_ssl, b.ca = sasl_ssl, certs.ca  # type: ignore[attr-defined]
    b.start()
    try:
        _add_scram_user(b.bootstrap, USER, PASSWORD)
        yield b
    finally:
        b.close()


def security(b: BrokerProcess) -> dict[str, object]:
    ca: Path = b.ca  # type: ignore[attr-defined]
    return {
        "kafka.bootstrap.servers": f"127.0.0.1:{b.sasl_ssl}",  # type: ignore[attr-defined]
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                  f'required username="{USER}" password="{PASSWORD}";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(ca),
    }


def test_batch_write_then_read_over_sasl_ssl(spark: Any, secure_broker: BrokerProcess) -> None:
    topic = f"spark-sasl-{uuid.uuid4().hex[:8]}"
    create_topics(secure_broker.bootstrap, {topic: 2})
    rows = [(f"k{i}", f"v{i}") for i in range(6)]
    df = spark.createDataFrame(rows, "key string, value string")
    (df.write.format("kafka").options(**{k: str(v) for k, v in security(secure_broker).items()})
     .option("topic", topic).save())
    opts = source_options(f"127.0.0.1:{secure_broker.sasl_ssl}",  # type: ignore[attr-defined]
                          subscribe=topic, **security(secure_broker))
    got = spark.read.format("kafka").options(**opts).load().collect()
    assert sorted((r.key.decode(), r.value.decode()) for r in got) == rows
    assert f"authenticated as User:{USER} (SCRAM-SHA-512)" in secure_broker.log_tail(500)
