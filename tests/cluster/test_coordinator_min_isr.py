"""`transaction.state.log.min.isr` is applied: coordinator state is written with acks=all and
refused while the ISR of its `__transaction_state` partition is smaller than that.

Kafka creates `__transaction_state` with min.insync.replicas = transaction.state.log.min.isr
and appends transaction state with acks=-1; a write below it answers NOT_ENOUGH_REPLICAS,
which the coordinator maps to COORDINATOR_NOT_AVAILABLE (clients retry). Acknowledged with
the leader alone, a transition would be lost with that one broker.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import ConfigResource

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import TRANSACTION_KEY, Cluster, find_coordinators, wait_until
from tests.protocol.wire import WireClient

TXN_STATE = "__transaction_state"
INIT_PRODUCER_ID = 22
COORDINATOR_NOT_AVAILABLE = 15


@pytest.fixture
def two_brokers(zookeeper: ZooKeeperProcess, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(
        zookeeper,
        tmp_path,
        size=2,
        **{
            "transaction.state.log.num.partitions": 1,
            "transaction.state.log.replication.factor": 2,
            "transaction.state.log.min.isr": 2,
        },
    ).start()
    try:
        yield c
    finally:
        c.close()


def _coordinator(cluster: Cluster, txn_id: str) -> int:
    return find_coordinators(cluster, TRANSACTION_KEY, [txn_id])[txn_id]


def _init(cluster: Cluster, broker_id: int, txn_id: str) -> int:
    with WireClient(cluster.broker(broker_id).bootstrap) as w:
        r = w.call(INIT_PRODUCER_ID, 4, {"transactional_id": txn_id, "transaction_timeout": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
    return int(r.error_code)


def _init_until_done(cluster: Cluster, broker_id: int, txn_id: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    code = -1
    while time.monotonic() < deadline:
        code = _init(cluster, broker_id, txn_id)
        if code == 0:
            return code
        time.sleep(0.2)
    return code


def test_transaction_state_refused_below_min_isr(two_brokers: Cluster) -> None:
    cluster = two_brokers
    txn_id = "min-isr-txn"
    wait_until(lambda: _coordinator(cluster, txn_id) >= 0, 30, "a transaction coordinator")
    wait_until(lambda: cluster.has_leaders(TXN_STATE, 1), 30, f"{TXN_STATE} has a leader")
    coordinator = _coordinator(cluster, txn_id)
    assert _init_until_done(cluster, coordinator, txn_id, 30) == 0, cluster.logs_tail()

    resource = ConfigResource("topic", TXN_STATE)
    admin = cluster.admin()  # kept alive until its future is answered
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["min.insync.replicas"].value == "2"

    follower = next(b for b in cluster.brokers if b.broker_id != coordinator)
    follower.kill9()
    wait_until(lambda: cluster.isr(TXN_STATE)[0] == [coordinator], 30,
               f"the ISR of {TXN_STATE}-0 shrinks to the coordinator")
    codes = {_init(cluster, coordinator, txn_id) for _ in range(3)}
    assert codes == {COORDINATOR_NOT_AVAILABLE}, (
        f"InitProducerId with the ISR below transaction.state.log.min.isr answered {codes}\n"
        + cluster.logs_tail()
    )

    follower.start()
    wait_until(lambda: len(cluster.isr(TXN_STATE)[0]) == 2, 30, "the follower back in the ISR")
    assert _init_until_done(cluster, coordinator, txn_id, 30) == 0, cluster.logs_tail()
