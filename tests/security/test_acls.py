"""ACLs with Kafka's authorizer (authorizer.class.name): Kafka's kafka-acls tool manages them,
real clients over SASL PLAIN get Kafka's answers with and without the ACL each API needs.

One broker: PLAINTEXT (ANONYMOUS, a super user as a PLAINTEXT inter-broker listener must be)
and SASL_PLAINTEXT with the users admin (super user), alice and bob (no ACLs unless a test
grants them).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.support.broker import BrokerProcess, free_port
from tests.support.java import run_java_tool

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TIMEOUT = 20

ANY = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                       AclOperation.ANY, AclPermissionType.ANY)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    plain, sasl = free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("acl") / "data", port=plain, name="acl-broker",
                      settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin;User:ANONYMOUS",
        "num.partitions": 1,
    })
    b.sasl_port = sasl  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        _ADMINS.clear()
        b.close()


def sasl(broker: BrokerProcess, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}",  # type: ignore[attr-defined]
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


_ADMINS: dict[tuple[int, str], AdminClient] = {}


def admin(broker: BrokerProcess, user: str = "admin") -> AdminClient:
    """One admin client per user, kept: librdkafka fails the futures of a client that is
    garbage collected."""
    key = (broker.sasl_port, user)  # type: ignore[attr-defined]
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(sasl(broker, user))
    return _ADMINS[key]


def allow(resource: ResourceType, name: str, user: str, op: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource, name, pattern, f"User:{user}", "*", op, permission)


def grant(broker: BrokerProcess, *bindings: AclBinding) -> None:
    for f in admin(broker).create_acls(list(bindings)).values():
        f.result(TIMEOUT)


def new_topic(broker: BrokerProcess, prefix: str) -> str:
    name = f"{prefix}{uuid.uuid4().hex[:6]}"
    for f in admin(broker).create_topics([NewTopic(name, 1, 1)]).values():
        f.result(TIMEOUT)
    return name


def produce(broker: BrokerProcess, user: str, topic: str, **conf: Any) -> KafkaError | None:
    """Produce one record as `user`: None, or the delivery error."""
    errors: list[KafkaError | None] = []
    p = Producer({**sasl(broker, user), "message.timeout.ms": 10000, **conf})
    p.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    p.flush(TIMEOUT)
    assert errors, "no delivery report"
    return errors[0]


def admin_error(future: Any) -> int:
    with pytest.raises(KafkaException) as e:
        future.result(TIMEOUT)
    return int(e.value.args[0].code())


def test_kafka_acls_tool_adds_lists_and_removes(broker: BrokerProcess, tmp_path: Path) -> None:
    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n')
    base = ["--bootstrap-server", f"127.0.0.1:{broker.sasl_port}",  # type: ignore[attr-defined]
            "--command-config", str(props)]
    res = run_java_tool("org.apache.kafka.tools.AclCommand", [
        *base, "--add", "--allow-principal", "User:carol", "--operation", "Read",
        "--operation", "Describe", "--topic", "tool-", "--resource-pattern-type", "prefixed"])
    assert res.returncode == 0, res.describe()
    # The tool lists the resource's ACLs after adding them (DescribeAcls).
    assert "User:carol" in res.stdout and "READ" in res.stdout.upper(), res.describe()
    found = admin(broker).describe_acls(AclBindingFilter(
        ResourceType.TOPIC, "tool-", ResourcePatternType.PREFIXED, "User:carol", None,
        AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT)
    assert {b.operation for b in found} == {AclOperation.READ, AclOperation.DESCRIBE}
    res = run_java_tool("org.apache.kafka.tools.AclCommand", [
        *base, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Read",
        "--topic", "tool-", "--resource-pattern-type", "prefixed"])
    assert res.returncode == 0, res.describe()
    left = admin(broker).describe_acls(AclBindingFilter(
        ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:carol", None,
        AclOperation.ANY, AclPermissionType.ANY)).result(TIMEOUT)
    assert [b.operation for b in left] == [AclOperation.DESCRIBE]


def test_acl_apis_need_cluster_permissions(broker: BrokerProcess) -> None:
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    # (librdkafka drops DescribeAcls' top-level error: kafka-python reports it)
    kp = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.sasl_port}",  # type: ignore[attr-defined]
                          security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                          sasl_plain_username="bob", sasl_plain_password="bob-secret")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp.describe_acls(ACLFilter(
                principal=None, host="*", operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY, resource_pattern=ResourcePatternFilter(
                    KResourceType.ANY, None, ACLResourcePatternType.ANY)))
    finally:
        kp.close()
    bob = admin(broker, "bob")
    (f,) = bob.create_acls([allow(ResourceType.TOPIC, "x", "bob", AclOperation.ALL)]).values()
    assert admin_error(f) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # An invalid ACL: the CLUSTER resource has one name.
    (f,) = admin(broker).create_acls(
        [allow(ResourceType.BROKER, "other", "bob", AclOperation.ALL)]).values()
    assert admin_error(f) == KafkaError.INVALID_REQUEST


def test_reassignment_apis_need_cluster_alter_and_describe(broker: BrokerProcess) -> None:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import (
        ClusterAuthorizationFailedError,
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
    )

    topic = new_topic(broker, "mv-")
    tp = KTopicPartition(topic, 0)

    def client(user: str) -> KafkaAdminClient:
        return KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{broker.sasl_port}",  # type: ignore[attr-defined]
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
            sasl_plain_username=user, sasl_plain_password=f"{user}-secret")

    bob = client("bob")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.alter_partition_reassignments({tp: [0]})
        with pytest.raises(ClusterAuthorizationFailedError):
            bob.list_partition_reassignments()
    finally:
        bob.close()
    su = client("admin")  # a super user; one broker: the partition is where it can be
    try:
        assert su.alter_partition_reassignments({tp: [0]}) == {tp: None}
        assert su.alter_partition_reassignments({tp: [0, 1]}) == {
            tp: InvalidReplicationAssignmentError}
        assert su.alter_partition_reassignments({tp: None}) == {
            tp: NoReassignmentInProgressError}
        assert su.list_partition_reassignments() == {}
    finally:
        su.close()


def test_produce_needs_topic_write_prefixed_allow_and_literal_deny(
        broker: BrokerProcess) -> None:
    one, two = new_topic(broker, "w-"), new_topic(broker, "w-")
    err = produce(broker, "alice", one)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow(ResourceType.TOPIC, "w-", "alice", AclOperation.WRITE,
                        ResourcePatternType.PREFIXED))
    assert produce(broker, "alice", one) is None
    grant(broker, allow(ResourceType.TOPIC, one, "alice", AclOperation.WRITE,
                        permission=AclPermissionType.DENY))
    err = produce(broker, "alice", one)  # DENY beats ALLOW
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce(broker, "alice", two) is None
    assert produce(broker, "admin", one) is None  # a super user: no ACL applies


def test_idempotent_producer_needs_idempotent_write_or_a_topic_write(
        broker: BrokerProcess) -> None:
    topic = new_topic(broker, "idem-")
    grant(broker, allow(ResourceType.TOPIC, topic, "bob", AclOperation.DESCRIBE))
    fatal: list[KafkaError] = []
    p = Producer({**sasl(broker, "bob"), "enable.idempotence": True,
                  "error_cb": fatal.append})
    deadline = time.monotonic() + TIMEOUT
    while not fatal and time.monotonic() < deadline:
        try:
            p.poll(0.2)
        except KafkaException as exc:  # the fatal error is raised too
            fatal.append(exc.args[0])
    assert fatal and fatal[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, fatal
    grant(broker, allow(ResourceType.TOPIC, topic, "bob", AclOperation.WRITE))
    assert produce(broker, "bob", topic, **{"enable.idempotence": True}) is None


def test_metadata_hides_topics_and_create_delete_need_acls(broker: BrokerProcess) -> None:
    seen, hidden = new_topic(broker, "m-"), new_topic(broker, "m-")
    grant(broker, allow(ResourceType.TOPIC, seen, "bob", AclOperation.READ))
    names = set(admin(broker, "bob").list_topics(timeout=TIMEOUT).topics)
    assert seen in names and hidden not in names
    assert hidden in admin(broker).list_topics(timeout=TIMEOUT).topics
    bob = admin(broker, "bob")
    (f,) = bob.create_topics([NewTopic("m-bob", 1, 1)]).values()
    assert admin_error(f) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    (f,) = bob.delete_topics([seen]).values()
    assert admin_error(f) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow(ResourceType.BROKER, "kafka-cluster", "bob", AclOperation.CREATE))
    (f,) = bob.create_topics([NewTopic("m-bob", 1, 1)]).values()
    f.result(TIMEOUT)


def test_consumer_group_needs_group_and_topic_read(broker: BrokerProcess) -> None:
    topic = new_topic(broker, "c-")
    assert produce(broker, "admin", topic) is None
    group = f"g-{topic}"

    def consume() -> KafkaError | bytes:
        c = Consumer({**sasl(broker, "alice"), "group.id": group,
                      "auto.offset.reset": "earliest"})
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error() is not None:
                    return m.error()
                c.commit(m, asynchronous=False)
                return m.value()
            raise AssertionError("nothing consumed")
        finally:
            c.close()

    grant(broker, allow(ResourceType.TOPIC, topic, "alice", AclOperation.READ))
    err = consume()
    assert isinstance(err, KafkaError) and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(broker, allow(ResourceType.GROUP, group, "alice", AclOperation.READ))
    assert consume() == b"v"
    # The committed offset: for who may describe the group (alice), not for bob.
    (f,) = admin(broker, "alice").list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]).values()
    assert [tp.offset for tp in f.result(TIMEOUT).topic_partitions] == [1]
    (f,) = admin(broker, "bob").list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]).values()
    assert admin_error(f) == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_transactions_need_transactional_id_write_and_group_read(broker: BrokerProcess) -> None:
    topic = new_topic(broker, "t-")
    txn_id = f"tx-{topic}"
    conf = {**sasl(broker, "alice"), "transactional.id": txn_id,
            "transaction.timeout.ms": 10000}
    grant(broker, allow(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    p = Producer(conf)
    with pytest.raises(KafkaException) as e:
        p.init_transactions(TIMEOUT)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(broker, allow(ResourceType.TRANSACTIONAL_ID, txn_id, "alice", AclOperation.WRITE))
    p = Producer(conf)
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce(topic, b"in-txn")
    p.flush(TIMEOUT)
    group = f"g-{topic}"
    c = Consumer({**sasl(broker, "admin"), "group.id": group})
    try:
        with pytest.raises(KafkaException) as e:
            p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)],
                                          c.consumer_group_metadata(), TIMEOUT)
    finally:
        c.close()
    assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    # With READ on the group and the topic the transaction commits, offsets included.
    grant(broker, allow(ResourceType.GROUP, group, "alice", AclOperation.READ),
          allow(ResourceType.TOPIC, topic, "alice", AclOperation.READ))
    p = Producer(conf)
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce(topic, b"committed")
    c = Consumer({**sasl(broker, "admin"), "group.id": group})
    try:
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)],
                                      c.consumer_group_metadata(), TIMEOUT)
        p.commit_transaction(TIMEOUT)
        assert c.committed([TopicPartition(topic, 0)], TIMEOUT)[0].offset == 1
    finally:
        c.close()


def test_acl_apis_without_an_authorizer_are_security_disabled(
        shared_broker: BrokerProcess) -> None:
    a = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    (f,) = a.create_acls([allow(ResourceType.TOPIC, "t", "bob", AclOperation.READ)]).values()
    assert admin_error(f) == KafkaError.SECURITY_DISABLED
    (f,) = a.delete_acls([ANY]).values()
    assert admin_error(f) == KafkaError.SECURITY_DISABLED


def test_acl_requests_with_unknown_or_invalid_elements(broker: BrokerProcess) -> None:
    from tests.protocol.wire import WireClient

    entry = {"principal": "User:bob", "host": "*", "operation": 3, "permission_type": 3}
    with WireClient(broker.bootstrap) as w:  # PLAINTEXT: ANONYMOUS, a super user here
        # An out-of-range code: INVALID_REQUEST for that ACL only (Kafka's fromCode: UNKNOWN).
        resp = w.call(30, 3, {"creations": [
            {"resource_type": 2, "resource_name": "ok", "resource_pattern_type": 3, **entry},
            {"resource_type": 99, "resource_name": "bad", "resource_pattern_type": 3, **entry},
            {"resource_type": 2, "resource_name": "bad", "resource_pattern_type": 2, **entry},
        ]})
        assert [r.error_code for r in resp.results] == [0, KafkaError.INVALID_REQUEST,
                                                        KafkaError.INVALID_REQUEST]
        resp = w.call(29, 3, {"resource_type_filter": 2, "resource_name_filter": "ok",
                              "pattern_type_filter": 2, "principal_filter": None,
                              "host_filter": None, "operation": 1, "permission_type": 1})
        assert [(r.resource_name, len(r.acls)) for r in resp.resources] == [("ok", 1)]
    with WireClient(broker.bootstrap) as w:
        # UNKNOWN (0) does not parse in Kafka: the connection is closed.
        correlation, data = w.encode_request(31, 3, {"filters": [
            {"resource_type_filter": 0, "resource_name_filter": None, "pattern_type_filter": 1,
             "principal_filter": None, "host_filter": None, "operation": 1,
             "permission_type": 1}]})
        w.send_raw(data)
        assert w.sock.recv(1) == b""
    assert "DeleteAcls request contains UNKNOWN elements" in broker.log_tail(50)


def test_authorized_operations_kip_430(broker: BrokerProcess) -> None:
    from confluent_kafka import TopicCollection

    topic = new_topic(broker, "ops-")
    group = f"g-{topic}"
    grant(broker, allow(ResourceType.TOPIC, topic, "bob", AclOperation.READ),
          allow(ResourceType.GROUP, group, "bob", AclOperation.DELETE))
    bob = admin(broker, "bob")
    (f,) = bob.describe_topics(TopicCollection([topic]),
                               include_authorized_operations=True).values()
    assert set(f.result(TIMEOUT).authorized_operations) == {AclOperation.READ,
                                                             AclOperation.DESCRIBE}
    cluster = admin(broker).describe_cluster(include_authorized_operations=True)
    assert AclOperation.CLUSTER_ACTION in cluster.result(TIMEOUT).authorized_operations
    (f,) = bob.describe_consumer_groups([group], include_authorized_operations=True).values()
    assert set(f.result(TIMEOUT).authorized_operations) == {AclOperation.DELETE,
                                                             AclOperation.DESCRIBE}


def test_fetch_needs_topic_read_and_configs_need_their_acls(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import ConfigResource

    topic = new_topic(broker, "f-")
    assert produce(broker, "admin", topic) is None
    grant(broker, allow(ResourceType.TOPIC, topic, "bob", AclOperation.DESCRIBE),
          # (librdkafka looks up the coordinator of its group.id anyway)
          allow(ResourceType.GROUP, f"g-{topic}", "bob", AclOperation.DESCRIBE))

    def fetch() -> KafkaError | bytes:
        c = Consumer({**sasl(broker, "bob"), "group.id": f"g-{topic}"})
        try:
            c.assign([TopicPartition(topic, 0, 0)])  # no group, no committed offset
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None:
                    return m.error() or m.value()
            raise AssertionError("no answer")
        finally:
            c.close()

    err = fetch()  # Metadata and ListOffsets need DESCRIBE only; Fetch needs READ
    assert isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(broker, allow(ResourceType.TOPIC, topic, "bob", AclOperation.READ))
    assert fetch() == b"v"
    bob = admin(broker, "bob")
    (f,) = bob.describe_configs([ConfigResource("TOPIC", topic)]).values()
    assert admin_error(f) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    (f,) = bob.describe_configs([ConfigResource("BROKER", "0")]).values()
    assert admin_error(f) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    grant(broker, allow(ResourceType.TOPIC, topic, "bob", AclOperation.ALTER_CONFIGS))
    (f,) = bob.describe_configs([ConfigResource("TOPIC", topic)]).values()
    assert f.result(TIMEOUT)["retention.ms"].value  # ALTER_CONFIGS implies DESCRIBE_CONFIGS


def test_client_quota_apis_need_cluster_config_acls(broker: BrokerProcess, tmp_path: Path
                                                    ) -> None:
    """kafka-configs on client quotas: AlterClientQuotas needs ALTER_CONFIGS on the cluster,
    DescribeClientQuotas DESCRIBE_CONFIGS (bob has neither; admin is a super user)."""
    def configs(user: str, *args: str) -> Any:
        props = tmp_path / f"{user}.properties"
        props.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required username="{user}" password="{user}-secret";\n')
        return run_java_tool("kafka.admin.ConfigCommand", [
            "--bootstrap-server", f"127.0.0.1:{broker.sasl_port}",  # type: ignore[attr-defined]
            "--command-config", str(props), *args])

    alter = ["--alter", "--entity-type", "clients", "--entity-name", "acl-quota-app",
             "--add-config", "producer_byte_rate=4096"]
    refused = configs("bob", *alter)
    assert refused.returncode != 0 and "ClusterAuthorization" in refused.describe(), \
        refused.describe()
    done = configs("admin", *alter)
    assert done.returncode == 0, done.describe()
    describe = configs("bob", "--describe", "--entity-type", "clients", "--entity-name",
                       "acl-quota-app")
    assert describe.returncode != 0 and "ClusterAuthorization" in describe.describe(), \
        describe.describe()
