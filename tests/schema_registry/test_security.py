"""The registry over https with HTTP basic authentication against the cluster's SCRAM users."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from tests.security.certs import Certs, make_certs
from tests.support.broker import BrokerProcess, free_port

SCHEMA = Schema(json.dumps({"type": "record", "name": "R", "fields": []}), "AVRO")


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[BrokerProcess, str, Certs]]:
    certs = make_certs(tmp_path / "certs")
    url = f"https://127.0.0.1:{free_port()}"
    broker = BrokerProcess(tmp_path / "data", name="secured-registry", settings={
        "schema.registry.listeners": url,
        "schema.registry.authentication.method": "BASIC",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.both),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        yield broker, url, certs
    finally:
        broker.close()


def client(url: str, certs: Certs, login: str | None) -> SchemaRegistryClient:
    conf = {"url": url, "ssl.ca.location": str(certs.ca)}
    if login is not None:
        conf["basic.auth.user.info"] = login
    return SchemaRegistryClient(conf)


def test_https_and_basic_auth_against_scram_users(
        secured: tuple[BrokerProcess, str, Certs]) -> None:
    _, url, certs = secured
    alice = client(url, certs, "alice:alice-secret")
    sid = alice.register_schema("s", SCHEMA)
    assert alice.get_schema(sid).schema_type == "AVRO"
    for login in ("alice:wrong", "bob:alice-secret", None):
        with pytest.raises(SchemaRegistryError) as e:
            client(url, certs, login).get_subjects()
        assert (e.value.http_status_code, e.value.error_code) == (401, 401)
    # the same password again: remembered, still right
    assert client(url, certs, "alice:alice-secret").get_subjects() == ["s"]
