"""The persister (Kafka's DefaultStatePersister): how a share-partition leader reads and writes
its share-partition's durable state, wherever the share coordinator of it is.

The share-partition's state lives on the leader of its partition of `__share_group_state`
(`ShareStateCoordinator.partition_for`). Led here: the coordinator is called directly. Led by
another broker: a real Initialize/Read/Write/DeleteShareGroupState (83..86) or
ReadShareGroupStateSummary (87) request goes to it over the inter-broker channel. Answers that
say the coordinator is moving or loading (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS) and unreachable brokers are retried, looking the leader up
again, until `timeout_s` has passed; the last error is raised then (ShareStateError).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from samsa.coordinator.share import ShareStateCoordinator
from samsa.coordinator.share.coordinator import ShareStateError, StateRead
from samsa.coordinator.share.records import StateBatch
from samsa.protocol.errors import ErrorCode

from ..network.interbroker import BrokerConnection, BrokerUnavailable

if TYPE_CHECKING:
    from ..cluster.metadata_store import MetadataStore

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"
INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
LIST_OFFSETS = 2
# the versions sent: WriteShareGroupState and ReadShareGroupStateSummary v1 carry the
# delivery-complete count (KIP-1226), which share-group lag needs
VERSIONS = {WRITE: 1, SUMMARY: 1}
RETRIABLE = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                       ErrorCode.coordinator_load_in_progress})
_BACKOFF_S = (0.05, 1.0)

T = TypeVar("T")


class SharePersister:
    def __init__(self, coordinator: ShareStateCoordinator, store: MetadataStore, broker_id: int,
                 timeout_s: float = 15.0) -> None:
        self.coordinator = coordinator
        self.store = store
        self.broker_id = broker_id
        self.timeout_s = timeout_s
        self._connections: dict[int, BrokerConnection] = {}

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    # ------------------------------------------------------------------ the operations
    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> None:
        key = (group_id, topic_id, partition)
        body = _body(group_id, topic_id, {"partition": partition, "state_epoch": state_epoch,
                                          "start_offset": start_offset})
        await self._call(key, lambda: self.coordinator.initialize(key, state_epoch,
                                                                  start_offset),
                         INITIALIZE, body, lambda r: None)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> StateRead:
        key = (group_id, topic_id, partition)
        body = _body(group_id, topic_id, {"partition": partition, "leader_epoch": leader_epoch})

        def parse(r: Any) -> StateRead:
            return StateRead(r.state_epoch, r.start_offset, tuple(
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in r.state_batches))

        return await self._call(key, lambda: self.coordinator.read(key, leader_epoch), READ,
                                body, parse)

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int,
                    state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Iterable[StateBatch], delivery_complete_count: int = -1) -> None:
        key = (group_id, topic_id, partition)
        batches = tuple(batches)
        body = _body(group_id, topic_id, {
            "partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
            "start_offset": start_offset, "delivery_complete_count": delivery_complete_count,
            "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                               "delivery_state": b.delivery_state,
                               "delivery_count": b.delivery_count} for b in batches]})
        await self._call(key, lambda: self.coordinator.write(key, state_epoch, leader_epoch,
                                                             start_offset, batches,
                                                             delivery_complete_count),
                         WRITE, body, lambda r: None)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        key = (group_id, topic_id, partition)
        body = _body(group_id, topic_id, {"partition": partition})
        await self._call(key, lambda: self.coordinator.delete(key), DELETE, body,
                         lambda r: None)

    async def summary(self, group_id: str, topic_id: uuid.UUID, partition: int) -> StateRead:
        key = (group_id, topic_id, partition)
        body = _body(group_id, topic_id, {"partition": partition, "leader_epoch": -1})

        async def local() -> StateRead:
            return self.coordinator.summary(key)

        return await self._call(key, local, SUMMARY, body,
                                lambda r: StateRead(
                                    r.state_epoch, r.start_offset, leader_epoch=r.leader_epoch,
                                    delivery_complete_count=r.delivery_complete_count))

    # ------------------------------------------------------------------ routing
    async def _call(self, key: tuple[str, uuid.UUID, int], local: Callable[[], Awaitable[T]],
                    api_key: int, body: dict[str, Any], parse: Callable[[Any], T]) -> T:
        deadline = time.monotonic() + self.timeout_s
        delay, longest = _BACKOFF_S
        last = ShareStateError(ErrorCode.coordinator_not_available)
        while True:
            try:
                return await self._once(key, local, api_key, body, parse)
            except ShareStateError as exc:
                if exc.error_code not in RETRIABLE:
                    raise
                last = exc
            except BrokerUnavailable as exc:
                last = ShareStateError(ErrorCode.coordinator_not_available, str(exc))
            except Exception as exc:  # a malformed answer, a bug: an error, not a crash
                log.exception("share persister call %d for %s failed", api_key, key)
                raise ShareStateError(ErrorCode.unknown_server_error, repr(exc)) from None
            if time.monotonic() + delay > deadline:
                raise last
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)

    async def _once(self, key: tuple[str, uuid.UUID, int], local: Callable[[], Awaitable[T]],
                    api_key: int, body: dict[str, Any], parse: Callable[[Any], T]) -> T:
        try:
            await self.coordinator.ensure_topic()
        except Exception as exc:
            log.warning("creating %s failed: %r", SHARE_STATE_TOPIC, exc)
            raise ShareStateError(ErrorCode.coordinator_not_available) from None
        p = self.coordinator.partition_for(*key)
        state = self.store.topic(SHARE_STATE_TOPIC)
        pstate = state.partitions.get(p) if state is not None else None
        if pstate is None or pstate.leader < 0:
            raise ShareStateError(ErrorCode.coordinator_not_available)
        if pstate.leader == self.broker_id:
            return await local()
        response = await self._connection(pstate.leader).request(
            api_key, VERSIONS.get(api_key, 0), body)
        result = response.results[0].partitions[0]
        if result.error_code != ErrorCode.none:
            raise ShareStateError(ErrorCode(result.error_code), result.error_message)
        return parse(result)

    def _connection(self, broker: int) -> BrokerConnection:
        conn = self._connections.get(broker)
        if conn is None:
            conn = self._connections[broker] = BrokerConnection(
                self.store, broker, f"samsa-share-persister-{self.broker_id}",
                timeout_s=self.timeout_s)
        return conn

    async def end_offset(self, topic: str, partition: int) -> int:
        """The partition's high watermark, asked of its leader on another broker by a
        ListOffsets for the latest offset, read_uncommitted (Kafka's
        NetworkPartitionMetadataClient, what share-group lag is measured against); raises
        ShareStateError with the partition's error."""
        state = self.store.topic(topic)
        pstate = state.partitions.get(partition) if state is not None else None
        if pstate is None:
            raise ShareStateError(ErrorCode.unknown_topic_or_partition)
        if pstate.leader < 0:
            raise ShareStateError(ErrorCode.leader_not_available)
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition,
                                            "current_leader_epoch": -1, "timestamp": -1}]}]}
        try:
            response = await self._connection(pstate.leader).request(LIST_OFFSETS, 7, body)
        except BrokerUnavailable as exc:
            raise ShareStateError(ErrorCode.leader_not_available, str(exc)) from None
        result = response.topics[0].partitions[0]
        if result.error_code != ErrorCode.none:
            raise ShareStateError(ErrorCode(result.error_code))
        return int(result.offset)


def _body(group_id: str, topic_id: uuid.UUID, partition: dict[str, Any]) -> dict[str, Any]:
    return {"group_id": group_id, "topics": [{"topic_id": topic_id, "partitions": [partition]}]}
