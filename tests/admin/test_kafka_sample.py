"""The same admin commands against Apache Kafka 4.3.1 (one KRaft node from the jars
`make java-deps` caches, as bench/run.py starts it) and against Samsa: the JSON of each has the
same keys and the same shape, so scripts written against one work against the other."""

from __future__ import annotations

import io
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.broker.admin.client import AdminError, Connection, Settings
from samsa.protocol.uuids import random_kafka_uuid_string
from tests.admin.conftest import Samsa
from tests.support.broker import BrokerProcess, free_port
from tests.support.java import JVM_ARGS, classpath_dir, java_executable

SERVER_PROPERTIES = """process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:{cport}
log.dirs={logs}
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
group.initial.rebalance.delay.ms=0
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
"""


def _answers(bootstrap: str) -> bool:
    try:
        Connection(bootstrap, Settings({"bootstrap.servers": bootstrap})).close()
        return True
    except AdminError:
        return False


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-node Apache Kafka (KRaft, broker and controller); yields its bootstrap."""
    java, lib = java_executable(), classpath_dir("kafka4")
    work = tmp_path_factory.mktemp("apache-kafka")
    port, cport = free_port(), free_port()
    props = work / "server.properties"
    props.write_text(SERVER_PROPERTIES.format(port=port, cport=cport, logs=work / "logs"))
    cmd = [java, *JVM_ARGS, "-cp", f"{lib}/*"]
    cluster_id = random_kafka_uuid_string()  # never one starting with "-": an option to the tool
    subprocess.run([*cmd, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c",
                    str(props), "--standalone"], check=True, capture_output=True, timeout=120)
    log = (work / "kafka.log").open("wb")
    proc = subprocess.Popen([*cmd, "kafka.Kafka", str(props)], stdout=log,
                            stderr=subprocess.STDOUT)
    bootstrap = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not _answers(bootstrap):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (work / "kafka.log").read_text()[-3000:]
                pytest.fail(f"Apache Kafka did not start: {tail}")
            time.sleep(0.2)
        yield bootstrap
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def shape(value: Any) -> Any:
    """The keys and kinds of a JSON value: a list by its first item, a scalar by its type
    (null matching any)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None if value is None else type(value).__name__


