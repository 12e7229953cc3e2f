"""Transactions v2: a Produce v12 that arrives while the coordinator still writes the markers
of the producer's previous transaction. The leader retries the implicit add itself
(add.partitions.to.txn.retry.backoff.ms, up to add.partitions.to.txn.retry.backoff.max.ms, as
Kafka's ReplicaManager does) and answers CONCURRENT_TRANSACTIONS, not NOT_ENOUGH_REPLICAS, when
the markers are still pending after that.

The markers are held back for as long as a test wants: the previous transaction wrote (acks=1)
to a partition whose min.insync.replicas (2) its one replica cannot meet, so the coordinator's
marker writes there answer NOT_ENOUGH_REPLICAS and are retried until the topic's
min.insync.replicas is lowered.
"""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.transactions.test_tv2 import end_txn_v5, produce_v12, wait_completed
from tests.transactions.txnwire import (
    CONCURRENT_TRANSACTIONS,
    NONE,
    PRODUCE,
    TxnWire,
    committed_values,
    txn_batch,
)


def _produce_acks1_v12(w: TxnWire, txn: str, topic: str, batch: bytes) -> int:
    r = w.call(PRODUCE, 12, {"transactional_id": txn, "acks": 1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return int(r.responses[0].partition_responses[0].error_code)


def _pending_commit(w: TxnWire, admin: AdminClient, txn: str, topic: str) -> tuple[str, int, int]:
    """A committed TV2 transaction whose markers cannot be written yet: (the held-back
    topic, producer id, the epoch of the next transaction)."""
    held = f"{topic}-held"
    admin.create_topics([NewTopic(held, 1, 1, config={"min.insync.replicas": "2"}),
                         NewTopic(topic, 1, 1)])[held].result(30)
    r = w.init_until_ready(txn)
    pid, e = r.producer_id, r.producer_epoch
    assert _produce_acks1_v12(w, txn, held, txn_batch(pid, e, 0, [b"first"])) == NONE
    assert end_txn_v5(w, txn, pid, e, commit=True) == (NONE, pid, e + 1)
    assert w.describe_txn(txn).transaction_state == "PrepareCommit"
    return held, pid, e + 1


def _release(admin: AdminClient, held: str) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, held, incremental_configs=[
        ConfigEntry("min.insync.replicas", "1",
                    incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def test_produce_during_pending_markers_answers_concurrent_transactions(broker, unique_topic):
    """Past add.partitions.to.txn.retry.backoff.max.ms (100 ms) the client gets
    CONCURRENT_TRANSACTIONS (Kafka 4.x: a TV2 client knows it), and once the markers are
    written the same Produce goes through."""
    txn, topic = "tv2-add-retry-bound", unique_topic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with TxnWire(broker.bootstrap) as w:
        held, pid, e = _pending_commit(w, admin, txn, topic)
        batch = txn_batch(pid, e, 0, [b"second"])
        code, _ = w.produce(topic, 0, batch, txn_id=txn, version=12)
        assert code == CONCURRENT_TRANSACTIONS
        assert w.describe_txn(txn).transaction_state == "PrepareCommit"
        _release(admin, held)
        wait_completed(w, txn)
        assert produce_v12(w, txn, topic, batch) == NONE
        assert end_txn_v5(w, txn, pid, e, commit=True) == (NONE, pid, e + 1)
        wait_completed(w, txn)
        assert committed_values(w.fetch(held, 0, 0, isolation=1)) == [b"first"]
        assert committed_values(w.fetch(topic, 0, 0, isolation=1)) == [b"second"]


def test_produce_waits_at_the_leader_until_the_markers_are_written(broker_factory,
                                                                  unique_topic):
    """Within add.partitions.to.txn.retry.backoff.max.ms the leader keeps retrying the add:
    the Produce sent while the markers are pending is answered NONE once they are written,
    without the client seeing an error."""
    broker = broker_factory({"add.partitions.to.txn.retry.backoff.max.ms": 30000})
    txn, topic = "tv2-add-retry-wait", unique_topic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with TxnWire(broker.bootstrap) as w, TxnWire(broker.bootstrap) as producer:
        held, pid, e = _pending_commit(w, admin, txn, topic)
        answer: dict[str, Any] = {}

        def produce() -> None:
            answer["code"] = producer.produce(topic, 0, txn_batch(pid, e, 0, [b"second"]),
                                              txn_id=txn, version=12)[0]

        sender = threading.Thread(target=produce)
        sender.start()
        sender.join(0.5)  # (the Produce reaches the broker before the markers are released)
        assert w.describe_txn(txn).transaction_state == "PrepareCommit"
        _release(admin, held)
        sender.join(60)
        assert answer == {"code": NONE}
        d = w.describe_txn(txn)
        assert (d.transaction_state, [(t.topic, tuple(t.partitions)) for t in d.topics]) == (
            "Ongoing", [(topic, (0,))])
        assert end_txn_v5(w, txn, pid, e, commit=True) == (NONE, pid, e + 1)
        wait_completed(w, txn)
        assert committed_values(w.fetch(topic, 0, 0, isolation=1)) == [b"second"]
