"""`samsa txn list|describe|describe-producers|find-hanging|abort` against a Samsa broker.

As in tests/tools/test_find_hanging.py (kafka-transactions.sh against Samsa), a hanging
transaction is made the way a buggy or pre-KIP-890 client makes one: a transactional batch
written by a producer id its coordinator does not know, with partition verification off; beside
it a live transaction (librdkafka) that its coordinator knows, which is not hanging.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.protocol.records import build_batch
from tests.admin.conftest import Samsa, parse_table
from tests.support.broker import BrokerProcess
from tests.transactions.clients import create_topic, open_transaction, unique
from tests.transactions.txnwire import TxnWire

LIST_KEYS = {"transactional_id", "coordinator", "producer_id", "state"}
DESCRIBE_KEYS = {"coordinator_id", "transactional_id", "producer_id", "producer_epoch", "state",
                 "timeout_ms", "start_time_ms", "duration_ms", "topic_partitions"}
PRODUCER_KEYS = {"producer_id", "producer_epoch", "coordinator_epoch", "last_sequence",
                 "last_timestamp", "current_txn_start_offset"}
HANGING_KEYS = {"topic", "partition", "producer_id", "producer_epoch", "coordinator_epoch",
                "start_offset", "last_timestamp", "duration_minutes"}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("admin-txn") / "data", name="admin-txn",
                      settings={"transaction.partition.verification.enable": False})
    b.start()
    try:
        yield b
    finally:
        b.close()


def _ghost(bootstrap: str, topic: str, timestamp: int) -> tuple[int, int]:
    """An open transaction at offset 0 of partition 0 by a producer id no transactional id
    has: (producer id, epoch)."""
    with TxnWire(bootstrap) as w:
        init = w.init_pid(None)
        assert init.error_code == 0
        record = (None, b"ghost", [], timestamp)
        batch = build_batch([record], producer_id=init.producer_id,
                            producer_epoch=init.producer_epoch, base_sequence=0,
                            transactional=True)
        assert w.produce(topic, 0, batch, txn_id="ghost") == (0, 0)
        return init.producer_id, init.producer_epoch


def _json(samsa: Samsa, b: str, *args: str) -> Any:
    return samsa("txn", *args, "--format", "json", bootstrap=b).json()


def test_list_describe_find_hanging_and_abort(txn_broker: BrokerProcess,
                                              samsa: Samsa) -> None:
    b = txn_broker.bootstrap
    topic, txn_id = unique("hanging")
    create_topic(b, topic, partitions=2)
    live = open_transaction(b, txn_id, topic, 1)

    hour_ago = int(time.time() * 1000) - 3_600_000
    pid, epoch = _ghost(b, topic, hour_ago)

    listed = {r["transactional_id"]: r for r in _json(samsa, b, "list")}
    assert set(listed[txn_id]) == LIST_KEYS
    assert (listed[txn_id]["state"], listed[txn_id]["coordinator"]) == ("Ongoing", 0)
    assert [r["transactional_id"] for r in _json(samsa, b, "list", "--state", "Ongoing",
                                                 "--producer-id",
                                                 str(listed[txn_id]["producer_id"]))] == [txn_id]
    assert _json(samsa, b, "list", "--state", "CompleteAbort", "--producer-id",
                 str(listed[txn_id]["producer_id"])) == []
    assert [r["transactional_id"] for r in _json(
        samsa, b, "list", "--transactional-id-pattern", f"{txn_id[:-2]}.*")] == [txn_id]
    assert txn_id in {r["transactional_id"] for r in _json(samsa, b, "list",
                                                          "--duration-filter", "0")}
    assert txn_id not in {r["transactional_id"] for r in _json(samsa, b, "list",
                                                              "--duration-filter", "3600000")}
    rows = parse_table(samsa("txn", "list", "--state", "Ongoing", bootstrap=b).out.splitlines())
    assert {(r["TRANSACTIONAL-ID"], r["STATE"]) for r in rows} >= {(txn_id, "Ongoing")}

    d = _json(samsa, b, "describe", txn_id)
    assert set(d) == DESCRIBE_KEYS
    assert (d["coordinator_id"], d["state"], d["producer_id"]) == (
        0, "Ongoing", listed[txn_id]["producer_id"])
    assert d["topic_partitions"] == [{"topic": topic, "partition": 1}]
    assert d["timeout_ms"] > 0 and d["start_time_ms"] > 0 and d["duration_ms"] >= 0
    (row,) = parse_table(samsa("txn", "describe", txn_id, bootstrap=b).out.splitlines())
    assert (row["STATE"], row["PARTITIONS"]) == ("Ongoing", f"{topic}-1")
    r = samsa("txn", "describe", "nobody", bootstrap=b)
    assert (r.rc, r.err) == (1, "samsa: TRANSACTIONAL_ID_NOT_FOUND: Transactional id nobody "
                                "not found.\n")

    (ghost,) = _json(samsa, b, "describe-producers", "--topic", topic, "--partition", "0")
    assert set(ghost) == PRODUCER_KEYS
    assert (ghost["producer_id"], ghost["producer_epoch"], ghost["coordinator_epoch"],
            ghost["current_txn_start_offset"], ghost["last_timestamp"]) == (
        pid, epoch, -1, 0, hour_ago)

    hanging = _json(samsa, b, "find-hanging", "--broker-id", "0")
    assert [set(h) for h in hanging] == [HANGING_KEYS]
    assert [(h["topic"], h["partition"], h["producer_id"], h["producer_epoch"],
             h["coordinator_epoch"], h["start_offset"], h["last_timestamp"],
             h["duration_minutes"]) for h in hanging] == [
        (topic, 0, pid, epoch, -1, 0, hour_ago, 60)]
    # no age limit: the live transaction is a candidate, but its coordinator has partition 1
    assert [(h["topic"], h["partition"]) for h in _json(
        samsa, b, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")] == [
        (topic, 0)]
    out = samsa("txn", "find-hanging", "--topic", topic, "--partition", "0",
                bootstrap=b).out.splitlines()
    assert [(r["TOPIC"], r["PARTITION"], r["START-OFFSET"], r["DURATION-MIN"])
            for r in parse_table(out)] == [(topic, "0", "0", "60")]
    r = samsa("txn", "find-hanging", bootstrap=b)
    assert (r.rc, r.err) == (1, "samsa: INVALID_CONFIG: find-hanging needs --topic or "
                                "--broker-id to limit the search\n")

    r = samsa("txn", "abort", "--topic", topic, "--partition", "0", "--start-offset", "5",
              bootstrap=b)
    assert (r.rc, r.err) == (1, "samsa: INVALID_TXN_STATE: Could not find any open "
                                f"transactions starting at offset 5 on partition {topic}-0\n")
    r = samsa("txn", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0",
              bootstrap=b)
    assert (r.rc, r.out) == (0, f"Aborted the transaction of producer {pid} (epoch {epoch}) "
                                f"on {topic}-0.\n")
    assert _json(samsa, b, "find-hanging", "--broker-id", "0") == []
    with TxnWire(b) as w:
        part = w.fetch(topic, 0, 0, 1)
        assert part.last_stable_offset == part.high_watermark == 2  # record + abort marker

    live.commit_transaction(20)
    assert _json(samsa, b, "find-hanging", "--topic", topic, "--max-transaction-timeout",
                 "0") == []
    assert _json(samsa, b, "describe", txn_id)["state"] == "CompleteCommit"


def test_abort_by_producer_id_as_json(txn_broker: BrokerProcess, samsa: Samsa) -> None:
    b = txn_broker.bootstrap
    topic, _ = unique("abort-pid")
    create_topic(b, topic)
    pid, epoch = _ghost(b, topic, int(time.time() * 1000))
    assert _json(samsa, b, "abort", "--topic", topic, "--partition", "0", "--producer-id",
                 str(pid), "--producer-epoch", str(epoch), "--coordinator-epoch", "-1") == {
        "topic": topic, "partition": 0, "producer_id": pid, "producer_epoch": epoch,
        "coordinator_epoch": 0, "aborted": True}
    (p,) = _json(samsa, b, "describe-producers", "--topic", topic, "--partition", "0")
    assert p["current_txn_start_offset"] is None
