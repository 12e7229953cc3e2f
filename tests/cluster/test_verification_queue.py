"""KIP-890 verifications queued at a partition leader, as Kafka's AddPartitionsToTxnManager
queues them: one AddPartitionsToTxn in flight per coordinator broker; what arrives meanwhile
waits, at most one entry per transactional id, and goes in the next request, all together. A
second Produce for a waiting transactional id is answered at once, without the coordinator:
a lower epoch INVALID_PRODUCER_EPOCH, and the same epoch (a client's retry) takes the waiting
one's place, which is answered NETWORK_EXCEPTION (NOT_ENOUGH_REPLICAS for Produce, retried).

The coordinator is a broker process, held with SIGSTOP while the queue fills (its ZooKeeper
session outlives the pause); the leader is an embedded broker, so the test reads its queue on
its event loop and knows what waits before it sends the next Produce."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from confluent_kafka.admin import NewTopic

from samsa.broker.app import Broker
from samsa.protocol.records import build_batch
from samsa.testing import EmbeddedBroker, free_port
from tests.cluster.cluster import (
    CLUSTER_SETTINGS,
    TRANSACTION_KEY,
    Cluster,
    find_coordinators,
    wait_until,
)
from tests.observability.test_txn_metrics import scrape, verification_samples
from tests.transactions.txnwire import NONE, TxnWire

pytestmark = [pytest.mark.timeout(180)]

INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS = 47, 19
COORDINATOR, LEADER = 0, 1
SETTINGS: dict[str, object] = {
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    # the coordinator is paused for a moment: no session expiry, no leader moved meanwhile
    "zookeeper.session.timeout.ms": 30000,
}


def _batch(pid: int, epoch: int) -> bytes:
    return build_batch([(b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                       transactional=True)


def _waiting(leader: EmbeddedBroker) -> tuple[bool, dict[str, int]]:
    """Whether the leader has a verification in flight to the coordinator, and the epoch of
    each transactional id waiting for it."""
    def read(b: Broker) -> tuple[bool, dict[str, int]]:
        assert b.txn_verifier is not None
        queue = b.txn_verifier.queue(COORDINATOR)
        return queue.in_flight, {t: a.producer_epoch for t, a in queue.waiting.items()}
    return leader.run(read)


def _add_partitions_to_txn_v5(metrics_port: int) -> float:
    """AddPartitionsToTxn v5 requests the coordinator has received (from brokers)."""
    return scrape(metrics_port).get(
        'kafka_network_requestmetrics_requestspersec_total{request="AddPartitionsToTxn",'
        'version="5"}', 0.0)


def test_a_busy_coordinators_verifications_wait_at_the_leader(zookeeper, tmp_path):
    metrics_port = free_port()
    cluster = Cluster(zookeeper, tmp_path, size=1, **SETTINGS, **{"metrics.port": metrics_port})
    cluster.start()
    leader: EmbeddedBroker | None = None
    pool = ThreadPoolExecutor(4)
    paused = False
    coordinator = cluster.broker(COORDINATOR)
    try:
        txns = ["queue-x", "queue-t", "queue-y"]
        # __transaction_state made while the coordinator is the only broker: it leads it all
        wait_until(lambda: find_coordinators(cluster, TRANSACTION_KEY, txns), 30, "coordinator")
        leader = EmbeddedBroker(
            {**CLUSTER_SETTINGS, **SETTINGS,
             "zookeeper.connect": f"{zookeeper.connect_string}/{cluster.chroot}"},
            data_dir=tmp_path / "leader",
            broker_id=LEADER).start()
        wait_until(lambda: cluster.every_broker_sees({COORDINATOR, LEADER}), 30, "registered")
        topic = "queued-verifications"
        admin = cluster.admin()
        on_leader = NewTopic(topic, 3, replica_assignment=[[LEADER]] * 3)
        admin.create_topics([on_leader])[topic].result(30)
        wait_until(lambda: cluster.leaders(topic) == dict.fromkeys(range(3), LEADER), 30,
                   "the leader leads the topic")

        with TxnWire(coordinator.bootstrap) as co:
            producers: dict[str, tuple[int, int]] = {}
            for i, txn in enumerate(txns):
                r = co.init_until_ready(txn)
                r = co.init_until_ready(txn, pid=r.producer_id, epoch=r.producer_epoch)
                assert r.error_code == NONE and r.producer_epoch >= 1
                producers[txn] = (r.producer_id, r.producer_epoch)
                assert co.add_partitions(txn, *producers[txn], [(topic, i)]) == {
                    (topic, i): NONE}
        (x_pid, x_epoch), (t_pid, t_epoch), (y_pid, y_epoch) = producers.values()

        def produce(txn: str, partition: int, pid: int, epoch: int) -> int:
            with TxnWire(leader.bootstrap, timeout=60) as w:
                return w.produce(topic, partition, _batch(pid, epoch), txn, version=11)[0]

        sent_before = _add_partitions_to_txn_v5(metrics_port)
        timed, failed = verification_samples()
        os.kill(coordinator.pid, signal.SIGSTOP)
        paused = True
        # A: asked at once; its answer is held while the coordinator is paused
        a = pool.submit(produce, "queue-x", 0, x_pid, x_epoch)
        wait_until(lambda: _waiting(leader) == (True, {}), 20, "x's verification in flight")
        # B waits behind it
        b = pool.submit(produce, "queue-t", 1, t_pid, t_epoch)
        wait_until(lambda: _waiting(leader) == (True, {"queue-t": t_epoch}), 20, "t waiting")
        # C: the same transactional id at a lower epoch, fenced by the leader alone
        started = time.monotonic()
        assert produce("queue-t", 1, t_pid, t_epoch - 1) == INVALID_PRODUCER_EPOCH
        assert time.monotonic() - started < 10  # not the verification request's timeout
        # D: the same epoch again (a retry): B is answered, retriably, and D waits instead
        d = pool.submit(produce, "queue-t", 1, t_pid, t_epoch)
        assert b.result(20) == NOT_ENOUGH_REPLICAS
        wait_until(lambda: _waiting(leader) == (True, {"queue-t": t_epoch}), 20, "d waiting")
        # E: another transactional id waits beside D
        e = pool.submit(produce, "queue-y", 2, y_pid, y_epoch)
        wait_until(lambda: _waiting(leader) == (True, {"queue-t": t_epoch,
                                                       "queue-y": y_epoch}), 20, "e waiting")
        assert not any(f.done() for f in (a, d, e))

        os.kill(coordinator.pid, signal.SIGCONT)
        paused = False
        answers: dict[str, Future[int]] = {"a": a, "d": d, "e": e}
        assert {k: f.result(30) for k, f in answers.items()} == dict.fromkeys(answers, NONE)
        # A's request, then one for D and E together
        assert _add_partitions_to_txn_v5(metrics_port) - sent_before == 2
        assert _waiting(leader) == (False, {})
        # Kafka's AddPartitionsToTxnManager metrics, on the leader: five answers, two refusals
        assert verification_samples() == (timed + 5, failed + 2)
    finally:
        if paused:
            os.kill(coordinator.pid, signal.SIGCONT)
        pool.shutdown(wait=False, cancel_futures=True)
        if leader is not None:
            leader.close()
        cluster.close()

