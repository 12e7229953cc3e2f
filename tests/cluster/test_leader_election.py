"""Leader elections on a 3-broker cluster: Kafka's `kafka-leader-election` tool and raw
ElectLeaders (preferred and unclean), the controller's automatic leader rebalance, and
`unclean.leader.election.enable` per topic. Leaders are checked through Metadata."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster, create_topic, wait_until
from tests.cluster.test_replication import _read
from tests.protocol.wire import WireClient
from tests.support.java import run_java_tool

pytestmark = pytest.mark.timeout(240)

ELECT_LEADERS = 43
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 0, 3, 42
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, ELECTION_NOT_NEEDED = 80, 83, 84
PREFERRED, UNCLEAN = 0, 1


def _start(zookeeper: ZooKeeperProcess, tmp_path: Path, **settings: object) -> Cluster:
    c = Cluster(zookeeper, tmp_path, **settings)
    try:
        return c.start()
    except BaseException:
        c.close()
        raise


def _preferred(cluster: Cluster, topic: str) -> dict[int, int]:
    md = cluster.admin().list_topics(topic, timeout=10)
    return {p: pm.replicas[0] for p, pm in md.topics[topic].partitions.items()}


def _elect(bootstrap: str, election_type: int, topic_partitions: dict[str, list[int]] | None,
           version: int = 2) -> dict[tuple[str, int], int]:
    body: dict[str, object] = {"timeout": 20000, "topic_partitions": None if topic_partitions
                               is None else [{"topic": t, "partitions": ps}
                                             for t, ps in topic_partitions.items()]}
    if version >= 1:
        body["election_type"] = election_type
    with WireClient(bootstrap, timeout=30) as w:
        resp = w.call(ELECT_LEADERS, version, body)
    if version >= 1:
        assert resp.error_code == NONE
    return {(r.topic, p.partition_id): p.error_code
            for r in resp.replica_election_results for p in r.partition_result}


def _non_controllers(cluster: Cluster) -> list[int]:
    with WireClient(cluster.brokers[0].bootstrap) as w:
        controller = w.call(3, 1, {"topics": []}).controller_id
    return [b.broker_id for b in cluster.brokers if b.broker_id != controller]


def test_preferred_election_tool_moves_leadership_back_without_losing_acked_records(
        zookeeper, tmp_path):
    cluster = _start(zookeeper, tmp_path, **{"auto.leader.rebalance.enable": False})
    try:
        topic = "pref-" + uuid.uuid4().hex[:6]
        create_topic(cluster, topic, 6)
        preferred = _preferred(cluster, topic)
        wait_until(lambda: cluster.leaders(topic) == preferred, 20, "preferred leaders")
        # Already on its preferred replica: nothing to elect (asked of a broker that is not
        # the controller, which forwards the request; and in v0, preferred only).
        victim, asked = _non_controllers(cluster)
        other = cluster.broker(asked).bootstrap
        assert _elect(other, PREFERRED, {topic: [0, 1], "nope": [0]}) == {
            (topic, 0): ELECTION_NOT_NEEDED, (topic, 1): ELECTION_NOT_NEEDED,
            ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert _elect(other, PREFERRED, {topic: [9]}, version=0) == {
            (topic, 9): UNKNOWN_TOPIC_OR_PARTITION}

        moved = sorted(p for p, b in preferred.items() if b == victim)
        assert moved
        cluster.broker(victim).stop()
        wait_until(lambda: all(cluster.leaders(topic)[p] not in (victim, -1) for p in moved),
                   30, "leaders moved off the stopped broker")
        assert _elect(other, PREFERRED, {topic: moved[:1]}) == {
            (topic, moved[0]): PREFERRED_LEADER_NOT_AVAILABLE}
        cluster.broker(victim).start()
        wait_until(lambda: all(victim in isr for isr in cluster.isr(topic).values()), 60,
                   "the restarted broker back in every ISR")
        assert all(cluster.leaders(topic)[p] != victim for p in moved)

        # A producer (acks=all) runs across the election.
        acked: list[bytes] = []
        errors: list[object] = []
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                          "enable.idempotence": True, "linger.ms": 5,
                          "message.timeout.ms": 60000})
            i = 0
            while not stop.is_set():
                p.produce(topic, f"r{i}".encode(), partition=i % 6, on_delivery=lambda err, m:
                          errors.append(err) if err else acked.append(m.value()))
                p.poll(0.002)
                i += 1
            p.flush(60)

        t = threading.Thread(target=produce)
        t.start()
        try:
            wait_until(lambda: len(acked) > 200, 30, "records acknowledged before the election")
            res = run_java_tool("org.apache.kafka.tools.LeaderElectionCommand", [
                "--bootstrap-server", other, "--election-type", "PREFERRED",
                "--all-topic-partitions"]).check()
            after = len(acked)
            wait_until(lambda: len(acked) > after + 200, 30, "records acknowledged after it")
        finally:
            stop.set()
            t.join(90)
        prefix = "Successfully completed leader election (PREFERRED) for partitions "
        assert res.stdout.startswith(prefix) and sorted(
            res.stdout.strip()[len(prefix):].split(", ")) == sorted(
            f"{topic}-{p}" for p in moved), res.describe()
        wait_until(lambda: cluster.leaders(topic) == preferred, 5, "Metadata's preferred leaders")
        assert not errors, errors
        got = set(_read(cluster.bootstrap, topic, 6, len(acked)))
        assert set(acked) <= got, f"{len(set(acked) - got)} acknowledged records lost"

        # Nothing left to elect: the tool succeeds and reports nothing.
        again = run_java_tool("org.apache.kafka.tools.LeaderElectionCommand", [
            "--bootstrap-server", cluster.bootstrap, "--election-type", "PREFERRED",
            "--all-topic-partitions"]).check()
        assert "Successfully" not in again.stdout, again.describe()
    finally:
        cluster.close()


def test_auto_leader_rebalance_moves_leadership_back(zookeeper, tmp_path):
    cluster = _start(zookeeper, tmp_path, **{"leader.imbalance.check.interval.seconds": 1})
    try:
        topic = "auto-" + uuid.uuid4().hex[:6]
        create_topic(cluster, topic, 3)
        preferred = _preferred(cluster, topic)
        victim = 2
        cluster.broker(victim).stop()
        wait_until(lambda: victim not in cluster.leaders(topic).values(), 30,
                   "leaders moved off the stopped broker")
        cluster.broker(victim).start()
        wait_until(lambda: cluster.leaders(topic) == preferred, 60,
                   "leadership back on the preferred replicas")
    finally:
        cluster.close()


def test_unclean_election_by_request_and_by_topic_config(zookeeper, tmp_path):
    cluster = _start(zookeeper, tmp_path, **{"auto.leader.rebalance.enable": False})
    try:
        clean, unclean = "clean-" + uuid.uuid4().hex[:6], "unclean-" + uuid.uuid4().hex[:6]
        later = "later-" + uuid.uuid4().hex[:6]
        admin = cluster.admin()
        fs = admin.create_topics([
            NewTopic(clean, 1, replica_assignment=[[1, 2]]),
            NewTopic(later, 1, replica_assignment=[[1, 2]]),
            NewTopic(unclean, 1, replica_assignment=[[1, 2]],
                     config={"unclean.leader.election.enable": "true"})])
        for f in fs.values():
            f.result(20)
        for t in (clean, unclean, later):
            wait_until(lambda t=t: cluster.leaders(t) == {0: 1}, 20, f"{t} led by 1")
        cluster.broker(2).stop()
        wait_until(lambda: all(cluster.isr(t) == {0: [1]} for t in (clean, unclean, later)),
                   30, "ISRs without broker 2")
        cluster.broker(1).stop()
        wait_until(lambda: cluster.leaders(clean) == {0: -1} == cluster.leaders(unclean), 30,
                   "both partitions offline")
        b0 = cluster.brokers[0].bootstrap
        assert _elect(b0, UNCLEAN, {clean: [0]}) == {(clean, 0): ELIGIBLE_LEADERS_NOT_AVAILABLE}
        cluster.broker(2).start()
        # The topic that allows it gets the out-of-sync replica as leader by itself ...
        wait_until(lambda: cluster.leaders(unclean) == {0: 2}, 30, "unclean leader elected")
        assert cluster.leaders(clean) == {0: -1}
        assert _elect(b0, PREFERRED, {clean: [0]}) == {(clean, 0): PREFERRED_LEADER_NOT_AVAILABLE}
        # ... the other one only when an admin asks for an unclean election.
        assert _elect(b0, UNCLEAN, {clean: [0]}) == {(clean, 0): NONE}
        wait_until(lambda: cluster.leaders(clean) == {0: 2}, 5, "the unclean leader in Metadata")
        assert cluster.isr(clean) == {0: [2]}
        assert _elect(b0, UNCLEAN, {clean: [0]}) == {(clean, 0): ELECTION_NOT_NEEDED}
        # Allowing it later on a topic elects its out-of-sync replica then.
        assert cluster.leaders(later) == {0: -1}
        res = ConfigResource("topic", later, incremental_configs=[ConfigEntry(
            "unclean.leader.election.enable", "true",
            incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(20)
        wait_until(lambda: cluster.leaders(later) == {0: 2}, 30, "unclean leader after the change")
    finally:
        cluster.close()


def test_single_broker_has_nobody_else_to_elect(shared_broker):
    """Without ZooKeeper the broker leads every partition it has: no election is needed."""
    from confluent_kafka.admin import AdminClient

    topic = "single-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(20)
    b = shared_broker.bootstrap
    assert _elect(b, PREFERRED, {topic: [0, 1, 5]}) == {
        (topic, 0): ELECTION_NOT_NEEDED, (topic, 1): ELECTION_NOT_NEEDED,
        (topic, 5): UNKNOWN_TOPIC_OR_PARTITION}
    assert _elect(b, UNCLEAN, {topic: [1]}, version=1) == {(topic, 1): ELECTION_NOT_NEEDED}
    assert _elect(b, PREFERRED, None) == {}  # all partitions: those not needing one left out
    with WireClient(b) as w:
        resp = w.call(ELECT_LEADERS, 2, {"election_type": 7, "timeout": 1000,
                                         "topic_partitions": [{"topic": topic, "partitions": [0]}]})
    assert resp.error_code == INVALID_REQUEST
    assert [p.error_code for r in resp.replica_election_results for p in r.partition_result] == [
        INVALID_REQUEST]
