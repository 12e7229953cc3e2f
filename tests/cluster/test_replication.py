"""A 3-broker Samsa cluster through ZooKeeper: replication, failover, acks=all, transactions.

Every test starts its own three broker processes (own chroot in the session's ZooKeeper) and
drives them with confluent-kafka (librdkafka) over real sockets.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.cluster.cluster import Cluster, wait_until
from tests.protocol.wire import WireClient

pytestmark = pytest.mark.timeout(240)

NOT_ENOUGH_REPLICAS = 19


def _create(cluster: Cluster, topic: str, partitions: int, rf: int = 3, **configs: str) -> None:
    admin = cluster.admin()  # must outlive its futures
    fs = admin.create_topics(
        [NewTopic(topic, partitions, rf, config=configs)], operation_timeout=10
    )
    fs[topic].result(timeout=20)
    wait_until(lambda: cluster.has_leaders(topic, partitions), 20, "leaders")


def _produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    errors: list[KafkaError] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % partitions,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(90) == 0
    assert not errors, errors


def _read(bootstrap: str, topic: str, partitions: int, expect: int,
          isolation: str = "read_uncommitted", timeout: float = 60) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "fetch.wait.max.ms": 100})
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        wait_until(lambda: _drain(c, out) >= expect, timeout, f"{expect} records")
        _drain(c, out, 1.0)  # nothing beyond what is expected
    finally:
        c.close()
    return out


def _drain(c: Consumer, out: list[bytes], seconds: float = 0.2) -> int:
    for msg in c.consume(1000, seconds):
        if msg.error() is None:
            out.append(msg.value())
    return len(out)


def test_replicated_topic_spreads_leaders_and_copies_every_replica(cluster):
    topic = "rep-" + uuid.uuid4().hex[:6]
    _create(cluster, topic, 3)
    assert set(cluster.leaders(topic).values()) == {0, 1, 2}
    values = [f"v{i}".encode() for i in range(300)]
    _produce(cluster.bootstrap, topic, values, 3)
    assert sorted(_read(cluster.bootstrap, topic, 3, 300)) == sorted(values)
    for p in range(3):
        wait_until(lambda p=p: len(set(cluster.log_sizes(topic, p).values())) == 1, 20,
                   f"replicas of partition {p} identical in size")
        assert len(cluster.log_sizes(topic, p)) == 3
    assert all(isr == [0, 1, 2] for isr in cluster.isr(topic).values())


def test_leader_kill9_fails_over_without_losing_acknowledged_writes(cluster):
    topic = "fo-" + uuid.uuid4().hex[:6]
    _create(cluster, topic, 2)
    first = [f"a{i}".encode() for i in range(200)]
    _produce(cluster.bootstrap, topic, first, 2)
    victim = cluster.leaders(topic)[0]
    cluster.broker(victim).kill9()
    wait_until(lambda: cluster.leaders(topic)[0] not in (victim, -1), 30, "a new leader")
    second = [f"b{i}".encode() for i in range(200)]
    _produce(cluster.bootstrap, topic, second, 2)
    assert sorted(_read(cluster.bootstrap, topic, 2, 400)) == sorted(first + second)
    # The killed broker comes back as a follower, catches up and rejoins the ISR.
    cluster.broker(victim).start()
    wait_until(lambda: all(victim in isr for isr in cluster.isr(topic).values()), 60,
               "the restarted broker back in every ISR")
    for p in range(2):
        wait_until(lambda p=p: len(set(cluster.log_sizes(topic, p).values())) == 1, 30,
                   f"replicas of partition {p} identical in size")


def test_min_insync_replicas_refuses_writes_it_cannot_replicate(cluster):
    topic = "misr-" + uuid.uuid4().hex[:6]
    _create(cluster, topic, 1, **{"min.insync.replicas": "2"})
    leader = cluster.leaders(topic)[0]
    others = [b for b in (0, 1, 2) if b != leader]
    _produce(cluster.bootstrap, topic, [b"before"], 1)
    cluster.broker(others[0]).kill9()
    wait_until(lambda: len(cluster.isr(topic)[0]) == 2, 30, "ISR without the killed follower")
    _produce(cluster.bootstrap, topic, [b"one-down"], 1)
    cluster.broker(others[1]).kill9()
    wait_until(lambda: cluster.isr(topic)[0] == [leader], 30, "ISR of the leader alone")
    from samsa.protocol.records import build_batch

    with WireClient(cluster.broker(leader).bootstrap) as w:
        resp = w.call(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [
                {"index": 0, "records": build_batch([(None, b"refused", [], 0)])}]}]})
    assert resp.responses[0].partition_responses[0].error_code == NOT_ENOUGH_REPLICAS
    got = _read(cluster.broker(leader).bootstrap, topic, 1, 2)
    assert got == [b"before", b"one-down"]


def test_transaction_spanning_three_leaders_commits_atomically(cluster):
    topic = "txn-" + uuid.uuid4().hex[:6]
    _create(cluster, topic, 3)
    assert set(cluster.leaders(topic).values()) == {0, 1, 2}
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "t-" + topic,
                  "transaction.timeout.ms": 30000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, f"c{i}".encode(), partition=i % 3)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, f"x{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0  # abort_transaction would otherwise purge unsent records
    p.abort_transaction(30)
    committed = _read(cluster.bootstrap, topic, 3, 30, isolation="read_committed")
    assert sorted(committed) == sorted(f"c{i}".encode() for i in range(30))
    everything = _read(cluster.bootstrap, topic, 3, 60)
    assert len(everything) == 60  # the aborted records are there, just not visible


def _all_brokers_see_leaders(cluster: Cluster, topic: str, partitions: int) -> bool:
    for b in cluster.brokers:
        with WireClient(b.bootstrap) as w:
            md = w.call(3, 4, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
        led = [p for t in md.topics if t.name == topic for p in t.partitions if p.leader_id >= 0]
        if len(led) != partitions:
            return False
    return True


def test_coordinators_spread_across_brokers(cluster):
    from samsa.coordinator.internal_log import partition_for

    ids = [f"txn-{i}" for i in range(40)]
    with WireClient(cluster.brokers[0].bootstrap) as w:
        resp = w.call(10, 4, {"key_type": 1, "coordinator_keys": ids})
    nodes = {c.key: c.node_id for c in resp.coordinators if c.error_code == 0}
    assert len(nodes) == len(ids), resp
    assert set(nodes.values()) == {0, 1, 2}
    # FindCoordinator created __transaction_state through broker 0; the others learn its
    # partitions from ZooKeeper watches a moment later (Kafka's brokers do too).
    wait_until(lambda: _all_brokers_see_leaders(cluster, "__transaction_state", 6), 20,
               "every broker seeing __transaction_state's leaders")
    leaders = cluster.leaders("__transaction_state")
    for key, node in nodes.items():
        assert node == leaders[partition_for(key, 6)]


def test_frozen_leader_is_fenced_and_its_stale_write_is_never_visible(cluster):
    import os
    import signal

    topic = "frz-" + uuid.uuid4().hex[:6]
    _create(cluster, topic, 1, **{"min.insync.replicas": "2"})
    _produce(cluster.bootstrap, topic, [f"a{i}".encode() for i in range(50)], 1)
    zombie = cluster.leaders(topic)[0]
    zb = cluster.broker(zombie)
    os.kill(zb.pid, signal.SIGSTOP)
    try:
        # Its ZooKeeper session (3 s) expires; the controller moves the leadership.
        wait_until(lambda: cluster.leaders(topic)[0] not in (zombie, -1), 30, "a new leader")
        live = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != zombie)
        _produce(live, topic, [f"b{i}".encode() for i in range(50)], 1)
        # A write queued on the frozen broker's socket is handled when it wakes up.
        from samsa.protocol.records import build_batch

        w = WireClient(zb.bootstrap)
        correlation, frame = w.encode_request(0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [
                {"index": 0, "records": build_batch([(None, b"zombie", [], 0)])}]}]})
        w.send_raw(frame)
    finally:
        os.kill(zb.pid, signal.SIGCONT)
    resp = w.read_response(0, 9, correlation)
    w.close()
    assert resp.responses[0].partition_responses[0].error_code != 0
    # The old leader follows the new one, truncates what only it had, and rejoins the ISR.
    wait_until(lambda: zombie in cluster.isr(topic)[0], 60, "the fenced broker back in the ISR")
    wait_until(lambda: len(set(cluster.log_sizes(topic, 0).values())) == 1, 30,
               "identical replicas")
    got = _read(live, topic, 1, 100)
    assert b"zombie" not in got
    assert got == [f"a{i}".encode() for i in range(50)] + [f"b{i}".encode() for i in range(50)]
    assert "leader" in zb.log_text()


def test_frozen_controller_is_replaced_and_fenced(cluster):
    import os
    import signal

    old = cluster.admin().list_topics(timeout=10).controller_id
    ob = cluster.broker(old)
    os.kill(ob.pid, signal.SIGSTOP)
    others = [b for b in cluster.brokers if b.broker_id != old]
    bootstrap = ",".join(b.bootstrap for b in others)
    from confluent_kafka.admin import AdminClient

    try:
        wait_until(
            lambda: AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
            .controller_id not in (old, -1), 30, "a new controller")
    finally:
        os.kill(ob.pid, signal.SIGCONT)
    new = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).controller_id
    wait_until(lambda: "resigns as controller" in ob.log_text()
               or "is no longer the controller" in ob.log_text(), 30,
               "the old controller stepping down")
    # It comes back as an ordinary broker under a new ZooKeeper session.
    wait_until(lambda: cluster.every_broker_sees({0, 1, 2}), 30,
               "the old controller registered, as every broker sees it")
    # The cluster is still run by the new controller: a leader that dies is replaced.
    topic = "ctl-" + uuid.uuid4().hex[:6]
    _create(cluster, topic, 1)
    leader = cluster.leaders(topic)[0]
    cluster.broker(leader).kill9()
    wait_until(lambda: cluster.leaders(topic)[0] not in (leader, -1), 30, "a new leader")
    assert new != old


def test_topic_config_and_deletion_reach_every_broker(cluster):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    topic = "cfg-" + uuid.uuid4().hex[:6]
    _create(cluster, topic, 3)
    admin = cluster.admin()
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(timeout=20)
    # Every partition leader (one per broker) now refuses a record over the new limit.
    from samsa.protocol.records import build_batch

    for partition, leader in cluster.leaders(topic).items():
        def too_large(partition=partition, leader=leader) -> bool:
            with WireClient(cluster.broker(leader).bootstrap) as w:
                resp = w.call(0, 9, {"acks": 1, "timeout": 5000, "topic_data": [
                    {"name": topic, "partition_data": [
                        {"index": partition,
                         "records": build_batch([(None, b"x" * 5000, [], 0)])}]}]})
            return resp.responses[0].partition_responses[0].error_code == 10
        wait_until(too_large, 20, f"MESSAGE_TOO_LARGE from broker {leader}")
    admin.delete_topics([topic])[topic].result(timeout=20)
    wait_until(lambda: not any(cluster.log_sizes(topic, p) for p in range(3)), 20,
               "the partition directories gone from every broker")


def test_clean_stop_hands_leadership_over_without_losing_acknowledged_writes(cluster):
    import re
    import threading

    topic = "cs-" + uuid.uuid4().hex[:6]
    _create(cluster, topic, 3)
    leader = cluster.leaders(topic)[0]
    acked: list[bytes] = []
    failed: list[object] = []
    unflushed: list[int] = []  # the thread's flush result, asserted here (not in the thread)
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 2})

        def done(err, msg) -> None:
            (failed if err else acked).append(err or msg.value())

        i = 0
        while not stop.is_set():
            p.produce(topic, f"v{i}".encode(), partition=i % 3, on_delivery=done)
            p.poll(0.002)
            i += 1
        unflushed.append(p.flush(60))

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    wait_until(lambda: len(acked) > 200, 30, "records acknowledged before the stop")
    assert cluster.broker(leader).stop() == 0
    wait_until(lambda: len(acked) > 600, 60, "records acknowledged after the stop")
    stop.set()
    t.join(90)
    assert unflushed == [0], "the producer did not finish delivering"
    assert not failed, failed[:3]
    # The controller moved its leaderships (ControlledShutdown), leaving none with it.
    assert "Controlled shutdown request returned successfully" in cluster.broker(
        leader).log_text()
    moved = [m for b in cluster.brokers for m in re.findall(
        rf"{topic}-\d+: leader \d+ epoch \d+ isr .* \(controlled shutdown of {leader}\)",
        b.log_text())]
    assert moved
    live = ",".join(b.bootstrap for b in cluster.brokers if b.broker_id != leader)
    got = _read(live, topic, 3, len(acked))
    assert sorted(got) == sorted(acked)


def test_markers_from_a_replaced_transaction_coordinator_are_refused(cluster):
    from samsa.coordinator.internal_log import partition_for

    topic = "mk-" + uuid.uuid4().hex[:6]
    _create(cluster, topic, 1)
    txn_id = "mk-" + topic
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": 30000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"first", partition=0)
    p.commit_transaction(30)
    coordinator = cluster.leaders("__transaction_state")[partition_for(txn_id, 6)]

    def producer_state() -> object:
        # commit_transaction returns once the commit is decided (PrepareCommit replicated);
        # the coordinator writes the markers after that, so wait until this partition's
        # marker has landed (no open transaction) before reading its coordinator epoch.
        seen: list[object] = []

        def settled() -> bool:
            with WireClient(cluster.broker(cluster.leaders(topic)[0]).bootstrap) as w:
                resp = w.call(61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
            (state,) = resp.topics[0].partitions[0].active_producers
            seen.append(state)
            return state.current_txn_start_offset == -1

        wait_until(settled, 30, "the commit marker on the partition")
        return seen[-1]

    before = producer_state()
    # The coordinator dies; its __transaction_state partition gets a new leader (epoch + 1).
    cluster.broker(coordinator).kill9()
    wait_until(lambda: cluster.leaders("__transaction_state")[partition_for(txn_id, 6)]
               not in (coordinator, -1), 30, "a new transaction coordinator")
    p.begin_transaction()
    p.produce(topic, b"second", partition=0)
    p.commit_transaction(60)
    after = producer_state()
    assert after.coordinator_epoch > before.coordinator_epoch
    # A marker carrying the old coordinator's epoch (a zombie coordinator) is refused.
    leader = cluster.leaders(topic)[0]
    with WireClient(cluster.broker(leader).bootstrap) as w:
        resp = w.call(27, 1, {"markers": [{
            "producer_id": after.producer_id, "producer_epoch": after.producer_epoch,
            "transaction_result": False, "coordinator_epoch": before.coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [0]}]}]})
    assert resp.markers[0].topics[0].partitions[0].error_code == 52  # COORDINATOR_FENCED
    got = _read(cluster.broker(leader).bootstrap, topic, 1, 2, isolation="read_committed")
    assert got == [b"first", b"second"]
