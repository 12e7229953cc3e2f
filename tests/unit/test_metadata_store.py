"""The one-broker metadata store's file: every partition field survives a restart."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

from samsa.broker.cluster.metadata_store import (
    BrokerInfo,
    LocalMetadataStore,
    PartitionState,
    TopicState,
)

INFO = BrokerInfo(0, "127.0.0.1", 9092)


async def test_a_topic_comes_back_with_every_partition_field(tmp_path: Path) -> None:
    moving = PartitionState(replicas=[0, 1, 2], leader=1, leader_epoch=7, isr=[1, 0],
                            adding=[2], removing=[0], zxid=42)
    plain = PartitionState(replicas=[0], leader=0)
    topic = TopicState("orders", uuid.uuid4(), {0: moving, 1: plain},
                       configs={"cleanup.policy": "compact"})
    await LocalMetadataStore(tmp_path, INFO).create_topic(topic)

    again = LocalMetadataStore(tmp_path, INFO).topic("orders")

    assert again == topic


async def test_the_file_keeps_exactly_the_partition_fields(tmp_path: Path) -> None:
    """A field added to PartitionState must be written too, or a restart loses it."""
    store = LocalMetadataStore(tmp_path, INFO)
    await store.create_topic(TopicState("t", uuid.uuid4(), {0: PartitionState([0], 0)}))

    doc = json.loads((tmp_path / LocalMetadataStore.FILE).read_text())
    saved = next(t for t in doc["topics"] if t["name"] == "t")["partitions"]["0"]

    assert set(saved) == {f.name for f in dataclasses.fields(PartitionState)}
