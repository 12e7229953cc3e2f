"""`kafka-transactions find-hanging` (TransactionsCommand, kafka-tools 4.x) against Samsa.

A hanging transaction is an open transaction on a partition that its coordinator will never
finish. One is made here the way a buggy or pre-KIP-890 client makes one: a transactional
batch written by a producer id the coordinator does not know, with partition verification off.
"""

from __future__ import annotations

import time

import pytest

from samsa.protocol.records import build_batch
from tests.support.java import run_java_tool
from tests.transactions.clients import create_topic, open_transaction, unique
from tests.transactions.txnwire import TxnWire

pytestmark = pytest.mark.timeout(300)
TOOLS = "org.apache.kafka.tools"
HEADER = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
          "StartOffset", "LastTimestamp", "Duration(min)"]


def _find_hanging(bootstrap: str, *extra: str) -> list[list[str]]:
    res = run_java_tool(
        f"{TOOLS}.TransactionsCommand",
        ["--bootstrap-server", bootstrap, "find-hanging", "--broker-id", "0", *extra],
        timeout=120,
    ).check()
    lines = [line.split() for line in res.stdout.splitlines() if line.strip()]
    assert lines and lines[0] == HEADER, res.describe()
    return lines[1:]


def test_find_hanging_then_abort(broker_factory):
    b = broker_factory({"transaction.partition.verification.enable": False})
    bs = b.bootstrap
    topic, txn_id = unique("hanging")
    create_topic(bs, topic, partitions=2)

    # an open transaction its coordinator knows about (partition 1): not hanging
    live = open_transaction(bs, txn_id, topic, 1)

    # a hanging one (partition 0): its last record is an hour old
    hour_ago = int(time.time() * 1000) - 3_600_000
    with TxnWire(bs) as w:
        init = w.init_pid(None)
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch
        batch = build_batch([(None, b"ghost", [], hour_ago)], producer_id=pid,
                            producer_epoch=epoch, base_sequence=0, transactional=True)
        assert w.produce(topic, 0, batch, txn_id=f"{txn_id}-ghost") == (0, 0)

    rows = _find_hanging(bs)  # default --max-transaction-timeout 15 (minutes)
    assert rows == [[topic, "0", str(pid), str(epoch), "-1", "0", str(hour_ago), "60"]]
    # with no age limit the live transaction is a candidate too, but the coordinator
    # describes it as Ongoing on partition 1: still only the ghost is reported
    rows = _find_hanging(bs, "--max-transaction-timeout", "0")
    assert [r[:3] for r in rows] == [[topic, "0", str(pid)]]

    run_java_tool(
        f"{TOOLS}.TransactionsCommand",
        ["--bootstrap-server", bs, "abort", "--topic", topic, "--partition", "0",
         "--start-offset", "0"],
        timeout=120,
    ).check()
    assert _find_hanging(bs) == []
    with TxnWire(bs) as w:
        part = w.fetch(topic, 0, 0, 1)
        assert part.last_stable_offset == part.high_watermark == 2  # record + abort marker

    live.commit_transaction(20)
    assert _find_hanging(bs, "--max-transaction-timeout", "0") == []
