"""`LogDirs`: every directory of `log.dirs`, each a `LogManager`, behind one interface (what
Kafka's LogManager is over its `logDirs`).

A new partition goes to the online directory holding the fewest partitions (ties: the first in
`log.dirs`), as in Kafka. A directory with an I/O error is offline until the broker restarts
(`samsa.storage.log_dir_failure`): its logs are dropped here and their partitions are served by no
one on this broker; the other directories go on. While a directory is offline, a log that is
not found is not created elsewhere unless its partition is new (Kafka's `isNew`): it may hold
the partition's data, and an empty replica in its place could be elected and lose it."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from samsa.storage.config import LogConfig
from samsa.storage.errors import KafkaStorageError
from samsa.storage.log import Log
from samsa.storage.log_dir_failure import LogDirFailureChannel
from samsa.storage.log_manager import LogManager, TopicPartition

log = logging.getLogger(__name__)


class LogDirs:
    def __init__(self, dirs: Sequence[Path], default_config: LogConfig, **options: Any) -> None:
        if not dirs:
            raise ValueError("at least one log directory is needed")
        self.failure_channel = LogDirFailureChannel()
        self.managers = [LogManager(d, default_config, failure_channel=self.failure_channel,
                                    **options) for d in dirs]
        self._by_key = {m.dir_key: m for m in self.managers}
        if len(self._by_key) != len(self.managers):
            raise ValueError(f"log.dirs names a directory twice: {[str(d) for d in dirs]}")
        self._owner: dict[TopicPartition, LogManager] = {}

    def set_cleaner_backoff_ms(self, ms: int) -> None:
        """log.cleaner.backoff.ms changed while running."""
        for m in self.managers:
            m.intervals["cleaner"] = ms

    def set_producer_id_expiration_ms(self, ms: int) -> None:
        """producer.id.expiration.ms changed while running: for every log, and those to come."""
        for m in self.managers:
            m.producer_id_expiration_ms = ms
        for plog in self.logs().values():
            plog.producer_state.producer_id_expiration_ms = ms

    # -- directories ---------------------------------------------------------------------------

    @property
    def dirs(self) -> list[str]:
        return [m.dir_key for m in self.managers]

    @property
    def live_dirs(self) -> list[str]:
        return [m.dir_key for m in self.managers if not m.offline]

    @property
    def offline_dirs(self) -> list[str]:
        return [m.dir_key for m in self.managers if m.offline]

    def dir_of(self, topic: str, partition: int) -> str | None:
        m = self._owner.get((topic, partition))
        return None if m is None else m.dir_key

    def handle_dir_failure(self, key: str) -> list[TopicPartition]:
        """Drop the logs of the failed directory `key`; returns their partitions."""
        m = self._by_key.get(key)
        if m is None:
            return []
        tps = m.handle_dir_failure()
        for tp in tps:
            if self._owner.get(tp) is m:
                del self._owner[tp]
        log.warning("Logs for partitions %s are offline due to failure on log directory %s",
                    ",".join(f"{t}-{p}" for t, p in tps) or "(none)", key)
        return tps

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self, config_for: Callable[[str], LogConfig]) -> None:
        """Load every directory; one that cannot be read is offline from the start."""
        for m in self.managers:
            try:
                m.startup(config_for)
            except OSError as exc:
                m.report_io_error("loading logs", exc)
                continue
            except KafkaStorageError:
                continue  # reported where it happened
            for tp in m.logs():
                self._owner[tp] = m

    def shutdown(self) -> None:
        for m in self.managers:
            m.shutdown()

    async def run_background(self) -> None:
        await asyncio.gather(*(m.run_background() for m in self.managers))

    @property
    def flush_observer(self) -> Callable[[float], None] | None:
        return self.managers[0].flush_observer

    @flush_observer.setter
    def flush_observer(self, fn: Callable[[float], None] | None) -> None:
        for m in self.managers:
            m.flush_observer = fn

    # -- logs ----------------------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        m = self._owner.get((topic, partition))
        return None if m is None else m.get_log(topic, partition)

    def logs(self) -> dict[TopicPartition, Log]:
        out: dict[TopicPartition, Log] = {}
        for m in self.managers:
            out.update(m.logs())
        return out

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                   topic_id: uuid.UUID | None = None, *, is_new: bool = True) -> Log:
        """The partition's log, created in the online directory with the fewest partitions if
        there is none. `is_new=False` (the partition existed before a directory went offline)
        refuses to create it while any directory is offline."""
        existing = self.get_log(topic, partition)
        if existing is not None:
            return existing
        offline = self.offline_dirs
        if offline and not is_new:
            raise KafkaStorageError(f"Can not create log for {topic}-{partition} because log "
                                    f"directories {','.join(offline)} are offline")
        live = [m for m in self.managers if not m.offline]
        if not live:
            raise KafkaStorageError(f"Can not create log for {topic}-{partition}: every log "
                                    "directory is offline")
        m = min(live, key=lambda m: m.log_count)  # min() keeps the first of equals
        lg = m.create_log(topic, partition, config, topic_id)
        self._owner[(topic, partition)] = m
        return lg

    def delete_log(self, topic: str, partition: int) -> bool:
        m = self._owner.pop((topic, partition), None)
        return m is not None and m.delete_log(topic, partition)

    def update_config(self, topic: str, config: LogConfig) -> None:
        for m in self.managers:
            m.update_config(topic, config)

    def checkpoint(self) -> None:
        for m in self.managers:
            if not m.offline:
                m.checkpoint()


__all__ = ["LogDirs"]
