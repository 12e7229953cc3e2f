"""Partition reassignment (AlterPartitionReassignments / ListPartitionReassignments, KIP-455)
on a three-broker ZooKeeper cluster: replicas move with their data, the replicas left behind
are deleted, a reassignment in progress is listed and can be cancelled, and a new controller
finishes one the old controller started."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from samsa.protocol.errors import ErrorCode
from tests.cluster.cluster import (
    GROUP_KEY,
    TRANSACTION_KEY,
    Cluster,
    find_coordinators,
    wait_until,
)
from tests.protocol.wire import WireClient
from tests.support.java import run_java_tool

RECORDS = 200


def _create(cluster: Cluster, topic: str, assignment: list[list[int]]) -> None:
    admin = cluster.admin()
    fs = admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment)],
                             operation_timeout=10)
    fs[topic].result(timeout=20)
    wait_until(lambda: cluster.has_leaders(topic, len(assignment)), 20, "leaders")


def _produce(cluster: Cluster, topic: str, n: int = RECORDS) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"value-{i}".encode(), partition=0)
    assert p.flush(30) == 0


def _consume(cluster: Cluster, topic: str, n: int = RECORDS) -> list[bytes]:
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        for _ in range(300):
            for m in c.consume(500, timeout=0.2):
                assert m.error() is None, m.error()
                out.append(m.value())
            if len(out) >= n:
                break
        # and nothing more (a duplicate would show here)
        out.extend(m.value() for m in c.consume(500, timeout=1.0) if m.error() is None)
        return out
    finally:
        c.close()


def _replicas(cluster: Cluster, topic: str) -> list[int]:
    md = cluster.admin().list_topics(topic, timeout=10)
    return list(md.topics[topic].partitions[0].replicas)


def _kadmin(cluster: Cluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=20000)


def _controller(cluster: Cluster) -> int:
    running = next(b for b in cluster.brokers if b.is_running())
    with WireClient(running.bootstrap) as w:
        return int(w.call(3, 1, {"topics": []}).controller_id)


def _done(cluster: Cluster, topic: str, target: list[int]) -> bool:
    """No reassignment listed, and every running broker's Metadata shows the target."""
    admin = _kadmin(cluster)
    try:
        if admin.list_partition_reassignments():
            return False
    finally:
        admin.close()
    for b in cluster.brokers:
        if not b.is_running():
            continue
        with WireClient(b.bootstrap) as w:
            md = w.call(3, 4, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        parts = [p for t in md.topics if t.name == topic for p in t.partitions]
        if [list(p.replica_nodes) for p in parts] != [target] or parts[0].leader_id not in target:
            return False
    return True


def test_reassign_moves_data_and_deletes_old_replica(cluster: Cluster) -> None:
    topic = "moved"
    _create(cluster, topic, [[0]])
    _produce(cluster, topic)
    tp = KTopicPartition(topic, 0)
    admin = _kadmin(cluster)
    try:
        # Kafka's validation of a target, and a cancel with nothing in progress
        assert admin.alter_partition_reassignments({tp: [1, 1]}) == {
            tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: [1, 7]}) == {
            tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: None}) == {
            tp: NoReassignmentInProgressError}
        missing = KTopicPartition(topic, 5)
        assert admin.alter_partition_reassignments({missing: [1]}) == {
            missing: UnknownTopicOrPartitionError}
        # an idempotent producer (acks=all) keeps writing while the partition and its
        # leadership move
        stop = threading.Event()
        sent: list[int] = []

        def produce() -> None:
            p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                          "enable.idempotence": True, "linger.ms": 1})
            i = RECORDS
            while not stop.is_set():
                p.produce(topic, key=str(i).encode(), value=f"value-{i}".encode(),
                          partition=0)
                sent.append(i)
                i += 1
                if i % 20 == 0:
                    p.flush(10)
            assert p.flush(30) == 0

        producing = threading.Thread(target=produce)
        producing.start()
        try:
            wait_until(lambda: len(sent) >= 100, 10, "producing")
            assert admin.alter_partition_reassignments({tp: [1, 2]}) == {tp: None}
            wait_until(lambda: _done(cluster, topic, [1, 2]), 30, "reassignment to [1, 2] done")
            moved_at = len(sent)
            wait_until(lambda: len(sent) >= moved_at + 100, 10, "producing after the move")
        finally:
            stop.set()
            producing.join(60)
    finally:
        admin.close()
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "epochs",
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        messages = []
        for _ in range(300):
            messages += [m for m in c.consume(500, timeout=0.2) if m.error() is None]
            if len(messages) >= RECORDS + len(sent):
                break
        messages += [m for m in c.consume(500, timeout=1.0) if m.error() is None]
    finally:
        c.close()
    assert [m.value() for m in messages] == [
        f"value-{i}".encode() for i in range(RECORDS + len(sent))]
    # written under the old leadership and under the new one (epoch + 2: the move's two steps)
    epochs = {m.leader_epoch() for m in messages}
    assert {0, 2} <= epochs, epochs
    wait_until(lambda: not (cluster.broker(0).data_dir / f"{topic}-0").exists(), 10,
               "broker 0's copy deleted")
    assert (cluster.broker(1).data_dir / f"{topic}-0").is_dir()
    assert (cluster.broker(2).data_dir / f"{topic}-0").is_dir()


