"""The broker side of `samsa.coordinator.ports.InternalLogHost`: what the coordinators' internal
topics (`__consumer_offsets`, `__transaction_state`, `__share_group_state`) see of this broker."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable

from .cluster.metadata_store import MetadataStore
from .cluster.topic_admin import TopicAdmin
from .replication.partition import Partition
from .replication.replica_manager import ReplicaManager


class BrokerLogHost:
    """Metadata from the store (also the group and share coordinators'
    `samsa.coordinator.ports.TopicsView`), topic creation through `TopicAdmin`, replicas from
    the replica manager (`broker.replication.partition.Partition` is a
    `coordinator.ports.CoordinatorReplica`; `PartitionError` and `TopicError` are the
    `KafkaError`s the interface names)."""

    def __init__(self, store: MetadataStore, topics: TopicAdmin, replicas: ReplicaManager) -> None:
        self._store = store
        self._topics = topics
        self._replicas = replicas

    def topic_partitions(self, topic: str) -> Collection[int] | None:
        state = self._store.topic(topic)
        return None if state is None else state.partitions.keys()

    def topic_info(self, name: str) -> tuple[uuid.UUID, int] | None:
        state = self._store.topic(name)
        return None if state is None else (state.topic_id, len(state.partitions))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._store.topic_name_by_id(topic_id)

    def topic_names(self) -> Iterable[str]:
        return self._store.topics().keys()

    def broker_count(self) -> int:
        return len(self._store.brokers())

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        wanted: dict[str, str | None] = dict(configs)
        await self._topics.create(
            name, partitions, replication_factor, configs=wanted, internal=True
        )

    def replica(self, topic: str, partition: int) -> Partition | None:
        return self._replicas.get(topic, partition)

    def leader(self, topic: str, partition: int) -> Partition:
        return self._replicas.leader_partition(topic, partition)
