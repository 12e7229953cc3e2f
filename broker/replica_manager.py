"""Which partitions this broker hosts, and the long-poll wait for fetches.

The replica manager turns metadata (topic → partition → replicas, leader epoch) into
`Partition` objects backed by logs from the `LogManager`, and is the one place a handler asks
for a partition (answering Kafka's UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from storage.config import LogConfig
from storage.log_manager import LogManager

from .metadata_store import MetadataStore, TopicState
from .partition import Partition

log = logging.getLogger(__name__)

UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6


class PartitionError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


class ReplicaManager:
    def __init__(
        self, broker_id: int, log_manager: LogManager, store: MetadataStore, topic_config
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.store = store
        self._topic_config = topic_config  # (TopicState) -> LogConfig
        self._partitions: dict[tuple[str, int], Partition] = {}

    def load_all(self) -> None:
        for topic in self.store.topics().values():
            self.materialize(topic)

    def materialize(self, topic: TopicState) -> None:
        """Open (or create) the logs of every partition of `topic` hosted here."""
        config: LogConfig = self._topic_config(topic)
        for index, state in topic.partitions.items():
            if self.broker_id not in state.replicas or (topic.name, index) in self._partitions:
                continue
            plog = self.log_manager.get_log(topic.name, index)
            if plog is None:
                plog = self.log_manager.create_log(topic.name, index, config, topic.topic_id)
            else:
                plog.config = config
            self._partitions[(topic.name, index)] = Partition(
                topic.name,
                index,
                topic.topic_id,
                plog,
                state.leader_epoch,
                state.replicas,
                self.broker_id,
            )

    def reconfigure(self, topic: TopicState) -> None:
        config = self._topic_config(topic)
        for (name, _), partition in self._partitions.items():
            if name == topic.name:
                partition.log.config = config

    def remove_topic(self, name: str) -> None:
        for key in [k for k in self._partitions if k[0] == name]:
            partition = self._partitions.pop(key)
            partition.notify_waiters()
            self.log_manager.delete_log(*key)

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def get(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def leader_partition(self, topic: str, index: int) -> Partition:
        partition = self._partitions.get((topic, index))
        if partition is None:
            t = self.store.topic(topic)
            if t is not None and index in t.partitions:
                raise PartitionError(NOT_LEADER_OR_FOLLOWER)
            raise PartitionError(UNKNOWN_TOPIC_OR_PARTITION)
        if not partition.is_leader:
            raise PartitionError(NOT_LEADER_OR_FOLLOWER)
        return partition

    async def wait_for_data(self, partitions: list[Partition], timeout_s: float) -> None:
        """Sleep until any of `partitions` gets new data, or the timeout."""
        if timeout_s <= 0:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for p in partitions:
            p.add_waiter(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            pass
        finally:
            for p in partitions:
                p.discard_waiter(fut)
