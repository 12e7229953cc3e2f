"""Transactions v2 across brokers: a partition leader that is not the transaction coordinator
adds the partition for Produce v12, and a coordinator killed between EndTxn v5 and the
markers leaves a new coordinator that finishes the transaction and answers a retry with the
old epoch as the old one would have (the bumped producer epoch)."""

from __future__ import annotations

import time

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from tests.cluster.cluster import (
    TRANSACTION_KEY,
    coordinator_and_a_partition_elsewhere,
    create_topic,
    find_coordinators,
    wait_until,
)
from tests.transactions.txnwire import (
    CONCURRENT_TRANSACTIONS,
    END_TXN,
    NONE,
    PRODUCE,
    TxnWire,
    committed_values,
    markers,
    txn_batch,
)


def _end_txn(w: TxnWire, txn: str, pid: int, epoch: int) -> tuple[int, int, int]:
    r = w.call(END_TXN, 5, {"transactional_id": txn, "producer_id": pid,
                            "producer_epoch": epoch, "committed": True})
    return int(r.error_code), r.producer_id, r.producer_epoch


def test_new_coordinator_finishes_tv2_commit(cluster, unique_topic):
    topic, txn = unique_topic, "tv2-failover"
    # One replica and min.insync.replicas=2: the markers (acks=all) cannot land until the
    # config changes, which holds the transaction in PrepareCommit across the kill.
    create_topic(cluster, topic, 3, rf=1, **{"min.insync.replicas": "2"})
    coordinator, p, leader = coordinator_and_a_partition_elsewhere(cluster, topic, txn)
    with TxnWire(cluster.broker(coordinator).bootstrap) as c, \
            TxnWire(cluster.broker(leader).bootstrap) as lw:
        deadline = time.monotonic() + 20
        while (r := c.init_until_ready(txn)).error_code != NONE:  # the coordinator loading
            assert time.monotonic() < deadline, r
            time.sleep(0.2)
        pid, e = r.producer_id, r.producer_epoch
        # Produce v12 (acks=1) to a leader that is not the coordinator: it adds the partition.
        resp = lw.call(PRODUCE, 12, {"transactional_id": txn, "acks": 1, "timeout": 5000,
                                     "topic_data": [{"name": topic, "partition_data": [
                                         {"index": p, "records": txn_batch(pid, e, 0, [b"a"])}]}]})
        assert resp.responses[0].partition_responses[0].error_code == NONE
        assert _end_txn(c, txn, pid, e) == (NONE, pid, e + 1)
        assert c.describe_txn(txn).transaction_state == "PrepareCommit"
    cluster.broker(coordinator).kill9()

    def new_coordinator() -> int | None:
        try:
            found = find_coordinators(cluster, TRANSACTION_KEY, [txn])[txn]
        except AssertionError:
            return None
        return found if found != coordinator else None

    wait_until(lambda: new_coordinator() is not None, 30, "a new coordinator")
    with TxnWire(cluster.broker(new_coordinator() or -1).bootstrap) as c2:
        # Loaded as a TV2 transaction: a retry with the old epoch is not fenced.
        deadline = time.monotonic() + 20
        while (code := _end_txn(c2, txn, pid, e)[0]) != CONCURRENT_TRANSACTIONS:
            assert time.monotonic() < deadline, code  # loading: NOT_COORDINATOR / LOAD...
            time.sleep(0.2)
        admin = cluster.admin()
        res = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(
            "min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(20)
        wait_until(lambda: c2.describe_txn(txn).transaction_state == "CompleteCommit", 30,
                   "the new coordinator completes the commit")
        assert _end_txn(c2, txn, pid, e) == (NONE, pid, e + 1)
    with TxnWire(cluster.broker(leader).bootstrap) as lw:
        part = lw.fetch(topic, p, 0, isolation=1)
        assert markers(part.records) == [(pid, e + 1, True)]
        assert committed_values(part) == [b"a"]
