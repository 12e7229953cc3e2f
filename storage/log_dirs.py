"""`LogDirs`: every directory of `log.dirs`, each a `LogManager`, behind one interface (what
Kafka's LogManager is over its `logDirs`).

A new partition goes to the online directory holding the fewest partitions (ties: the first in
`log.dirs`), as in Kafka, leaving out the cordoned ones (`cordoned.log.dirs`, KIP-1066) unless
every directory is. A directory with an I/O error is offline until the broker restarts
(`samsa.storage.log_dir_failure`): its logs are dropped here and their partitions are served by no
one on this broker; the other directories go on. While a directory is offline, a log that is
not found is not created elsewhere unless its partition is new (Kafka's `isNew`): it may hold
the partition's data, and an empty replica in its place could be elected and lose it."""

from __future__ import annotations

import asyncio
import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from samsa.storage.config import LogConfig
from samsa.storage.errors import KafkaStorageError
from samsa.storage.log import Log
from samsa.storage.log_dir_failure import LogDirFailureChannel, dir_key
from samsa.storage.log_dir_lock import LogDirLock, lock_log_dirs
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
        # Replicas being moved to another directory (AlterReplicaLogDirs): their future log.
        self._futures: dict[TopicPartition, tuple[LogManager, Log]] = {}
        # Where a partition not hosted yet is to be created (an AlterReplicaLogDirs before it).
        self.preferred: dict[TopicPartition, str] = {}
        # Moves cut short by a restart (their future log was found): partition -> target dir.
        self.resumed_moves: dict[TopicPartition, str] = {}
        # Directories no new partition is placed in (cordoned.log.dirs, KIP-1066).
        self.cordoned: frozenset[str] = frozenset()
        # Each directory's `.lock`, held from lock() to shutdown() (a broker's, not a test's).
        self._locks: list[LogDirLock] = []

    @classmethod
    def from_config(cls, config: Any) -> LogDirs:
        """A broker's `log.dirs` with its log manager settings (Kafka's LogManager.apply)."""
        return cls(
            [Path(d) for d in config.log_dirs],
            LogConfig.from_properties({}),
            producer_id_expiration_ms=config["producer.id.expiration.ms"],
            producer_id_expiration_check_interval_ms=config[
                "producer.id.expiration.check.interval.ms"
            ],
            retention_check_interval_ms=config["log.retention.check.interval.ms"],
            flush_offset_checkpoint_interval_ms=config["log.flush.offset.checkpoint.interval.ms"],
            flush_start_offset_checkpoint_interval_ms=config[
                "log.flush.start.offset.checkpoint.interval.ms"
            ],
            replication_offset_checkpoint_interval_ms=config[
                "replica.high.watermark.checkpoint.interval.ms"
            ],
            # Where the cleaner is scheduled: off entirely, or every backoff ms (Kafka's
            # log.cleaner.enable / log.cleaner.backoff.ms).
            cleaner_enable=config["log.cleaner.enable"],
            cleaner_backoff_ms=config["log.cleaner.backoff.ms"],
        )

    def set_cordoned(self, names: Sequence[str]) -> None:
        """cordoned.log.dirs, at start and when changed."""
        self.cordoned = self.cordoned_keys(names)

    def cordoned_keys(self, names: Sequence[str]) -> frozenset[str]:
        """The directories cordoned.log.dirs `names`: `*` is every one, else each must be one
        of log.dirs (ValueError otherwise, with Kafka's message)."""
        if "*" in names:
            if len(names) > 1:
                raise ValueError("When cordoned.log.dirs is set to *, it must not contain "
                                 "other values")
            return frozenset(self._by_key)
        missing = [n for n in names if dir_key(n) not in self._by_key]
        if missing:
            raise ValueError("All entries in cordoned.log.dirs must be present in log.dirs or "
                             f"log.dir. Missing entries : {','.join(missing)}")
        return frozenset(dir_key(n) for n in names)

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
        for tp, (fm, flog) in list(self._futures.items()):
            if fm is m:  # a move to the failed directory ends; its replica stays where it is
                del self._futures[tp]
                flog.close_handlers()
        for tp in tps:
            if self._owner.get(tp) is m:
                del self._owner[tp]
            self.remove_future_log(*tp)  # a move of a replica that is lost ends
        log.warning("Logs for partitions %s are offline due to failure on log directory %s",
                    ",".join(f"{t}-{p}" for t, p in tps) or "(none)", key)
        return tps

    # -- lifecycle -----------------------------------------------------------------------------

    def lock(self) -> None:
        """Kafka's lockLogDirs: take every directory's `.lock` until shutdown() (or unlock());
        LogDirLockError, holding none, when a broker of another process or of this one uses
        one of them. A directory with an I/O error is offline from the start, as one that
        cannot be loaded."""
        if self._locks:
            return
        by_dir = {m.log_dir: m for m in self.managers}

        def offline(d: Path, exc: OSError) -> None:
            by_dir[d].report_io_error("locking the directory", exc)

        self._locks = lock_log_dirs(list(by_dir), offline)

    def unlock(self) -> None:
        for held in self._locks:
            held.release()
        self._locks = []

    def startup(self, config_for: Callable[[str], LogConfig]) -> None:
        """Load every directory; one that cannot be read is offline from the start."""
        for m in self.managers:
            if m.offline:
                continue  # it could not be locked
            try:
                m.startup(config_for)
            except OSError as exc:
                m.report_io_error("loading logs", exc)
                continue
            except KafkaStorageError:
                continue  # reported where it happened
            for tp in m.logs():
                self._owner[tp] = m
        for m in self.managers:
            if not m.offline:
                try:
                    self._load_futures(m, config_for)
                except OSError as exc:
                    m.report_io_error("loading future logs", exc)

    def _load_futures(self, m: LogManager, config_for: Callable[[str], LogConfig]) -> None:
        """A future log left by a restart: with its replica still current elsewhere the move
        starts again (its copy is discarded: the current log is what was acknowledged); with
        none (the current one was already renamed for deletion when the broker stopped) it is
        the replica, complete (it was flushed before that rename)."""
        futures, m.future_dirs = m.future_dirs, []
        for tp, d in futures:
            if tp in self._owner:
                log.info("%s-%d: resuming its move to log dir %s", tp[0], tp[1], m.dir_key)
                shutil.rmtree(d)
                self.resumed_moves[tp] = m.dir_key
                continue
            if self.offline_dirs:
                # Its current log may be in the offline directory: the future one, perhaps
                # partial, is left alone (the partition is offline here until then).
                log.warning("%s-%d: future log %s left as it is: log directories %s are "
                            "offline", tp[0], tp[1], d, ",".join(self.offline_dirs))
                continue
            log.info("%s-%d: its future log in %s replaces the current one, deleted before the "
                     "broker stopped", tp[0], tp[1], m.dir_key)
            target = d.with_name(f"{tp[0]}-{tp[1]}")
            d.rename(target)
            m.adopt(tp[0], tp[1], m.open_log(target, config_for(tp[0]), recover=True))
            self._owner[tp] = m

    def shutdown(self) -> None:
        try:
            for m in self.managers:
                m.shutdown()
            for _m, fut in self._futures.values():  # kept: the next start resumes their moves
                if not fut.offline:
                    fut.close_without_flush()
        finally:
            self.unlock()  # last: nothing of this broker writes any more

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
        # Kafka's nextLogDirs: not a cordoned directory, unless every one is (then the first)
        open_dirs = [m for m in live if m.dir_key not in self.cordoned] or live[:1]
        m = min(open_dirs, key=lambda m: m.log_count)  # min() keeps the first of equals
        wanted = self._by_key.get(self.preferred.pop((topic, partition), ""))
        if wanted is not None and not wanted.offline:
            m = wanted
        lg = m.create_log(topic, partition, config, topic_id)
        self._owner[(topic, partition)] = m
        return lg

    def delete_log(self, topic: str, partition: int) -> bool:
        self.remove_future_log(topic, partition)
        self.preferred.pop((topic, partition), None)
        m = self._owner.pop((topic, partition), None)
        return m is not None and m.delete_log(topic, partition)

    # -- moving a replica to another directory (AlterReplicaLogDirs) ---------------------------

    def is_online(self, key: str) -> bool:
        m = self._by_key.get(key)
        return m is not None and not m.offline

    def future_log(self, topic: str, partition: int) -> Log | None:
        entry = self._futures.get((topic, partition))
        return None if entry is None else entry[1]

    def future_dir_of(self, topic: str, partition: int) -> str | None:
        entry = self._futures.get((topic, partition))
        return None if entry is None else entry[0].dir_key

    def future_logs(self) -> dict[TopicPartition, Log]:
        return {tp: lg for tp, (_m, lg) in self._futures.items()}

    def create_future_log(self, topic: str, partition: int, key: str, config: LogConfig,
                          topic_id: uuid.UUID | None) -> Log:
        """An empty future log for the partition in directory `key` (any previous one goes).
        Refused while a directory is offline, as Kafka does: a future log could be left in
        each of two directories."""
        self.remove_future_log(topic, partition)
        offline = self.offline_dirs
        if offline:
            raise KafkaStorageError(f"Can not create a future log for {topic}-{partition} "
                                    f"because log directories {','.join(offline)} are offline")
        m = self._by_key[key]
        lg = m.create_future_log(topic, partition, config, topic_id)
        self._futures[(topic, partition)] = (m, lg)
        return lg

    def remove_future_log(self, topic: str, partition: int) -> bool:
        entry = self._futures.pop((topic, partition), None)
        if entry is None:
            return False
        entry[1].delete()
        return True

    def replace_current_with_future(self, topic: str, partition: int,
                                    high_watermark: int) -> Log:
        """The future log has everything the current one has: it becomes the partition's log
        (Kafka's replaceCurrentWithFutureLog). Both are closed (flushed, producer snapshot at
        their end); the current directory is renamed for deletion, then the future one takes
        the partition's name. A crash between the two renames leaves only the future log,
        complete, which start-up makes current. Files go after file.delete.delay.ms."""
        tp = (topic, partition)
        src = self._owner[tp]
        dst, fut = self._futures[tp]
        fut.close()  # first: a failure here leaves the current log as it was
        del self._futures[tp]
        cur = src.release(topic, partition)
        if cur is None:
            raise KafkaStorageError(f"{topic}-{partition} has no current log in {src.dir_key}")
        leo = fut.log_end_offset
        start = max(fut.log_start_offset, cur.log_start_offset)
        config = cur.config
        cur.close()
        doomed = cur.dir.with_name(f"{topic}-{partition}.{uuid.uuid4().hex}-delete")
        try:
            cur.dir.rename(doomed)
        except OSError as exc:
            raise src.report_io_error(f"renaming the log of {topic}-{partition}", exc) from exc
        target = dst.log_dir / f"{topic}-{partition}"
        try:
            fut.dir.rename(target)
        except OSError as exc:
            raise dst.report_io_error(f"renaming the future log of {topic}-{partition}",
                                      exc) from exc
        new = dst.open_log(target, config, recover=False, recovery_point=leo,
                           log_start_offset=start, high_watermark=high_watermark)
        dst.adopt(topic, partition, new)
        self._owner[tp] = dst
        timer = threading.Timer(config.file_delete_delay_ms / 1000, shutil.rmtree, (doomed,),
                                {"ignore_errors": True})
        timer.daemon = True  # left for the next start-up if the broker stops first
        timer.start()
        log.info("%s-%d: moved from log dir %s to %s", topic, partition, src.dir_key,
                 dst.dir_key)
        return new

    def checkpoint(self) -> None:
        for m in self.managers:
            if not m.offline:
                m.checkpoint()


__all__ = ["LogDirs"]
