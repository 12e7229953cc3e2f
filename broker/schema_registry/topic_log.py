"""The registry's `_schemas` topic: one partition, whose leader is the registry's primary.
The primary loads the state by replaying the partition when it becomes the leader, appends
each write with acks=all and applies it only once the ISR has it."""

from __future__ import annotations

import asyncio
import json
import logging
import time

from samsa.coordinator.internal_log import InternalTopic, ReplayedRecord
from samsa.protocol.errors import ErrorCode, KafkaError

from . import errors
from .records import decode
from .store import SchemaStore

log = logging.getLogger(__name__)

PARTITION = 0
CREATE_WAIT_S = 10.0  # how long a first request waits for the new topic's leadership


class TopicLog:
    def __init__(self, topic: InternalTopic, store: SchemaStore) -> None:
        self.topic = topic
        self.store = store
        self.loaded_epoch: int | None = None  # the leader epoch the store was loaded at
        self._load_lock = asyncio.Lock()

    async def catch_up(self) -> None:
        """Make sure the store holds the partition's records: this broker must lead it (the
        primary); loads them on the first call after it became the leader."""
        if self._current():
            return
        async with self._load_lock:
            if not self.topic.exists():
                await self._create()
            if not self.topic.is_led_here(PARTITION):
                raise errors.not_primary(
                    f"this broker does not lead {self.topic.name}-{PARTITION}", forwardable=True)
            if not self._current():
                self._load()

    def _current(self) -> bool:
        return (self.loaded_epoch is not None and self.topic.is_led_here(PARTITION)
                and self.topic.leader_epoch(PARTITION) == self.loaded_epoch)

    async def _create(self) -> None:
        try:
            await self.topic.ensure_created()
        except KafkaError as exc:
            raise errors.store_error(f"creating {self.topic.name}: {exc}") from exc
        deadline = time.monotonic() + CREATE_WAIT_S
        while not self.topic.replica(PARTITION) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    def _load(self) -> None:
        epoch = self.topic.leader_epoch(PARTITION)
        started = time.monotonic()
        self.store.clear()
        count = 0
        for entry in self.topic.replay(PARTITION):
            if isinstance(entry, ReplayedRecord) and entry.key is not None:
                self._apply(entry.key, entry.value)
                count += 1
        self.loaded_epoch = epoch
        log.info("schema registry: %d records of %s loaded in %.0f ms (leader epoch %d)",
                 count, self.topic.name, (time.monotonic() - started) * 1000, epoch)

    def _apply(self, key: bytes, value: bytes | None) -> None:
        try:
            self.store.apply(json.loads(key), decode(value))
        except (ValueError, KeyError, TypeError):
            log.warning("%s: a record that is not the registry's skipped: %r", self.topic.name,
                        key[:200])

    async def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        await self.catch_up()
        try:
            await self.topic.append_replicated(PARTITION, records,
                                               leader_epoch=self.loaded_epoch,
                                               timestamp_ms=int(time.time() * 1000))
        except KafkaError as exc:
            # The records may be in the log all the same: load it again before the next use.
            self.loaded_epoch = None
            if exc.error_code == ErrorCode.request_timed_out:
                raise errors.timeout(str(exc)) from exc
            if exc.error_code == ErrorCode.not_leader_or_follower:
                raise errors.not_primary(str(exc)) from exc
            raise errors.store_error(f"{exc.error_code.name}: {exc}") from exc
        for key, value in records:
            self._apply(key, value)
