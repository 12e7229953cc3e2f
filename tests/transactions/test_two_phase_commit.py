"""InitProducerId v6 (KIP-939 two-phase commit) over a socket, and Kafka 4.4's Java producer.

v6 is unstable in Kafka 4.4: the broker lists and serves it only with
unstable.api.versions.enable (a v6 request otherwise closes the connection, as Kafka's
SocketServer closes one with a version it does not enable), and Enable2Pc needs the broker's
transaction.two.phase.commit.enable. kafka-clients 4.4 takes transaction.two.phase.commit.enable
but neither sets Enable2Pc on the wire nor uses unstable versions: its producer keeps to v5.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.broker import free_port
from tests.support.java import JAVA_SRC, compile_java, run_java_tool
from tests.transactions.txnwire import (
    INIT_PID,
    NONE,
    TxnWire,
    committed_values,
    txn_batch,
)

from .clients import consume_all
from .test_tv2 import _requests_seen, _versions

pytestmark = pytest.mark.timeout(300)
TWO_PC = {"unstable.api.versions.enable": True, "transaction.two.phase.commit.enable": True}


def _init_2pc(w: TxnWire, txn: str) -> Any:
    body = {"transactional_id": txn, "transaction_timeout": 60_000, "producer_id": -1,
            "producer_epoch": -1, "enable2_pc": True, "keep_prepared_txn": False}
    for _ in range(300):  # the coordinator's partition loads first
        r = w.call(INIT_PID, 6, body)
        if r.error_code not in (14, 15, 51):  # load in progress, not available, concurrent
            return r
    raise AssertionError(f"InitProducerId kept answering {r.error_code}")


def test_init_v6_closes_the_connection_without_the_unstable_switch(broker):
    with TxnWire(broker.bootstrap) as w, pytest.raises(ConnectionError):
        _init_2pc(w, "2pc")


def test_a_two_phase_commit_transaction_over_the_wire(broker_factory, unique_topic):
    broker = broker_factory(TWO_PC)
    with TxnWire(broker.bootstrap) as w:
        w.create_topic(unique_topic)
        r = _init_2pc(w, "2pc")
        assert r.error_code == NONE
        pid, epoch = r.producer_id, r.producer_epoch
        assert (r.ongoing_txn_producer_id, r.ongoing_txn_producer_epoch) == (-1, -1)
        w.add_partitions("2pc", pid, epoch, [(unique_topic, 0)])
        err, _ = w.produce(unique_topic, 0, txn_batch(pid, epoch, 0, [b"a"]), "2pc")
        assert err == NONE
        ongoing = w.describe_txn("2pc")
        assert (ongoing.transaction_state, ongoing.transaction_timeout.total_seconds() * 1000) \
            == ("Ongoing", 2**31 - 1)
        assert w.end_txn("2pc", pid, epoch, True) == NONE
        assert committed_values(w.fetch(unique_topic, 0, 0, isolation=1)) == [b"a"]


def test_the_java_4_4_producer_configured_for_2pc_keeps_to_v5(broker_factory, unique_topic):
    port = free_port()
    broker = broker_factory(TWO_PC | {"metrics.port": port})
    with TxnWire(broker.bootstrap) as w:
        w.create_topic(unique_topic)
    before = _requests_seen(port)
    classes = compile_java([JAVA_SRC / "TwoPhaseCommit.java"], classpath="kafka44")
    res = run_java_tool("TwoPhaseCommit", [broker.bootstrap, unique_topic, "2pc", "2"],
                        classpath="kafka44", extra_classpath=[classes], timeout=120)
    assert res.returncode == 0 and "DONE" in res.stdout, res.describe()
    assert _versions(before, _requests_seen(port), "InitProducerId") == {5}
    assert consume_all(broker.bootstrap, unique_topic, "read_committed", expect=2) == [
        b"v0", b"v1"]
    with TxnWire(broker.bootstrap) as w:
        d = w.describe_txn("2pc")
    # no Enable2Pc from this client: an ordinary transaction with the client's timeout
    assert (d.transaction_state, d.transaction_timeout.total_seconds()) == ("CompleteCommit", 60)