def same_shape(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_shape(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return not a or not b or same_shape(a[0], b[0])
    return a is None or b is None or a == b


def assert_same_shapes(from_kafka: dict[str, Any], from_samsa: dict[str, Any]) -> None:
    assert from_kafka.keys() == from_samsa.keys()
    for command in from_kafka:
        assert same_shape(shape(from_kafka[command]), shape(from_samsa[command])), (
            command, from_kafka[command], from_samsa[command])


def _sample(samsa: Samsa, bootstrap: str, topic: str, group: str) -> dict[str, Any]:
    """What each command prints as JSON, on a topic with one committed offset of a group."""
    out = {"create": samsa("topic", "create", topic, "-p", "2", "-c", "retention.ms=60000",
                           "--format", "json", bootstrap=bootstrap).json()}
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(4):
        p.produce(topic, b"x", partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    c.close()
    (out["list"],) = [t for t in samsa("topic", "list", "--format", "json",
                                       bootstrap=bootstrap).json() if t["name"] == topic]
    out["describe"] = samsa("topic", "describe", topic, "--format", "json",
                            bootstrap=bootstrap).json()
    out["cluster"] = samsa("cluster", "describe", "--format", "json", bootstrap=bootstrap).json()
    (out["groups"],) = [g for g in samsa("group", "list", "--format", "json",
                                         bootstrap=bootstrap).json() if g["group_id"] == group]
    out["group"] = samsa("group", "describe", group, "--format", "json",
                         bootstrap=bootstrap).json()
    r = samsa("topic", "describe", f"{topic}-missing", bootstrap=bootstrap)
    out["error"] = (r.rc, r.err.split(":")[1].strip())
    out["reset"] = samsa("group", "reset-offsets", group, "--topic", f"{topic}:0",
                         "--shift-by", "5", "--execute", "--format", "json",
                         bootstrap=bootstrap).json()
    out["delete"] = samsa("group", "delete", group, "--format", "json",
                          bootstrap=bootstrap).json()
    out.update(_txn_sample(samsa, bootstrap, topic, f"t-{group}"))
    entity = ("--entity-type", "topic", "--entity-name", topic, "--format", "json")
    out["config-set"] = samsa("config", "set", *entity, "retention.ms=120000",
                              bootstrap=bootstrap).json()
    out["config-describe"] = samsa("config", "describe", *entity, bootstrap=bootstrap).json()
    out["config-delete"] = samsa("config", "delete", *entity, "retention.ms",
                                 bootstrap=bootstrap).json()
    with pytest.MonkeyPatch.context() as m:
        m.setattr("sys.stdin", io.StringIO("k1:v1\nk2:v2\n"))
        out["produce"] = samsa("produce", topic, "-p", "0", "-K", ":", "-H", "h=1",
                               "--format", "json", bootstrap=bootstrap).json()
    out["consume"] = samsa("consume", topic, "-p", "0", "--offset",
                           str(out["produce"]["partitions"][0]["base_offset"]),
                           "--isolation", "read_committed", "--format", "json",
                           bootstrap=bootstrap).json()
    out["consume-group"] = samsa("consume", topic, "-g", f"c-{group}", "--from-beginning",
                                 "--format", "json", bootstrap=bootstrap).json()
    out["reassign-list"] = samsa("reassign", "list", "--format", "json",
                                 bootstrap=bootstrap).json()
    node = str(out["cluster"]["brokers"][0]["id"])  # one node: a move to where it is
    out["reassign-execute"] = samsa("reassign", "execute", "--move", f"{topic}:0={node}",
                                    "--wait", "--timeout", "30", "--format", "json",
                                    bootstrap=bootstrap).json()
    r = samsa("reassign", "cancel", f"{topic}:0", bootstrap=bootstrap)
    out["reassign-cancel"] = (r.rc, r.err.split(":")[1].strip())
    out["elect"] = samsa("elect-leaders", "--election-type", "preferred", "--topic", topic,
                         "--format", "json", bootstrap=bootstrap).json()
    return out


def _txn_sample(samsa: Samsa, bootstrap: str, topic: str, txn_id: str) -> dict[str, Any]:
    """The txn commands on one committed transaction of `txn_id` (to partition 1)."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"t", partition=1)
    p.commit_transaction(30)

    def txn(*args: str) -> Any:
        return samsa("txn", *args, "--format", "json", bootstrap=bootstrap).json()

    deadline = time.monotonic() + 30  # the markers follow EndTxn's answer (PrepareCommit)
    while txn("describe", txn_id)["state"] != "CompleteCommit" and time.monotonic() < deadline:
        time.sleep(0.1)
    (listed,) = [t for t in txn("list") if t["transactional_id"] == txn_id]
    out = {"txn-list": listed, "txn-describe": txn("describe", txn_id),
           "txn-producers": txn("describe-producers", "--topic", topic, "--partition", "1"),
           "txn-hanging": txn("find-hanging", "--topic", topic,
                              "--max-transaction-timeout", "0")}
    # a transaction left open (at offset 4 of partition 1), aborted as an operator would
    stuck = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{txn_id}-open"})
    stuck.init_transactions(30)
    stuck.begin_transaction()
    stuck.produce(topic, b"open", partition=1)
    assert stuck.flush(30) == 0
    (open_,) = [p for p in txn("describe-producers", "--topic", topic, "--partition", "1")
                if p["current_txn_start_offset"] is not None]
    out["txn-abort"] = txn("abort", "--topic", topic, "--partition", "1", "--start-offset",
                           str(open_["current_txn_start_offset"]))
    out["txn-open-after-abort"] = [
        p for p in txn("describe-producers", "--topic", topic, "--partition", "1")
        if p["current_txn_start_offset"] is not None]
    return out


def test_the_same_output_shape_as_against_apache_kafka(kafka: str, shared_broker: BrokerProcess,
                                                       samsa: Samsa, unique_topic: str) -> None:
    # The first group request of a new Kafka cluster creates __consumer_offsets and answers
    # COORDINATOR_NOT_AVAILABLE meanwhile: the command retries, as Kafka's Admin client does.
    r = samsa("group", "describe", "nobody", bootstrap=kafka)
    assert r.err == "samsa: GROUP_ID_NOT_FOUND: Group nobody not found.\n"
    from_kafka = _sample(samsa, kafka, unique_topic, f"g-{unique_topic}")
    from_samsa = _sample(samsa, shared_broker.bootstrap, unique_topic, f"g-{unique_topic}")
    assert_same_shapes(from_kafka, from_samsa)
    for got in (from_kafka, from_samsa):
        assert got["create"]["partitions"] == 2 and got["list"]["partitions"] == 2
        (d,) = got["describe"]
        assert d["configs"] == {"retention.ms": "60000"} and len(d["partition_details"]) == 2
        assert got["groups"]["type"] == "classic" and got["groups"]["state"] == "Empty"
        (g,) = got["group"]
        assert [(o["partition"], o["current_offset"], o["log_end_offset"], o["lag"])
                for o in g["offsets"]] == [(0, 1, 2, 1)]
        assert got["error"] == (1, "UNKNOWN_TOPIC_OR_PARTITION")
        assert [(r["partition"], r["new_offset"]) for r in got["reset"]] == [(0, 2)]
        assert got["delete"] == [{"group_id": f"g-{unique_topic}", "deleted": True}]
        assert got["txn-list"]["state"] == got["txn-describe"]["state"] == "CompleteCommit"
        (producer,) = got["txn-producers"]
        assert producer["producer_id"] == got["txn-list"]["producer_id"]
        assert producer["current_txn_start_offset"] is None and got["txn-hanging"] == []
        assert (got["txn-abort"]["partition"], got["txn-abort"]["aborted"]) == (1, True)
        assert got["txn-open-after-abort"] == []
        assert [(c["name"], c["value"], c["source"]) for c in got["config-describe"][
            "configs"]] == [("retention.ms", "120000", "DYNAMIC_TOPIC_CONFIG")]
        assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in got["consume"]] == [
            (2, "k1", "v1", {"h": "1"}), (3, "k2", "v2", {"h": "1"})]
        assert got["reassign-list"] == []
        assert got["reassign-execute"]["done"] and [
            (m["partition"], m["replicas"]) for m in got["reassign-execute"]["partitions"]] == [
            (0, [got["cluster"]["brokers"][0]["id"]])]
        assert got["reassign-cancel"] == (1, "NO_REASSIGNMENT_IN_PROGRESS")
        # a classic group's only member: both partitions (4 + 2 records above, 1 + 1 since,
        # and the aborted record at 4 of partition 1, read uncommitted)
        assert sorted((r["partition"], r["offset"]) for r in got["consume-group"]) == [
            (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 4)]
        assert [(e["partition"], e["result"]) for e in got["elect"]] == [
            (0, "ELECTION_NOT_NEEDED"), (1, "ELECTION_NOT_NEEDED")]


def _security_sample(samsa: Samsa, bootstrap: str, name: str) -> dict[str, Any]:
    """The acl commands on ACLs of `name` (both brokers with an authorizer), the user
    commands on a user `name`."""
    def run(*args: str) -> Any:
        return samsa(*args, "--format", "json", bootstrap=bootstrap).json()

    return {
        "acl-create": run("acl", "create", "--resource-type", "topic", "--resource-name", name,
                          "--pattern-type", "prefixed", "--principal", "User:alice",
                          "--operation", "read", "--operation", "describe"),
        "acl-list": run("acl", "list", "--resource-type", "topic", "--resource-name",
                        f"{name}-x", "--pattern-type", "match"),
        "acl-delete": run("acl", "delete", "--resource-type", "topic", "--principal",
                          "User:alice", "--operation", "read"),
        "user-set": run("user", "set-scram", name, "--mechanism", "SCRAM-SHA-512",
                        "--password", "secret"),
        "user-describe": run("user", "describe", name),
        "user-delete": run("user", "delete-scram", name, "--mechanism", "SCRAM-SHA-512"),
    }


def test_the_acl_and_user_commands_against_apache_kafka(kafka: str, broker_factory: Any,
                                                    samsa: Samsa, unique_topic: str) -> None:
    samsa_broker = broker_factory(settings={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    from_kafka = _security_sample(samsa, kafka, unique_topic)
    from_samsa = _security_sample(samsa, samsa_broker.bootstrap, unique_topic)
    assert_same_shapes(from_kafka, from_samsa)
    for got in (from_kafka, from_samsa):
        assert [a["operation"] for a in got["acl-create"]] == ["READ", "DESCRIBE"]
        assert [(a["resource_name"], a["pattern_type"], a["operation"])
                for a in got["acl-list"]] == [(unique_topic, "PREFIXED", "DESCRIBE"),
                                              (unique_topic, "PREFIXED", "READ")]
        assert [a["operation"] for a in got["acl-delete"]] == ["READ"]
        assert got["user-describe"] == [{"user": unique_topic, "credentials": [
            {"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}]
        assert got["user-delete"] == {"user": unique_topic, "deleted": ["SCRAM-SHA-512"]}
