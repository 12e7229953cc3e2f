"""The Java client's transactional producer (ProducerPerformance) and TransactionsCommand."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.java import JavaResult, run_java_tool

from .clients import consume_all, create_topic, unique

pytestmark = pytest.mark.timeout(300)
TOOLS = "org.apache.kafka.tools"
RECORDS = 3000


def _ok(res: JavaResult) -> JavaResult:
    assert not res.timed_out and res.returncode == 0, res.describe()
    return res


def test_java_transactional_producer_and_transactions_command(shared_broker):
    bs = shared_broker.bootstrap
    topic, txn = unique("java-txn")
    create_topic(bs, topic, partitions=2)
    perf = _ok(
        run_java_tool(
            f"{TOOLS}.ProducerPerformance",
            [
                "--topic",
                topic,
                "--num-records",
                str(RECORDS),
                "--record-size",
                "50",
                "--throughput",
                "-1",
                "--transactional-id",
                txn,
                "--transaction-duration-ms",
                "100",
                "--producer-props",
                f"bootstrap.servers={bs}",
                "linger.ms=5",
            ],
            timeout=180,
        )
    )
    m = re.search(r"^(\d+) records sent", perf.stdout, re.M)
    assert m and int(m.group(1)) == RECORDS, perf.describe()
    got = consume_all(bs, topic, "read_committed", partitions=2, expect=RECORDS, timeout=60)
    assert len(got) == RECORDS

    listed = _ok(
        run_java_tool(
            f"{TOOLS}.TransactionsCommand", ["--bootstrap-server", bs, "list"], timeout=90
        )
    )
    row = next((line for line in listed.stdout.splitlines() if line.split()[:1] == [txn]), None)
    assert row is not None and "CompleteCommit" in row, listed.describe()
    described = _ok(
        run_java_tool(
            f"{TOOLS}.TransactionsCommand",
            ["--bootstrap-server", bs, "describe", "--transactional-id", txn],
            timeout=90,
        )
    )
    assert "CompleteCommit" in described.stdout, described.describe()
    # Describe a partition the producer wrote to: its sticky partitioner may have put every
    # batch of a small run in one of the two partitions.
    probe = Consumer({"bootstrap.servers": bs, "group.id": f"probe-{topic}"})
    try:
        partition = next(p for p in (0, 1)
                         if probe.get_watermark_offsets(TopicPartition(topic, p), 10)[1] > 0)
    finally:
        probe.close()
    producers = _ok(
        run_java_tool(
            f"{TOOLS}.TransactionsCommand",
            ["--bootstrap-server", bs, "describe-producers", "--topic", topic,
             "--partition", str(partition)],
            timeout=90,
        )
    )
    assert re.search(r"^\d+\s", producers.stdout, re.M), producers.describe()


def test_transactions_command_abort_hanging_transaction(shared_broker):
    """Admin.abortTransaction = DescribeProducers + WriteTxnMarkers(abort) to the leader."""
    from .clients import txn_producer
    from .txnwire import TxnWire

    bs = shared_broker.bootstrap
    topic, txn = unique("java-abort")
    create_topic(bs, topic)
    p = txn_producer(bs, txn)
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"hanging", partition=0)
    p.flush(10)
    with TxnWire(bs) as c:
        assert c.fetch(topic, 0, 0, 1).last_stable_offset == 0
    _ok(
        run_java_tool(
            f"{TOOLS}.TransactionsCommand",
            [
                "--bootstrap-server",
                bs,
                "abort",
                "--topic",
                topic,
                "--partition",
                "0",
                "--start-offset",
                "0",
            ],
            timeout=90,
        )
    )
    with TxnWire(bs) as c:
        part = c.fetch(topic, 0, 0, 1)
        assert part.last_stable_offset == part.high_watermark == 2
        assert len(part.aborted_transactions) == 1
    assert consume_all(bs, topic, "read_committed", idle_s=1.0) == []
    p.purge()


def test_transactions_command_lists_by_transactional_id_pattern(shared_broker):
    """`kafka-transactions.sh list --transactional-id-pattern` (ListTransactions v2, KIP-1152):
    only the ids the pattern matches in full."""
    from .clients import txn_producer

    bs = shared_broker.bootstrap
    _, base = unique("java-pattern")
    ids = [f"{base}-keep-1", f"{base}-keep-2", f"{base}-drop"]
    for tid in ids:
        txn_producer(bs, tid).init_transactions(20)
    listed = _ok(run_java_tool(
        f"{TOOLS}.TransactionsCommand",
        ["--bootstrap-server", bs, "list", "--transactional-id-pattern", f"{base}-keep-.*"],
        timeout=90))
    shown = {line.split()[0] for line in listed.stdout.splitlines()[1:] if line.strip()}
    assert shown == set(ids[:2]), listed.describe()
