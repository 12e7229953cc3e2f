"""A broker bounced faster than its ZooKeeper session timeout (KIP-380).

A broker is killed (-9) and started again at once, well inside zookeeper.session.timeout.ms,
while transactional producers and read_committed consumers run (tests/chaos's queue workload
and its checker). Its new life registers with a new broker epoch (the czxid of its znode) and
the controller handles it as a failure and a start-up: every partition it led gets a higher
leader epoch (moved, or re-established), no two brokers ever claim leadership at the same
leader epoch, the metadata of every broker converges, and the checker finds nothing
acknowledged lost. A ControlledShutdown carrying the broker epoch of its previous life is
fenced with STALE_BROKER_EPOCH.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from samsa.protocol.errors import ErrorCode
from tests.chaos.checker import Recorder, check
from tests.chaos.nemesis import create_topics, fully_replicated
from tests.chaos.queue_workload import ConsumerWorker, Errors, ProducerWorker, QueueParams
from tests.cluster.cluster import Cluster, wait_until
from tests.protocol.wire import WireClient
from tests.support.broker import BrokerProcess

PARTITIONS = 3


def _views(cluster: Cluster, topic: str) -> dict[int, dict[int, tuple[int, int]]]:
    """Each running broker's own metadata: broker -> partition -> (leader, leader epoch)."""
    views = {}
    for b in cluster.brokers:
        if not b.is_running():
            continue
        try:
            with WireClient(b.bootstrap, timeout=2) as w:
                md = w.call(3, 12, {"topics": [{"name": topic}],
                                    "allow_auto_topic_creation": False})
        except Exception:
            continue  # starting or stopping
        views[b.broker_id] = {p.partition_index: (p.leader_id, p.leader_epoch)
                              for t in md.topics if t.name == topic for p in t.partitions}
    return views


def _converged(cluster: Cluster, topic: str) -> dict[int, tuple[int, int]] | None:
    views = _views(cluster, topic)
    distinct = {tuple(sorted(v.items())) for v in views.values()}
    if len(views) != len(cluster.brokers) or len(distinct) != 1:
        return None
    view = next(iter(views.values()))
    if len(view) != PARTITIONS or any(leader < 0 for leader, _ in view.values()):
        return None
    return view


def _await_converged(cluster: Cluster, topic: str, timeout_s: float = 30) -> dict[
        int, tuple[int, int]]:
    """The brokers' agreed view, asked again until they agree: one Metadata call slower than
    its 2 s under this load drops that broker's view from a single look."""
    deadline = time.monotonic() + timeout_s
    while (view := _converged(cluster, topic)) is None:
        assert time.monotonic() < deadline, _views(cluster, topic)
        time.sleep(0.2)
    return view


