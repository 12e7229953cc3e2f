"""`samsa acl list|create|delete` against a Samsa broker with Kafka's StandardAuthorizer
(the anonymous principal a super user): literal, prefixed and cluster ACLs created, listed by
filters (MATCH finds what applies to a name) and deleted, and an ACL that lets a SASL user
see a topic."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.admin.conftest import Samsa, parse_table
from tests.security.test_sasl import JAAS
from tests.support.broker import BrokerProcess, free_port

ACL_KEYS = {"resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
            "permission"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """PLAINTEXT for the (super user) admin, SASL PLAIN for alice, whom ACLs govern."""
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("admin-acls") / "data", port=plain,
                      name="admin-acls", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    b.sasl = f"127.0.0.1:{sasl}"  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


def _acls(samsa: Samsa, b: str, command: str, *args: str) -> list[tuple[str, ...]]:
    rows = samsa("acl", command, *args, "--format", "json", bootstrap=b).json()
    assert all(set(r) == ACL_KEYS for r in rows)
    return [(r["resource_type"], r["resource_name"], r["pattern_type"], r["principal"],
             r["host"], r["operation"], r["permission"]) for r in rows]


def test_create_list_and_delete_acls(acl_broker: BrokerProcess, samsa: Samsa) -> None:
    b = acl_broker.bootstrap
    assert _acls(samsa, b, "create", "--resource-type", "topic", "--resource-name", "orders",
                 "--principal", "User:alice", "--operation", "read", "--operation",
                 "describe") == [
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW")]
    r = samsa("acl", "create", "--resource-type", "topic", "--resource-name", "ord",
              "--pattern-type", "prefixed", "--principal", "User:bob", "--host", "10.0.0.1",
              "--operation", "write", "--permission", "deny", bootstrap=b)
    (row,) = parse_table(r.out.splitlines())
    assert row == {"RESOURCE-TYPE": "TOPIC", "RESOURCE-NAME": "ord", "PATTERN-TYPE": "PREFIXED",
                   "PRINCIPAL": "User:bob", "HOST": "10.0.0.1", "OPERATION": "WRITE",
                   "PERMISSION": "DENY"}
    assert _acls(samsa, b, "create", "--resource-type", "cluster", "--principal", "User:ops",
                 "--operation", "cluster-action") == [
        ("CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "*", "CLUSTER_ACTION", "ALLOW")]

    assert len(_acls(samsa, b, "list")) == 4
    assert _acls(samsa, b, "list", "--principal", "User:bob") == [
        ("TOPIC", "ord", "PREFIXED", "User:bob", "10.0.0.1", "WRITE", "DENY")]
    assert {a[1:3] for a in _acls(samsa, b, "list", "--resource-type", "topic",
                                  "--resource-name", "orders", "--pattern-type", "match")} == {
        ("orders", "LITERAL"), ("ord", "PREFIXED")}
    assert [a[5] for a in _acls(samsa, b, "list", "--resource-type", "topic",
                                "--resource-name", "orders")] == ["DESCRIBE", "READ"]
    r = samsa("acl", "list", "--operation", "fly", bootstrap=b)
    assert r.rc == 1 and r.err.startswith("samsa: INVALID_REQUEST: unknown operation 'fly': ")

    assert _acls(samsa, b, "delete", "--resource-type", "topic", "--operation", "read") == [
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")]
    assert len(_acls(samsa, b, "delete", "--resource-type", "any")) == 3
    assert _acls(samsa, b, "list") == []



def test_an_acl_takes_effect(acl_broker: BrokerProcess, samsa: Samsa,
                             unique_topic: str) -> None:
    b, t = acl_broker.bootstrap, unique_topic
    assert samsa("topic", "create", t, bootstrap=b).rc == 0
    as_alice = ("-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
                "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret")
    sasl = acl_broker.sasl  # type: ignore[attr-defined]
    r = samsa("topic", "describe", t, *as_alice, bootstrap=sasl)
    assert (r.rc, r.err.split(":")[1].strip()) == (1, "TOPIC_AUTHORIZATION_FAILED")
    _acls(samsa, b, "create", "--resource-type", "topic", "--resource-name", t,
          "--principal", "User:alice", "--operation", "describe", "--operation",
          "describe-configs")  # Metadata, then DescribeConfigs
    (d,) = samsa("topic", "describe", t, *as_alice, "--format", "json", bootstrap=sasl).json()
    assert d["name"] == t
    _acls(samsa, b, "delete", "--resource-type", "topic", "--resource-name", t)
    r = samsa("topic", "describe", t, *as_alice, bootstrap=sasl)
    assert (r.rc, r.err.split(":")[1].strip()) == (1, "TOPIC_AUTHORIZATION_FAILED")
