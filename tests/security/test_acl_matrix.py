"""The ACL matrix, API family by API family: a principal (SASL PLAIN, one user per case so the
cases share nothing) gets Kafka's authorization error without the ACL the API needs, the API's
ordinary answer with a LITERAL ALLOW, and the error again once a PREFIXED (or, on the cluster,
LITERAL) DENY matches. Requests go over a real socket, one per step; Produce, Fetch, groups,
topics' creation and deletion, configs and transactions with real clients are in
test_acls.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from samsa.protocol.errors import ErrorCode
from tests.protocol.wire import WireClient
from tests.support.broker import BrokerProcess, free_port

USERS = [f"u{i}" for i in range(24)]
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{u}-pw"' for u in USERS) + ";")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TIMEOUT = 20
CLUSTER = "kafka-cluster"

TOPIC_DENIED = {ErrorCode.topic_authorization_failed}
GROUP_DENIED = {ErrorCode.group_authorization_failed}
CLUSTER_DENIED = {ErrorCode.cluster_authorization_failed}
TXN_DENIED = {ErrorCode.transactional_id_authorization_failed}


@dataclass(frozen=True)
class Names:
    topic: str
    group: str
    txn: str


@dataclass(frozen=True)
class Case:
    name: str
    api_key: int
    version: int
    body: Callable[[Names], dict[str, Any]]
    needs: tuple[tuple[ResourceType, AclOperation], ...]  # the ALLOW ACLs it needs
    denied: set[ErrorCode]  # the error codes without them
    allowed: set[ErrorCode]  # the non-zero error codes with them


def _tp(n: Names, **partition: Any) -> list[dict[str, Any]]:
    return [{"name": n.topic, "partitions": [{"partition_index": 0, **partition}]}]


CASES = [
    Case("ListOffsets", 2, 7, lambda n: {"replica_id": -1, "topics": _tp(n, timestamp=-1)},
         ((ResourceType.TOPIC, AclOperation.DESCRIBE),), TOPIC_DENIED, set()),
    Case("DescribeTopicPartitions", 75, 0,
         lambda n: {"topics": [{"name": n.topic}], "response_partition_limit": 100},
         ((ResourceType.TOPIC, AclOperation.DESCRIBE),), TOPIC_DENIED, set()),
    Case("DeleteRecords", 21, 2, lambda n: {"topics": _tp(n, offset=0), "timeout": 5000},
         ((ResourceType.TOPIC, AclOperation.DELETE),), TOPIC_DENIED, set()),
    Case("CreatePartitions", 37, 3,
         lambda n: {"topics": [{"name": n.topic, "count": 2, "assignments": None}],
                    "timeout": 5000, "validate_only": True},
         ((ResourceType.TOPIC, AclOperation.ALTER),), TOPIC_DENIED, set()),
    Case("IncrementalAlterConfigs (topic)", 44, 1,
         lambda n: {"resources": [{"resource_type": 2, "resource_name": n.topic, "configs": [
             {"name": "retention.ms", "config_operation": 0, "value": "100000"}]}]},
         ((ResourceType.TOPIC, AclOperation.ALTER_CONFIGS),), TOPIC_DENIED, set()),
    Case("AlterConfigs (broker)", 33, 2,
         lambda n: {"resources": [{"resource_type": 4, "resource_name": "0", "configs": []}],
                    "validate_only": True},
         ((ResourceType.BROKER, AclOperation.ALTER_CONFIGS),), CLUSTER_DENIED, set()),
    Case("AlterConfigs (group)", 33, 2,
         lambda n: {"resources": [{"resource_type": 32, "resource_name": n.group, "configs": [
             {"name": "consumer.session.timeout.ms", "value": "45000"}]}],
                    "validate_only": True},
         ((ResourceType.GROUP, AclOperation.ALTER_CONFIGS),), GROUP_DENIED, set()),
    Case("DescribeProducers", 61, 0,
         lambda n: {"topics": [{"name": n.topic, "partition_indexes": [0]}]},
         ((ResourceType.TOPIC, AclOperation.READ),), TOPIC_DENIED, set()),
    Case("FindCoordinator (group)", 10, 4,
         lambda n: {"key_type": 0, "coordinator_keys": [n.group]},
         ((ResourceType.GROUP, AclOperation.DESCRIBE),), GROUP_DENIED, set()),
    Case("DescribeGroups", 15, 5, lambda n: {"groups": [n.group]},
         ((ResourceType.GROUP, AclOperation.DESCRIBE),), GROUP_DENIED, set()),
    Case("DeleteGroups", 42, 2, lambda n: {"groups_names": [n.group]},
         ((ResourceType.GROUP, AclOperation.DELETE),), GROUP_DENIED,
         {ErrorCode.group_id_not_found}),
    Case("OffsetCommit (needs topic READ too)", 8, 8,
         lambda n: {"group_id": n.group, "generation_id_or_member_epoch": -1, "member_id": "",
                    "topics": _tp(n, committed_offset=0)},
         ((ResourceType.GROUP, AclOperation.READ), (ResourceType.TOPIC, AclOperation.READ)),
         GROUP_DENIED, set()),
    Case("OffsetDelete", 47, 0,
         lambda n: {"group_id": n.group, "topics": [
             {"name": n.topic, "partitions": [{"partition_index": 0}]}]},
         ((ResourceType.GROUP, AclOperation.DELETE), (ResourceType.TOPIC, AclOperation.READ)),
         GROUP_DENIED, {ErrorCode.group_id_not_found}),
    Case("FindCoordinator (transaction)", 10, 4,
         lambda n: {"key_type": 1, "coordinator_keys": [n.txn]},
         ((ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE),), TXN_DENIED, set()),
    Case("InitProducerId (transactional)", 22, 4,
         lambda n: {"transactional_id": n.txn, "transaction_timeout": 10000,
                    "producer_id": -1, "producer_epoch": -1},
         ((ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE),), TXN_DENIED, set()),
    Case("DescribeTransactions", 65, 0, lambda n: {"transactional_ids": [n.txn]},
         ((ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE),), TXN_DENIED,
         {ErrorCode.transactional_id_not_found}),
    Case("DescribeLogDirs", 35, 4, lambda n: {"topics": None},
         ((ResourceType.BROKER, AclOperation.DESCRIBE),), CLUSTER_DENIED, set()),
    Case("AlterReplicaLogDirs", 34, 2,
         lambda n: {"dirs": [{"path": "/not-a-log-dir", "topics": [
             {"name": n.topic, "partitions": [0]}]}]},
         ((ResourceType.BROKER, AclOperation.ALTER),), CLUSTER_DENIED,
         {ErrorCode.log_dir_not_found}),
    Case("ElectLeaders", 43, 2,
         lambda n: {"election_type": 0, "timeout": 5000,
                    "topic_partitions": [{"topic": n.topic, "partitions": [0]}]},
         ((ResourceType.BROKER, AclOperation.ALTER),), CLUSTER_DENIED,
         {ErrorCode.election_not_needed}),
    Case("DescribeUserScramCredentials", 50, 0, lambda n: {"users": None},
         ((ResourceType.BROKER, AclOperation.DESCRIBE),), CLUSTER_DENIED, set()),
    Case("AlterUserScramCredentials", 51, 0,
         lambda n: {"deletions": [{"name": f"nobody-{n.txn}", "mechanism": 1}]},
         ((ResourceType.BROKER, AclOperation.ALTER),), CLUSTER_DENIED,
         {ErrorCode.resource_not_found}),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("acl-matrix") / "data", port=plain,
                      name="acl-matrix", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:ANONYMOUS",
        "num.partitions": 1,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.num.partitions": 1,
    })
    b.sasl_port = sasl  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})  # ANONYMOUS: a super user


def error_codes(value: Any) -> set[ErrorCode]:
    """Every non-zero error_code anywhere in a response."""
    found: set[ErrorCode] = set()
    if isinstance(value, tuple | list):
        for v in value:
            found |= error_codes(v)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            v = getattr(value, name)
            if name == "error_code" and v:
                found.add(ErrorCode(v))
            else:
                found |= error_codes(v)
    return found


def call_as(broker: BrokerProcess, user: str, case: Case, names: Names) -> set[ErrorCode]:
    with WireClient(f"127.0.0.1:{broker.sasl_port}") as w:  # type: ignore[attr-defined]
        assert w.call(17, 1, {"mechanism": "PLAIN"}).error_code == 0
        token = f"\0{user}\0{user}-pw".encode()
        assert w.call(36, 2, {"auth_bytes": token}).error_code == 0
        return error_codes(w.call(case.api_key, case.version, case.body(names)))


def binding(resource: ResourceType, name: str, user: str, op: AclOperation,
            permission: AclPermissionType) -> AclBinding:
    if resource == ResourceType.BROKER:
        return AclBinding(resource, CLUSTER, ResourcePatternType.LITERAL, f"User:{user}", "*",
                          op, permission)
    prefixed = permission == AclPermissionType.DENY
    return AclBinding(resource, name[:-3] if prefixed else name,
                      ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
                      f"User:{user}", "*", op, permission)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name for c in CASES])
def test_acl_matrix(broker: BrokerProcess, admin: AdminClient, index: int) -> None:
    case, user = CASES[index], USERS[index]
    tag = uuid.uuid4().hex[:8]
    names = Names(f"t-{tag}", f"g-{tag}", f"x-{tag}")
    for f in admin.create_topics([NewTopic(names.topic, 1, 1)]).values():
        f.result(TIMEOUT)
    name_of = {ResourceType.TOPIC: names.topic, ResourceType.GROUP: names.group,
               ResourceType.TRANSACTIONAL_ID: names.txn, ResourceType.BROKER: CLUSTER}

    def acls(permission: AclPermissionType) -> None:
        bindings = [binding(r, name_of[r], user, op, permission) for r, op in case.needs]
        for f in admin.create_acls(bindings[:1] if permission == AclPermissionType.DENY
                                   else bindings).values():
            f.result(TIMEOUT)

    assert call_as(broker, user, case, names) == case.denied, "without the ACL"
    acls(AclPermissionType.ALLOW)
    assert call_as(broker, user, case, names) == case.allowed, "with the ACL"
    acls(AclPermissionType.DENY)  # DENY beats ALLOW
    assert call_as(broker, user, case, names) == case.denied, "with a matching DENY"