def test_broker_bounced_within_its_session_timeout(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    cluster = Cluster(zookeeper, tmp_path)  # zookeeper.session.timeout.ms=3000
    zk = KazooClient(hosts=zookeeper.connect_string)
    stop, watching = threading.Event(), threading.Event()
    # (topic partition, leader epoch) -> the brokers that said they lead it at that epoch
    claims: dict[tuple[int, int], set[int]] = {}
    try:
        cluster.start()
        zk.start()
        run_id = uuid.uuid4().hex[:6]
        topic = f"bounce-{run_id}"
        create_topics(cluster, {topic: PARTITIONS})
        bootstrap = ",".join(b.bootstrap for b in cluster.brokers)

        def watch() -> None:
            while not watching.is_set():
                for broker_id, view in _views(cluster, topic).items():
                    for p, (leader, epoch) in view.items():
                        if leader == broker_id:
                            claims.setdefault((p, epoch), set()).add(broker_id)
                time.sleep(0.05)

        params = QueueParams(partitions=PARTITIONS)
        rec, errors = Recorder(), Errors()
        workers: list[threading.Thread] = [
            ProducerWorker(i, bootstrap, topic, params, rec, errors, stop, run_id)
            for i in range(2)]
        workers.append(ConsumerWorker("c0", bootstrap, topic, PARTITIONS, rec, errors, stop))
        workers.append(threading.Thread(target=watch, daemon=True))
        for w in workers:
            w.start()
        wait_until(lambda: rec.history() and len(rec.history()) > 20, 30, "some transactions")

        for victim_id in (1, 2):  # not broker 0: the first one up, the controller
            victim = cluster.broker(victim_id)
            before = _await_converged(cluster, topic)
            led = {p: epoch for p, (leader, epoch) in before.items() if leader == victim_id}
            path = f"/{cluster.chroot}/brokers/ids/{victim_id}"
            old_epoch = zk.exists(path).czxid
            victim.kill9()
            victim.start()  # its old session is still alive in ZooKeeper
            wait_until(lambda: zk.exists(path) is not None and  # noqa: B023
                       zk.exists(path).czxid != old_epoch, 15, "the new registration")  # noqa: B023
            wait_until(lambda: fully_replicated(cluster, [topic]), 60, "full ISRs again")
            after = _await_converged(cluster, topic)
            # every leadership of its previous life was moved or re-established at a new epoch
            for p, epoch in led.items():
                assert after[p][1] > epoch, (victim_id, p, before, after)
            # a request of its previous life is fenced by the controller
            controller = cluster.broker(int(_controller_id(zk, cluster.chroot)))
            with WireClient(controller.bootstrap) as w:
                resp = w.call(7, 3, {"broker_id": victim_id, "broker_epoch": old_epoch})
            assert resp.error_code == ErrorCode.stale_broker_epoch, resp
            time.sleep(2)

        stop.set()
        for w in workers[:2]:
            w.join(120)
        watching.set()
        final = ConsumerWorker("final", bootstrap, topic, PARTITIONS, rec, errors,
                               threading.Event())
        final.start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and time.monotonic() - final.last_record < 6:
            time.sleep(0.5)
        final.stop_event.set()
        final.join(30)
        report = check(rec.history())
        assert report.sends.get("ok", 0) > 0, report.text()
        assert report.ok, report.text()
        doubled = {k: v for k, v in claims.items() if len(v) > 1}
        assert not doubled, f"two leaders at one leader epoch: {doubled}"
    finally:
        stop.set()
        watching.set()
        zk.stop()
        zk.close()
        cluster.close()


def _controller_id(zk: KazooClient, chroot: str) -> int:
    path = f"/{chroot}/controller" if chroot else "/controller"
    return int(json.loads(zk.get(path)[0])["brokerid"])


def test_controller_takes_a_new_registration_for_a_new_life(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """The race the test above leaves to chance, made certain: a broker's znode replaced in
    one ZooKeeper multi (its id never leaves /brokers/ids, only the czxid changes) is a new
    incarnation to the controller, which moves the leaderships of the old one (here paused)
    and takes it out of the ISRs. ControlledShutdown is served between brokers only."""
    cluster = Cluster(zookeeper, tmp_path)
    zk = KazooClient(hosts=f"{zookeeper.connect_string}/{cluster.chroot}")
    frozen: list[BrokerProcess] = []
    try:
        cluster.start()
        zk.start()
        create_topics(cluster, {"lives": PARTITIONS})
        victim = cluster.broker(2)
        controller_id = _controller_id(zk, "")
        assert controller_id != 2
        with WireClient(cluster.broker(controller_id).bootstrap) as w:
            versions = w.call(18, 3, {"client_software_name": "t",
                                      "client_software_version": "1"})
            assert 7 not in {k.api_key for k in versions.api_keys}  # as Kafka 4: not listed
            resp = w.call(7, 3, {"broker_id": 99, "broker_epoch": 1})
            assert resp.error_code == ErrorCode.broker_not_available, resp
        other = next(b for b in (0, 1) if b != controller_id)
        with WireClient(cluster.broker(other).bootstrap) as w:
            resp = w.call(7, 2, {"broker_id": 2, "broker_epoch": -1})
            assert resp.error_code == ErrorCode.not_controller, resp

        def state(p: int) -> dict[str, object]:
            data, _ = zk.get(f"/brokers/topics/lives/partitions/{p}/state")
            return dict(json.loads(data))

        led = {p: state(p)["leader_epoch"] for p in range(PARTITIONS) if state(p)["leader"] == 2}
        assert led, [state(p) for p in range(PARTITIONS)]
        path = "/brokers/ids/2"
        data, stat = zk.get(path)
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGSTOP)  # its session lives on for the session timeout
        frozen.append(victim)
        tx = zk.transaction()
        tx.delete(path, version=stat.version)
        tx.create(path, data, ephemeral=True)
        assert not any(isinstance(r, Exception) for r in tx.commit())

        def moved() -> bool:
            states = [state(p) for p in range(PARTITIONS)]
            return all(s["leader"] != 2 and 2 not in s["isr"] for s in states) and all(
                states[p]["leader_epoch"] > epoch for p, epoch in led.items())

        wait_until(moved, 10, "the old life's leaderships moved and its ISR places taken")
        with WireClient(cluster.broker(controller_id).bootstrap) as w:
            resp = w.call(7, 3, {"broker_id": 2, "broker_epoch": stat.czxid})
            assert resp.error_code == ErrorCode.stale_broker_epoch, resp
    finally:
        for b in frozen:
            b.kill9()
        zk.stop()
        zk.close()
        cluster.close()


def test_a_new_controller_finds_leaderships_of_a_previous_life(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """The same re-registration while the controller is frozen (SIGSTOP): its successor,
    elected once the frozen one's session expires, never saw the old broker epoch, yet finds
    the states written before the broker's current registration and moves those leaderships."""
    cluster = Cluster(zookeeper, tmp_path)
    zk = KazooClient(hosts=f"{zookeeper.connect_string}/{cluster.chroot}")
    frozen: list[BrokerProcess] = []
    try:
        cluster.start()
        zk.start()
        create_topics(cluster, {"lives": PARTITIONS})
        controller = _controller_id(zk, "")
        victim_id = next(b for b in (1, 2) if b != controller)

        def state(p: int) -> dict[str, object]:
            data, _ = zk.get(f"/brokers/topics/lives/partitions/{p}/state")
            return dict(json.loads(data))

        led = {p: state(p)["leader_epoch"] for p in range(PARTITIONS)
               if state(p)["leader"] == victim_id}
        assert led, [state(p) for p in range(PARTITIONS)]
        frozen += [cluster.broker(controller), cluster.broker(victim_id)]
        for b in frozen:
            assert b.pid is not None
            os.kill(b.pid, signal.SIGSTOP)
        path = f"/brokers/ids/{victim_id}"
        data, stat = zk.get(path)
        tx = zk.transaction()
        tx.delete(path, version=stat.version)
        tx.create(path, data, ephemeral=True)
        assert not any(isinstance(r, Exception) for r in tx.commit())

        def moved() -> bool:
            if _controller_id(zk, "") in (controller, victim_id):
                return False
            states = {p: state(p) for p in led}
            return all(s["leader"] not in (victim_id, controller) for s in states.values())

        wait_until(moved, 20, "the new controller moving the old life's leaderships")
    finally:
        for b in frozen:
            b.kill9()
        zk.stop()
        zk.close()
        cluster.close()


TopicPartitions = list[tuple[str, int]]


def _produce(bootstrap: str, tps: TopicPartitions, tag: str) -> dict[tuple[str, int], list[bytes]]:
    """20 records to each partition (acks=all): those acknowledged."""
    from confluent_kafka import Producer

    acked: dict[tuple[str, int], list[bytes]] = {tp: [] for tp in tps}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})

    def done(err: Any, msg: Any) -> None:
        if err is None:
            acked[(msg.topic(), msg.partition())].append(msg.value())

    for t, p in tps:
        for i in range(20):
            producer.produce(t, f"{tag}-{t}-{p}-{i}".encode(), partition=p, on_delivery=done)
    assert producer.flush(60) == 0
    return acked


