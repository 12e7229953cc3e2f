"""Metadata answers are reused between requests (broker/cluster/metadata_cache.py): they must still
show every change at once, and never show one principal what only another may see.

Each check first asks for the full metadata (so the broker holds encoded answers for that
request version and listener), changes something, and asks again: the very next answer must
have the change. Clients: confluent-kafka (librdkafka), kafka-python, and raw requests at
several Metadata versions over a socket.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import KafkaAdminClient

from tests.protocol.wire import WireClient
from tests.support.broker import BrokerProcess, free_port

TIMEOUT = 20
METADATA = 3
VERSIONS = (1, 4, 9, 12)  # before and after flexible versions, with and without topic ids


def _wire_topics(bootstrap: str, version: int) -> dict[str, tuple[int, uuid.UUID | None]]:
    """Every topic a full Metadata request of `version` lists: partitions led, topic id."""
    with WireClient(bootstrap) as w:
        md = w.call(METADATA, version, {"topics": None, "allow_auto_topic_creation": False})
    return {t.name: (sum(1 for p in t.partitions if p.leader_id >= 0),
                     getattr(t, "topic_id", None))
            for t in md.topics if t.error_code == 0}


class Views:
    """The full metadata as each client sees it, asked the same way every time."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.rdkafka = AdminClient({"bootstrap.servers": bootstrap})
        self.kafka_python = KafkaAdminClient(bootstrap_servers=bootstrap)

    def close(self) -> None:
        self.kafka_python.close()

    def all(self) -> dict[str, dict[str, int]]:
        """client -> topic -> partitions (each with a leader)."""
        out: dict[str, dict[str, int]] = {}
        md = self.rdkafka.list_topics(timeout=TIMEOUT)
        out["confluent-kafka"] = {
            n: sum(1 for p in t.partitions.values() if p.leader >= 0)
            for n, t in md.topics.items() if t.error is None}
        out["kafka-python"] = {
            t["name"]: sum(1 for p in t["partitions"] if p["leader_id"] >= 0)
            for t in self.kafka_python.describe_topics() if t["error_code"] == 0}
        for v in VERSIONS:
            out[f"Metadata v{v}"] = {n: c for n, (c, _) in
                                     _wire_topics(self.bootstrap, v).items()}
        return out

    def partitions(self, topic: str) -> dict[str, int | None]:
        """client -> partitions of `topic` it lists (None: not listed), after asking twice
        (the second answer can only come from what the broker kept)."""
        self.all()
        return {client: topics.get(topic) for client, topics in self.all().items()}


@pytest.fixture
def views(broker: BrokerProcess) -> Iterator[Views]:
    v = Views(broker.bootstrap)
    try:
        yield v
    finally:
        v.close()


def _each(value: int | None) -> dict[str, int | None]:
    return {c: value for c in ("confluent-kafka", "kafka-python",
                               *(f"Metadata v{v}" for v in VERSIONS))}


def test_every_topic_change_is_in_the_next_metadata(views: Views) -> None:
    admin = views.rdkafka
    topic = f"mc-{uuid.uuid4().hex[:8]}"
    assert views.partitions(topic) == _each(None)

    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(TIMEOUT)
    assert views.partitions(topic) == _each(3)

    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(TIMEOUT)
    assert views.partitions(topic) == _each(5)

    admin.delete_topics([topic])[topic].result(TIMEOUT)
    assert views.partitions(topic) == _each(None)

    # The same name again, with other partitions.
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(TIMEOUT)
    assert views.partitions(topic) == _each(2)


def test_a_recreated_topic_has_its_new_id_in_the_next_metadata(views: Views) -> None:
    admin = views.rdkafka
    topic = f"mc-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    views.all()
    first = _wire_topics(views.bootstrap, 12)[topic][1]
    admin.delete_topics([topic])[topic].result(TIMEOUT)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    second = _wire_topics(views.bootstrap, 12)[topic][1]
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(TIMEOUT)
    assert first is not None and second is not None and first != second
    assert str(described.topic_id) == _kafka_uuid(second)


def _kafka_uuid(u: uuid.UUID) -> str:
    """As librdkafka prints a topic id (base64, unpadded)."""
    return base64.b64encode(u.bytes).rstrip(b"=").decode()


# ------------------------------------------------------------------------------ ACL views
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')


@pytest.fixture
def acl_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path / "data", port=plain, name="acl-broker", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:ANONYMOUS",
    })
    b.sasl_port = sasl  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


def _as(broker: BrokerProcess, user: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}",  # type: ignore[attr-defined]
                        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
                        "sasl.username": user, "sasl.password": f"{user}-secret"})


def _listed(client: AdminClient, *topics: str) -> set[str]:
    listed = client.list_topics(timeout=TIMEOUT).topics
    return {t for t in topics if t in listed}


def _describe(user: str, topic: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}",
                      "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)


def test_principals_never_share_a_metadata_view(acl_broker: BrokerProcess) -> None:
    """Same listener, same request version, different principals: each full Metadata lists
    exactly the topics its principal may describe, whoever asked before; and an ACL change
    shows in the next answer."""
    clients: dict[str, Any] = {u: _as(acl_broker, u) for u in ("admin", "alice", "bob")}
    a, b = (f"mc-{x}-{uuid.uuid4().hex[:6]}" for x in ("a", "b"))
    for t in (a, b):
        clients["admin"].create_topics([NewTopic(t, 2, 1)])[t].result(TIMEOUT)
    for f in clients["admin"].create_acls([_describe("alice", a), _describe("bob", b)]).values():
        f.result(TIMEOUT)
    for _ in range(2):  # the second round is answered from what the first left behind
        assert _listed(clients["admin"], a, b) == {a, b}
        assert _listed(clients["alice"], a, b) == {a}
        assert _listed(clients["bob"], a, b) == {b}
    for f in clients["admin"].create_acls([_describe("alice", b)]).values():
        f.result(TIMEOUT)
    assert _listed(clients["alice"], a, b) == {a, b}
    assert _listed(clients["bob"], a, b) == {b}
    gone = AclBindingFilter(ResourceType.TOPIC, a, ResourcePatternType.LITERAL, "User:alice",
                            None, AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for f in clients["admin"].delete_acls([gone]).values():
        f.result(TIMEOUT)
    assert _listed(clients["alice"], a, b) == {b}
    assert _listed(clients["admin"], a, b) == {a, b}
