"""Group coordinator properties seen by a client: offset.metadata.max.bytes bounds the metadata
of a commit, offsets.topic.compression.codec compresses what __consumer_offsets stores."""

from __future__ import annotations

import time
import uuid

import pytest

from samsa.protocol.records import iter_batches
from tests.groups.clients import FAST, create_topic
from tests.transactions.txnwire import TxnWire

pytestmark = pytest.mark.timeout(120)

GZIP = 1
COORDINATOR_LOAD_IN_PROGRESS = 14


def _commit(bootstrap: str, group: str, topic: str, offset: int, metadata: str) -> None:
    """A simple (group-less) commit by kafka-python, which sends the metadata as given."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        c.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, metadata, -1)})
    finally:
        c.close()


def test_offset_metadata_max_bytes(broker_factory):
    from kafka.errors import OffsetMetadataTooLargeError

    b = broker_factory(settings={**FAST, "offset.metadata.max.bytes": 10}).bootstrap
    topic, group = f"meta-{uuid.uuid4().hex[:8]}", f"meta-g-{uuid.uuid4().hex[:8]}"
    create_topic(b, topic, 1)
    _commit(b, group, topic, 5, "x" * 10)
    with pytest.raises(OffsetMetadataTooLargeError):
        _commit(b, group, topic, 6, "x" * 11)
    # Kafka counts String.length(): "é" is one unit, though two UTF-8 bytes
    _commit(b, group, topic, 7, "é" * 10)


def test_offsets_topic_compression_codec(broker_factory):
    broker = broker_factory(settings={**FAST, "offsets.topic.num.partitions": 1,
                                      "offsets.topic.compression.codec": GZIP})
    topic, group = f"codec-{uuid.uuid4().hex[:8]}", f"codec-g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    _commit(broker.bootstrap, group, topic, 3, "m")
    data = b"".join(p.read_bytes()
                    for p in sorted((broker.data_dir / "__consumer_offsets-0").glob("*.log")))
    codecs = [h.compression for _, h in iter_batches(data)]
    assert codecs and set(codecs) == {GZIP}, codecs


def _describe_txn(bootstrap: str, txn_id: str):
    with TxnWire(bootstrap) as w:
        deadline = time.monotonic() + 15
        while True:  # the coordinator may still be loading after a restart
            state = w.describe_txn(txn_id)
            if state.error_code != COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                assert state.error_code == 0, state
                return state
            time.sleep(0.1)


def test_state_loads_with_one_byte_reads(broker_factory):
    """offsets/transaction.state.log.load.buffer.size=1: every read returns one whole batch,
    and after a restart the committed offsets and the transactional id are all there."""
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    broker = broker_factory(settings={**FAST, "offsets.load.buffer.size": 1,
                                      "transaction.state.log.load.buffer.size": 1,
                                      "transaction.state.log.replication.factor": 1,
                                      "transaction.state.log.min.isr": 1})
    topic, group = f"load-{uuid.uuid4().hex[:8]}", f"load-g-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    for offset in range(1, 6):  # five commits: five batches to replay
        _commit(broker.bootstrap, group, topic, offset, f"m{offset}")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": group})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"in-txn", partition=0)
    producer.commit_transaction(30)
    before = _describe_txn(broker.bootstrap, group)
    assert before.transaction_state == "CompleteCommit"
    broker.stop()
    broker.start()
    after = _describe_txn(broker.bootstrap, group)  # as loaded from __transaction_state
    assert (after.transaction_state, after.producer_id, after.producer_epoch) == (
        "CompleteCommit", before.producer_id, before.producer_epoch)

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                      enable_auto_commit=False)
    try:
        assert c.committed(TopicPartition(topic, 0), metadata=True) == (5, "m5", -1)
    finally:
        c.close()
    again = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": group})
    again.init_transactions(30)  # the loaded transactional id gets its next epoch
    again.begin_transaction()
    again.produce(topic, b"after-restart", partition=0)
    again.commit_transaction(30)