def _read(bootstrap: str, expected: dict[tuple[str, int], list[bytes]]
          ) -> dict[tuple[str, int], list[bytes]]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as TP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check",
                         "enable.auto.commit": False})
    got: dict[tuple[str, int], list[bytes]] = {tp: [] for tp in expected}
    try:
        consumer.assign([TP(t, p, 0) for t, p in expected])
        deadline = time.monotonic() + 30
        while (time.monotonic() < deadline
               and any(len(got[tp]) < len(expected[tp]) for tp in expected)):
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    got[(m.topic(), m.partition())].append(m.value())
    finally:
        consumer.close()
    return got


def _probe_as_leader(bootstrap: str, led: dict[tuple[str, int], int], seconds: float
                     ) -> list[tuple[str, tuple[str, int], int]]:
    """Produce (acks=1) and Fetch (at the leader epoch of `led`) sent to `bootstrap` for each
    of its partitions, again and again for `seconds`: the answers' error codes."""
    from samsa.protocol.records import build_batch

    answers: list[tuple[str, tuple[str, int], int]] = []
    until = time.monotonic() + seconds
    with WireClient(bootstrap) as w:
        while time.monotonic() < until:
            for (t, p), epoch in led.items():
                produced = w.call(0, 9, {"acks": 1, "timeout": 5000, "topic_data": [
                    {"name": t, "partition_data": [
                        {"index": p, "records": build_batch([(None, b"stale", [], 0)])}]}]})
                answers.append(("produce", (t, p),
                                produced.responses[0].partition_responses[0].error_code))
                fetched = w.call(1, 11, {
                    "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "forgotten_topics_data": [], "rack_id": "",
                    "topics": [{"topic": t, "partitions": [
                        {"partition": p, "current_leader_epoch": epoch, "fetch_offset": 0,
                         "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})
                answers.append(("fetch", (t, p), fetched.responses[0].partitions[0].error_code))
            time.sleep(0.1)
    return answers


def _fetch_hints(bootstrap: str, led: dict[tuple[str, int], int]
                 ) -> tuple[dict[tuple[str, int], tuple[int, int, int]], list[int]]:
    """Fetch v16 to `bootstrap` of each partition of `led` at its leader epoch: (partition ->
    (error code, the current leader and epoch hinted), the node ids of the endpoints)."""
    names = sorted({t for t, _ in led})
    with WireClient(bootstrap) as w:
        md = w.call(3, 12, {"topics": [{"name": t, "topic_id": None} for t in names],
                            "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False})
        ids = {t.name: t.topic_id for t in md.topics}
        r = w.call(1, 16, {
            "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic_id": ids[t], "partitions": [
                {"partition": p, "current_leader_epoch": e, "fetch_offset": 0,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}
                for (name, p), e in led.items() if name == t]} for t in names]})
    by_id = {v: k for k, v in ids.items()}
    return ({(by_id[t.topic_id], p.partition_index): (
        p.error_code, p.current_leader.leader_id, p.current_leader.leader_epoch)
        for t in r.responses for p in t.partitions}, [e.node_id for e in r.node_endpoints])


def _own_view(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], tuple[int, int]]:
    """A broker's own metadata: partition -> (leader, leader epoch)."""
    with WireClient(bootstrap, timeout=2) as w:
        md = w.call(3, 12, {"topics": [{"name": t} for t in topics],
                            "allow_auto_topic_creation": False})
    return {(t.name, p.partition_index): (p.leader_id, p.leader_epoch)
            for t in md.topics for p in t.partitions}


def test_a_restarted_broker_leads_only_once_the_controller_says_so(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """A broker restarted while the controller cannot act (frozen, its session kept by a
    long session timeout; the old registration deleted as an expired session's would be)
    reads partition states naming it leader, written in its previous life. It must not lead
    them at that old leader epoch (Kafka's broker waits for the controller's LeaderAndIsr),
    nor name itself their leader in Metadata: Produce and Fetch answer NOT_LEADER_OR_FOLLOWER
    until the controller writes the states again. Then leaderships move to an in-sync
    replica, or, for a partition it alone holds, come back to it one leader epoch higher
    (not offline first and two higher); nothing acknowledged before is lost."""
    from confluent_kafka.admin import NewTopic

    cluster = Cluster(zookeeper, tmp_path, **{"zookeeper.session.timeout.ms": 20000})
    zk = KazooClient(hosts=f"{zookeeper.connect_string}/{cluster.chroot}")
    frozen: list[BrokerProcess] = []
    try:
        cluster.start()
        zk.start()
        controller_id = _controller_id(zk, "")
        victim_id = next(b for b in (1, 2) if b != controller_id)
        victim = cluster.broker(victim_id)
        create_topics(cluster, {"lives": PARTITIONS})
        admin = cluster.admin()
        admin.create_topics([NewTopic("alone", 1, replica_assignment=[[victim_id]])])[
            "alone"].result(20)
        wait_until(lambda: cluster.has_leaders("alone", 1), 20, "a leader of alone")
        tps = [("lives", p) for p in range(PARTITIONS)] + [("alone", 0)]
        led = {tp: _state(zk, tp)["leader_epoch"] for tp in tps
               if _state(zk, tp)["leader"] == victim_id}
        assert ("alone", 0) in led and len(led) > 1, led
        acked = _produce(cluster.bootstrap, tps, "before")
        assert all(len(v) == 20 for v in acked.values()), acked

        controller = cluster.broker(controller_id)
        assert controller.pid is not None
        os.kill(controller.pid, signal.SIGSTOP)  # the session (20 s) outlives the freeze
        frozen.append(controller)
        victim.kill9()
        zk.delete(f"/brokers/ids/{victim_id}")  # as its old session's expiry would
        victim.start()
        # its metadata read: the leaderships of its previous life named as none (as Kafka
        # answers for a leader that is gone), at their epoch
        wait_until(lambda: all(_own_view(victim.bootstrap, ["lives", "alone"]).get(tp)
                               == (-1, epoch) for tp, epoch in led.items()),
                   15, "the restarted broker's metadata")
        answers = _probe_as_leader(victim.bootstrap, led, 2)
        # the controller was frozen all along: the states are still the previous life's
        assert {tp: _state(zk, tp)["leader_epoch"] for tp in led} == led
        wrong = [a for a in answers if a[2] != ErrorCode.not_leader_or_follower]
        assert not wrong, wrong
        # KIP-951's leader hints name no leader for them either, as Metadata does, from the
        # restarted broker and from one that does not host "alone" (and follows the others
        # at the epoch the restarted broker no longer leads): no endpoint to go to
        observer = next(b for b in cluster.brokers if b.broker_id not in (victim_id,
                                                                           controller_id))
        wait_until(lambda: _own_view(observer.bootstrap, ["alone"]).get(("alone", 0))
                   == (-1, led[("alone", 0)]), 15, "the other broker's metadata")
        for b in (victim, observer):
            assert _fetch_hints(b.bootstrap, led) == (
                {tp: (ErrorCode.not_leader_or_follower, -1, e) for tp, e in led.items()},
                []), b.broker_id

        os.kill(controller.pid, signal.SIGCONT)
        frozen.clear()
        wait_until(lambda: all(_state(zk, tp)["leader_epoch"] > led[tp] for tp in led),
                   15, "the controller writing the states again")
        alone = _state(zk, ("alone", 0))
        assert (alone["leader"], alone["leader_epoch"]) == (victim_id, led[("alone", 0)] + 1)
        wait_until(lambda: fully_replicated(cluster, ["lives"]), 30, "full ISRs again")
        for tp, values in _produce(cluster.bootstrap, tps, "after").items():
            acked[tp] += values
        got = _read(cluster.bootstrap, acked)
        for tp, values in acked.items():
            assert len(values) == 40, (tp, len(values))
            assert set(values) <= set(got[tp]), (tp, set(values) - set(got[tp]))
            assert b"stale" not in got[tp], tp
    finally:
        for b in frozen:
            assert b.pid is not None
            os.kill(b.pid, signal.SIGCONT)
        zk.stop()
        zk.close()
        cluster.close()


def _state(zk: KazooClient, tp: tuple[str, int]) -> dict[str, Any]:
    data, _ = zk.get(f"/brokers/topics/{tp[0]}/partitions/{tp[1]}/state")
    return dict(json.loads(data))


def test_a_cold_cluster_restart_keeps_leaders_one_epoch_higher(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    """Every broker killed and started again once their sessions have expired, all
    registered before any of them is controller (a placeholder /controller holds the
    election back): none leads on the states of its previous life (nor names itself their
    leader in Metadata), and the controller then
    elected re-establishes each leader where it was, one leader epoch higher (Kafka's
    controller sends LeaderAndIsr to the brokers starting; not offline first, two higher),
    the in-sync replicas kept; nothing acknowledged is lost."""
    cluster = Cluster(zookeeper, tmp_path)
    zk = KazooClient(hosts=f"{zookeeper.connect_string}/{cluster.chroot}")
    try:
        cluster.start()
        zk.start()
        create_topics(cluster, {"lives": PARTITIONS})
        tps = [("lives", p) for p in range(PARTITIONS)]
        wait_until(lambda: fully_replicated(cluster, ["lives"]), 30, "full ISRs")
        acked = _produce(cluster.bootstrap, tps, "before")
        before = {tp: _state(zk, tp) for tp in tps}
        for b in cluster.brokers:
            b.kill9()
        wait_until(lambda: not zk.get_children("/brokers/ids") and not zk.exists("/controller"),
                   15, "the old sessions expired")
        zk.create("/controller", json.dumps({"version": 1, "brokerid": 99,
                                             "timestamp": "0"}).encode(), ephemeral=True)
        for b in cluster.brokers:
            b.start()
        wait_until(lambda: cluster.every_broker_sees({0, 1, 2}), 20, "every broker registered")
        for b in cluster.brokers:
            led = {tp: s["leader_epoch"] for tp, s in before.items()
                   if s["leader"] == b.broker_id}
            wait_until(lambda b=b, led=led: all(
                _own_view(b.bootstrap, ["lives"]).get(tp) == (-1, e)
                for tp, e in led.items()), 15, "the restarted brokers' metadata")
            wrong = [a for a in _probe_as_leader(b.bootstrap, led, 0.5)
                     if a[2] != ErrorCode.not_leader_or_follower]
            assert not wrong, (b.broker_id, wrong)
        assert {tp: _state(zk, tp) for tp in tps} == before  # no controller yet
        zk.delete("/controller")
        wait_until(lambda: all(_state(zk, tp)["leader_epoch"] > before[tp]["leader_epoch"]
                               for tp in tps), 15, "the new controller's writes")
        time.sleep(1)  # and nothing more after them
        for tp in tps:
            s = _state(zk, tp)
            assert (s["leader"], s["leader_epoch"], sorted(s["isr"])) == (
                before[tp]["leader"], before[tp]["leader_epoch"] + 1,
                sorted(before[tp]["isr"])), (tp, before[tp], s)
        for tp, values in _produce(cluster.bootstrap, tps, "after").items():
            acked[tp] += values
        got = _read(cluster.bootstrap, acked)
        for tp, values in acked.items():
            assert len(values) == 40, (tp, len(values))
            assert set(values) <= set(got[tp]), (tp, set(values) - set(got[tp]))
            assert b"stale" not in got[tp], tp
    finally:
        zk.stop()
        zk.close()
        cluster.close()
