"""KIP-890 part 1 across brokers: a partition leader that is not the transaction coordinator
asks the coordinator (AddPartitionsToTxn v5, VerifyOnly) before a producer's first
transactional append, so a batch for a partition outside the transaction, or from a fenced
epoch, is refused with Kafka's Produce errors instead of opening a hanging transaction."""

from __future__ import annotations

import time

from samsa.coordinator.internal_log import partition_for
from samsa.protocol.records import build_batch
from tests.cluster.cluster import (
    CLUSTER_SETTINGS,
    TRANSACTION_KEY,
    Cluster,
    coordinator_and_a_partition_elsewhere,
    create_topic,
    find_coordinators,
    wait_until,
)
from tests.transactions.txnwire import NONE, TxnWire

INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, TRANSACTION_ABORTABLE = 47, 48, 120
NOT_ENOUGH_REPLICAS = 19


def _batch(pid: int, epoch: int, seq: int = 0) -> bytes:
    return build_batch([(b"k", b"v%d" % seq)], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, transactional=True)


def test_leader_verifies_with_a_remote_coordinator(cluster, unique_topic):
    topic = unique_topic
    create_topic(cluster, topic, 6, rf=1)
    txn = "verify-remote"
    wait_until(lambda: find_coordinators(cluster, TRANSACTION_KEY, [txn]), 20, "coordinator")
    coordinator = find_coordinators(cluster, TRANSACTION_KEY, [txn])[txn]
    leaders = cluster.leaders(topic)
    p, q = [p for p, leader in sorted(leaders.items()) if leader != coordinator][:2]
    with TxnWire(cluster.broker(coordinator).bootstrap) as c, \
            TxnWire(cluster.broker(leaders[p]).bootstrap) as lp, \
            TxnWire(cluster.broker(leaders[q]).bootstrap) as lq:
        r = c.init_until_ready(txn)
        assert r.error_code == NONE
        pid, epoch = r.producer_id, r.producer_epoch
        # Not added to the transaction: refused (Produce v11 knows TRANSACTION_ABORTABLE).
        assert lp.produce(topic, p, _batch(pid, epoch), txn, version=11)[0] == (
            TRANSACTION_ABORTABLE)
        assert lp.produce(topic, p, _batch(pid, epoch), txn, version=9)[0] == INVALID_TXN_STATE
        assert c.add_partitions(txn, pid, epoch, [(topic, p)]) == {(topic, p): NONE}
        assert lp.produce(topic, p, _batch(pid, epoch), txn, version=11)[0] == NONE
        assert c.end_txn(txn, pid, epoch, commit=True) == NONE

        deadline = time.monotonic() + 20
        while lp.fetch(topic, p, 0, 1).last_stable_offset < 2:  # record + commit marker
            assert time.monotonic() < deadline, "the commit marker never landed"
            time.sleep(0.1)

        r = c.init_until_ready(txn, pid=pid, epoch=epoch)
        assert (r.error_code, r.producer_epoch) == (NONE, epoch + 1)
        # The old epoch is fenced at the coordinator, though partition q has never seen this
        # producer (its own state would accept the batch).
        assert lq.produce(topic, q, _batch(pid, epoch), txn, version=11)[0] == (
            INVALID_PRODUCER_EPOCH)


def test_a_late_batch_opens_no_transaction_while_its_coordinator_is_gone(zookeeper, tmp_path):
    """A batch of a committed transaction that reaches its partition's leader late (a retry
    after a network cut) while the transaction coordinator has no live broker: the leader
    cannot ask, so it refuses the batch with a code the client retries. Appended, the batch
    would open a transaction no coordinator knows of, and the partition's last stable offset
    would stay behind it for good."""
    c = Cluster(zookeeper, tmp_path, size=2, **{
        "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
    }).start()
    try:
        topic, txn = "late-batch", "late-batch-txn"
        create_topic(c, topic, 2, rf=1)
        coordinator, p, leader = coordinator_and_a_partition_elsewhere(c, topic, txn)
        with TxnWire(c.broker(coordinator).bootstrap) as co, \
                TxnWire(c.broker(leader).bootstrap) as lp:
            r = co.init_until_ready(txn)
            pid, epoch = r.producer_id, r.producer_epoch
            assert co.add_partitions(txn, pid, epoch, [(topic, p)]) == {(topic, p): NONE}
            assert lp.produce(topic, p, _batch(pid, epoch, 0), txn, version=11)[0] == NONE
            assert co.end_txn(txn, pid, epoch, commit=True) == NONE
            wait_until(lambda: lp.fetch(topic, p, 0, 1).last_stable_offset == 2, 20,
                       "the commit marker landed")
        c.broker(coordinator).kill9()
        with TxnWire(c.broker(leader).bootstrap) as lp:
            wait_until(lambda: _coordinator_partition_leader(lp, txn) == -1, 30,
                       "the leader sees no coordinator for the transactional id")
            assert lp.produce(topic, p, _batch(pid, epoch, 1), txn, version=11)[0] == (
                NOT_ENOUGH_REPLICAS)
            fetched = lp.fetch(topic, p, 0, 1)
            assert (fetched.high_watermark, fetched.last_stable_offset) == (2, 2)
    finally:
        c.close()


def _coordinator_partition_leader(wire: TxnWire, txn: str) -> int:
    """The leader of `txn`'s __transaction_state partition, as the broker's Metadata says."""
    md = wire.call(3, 4, {"topics": [{"name": "__transaction_state"}],
                          "allow_auto_topic_creation": False})
    partitions = CLUSTER_SETTINGS["transaction.state.log.num.partitions"]
    assert isinstance(partitions, int)
    index = partition_for(txn, partitions)
    return next(pm.leader_id for t in md.topics for pm in t.partitions
                if pm.partition_index == index)
