"""TxnOffsetCommit: offsets committed in a transaction become visible when it commits."""

from __future__ import annotations

import time
import uuid

from tests.groups.clients import FAST, create_topic
from tests.protocol.wire import WireClient


def _fetch(b: str, group: str, topic: str, stable: bool):
    with WireClient(b) as w:
        r = w.call(9, 7, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}],
                          "require_stable": stable})
        return r.topics[0].partitions[0]


def _fetch_stable(b: str, group: str, topic: str):
    """OffsetFetch(require_stable) retried while UNSTABLE_OFFSET_COMMIT, as clients do:
    EndTxn returns once the outcome is decided and the markers follow a moment later."""
    deadline = time.monotonic() + 15
    while (got := _fetch(b, group, topic, True)).error_code == 88:
        assert time.monotonic() < deadline, "offsets still unstable after the transaction ended"
        time.sleep(0.05)
    return got


def test_send_offsets_to_transaction_commit_and_abort(broker_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition

    broker = broker_factory(settings=FAST)
    b = broker.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"tx-{u}", f"txg-{u}"
    create_topic(b, topic, 1)
    c = Consumer({"bootstrap.servers": b, "group.id": group})
    meta = c.consumer_group_metadata()
    p = Producer({"bootstrap.servers": b, "transactional.id": f"tid-{u}"})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, b"x", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 11)], meta, 20)
    pending = _fetch(b, group, topic, True)
    assert pending.error_code == 88  # UNSTABLE_OFFSET_COMMIT while the txn is open
    assert _fetch(b, group, topic, False).committed_offset == -1
    p.commit_transaction(20)
    assert _fetch_stable(b, group, topic).committed_offset == 11
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 99)], meta, 20)
    p.abort_transaction(20)
    got = _fetch_stable(b, group, topic)
    assert got.error_code == 0 and got.committed_offset == 11
    c.close()
    p.flush()
    # rebuilt from __consumer_offsets: the transactional records and their markers replayed
    broker.kill9()
    broker.start()
    got = _fetch(b, group, topic, True)
    assert got.error_code == 0 and got.committed_offset == 11
