"""Transactions with librdkafka (confluent-kafka): visibility, LSO, fencing, timeouts."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from .clients import consume_all, create_topic, txn_producer, unique
from .txnwire import TxnWire


def test_commit_visible_abort_hidden(shared_broker):
    topic, txn = unique("cf-vis")
    bs = shared_broker.bootstrap
    create_topic(bs, topic, partitions=2)
    p = txn_producer(bs, txn)
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=f"commit-1-{i}".encode(), partition=i % 2)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=f"abort-{i}".encode(), partition=i % 2)
    p.flush(10)
    p.abort_transaction(20)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"commit-2-{i}".encode(), partition=i % 2)
    p.commit_transaction(20)

    committed = consume_all(bs, topic, "read_committed", partitions=2, expect=8)
    assert sorted(committed) == sorted(
        [f"commit-1-{i}".encode() for i in range(5)] + [f"commit-2-{i}".encode() for i in range(3)]
    )
    everything = consume_all(bs, topic, "read_uncommitted", partitions=2, expect=12)
    assert sorted(v for v in everything if v.startswith(b"abort")) == [
        f"abort-{i}".encode() for i in range(4)
    ]
    # nothing extra arrives after the expected count
    assert len(consume_all(bs, topic, "read_committed", partitions=2, idle_s=1.0)) == 8


def test_open_transaction_holds_read_committed_at_lso(shared_broker):
    topic, txn = unique("cf-lso")
    bs = shared_broker.bootstrap
    create_topic(bs, topic)
    p = txn_producer(bs, txn)
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"in-txn", partition=0)
    p.flush(10)
    # a later non-transactional write is behind the LSO too
    plain = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    plain.produce(topic, value=b"after", partition=0)
    plain.flush(10)
    assert consume_all(bs, topic, "read_uncommitted", expect=2) == [b"in-txn", b"after"]
    assert consume_all(bs, topic, "read_committed", idle_s=2.0) == []
    p.commit_transaction(20)
    assert consume_all(bs, topic, "read_committed", expect=2) == [b"in-txn", b"after"]


def test_zombie_is_fenced(shared_broker):
    topic, txn = unique("cf-zombie")
    bs = shared_broker.bootstrap
    create_topic(bs, topic)
    zombie = txn_producer(bs, txn)
    zombie.init_transactions(20)
    zombie.begin_transaction()
    zombie.produce(topic, value=b"zombie", partition=0)
    zombie.flush(10)
    fresh = txn_producer(bs, txn)
    fresh.init_transactions(20)  # aborts the zombie's open transaction, bumps the epoch
    fresh.begin_transaction()
    fresh.produce(topic, value=b"fresh", partition=0)
    fresh.commit_transaction(20)
    with pytest.raises(KafkaException) as err:
        zombie.produce(topic, value=b"zombie-2", partition=0)
        zombie.commit_transaction(10)
    zombie.purge()  # drop the queued record of the fenced producer before it is destroyed
    e = err.value.args[0]
    assert e.fatal() or e.code() in (
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    ), e
    assert consume_all(bs, topic, "read_committed", idle_s=1.5) == [b"fresh"]


def test_transaction_timeout_aborts_and_fences(broker_factory):
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 300})
    topic, txn = unique("cf-timeout")
    create_topic(b.bootstrap, topic)
    p = txn_producer(b.bootstrap, txn, **{"transaction.timeout.ms": 1500})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"too-slow", partition=0)
    p.flush(10)
    with TxnWire(b.bootstrap) as c:
        deadline = time.monotonic() + 15
        while c.describe_txn(txn).transaction_state != "CompleteAbort":
            assert time.monotonic() < deadline, c.describe_txn(txn)
            time.sleep(0.1)
        d = c.describe_txn(txn)
        part = c.fetch(topic, 0, 0, 1)
        assert part.last_stable_offset == part.high_watermark == 2
        assert [a.producer_id for a in part.aborted_transactions] == [d.producer_id]
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    assert consume_all(b.bootstrap, topic, "read_committed", idle_s=1.0) == []
    assert consume_all(b.bootstrap, topic, "read_uncommitted", expect=1) == [b"too-slow"]


@pytest.mark.parametrize("crash", [False, True], ids=["clean-stop", "kill-9"])
def test_state_survives_restart(broker_factory, crash):
    b = broker_factory()
    topic, txn = unique("cf-restart")
    create_topic(b.bootstrap, topic)
    p = txn_producer(b.bootstrap, txn)
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"committed", partition=0)
    p.commit_transaction(20)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=0)
    p.flush(10)
    with TxnWire(b.bootstrap) as c:
        before = c.describe_txn(txn)
    if crash:
        b.kill9()
    else:
        b.stop()
    b.start()
    with TxnWire(b.bootstrap) as c:
        deadline = time.monotonic() + 15
        while (d := c.describe_txn(txn)).error_code == 14:  # COORDINATOR_LOAD_IN_PROGRESS
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert (d.error_code, d.transaction_state) == (0, "Ongoing")
        assert (d.producer_id, d.producer_epoch) == (before.producer_id, before.producer_epoch)
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [0])]
    assert consume_all(b.bootstrap, topic, "read_committed", idle_s=1.5) == [b"committed"]
    # a new producer instance fences the old one and aborts its open transaction
    p2 = txn_producer(b.bootstrap, txn)
    p2.init_transactions(20)
    p2.begin_transaction()
    p2.produce(topic, value=b"after-restart", partition=0)
    p2.commit_transaction(20)
    assert consume_all(b.bootstrap, topic, "read_committed", expect=2) == [
        b"committed",
        b"after-restart",
    ]
    with TxnWire(b.bootstrap) as c:
        d = c.describe_txn(txn)
        assert d.producer_epoch == before.producer_epoch + 2  # fence bump + init bump


def test_prepared_transaction_is_completed_on_restart(broker_factory):
    """A crash between PrepareCommit and the markers: the restarted coordinator finds the
    PrepareCommit in __transaction_state and finishes the commit (writes the markers)."""
    from samsa.coordinator.internal_log import partition_for
    from samsa.coordinator.transaction.log import TxnLogValue, encode_key, encode_value
    from samsa.protocol.records import build_batch
    from samsa.storage.config import LogConfig
    from samsa.storage.log import Log

    b = broker_factory()
    topic, txn = unique("cf-prepared")
    create_topic(b.bootstrap, topic)
    p = txn_producer(b.bootstrap, txn)
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"prepared", partition=0)
    p.flush(10)
    with TxnWire(b.bootstrap) as c:
        d = c.describe_txn(txn)
        assert d.transaction_state == "Ongoing"
        assert c.fetch(topic, 0, 0, 1).last_stable_offset == 0
    b.kill9()
    # What the coordinator writes first when EndTxn(commit) arrives: PrepareCommit.
    now = int(time.time() * 1000)
    timeout_ms = int(d.transaction_timeout.total_seconds() * 1000)
    value = TxnLogValue(
        d.producer_id, d.producer_epoch, timeout_ms, 2, ((topic, 0),), now, now - 100
    )
    tdir = b.data_dir / f"__transaction_state-{partition_for(txn, 50)}"
    log = Log.open(tdir, LogConfig.from_properties({"cleanup.policy": "compact"}), recover=True)
    log.append_as_leader(
        build_batch([(encode_key(txn), encode_value(value), [], now)]),
        log.latest_epoch or 0,
        origin="coordinator",
    )
    log.close()
    b.start()
    with TxnWire(b.bootstrap) as c:
        deadline = time.monotonic() + 15
        while c.describe_txn(txn).transaction_state != "CompleteCommit":
            assert time.monotonic() < deadline, c.describe_txn(txn)
            time.sleep(0.1)
        part = c.fetch(topic, 0, 0, 1)
        assert part.last_stable_offset == 2
    assert consume_all(b.bootstrap, topic, "read_committed", expect=1) == [b"prepared"]
