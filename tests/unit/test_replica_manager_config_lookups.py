"""What a partition state change costs the replica manager in topic-config lookups, and that a
topic config change still reaches every partition (broker/replication/replica_manager.py).

In a cluster the metadata store reports a partition's new leader or ISR as a change of its
whole topic. Looking the topic's config up again for each of its partitions at each such change
(merging the broker's defaults with the overrides, about 0.1 ms) made the states of a restart
cost O(partitions^2): minutes to lead 2,000 partitions. The broker's real lookups are counted
here, on real log directories and the single-broker metadata store; the replica fetchers are a
stand-in (they leave the process)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from samsa.broker.cluster.metadata_store import (
    BrokerInfo,
    LocalMetadataStore,
    PartitionState,
    TopicState,
)
from samsa.broker.replication.partition import Partition
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.config import BrokerConfig
from samsa.config.topic import effective_topic_config
from samsa.storage.config import LogConfig
from samsa.storage.log_dirs import LogDirs

ME, OTHER = 1, 2
PARTITIONS = 40


class Fetchers:
    """Stand-in for the replica fetchers: nothing to fetch in these tests."""

    def add(self, partition: Partition) -> None:
        pass

    def remove(self, partition: Partition) -> None:
        pass


class Lookups:
    """The broker's topic-config lookups (as broker/app.py wires them), counted."""

    def __init__(self, broker: BrokerConfig) -> None:
        self.broker = broker
        self.count = 0

    def _effective(self, topic: TopicState) -> dict[str, object]:
        self.count += 1
        return effective_topic_config(topic.configs, self.broker)

    def log_config(self, topic: TopicState) -> LogConfig:
        return LogConfig.from_properties(self._effective(topic))

    def min_isr(self, topic: TopicState) -> int:
        return int(str(self._effective(topic)["min.insync.replicas"]))


@pytest.fixture
async def node(tmp_path: Path) -> tuple[ReplicaManager, LocalMetadataStore, Lookups]:
    dirs = LogDirs([tmp_path / "logs"], LogConfig.from_properties({}))
    (tmp_path / "meta").mkdir()
    store = LocalMetadataStore(tmp_path / "meta", BrokerInfo(ME, "localhost", 9092))
    dirs.startup(lambda _name: LogConfig.from_properties({}))
    lookups = Lookups(BrokerConfig())
    replicas = ReplicaManager(ME, dirs, store, lookups.log_config)
    replicas.min_isr = lookups.min_isr
    replicas.fetchers = Fetchers()  # type: ignore[assignment]
    states = {i: PartitionState(replicas=[ME, OTHER], leader=OTHER, leader_epoch=0,
                                isr=[ME, OTHER]) for i in range(PARTITIONS)}
    await store.create_topic(TopicState("t", uuid.uuid4(), states, {}))
    topic = store.topic("t")
    assert topic is not None
    replicas.materialize(topic)
    return replicas, store, lookups


def _partitions(replicas: ReplicaManager) -> list[Partition]:
    hosted = [replicas.get("t", i) for i in range(PARTITIONS)]
    assert None not in hosted
    return [p for p in hosted if p is not None]


def _min_isrs(replicas: ReplicaManager) -> set[int]:
    return {p.min_insync_replicas for p in _partitions(replicas)}


async def _lead(replicas: ReplicaManager, store: LocalMetadataStore, index: int) -> None:
    """The controller made this broker the partition's leader; the store reports the topic."""
    topic = store.topic("t")
    assert topic is not None
    state = topic.partitions[index]
    state.leader, state.leader_epoch, state.isr = ME, state.leader_epoch + 1, [ME]
    await store.update_topic(topic)
    replicas.on_metadata_change("topic", "t")


async def test_partition_state_changes_look_the_config_up_a_bounded_number_of_times(
        node: tuple[ReplicaManager, LocalMetadataStore, Lookups]) -> None:
    replicas, store, lookups = node
    lookups.count = 0
    for index in range(PARTITIONS):
        await _lead(replicas, store, index)
    assert all(p.is_leader for p in _partitions(replicas))
    # Once for the topic as the first change finds it (its configs not yet noted as
    # applied); per partition per change it was PARTITIONS^2 = 1,600 min ISR lookups alone.
    assert lookups.count <= 2


async def test_another_brokers_min_isr_change_reaches_every_partition(
        node: tuple[ReplicaManager, LocalMetadataStore, Lookups]) -> None:
    replicas, store, lookups = node
    await _lead(replicas, store, 0)
    assert _min_isrs(replicas) == {1}
    topic = store.topic("t")
    assert topic is not None
    topic.configs = {"min.insync.replicas": "2"}  # AlterConfigs on another broker
    await store.update_topic(topic)
    replicas.on_metadata_change("topic", "t")
    assert _min_isrs(replicas) == {2}
    # the override goes: the broker's default again, at every partition
    topic.configs = {}
    await store.update_topic(topic)
    replicas.on_metadata_change("topic", "t")
    assert _min_isrs(replicas) == {1}


async def test_a_broker_default_change_reaches_every_partition(
        node: tuple[ReplicaManager, LocalMetadataStore, Lookups]) -> None:
    """A dynamic broker default (no topic override changed) is pushed by the broker's
    reconfiguration, which calls `reconfigure` for each topic."""
    replicas, store, lookups = node
    await _lead(replicas, store, 0)
    lookups.broker = BrokerConfig({"min.insync.replicas": "2"})
    topic = store.topic("t")
    assert topic is not None
    replicas.reconfigure(topic)
    assert _min_isrs(replicas) == {2}
    await _lead(replicas, store, 1)  # a later state change keeps it
    assert _min_isrs(replicas) == {2}