def test_only_the_controller_answers(cluster: Cluster) -> None:
    topic = "not-here"
    _create(cluster, topic, [[0]])
    controller = _controller(cluster)
    other = next(b for b in cluster.brokers if b.broker_id != controller)
    body: dict[str, Any] = {"timeout": 10000, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "replicas": [1]}]}]}
    with WireClient(other.bootstrap) as w:
        assert w.call(45, 0, body).error_code == ErrorCode.not_controller
        assert w.call(46, 0, {"timeout": 10000, "topics": None}).error_code == (
            ErrorCode.not_controller)
    with WireClient(cluster.broker(controller).bootstrap) as w:
        # v1 with AllowReplicationFactorChange false: [1] keeps the factor, [1, 2] does not
        resp = w.call(45, 1, {**body, "allow_replication_factor_change": False, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": [1, 2]}]}]})
        assert resp.error_code == 0
        assert resp.responses[0].partitions[0].error_code == ErrorCode.invalid_replication_factor
        assert resp.responses[0].partitions[0].error_message == (
            "The replication factor is changed from 1 to 2")
        resp = w.call(45, 0, {**body, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": []}]}]})
        assert resp.responses[0].partitions[0].error_code == ErrorCode.invalid_replica_assignment
        resp = w.call(45, 1, {**body, "allow_replication_factor_change": False})
        assert resp.responses[0].partitions[0].error_code == 0
    wait_until(lambda: _done(cluster, topic, [1]), 30, "reassignment to [1] done")


def test_in_progress_listed_cancelled_and_finished_by_a_new_controller(
    cluster: Cluster,
) -> None:
    """The target broker is frozen (still registered for a moment, so the target is valid):
    the reassignment stays in progress, is listed with its adding/removing replicas, and a
    cancel restores the original replicas. Started again, it survives the controller's death
    and completes under the next controller once the target broker is back."""
    controller = _controller(cluster)
    source, target = [b for b in (0, 1, 2) if b != controller]
    topic = "held"
    _create(cluster, topic, [[source]])
    _produce(cluster, topic)
    frozen = cluster.broker(target)
    assert frozen.pid is not None
    at_controller = cluster.broker(controller).bootstrap
    other = next(b for b in (0, 1, 2) if b not in (controller, target))
    # (raw requests to the controller: a client library might try the frozen broker first)

    def alter(replicas: list[int] | None) -> int:
        with WireClient(at_controller) as w:
            resp = w.call(45, 0, {"timeout": 10000, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "replicas": replicas}]}]})
        assert resp.error_code == 0
        return int(resp.responses[0].partitions[0].error_code)

    def listed(topics: list[dict[str, Any]] | None = None) -> dict[tuple[str, int], Any]:
        with WireClient(at_controller) as w:
            resp = w.call(46, 0, {"timeout": 10000, "topics": topics})
        assert resp.error_code == 0
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                              list(p.removing_replicas))
                for t in resp.topics for p in t.partitions}

    def replicas() -> list[int]:
        with WireClient(cluster.broker(other).bootstrap) as w:
            md = w.call(3, 4, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        return list(md.topics[0].partitions[0].replica_nodes)

    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        assert alter([target]) == 0
        ongoing = {(topic, 0): ([target, source], [target], [source])}
        assert listed() == ongoing
        assert listed([{"name": topic, "partition_indexes": [0]}]) == ongoing
        assert listed([{"name": "other", "partition_indexes": [0]}]) == {}
        wait_until(lambda: replicas() == [target, source], 10,
                   "Metadata shows the replica set being reassigned")
        with WireClient(cluster.broker(other).bootstrap) as w:
            # no new partitions while one moves (Kafka's ReassignmentInProgressException);
            # a topic config change leaves the assignment being reassigned alone
            resp = w.call(37, 1, {"topics": [{"name": topic, "count": 2, "assignments": None}],
                                  "timeout": 10000, "validate_only": False})
            assert resp.results[0].error_code == ErrorCode.reassignment_in_progress
            resp = w.call(44, 0, {"resources": [{
                "resource_type": 2, "resource_name": topic, "configs": [
                    {"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}],
                "validate_only": False})
            assert resp.responses[0].error_code == 0
        assert listed() == ongoing
        assert replicas() == [target, source]
        assert alter(None) == 0  # cancel: back to the original replicas
        assert listed() == {}
        wait_until(lambda: replicas() == [source], 10,
                   "Metadata shows the original replicas again")
        assert alter([target]) == 0
        assert listed() == ongoing
        cluster.broker(controller).kill9()
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    wait_until(lambda: _controller(cluster) in (source, target), 20, "a new controller")
    wait_until(lambda: _done(cluster, topic, [target]), 40, "reassignment completed")
    assert _consume(cluster, topic) == [f"value-{i}".encode() for i in range(RECORDS)]
    wait_until(lambda: not (cluster.broker(source).data_dir / f"{topic}-0").exists(), 10,
               "the source's copy deleted")


def test_transaction_coordinator_moves_with_its_partition(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """__transaction_state-0 moves from [0, 1] to [1, 2] while a transactional producer keeps
    committing: the coordinator leaves broker 0 and is loaded on broker 1, and a read_committed
    consumer sees every committed transaction exactly once, nothing else."""
    cluster = Cluster(zookeeper, tmp_path, **{"transaction.state.log.num.partitions": 1})
    cluster.start()
    try:
        admin = cluster.admin()  # must outlive its futures
        fs = admin.create_topics([
            NewTopic("__transaction_state", 1, replica_assignment=[[0, 1]],
                     config={"cleanup.policy": "compact", "min.insync.replicas": "2"}),
            NewTopic("eos", 1, replica_assignment=[[1, 2]]),
        ], operation_timeout=20)
        for fut in fs.values():
            fut.result(timeout=30)
        wait_until(lambda: cluster.has_leaders("__transaction_state", 1)
                   and cluster.has_leaders("eos", 1), 30, "leaders")
        committed: list[int] = []
        stop = threading.Event()
        failure: list[BaseException] = []

        def produce() -> None:
            p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "mover",
                          "transaction.timeout.ms": 30000})
            try:
                p.init_transactions(30)
                n = 0
                while not stop.is_set():
                    p.begin_transaction()
                    for j in range(5):
                        p.produce("eos", f"{n}-{j}".encode(), partition=0)
                    p.commit_transaction(30)
                    committed.append(n)
                    n += 1
            except BaseException as exc:
                failure.append(exc)
            finally:
                p.flush(10)

        worker = threading.Thread(target=produce, daemon=True)
        worker.start()
        try:
            wait_until(lambda: len(committed) >= 5 or bool(failure), 30,
                       "transactions committed")
            tp = KTopicPartition("__transaction_state", 0)
            kadmin = _kadmin(cluster)
            try:
                assert kadmin.alter_partition_reassignments({tp: [1, 2]}) == {tp: None}
            finally:
                kadmin.close()
            wait_until(lambda: _done(cluster, "__transaction_state", [1, 2]), 30, "moved")
            moved_at = len(committed)
            wait_until(lambda: len(committed) >= moved_at + 5 or bool(failure), 30,
                       "transactions committed after the move")
        finally:
            stop.set()
            worker.join(60)
        assert not failure, failure
        assert find_coordinators(cluster, TRANSACTION_KEY, ["mover"]) == {"mover": 1}
        expected = [f"{n}-{j}".encode() for n in committed for j in range(5)]
        assert _consume(cluster, "eos", len(expected)) == expected
        wait_until(lambda: not (cluster.broker(0).data_dir / "__transaction_state-0").exists(),
                   10, "broker 0's copy deleted")
    finally:
        cluster.close()


def test_kafka_reassign_partitions_execute_and_verify(cluster: Cluster, tmp_path: Path) -> None:
    """Kafka's own tool: --execute starts the move, --verify reports it complete (and clears
    the throttles, which it always does once nothing is moving)."""
    topic = "tool-moved"
    _create(cluster, topic, [[0]])
    _produce(cluster, topic)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 1]}]}))
    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    args = ["--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan)]
    res = run_java_tool(tool, [*args, "--execute"]).check()
    assert f"Successfully started partition reassignment for {topic}-0" in res.stdout
    verified: list[str] = []

    def complete() -> bool:
        out = run_java_tool(tool, [*args, "--verify"]).check().stdout
        verified.append(out)
        return f"Reassignment of partition {topic}-0 is completed." in out

    wait_until(complete, 60, "--verify reporting the reassignment complete")
    assert "Clearing broker-level throttles" in verified[-1], verified[-1]
    wait_until(lambda: _done(cluster, topic, [2, 1]), 10, "Metadata shows [2, 1]")
    assert _consume(cluster, topic) == [f"value-{i}".encode() for i in range(RECORDS)]
    wait_until(lambda: not (cluster.broker(0).data_dir / f"{topic}-0").exists(), 10,
               "broker 0's copy deleted")


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_replication_throttle_slows_a_move(
    zookeeper: ZooKeeperProcess, tmp_path: Path, side: str
) -> None:
    """With `<side>.replication.throttled.rate` at 100 kB/s and the topic listing its replicas
    in `<side>.replication.throttled.replicas`, moving 800 kB takes seconds (unthrottled it
    takes well under one), and the data arrives whole."""
    cluster = Cluster(zookeeper, tmp_path, **{
        f"{side}.replication.throttled.rate": 100_000,
        "replication.quota.window.num": 2,
        "replication.quota.window.size.seconds": 1,
        "replica.fetch.max.bytes": 50_000,
    })
    cluster.start()
    try:
        topic = "throttled"
        _create(cluster, topic, [[0]])
        # small batches: a fetch brings at least one whole batch, whatever its limit
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "batch.size": 5000})
        value = os.urandom(4000)
        for i in range(200):
            p.produce(topic, key=str(i).encode(), value=value, partition=0)
        assert p.flush(30) == 0
        admin = cluster.admin()
        # as kafka-reassign-partitions --throttle lists them: the current replica on the
        # leader side, the one being added on the follower side
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry(f"{side}.replication.throttled.replicas",
                        "0:0" if side == "leader" else "0:1",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(20)
        wait_until(lambda: all(_topic_config(b.bootstrap, topic).get(
            f"{side}.replication.throttled.replicas") for b in cluster.brokers), 10,
            "every broker seeing the throttled replicas")
        started = time.monotonic()
        tp = KTopicPartition(topic, 0)
        kadmin = _kadmin(cluster)
        try:
            assert kadmin.alter_partition_reassignments({tp: [1]}) == {tp: None}
        finally:
            kadmin.close()
        wait_until(lambda: _done(cluster, topic, [1]), 40, "the throttled move done")
        elapsed = time.monotonic() - started
        assert elapsed > 4.0, f"800 kB at 100 kB/s moved in {elapsed:.1f} s"
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "throttle-check",
                      "auto.offset.reset": "earliest"})
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            got = 0
            for _ in range(100):
                got += sum(1 for m in c.consume(500, timeout=0.2)
                           if m.error() is None and m.value() == value)
                if got >= 200:
                    break
            assert got == 200
        finally:
            c.close()
    finally:
        cluster.close()


