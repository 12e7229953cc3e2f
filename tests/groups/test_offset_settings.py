"""Group coordinator properties seen by a client: offset.metadata.max.bytes bounds the metadata
of a commit, offsets.topic.compression.codec compresses what __consumer_offsets stores."""

from __future__ import annotations

import uuid

import pytest

from protocol.records import iter_batches
from tests.groups.clients import FAST, create_topic

pytestmark = pytest.mark.timeout(120)

GZIP = 1


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