def _topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    with WireClient(bootstrap) as w:
        resp = w.call(32, 1, {"resources": [{"resource_type": 2, "resource_name": topic,
                                             "configuration_keys": None}],
                              "include_synonyms": False})
    return {c.name: c.value for c in resp.results[0].configs if c.value}


def test_group_coordinator_moves_with_its_partition(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """__consumer_offsets-0 moves from [0, 1] to [1, 2]: the group coordinator moves to
    broker 1 with the group's committed offsets, and commits go on there."""
    cluster = Cluster(zookeeper, tmp_path, **{"offsets.topic.num.partitions": 1})
    cluster.start()
    try:
        admin = cluster.admin()  # must outlive its futures
        fs = admin.create_topics([
            NewTopic("__consumer_offsets", 1, replica_assignment=[[0, 1]],
                     config={"cleanup.policy": "compact"}),
            NewTopic("data", 1, replica_assignment=[[2]]),
        ], operation_timeout=20)
        for fut in fs.values():
            fut.result(timeout=30)
        wait_until(lambda: cluster.has_leaders("__consumer_offsets", 1)
                   and cluster.has_leaders("data", 1), 30, "leaders")
        assert find_coordinators(cluster, GROUP_KEY, ["movers"]) == {"movers": 0}
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "movers",
                      "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition("data", 0, 42)], asynchronous=False)
            tp = KTopicPartition("__consumer_offsets", 0)
            kadmin = _kadmin(cluster)
            try:
                assert kadmin.alter_partition_reassignments({tp: [1, 2]}) == {tp: None}
            finally:
                kadmin.close()
            wait_until(lambda: _done(cluster, "__consumer_offsets", [1, 2]), 30, "moved")
            wait_until(lambda: find_coordinators(cluster, GROUP_KEY, ["movers"])
                       == {"movers": 1}, 10, "the coordinator on broker 1")
            # (the client learns of the move from a NOT_COORDINATOR answer, and asks again)
            wait_until(lambda: c.committed([TopicPartition("data", 0)], timeout=5)[0].offset
                       == 42, 20, "the offset committed before the move")
            c.commit(offsets=[TopicPartition("data", 0, 43)], asynchronous=False)
            (got,) = c.committed([TopicPartition("data", 0)], timeout=20)
            assert got.offset == 43
        finally:
            c.close()
    finally:
        cluster.close()
