"""`LogManager`: one log directory — loads/recovers partitions, checkpoints, retention,
compaction and flush scheduling, clean-shutdown marker (Kafka's LogManager, one log dir)."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from samsa.protocol.uuids import kafka_uuid_string, parse_kafka_uuid
from samsa.storage import cleaner
from samsa.storage.checkpoint import OffsetCheckpointFile, write_atomically
from samsa.storage.clock import milliseconds
from samsa.storage.config import LONG_MAX, LogConfig
from samsa.storage.errors import KafkaStorageError
from samsa.storage.fdcache import FD_CACHE
from samsa.storage.log import FUTURE_DIR_SUFFIX, Log, future_dir_name, parse_topic_partition
from samsa.storage.log_dir_failure import LogDirFailureChannel, dir_key

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
PARTITION_METADATA = "partition.metadata"
PROGRESS_INTERVAL_S = 5.0  # start-up: a progress line this often while logs load

TopicPartition = tuple[str, int]


def read_partition_metadata(dir: Path) -> uuid.UUID | None:
    try:
        text = (dir / PARTITION_METADATA).read_text()
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            return parse_kafka_uuid(value.strip())
    return None


def write_partition_metadata(dir: Path, topic_id: uuid.UUID, *, fsync: bool = True) -> None:
    data = f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}"
    write_atomically(dir / PARTITION_METADATA, data.encode(), fsync=fsync)


class LogManager:
    def __init__(
        self,
        log_dir: Path,
        default_config: LogConfig,
        *,
        producer_id_expiration_ms: int = 86_400_000,
        producer_id_expiration_check_interval_ms: int = 600_000,
        retention_check_interval_ms: int = 300_000,
        flush_scheduler_interval_ms: int = 1_000,
        flush_offset_checkpoint_interval_ms: int = 60_000,
        flush_start_offset_checkpoint_interval_ms: int = 60_000,
        replication_offset_checkpoint_interval_ms: int = 5_000,
        cleaner_backoff_ms: int = 15_000,
        cleaner_enable: bool = True,
        max_open_files: int | None = None,
        io_threads: int = 8,
        failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        self.dir_key = dir_key(self.log_dir)
        # I/O errors in this directory are reported there (None: they only raise).
        self.failure_channel = failure_channel
        self.default_config = default_config
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.intervals = {
            "retention": retention_check_interval_ms,
            "flush": flush_scheduler_interval_ms,
            "recovery_checkpoint": flush_offset_checkpoint_interval_ms,
            "start_checkpoint": flush_start_offset_checkpoint_interval_ms,
            "replication_checkpoint": replication_offset_checkpoint_interval_ms,
            "cleaner": cleaner_backoff_ms,
            "producer_expiration": producer_id_expiration_check_interval_ms,
        }
        self.cleaner_enable = cleaner_enable
        # Segment and index fds are cached process-wide (storage/fdcache.py); None keeps the
        # default cap (a quarter of RLIMIT_NOFILE, at most 8,192).
        if max_open_files is not None:
            FD_CACHE.capacity = max_open_files
        # Threads for the fsync-bound parts of shutdown and crash recovery (fsync releases the
        # GIL, and the file system commits concurrent fsyncs together).
        self.io_threads = max(1, io_threads)
        self._logs: dict[TopicPartition, Log] = {}
        self._cleaner_offsets: dict[TopicPartition, int] = {}
        self._recovery_cp = OffsetCheckpointFile(self.log_dir / RECOVERY_POINT_CHECKPOINT)
        self._start_cp = OffsetCheckpointFile(self.log_dir / LOG_START_OFFSET_CHECKPOINT)
        self._replication_cp = OffsetCheckpointFile(self.log_dir / REPLICATION_OFFSET_CHECKPOINT)
        self._cleaner_cp = OffsetCheckpointFile(self.log_dir / CLEANER_OFFSET_CHECKPOINT)
        self._stopping = False
        self._cleaner_thread: ThreadPoolExecutor | None = None  # Kafka's log cleaner thread
        self._deletion_thread: ThreadPoolExecutor | None = None  # segment files to delete
        self.had_clean_shutdown = False
        # Future replicas found at start-up (a move to this directory cut short).
        self.future_dirs: list[tuple[TopicPartition, Path]] = []
        # Called (from an executor thread) with the milliseconds each scheduled flush took.
        self.flush_observer: Callable[[float], None] | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @staticmethod
    def _read_checkpoint(cp: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return cp.read()
        except (ValueError, OSError) as e:
            log.warning("ignoring unreadable checkpoint %s: %s", cp.path, e)
            return {}

    def startup(self, config_for: Callable[[str], LogConfig]) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        marker = self.log_dir / CLEAN_SHUTDOWN_FILE
        self.had_clean_shutdown = marker.exists()
        recovery_points = self._read_checkpoint(self._recovery_cp)
        start_offsets = self._read_checkpoint(self._start_cp)
        self._cleaner_offsets = self._read_checkpoint(self._cleaner_cp)
        dirs = []
        for d in sorted(self.log_dir.iterdir()):
            if not d.is_dir():
                continue
            if d.name.endswith(("-delete", "-stray")):
                shutil.rmtree(d, ignore_errors=True)  # deletion interrupted by a crash
                continue
            if d.name.endswith(FUTURE_DIR_SUFFIX):
                try:  # a move to this directory cut short: LogDirs decides its fate
                    self.future_dirs.append((parse_topic_partition(d.name), d))
                except ValueError:
                    pass
                continue
            try:
                dirs.append((parse_topic_partition(d.name), d))
            except ValueError:
                continue
        recover = not self.had_clean_shutdown
        progress = _Progress(len(dirs), "recovering" if recover else "loading")
        if recover and dirs:
            log.info("no clean shutdown marker: recovering %d logs from their recovery points",
                     len(dirs))

        def load(tp: TopicPartition, d: Path) -> Log:
            lg = Log.open(
                d, config_for(tp[0]),
                recover=recover,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp),
                producer_id_expiration_ms=self.producer_id_expiration_ms,
            )
            lg.release_files()  # open/close per partition: fds follow use, not partitions
            self._attach(lg)
            return lg

        if recover and len(dirs) > 1 and self.io_threads > 1:
            # Recovery fsyncs what it rebuilt (segments, indexes, epochs, snapshots): overlap
            # those waits. A clean load does no fsync and stays on this thread.
            with ThreadPoolExecutor(self.io_threads, thread_name_prefix="log-recovery") as ex:
                for tp, lg in zip([tp for tp, _d in dirs],
                                  ex.map(lambda a: load(*a), dirs), strict=True):
                    self._logs[tp] = lg
                    progress.step(lg)
        else:
            for tp, d in dirs:
                lg = self._logs[tp] = load(tp, d)
                progress.step(lg)
        progress.done()
        # Recovered state is durable from here on; the marker must not outlive this run.
        self.checkpoint()
        marker.unlink(missing_ok=True)

    @property
    def offline(self) -> bool:
        channel = self.failure_channel
        return channel is not None and self.dir_key in channel.offline

    def report_io_error(self, what: str, exc: OSError) -> KafkaStorageError:
        """Take this directory offline (an I/O error outside any one log's operations)."""
        msg = f"Error while {what} in dir {self.dir_key}"
        if self.failure_channel is not None:
            self.failure_channel.maybe_add_offline_log_dir(self.dir_key, msg, exc)
        return KafkaStorageError(f"{msg}: {exc}")

    def handle_dir_failure(self) -> list[TopicPartition]:
        """The directory is offline: stop all work in it and forget its logs, closing their
        fds without writing (Kafka's LogManager.handleLogDirFailure). No clean-shutdown marker
        is written for it, so its logs are recovered at the next start."""
        self._stopping = True
        logs, self._logs = self._logs, {}

        def close_all() -> None:
            for lg in logs.values():
                lg.close_handlers()

        # On a thread of its own: a log's lock may be held by an fsync hung on the failed disk.
        threading.Thread(target=close_all, name="log-dir-failure", daemon=True).start()
        return sorted(logs)

    def shutdown(self) -> None:
        self._stopping = True
        if self.offline:
            return
        try:
            self._shutdown()
        except (OSError, KafkaStorageError) as exc:
            if isinstance(exc, OSError):
                self.report_io_error("closing logs", exc)
            log.error("log dir %s not shut down cleanly: it will be recovered at the next start",
                      self.dir_key)

    def _shutdown(self) -> None:
        logs = list(self._logs.values())
        started = time.monotonic()
        # Each close: final time-index entry, fsync of what is unflushed, producer snapshot at
        # the LEO. Mostly fsync waits, so run them side by side; the marker below is written
        # only after every close returned (an exception propagates and leaves no marker).
        if len(logs) > 1 and self.io_threads > 1:
            with ThreadPoolExecutor(self.io_threads, thread_name_prefix="log-close") as ex:
                for _ in ex.map(Log.close, logs):
                    pass
        else:
            for lg in logs:
                lg.close()
        self.checkpoint()
        log.debug("closed %d logs in %.0f ms", len(logs), (time.monotonic() - started) * 1000)
        write_atomically(self.log_dir / CLEAN_SHUTDOWN_FILE,
                         json.dumps({"version": 0, "brokerEpoch": 0}).encode())
        if self._cleaner_thread is not None:
            # A compaction still running saw its log closed and stops at its next batch.
            self._cleaner_thread.shutdown(wait=False)
        if self._deletion_thread is not None:
            self._deletion_thread.shutdown(wait=False)  # close() deleted what was pending

    # -- logs ----------------------------------------------------------------------------------

    @property
    def log_count(self) -> int:
        return len(self._logs)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None,
                   topic_id: uuid.UUID | None = None) -> Log:
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if self.offline:
            raise KafkaStorageError(f"cannot create {topic}-{partition}: log dir {self.dir_key} "
                                    "is offline")
        d = self.log_dir / f"{topic}-{partition}"
        try:
            d.mkdir(parents=True, exist_ok=True)
            if topic_id is not None:
                # Written before any data, as in Kafka, and like Kafka's made durable by the
                # log's first flush (its fsync was 2 of the 4 per created partition).
                write_partition_metadata(d, topic_id, fsync=False)
            lg = Log.open(d, config or self.default_config, recover=False,
                          producer_id_expiration_ms=self.producer_id_expiration_ms)
        except OSError as exc:
            raise self.report_io_error(f"creating log for {topic}-{partition}", exc) from exc
        self._attach(lg)
        if topic_id is not None:
            lg.flushes.sync_on_flush(d / PARTITION_METADATA)
        self._logs[(topic, partition)] = lg
        return lg

    def _attach(self, lg: Log) -> None:
        lg.io.failure_channel = self.failure_channel
        lg.retention.run_in_background = self._run_in_background

    def open_log(self, d: Path, config: LogConfig, **options: Any) -> Log:
        """A log of this directory opened outside start-up (a future replica promoted, a
        moved replica made current); not one of its logs until `adopt`."""
        try:
            lg = Log.open(d, config, producer_id_expiration_ms=self.producer_id_expiration_ms,
                          **options)
        except OSError as exc:
            raise self.report_io_error(f"opening log {d.name}", exc) from exc
        self._attach(lg)
        return lg

    def adopt(self, topic: str, partition: int, lg: Log) -> None:
        self._logs[(topic, partition)] = lg

    def release(self, topic: str, partition: int) -> Log | None:
        """Forget the log without closing it (its replica moved to another directory)."""
        self._cleaner_offsets.pop((topic, partition), None)
        return self._logs.pop((topic, partition), None)

    def create_future_log(self, topic: str, partition: int, config: LogConfig,
                          topic_id: uuid.UUID | None) -> Log:
        """An empty `<topic>-<partition>.<uuid>-future` log: the replica being moved here."""
        if self.offline:
            raise KafkaStorageError(f"cannot create a future log for {topic}-{partition}: log "
                                    f"dir {self.dir_key} is offline")
        d = self.log_dir / future_dir_name(topic, partition)
        try:
            d.mkdir(parents=True)
            if topic_id is not None:
                write_partition_metadata(d, topic_id, fsync=False)
        except OSError as exc:
            raise self.report_io_error(f"creating future log for {topic}-{partition}",
                                       exc) from exc
        lg = self.open_log(d, config, recover=False)
        if topic_id is not None:
            lg.flushes.sync_on_flush(d / PARTITION_METADATA)
        return lg

    def delete_log(self, topic: str, partition: int) -> bool:
        lg = self._logs.pop((topic, partition), None)
        self._cleaner_offsets.pop((topic, partition), None)
        if lg is None:
            return False
        lg.delete()
        return True

    def _run_in_background(self, fn: Callable[[], None]) -> None:
        """A log's deferred file work (segment deletions), one thread for all logs."""
        if self._stopping:
            fn()  # the thread is gone
            return
        if self._deletion_thread is None:
            self._deletion_thread = ThreadPoolExecutor(1, thread_name_prefix="log-deletion")

        def run() -> None:
            try:
                fn()
            except Exception:
                log.exception("deleting segment files failed")

        self._deletion_thread.submit(run)

    # -- checkpoints ---------------------------------------------------------------------------

    def _recovery_points(self) -> dict[TopicPartition, int]:
        return {tp: lg.recovery_point for tp, lg in self._logs.items()}

    def _start_offsets(self) -> dict[TopicPartition, int]:
        return {tp: lg.log_start_offset for tp, lg in self._logs.items()}

    def _high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: lg.high_watermark for tp, lg in self._logs.items()}

    def checkpoint(self) -> None:
        """Write every checkpoint file now (synchronously, with fsync)."""
        self._recovery_cp.write(self._recovery_points())
        self._start_cp.write(self._start_offsets())
        self._replication_cp.write(self._high_watermarks())
        self._cleaner_cp.write({tp: o for tp, o in self._cleaner_offsets.items()
                                if tp in self._logs})

    # -- background work -----------------------------------------------------------------------

    def run_retention(self, now_ms: int | None = None) -> int:
        """Retention of every log, all in the calling thread (tests, tools); the broker runs
        `_retention_off_loop`."""
        now = milliseconds() if now_ms is None else now_ms
        return sum(lg.retention.enforce(now) for lg in list(self._logs.values()))

    async def _retention_off_loop(self, now: int) -> int:
        """Retention with the file deletions in a thread: the loop only takes the expired
        segments out of the logs (no reader finds them after that), the thread deletes
        their files under each log's lock."""
        doomed = [(lg, segs) for lg in list(self._logs.values())
                  if (segs := lg.retention.detach_expired(now))]
        if not doomed:
            return 0

        def delete_all() -> None:
            for lg, segs in doomed:
                lg.retention.delete_detached(segs)

        started = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, delete_all)
        deleted = sum(len(segs) for _lg, segs in doomed)
        log.debug("retention deleted %d segments of %d logs in %.0f ms", deleted, len(doomed),
                  (time.monotonic() - started) * 1000)
        return deleted

    def _to_clean(self, now: int, force: bool) -> list[tuple[TopicPartition, Log]]:
        """Compacted logs whose dirty ratio reached min.cleanable.dirty.ratio."""
        due = []
        for tp, lg in list(self._logs.items()):
            if not lg.config.compact:
                continue
            first_dirty = max(self._cleaner_offsets.get(tp, 0), lg.log_start_offset)
            if not force and (cleaner.dirty_ratio(lg, first_dirty, now)
                              < lg.config.min_cleanable_dirty_ratio):
                continue
            due.append((tp, lg))
        return due

    def _cleaned(self, tp: TopicPartition, lg: Log, result: cleaner.CleanResult) -> None:
        if self._logs.get(tp) is lg:  # not deleted meanwhile
            self._cleaner_offsets[tp] = result.end_offset
        log.info("compacted %s-%d offsets %d..%d: %d -> %d bytes, %d records removed, "
                 "in %.0f ms (thread %s)", tp[0], tp[1], result.start_offset, result.end_offset,
                 result.bytes_before, result.bytes_after, result.records_removed,
                 result.duration_ms, result.thread)

    def run_cleaner(self, now_ms: int | None = None, *, force: bool = False) -> int:
        """Compact due logs in the calling thread (tests, tools); returns how many were. The
        broker runs `_cleaner_off_loop`."""
        now = milliseconds() if now_ms is None else now_ms
        cleaned = 0
        for tp, lg in self._to_clean(now, force):
            result = cleaner.compact(lg, now)
            if result is not None:
                self._cleaned(tp, lg, result)
                cleaned += 1
        return cleaned

    async def _cleaner_off_loop(self, now: int, *, force: bool = False) -> int:
        """Compaction with the cleaning in the cleaner thread: the loop picks the segments
        (they depend on the producer state it owns) and finally renames the swapped-in
        segments; the thread reads, filters, writes, fsyncs and swaps (cleaner.swap_in_cleaned)."""
        loop = asyncio.get_running_loop()
        if self._cleaner_thread is None:
            self._cleaner_thread = ThreadPoolExecutor(1, thread_name_prefix="log-cleaner")
        cleaned = 0
        for tp, lg in self._to_clean(now, force):
            segments = cleaner.cleanable_segments(lg, now)
            if not segments:
                continue
            result = await loop.run_in_executor(self._cleaner_thread, cleaner.clean_segments,
                                                lg, segments, lg.generation, now)
            if result is None:
                log.info("compaction of %s-%d aborted: the log changed", tp[0], tp[1])
                continue
            # Readers on the loop may have been in the replaced segments until this await
            # returned; none can be now, so their files can go.
            await loop.run_in_executor(self._cleaner_thread, lg.retention.delete_detached,
                                       result.replaced)
            cleaner.finish_swaps(lg, result.swapped_in)
            self._cleaned(tp, lg, result)
            cleaned += 1
        return cleaned

    def _flush_work(self, now: int) -> list[tuple[Log, int | None]]:
        """Logs due a flush: flush.ms elapsed, or segments rolled since the recovery point."""
        work: list[tuple[Log, int | None]] = []
        for lg in self._logs.values():
            if lg.config.flush_ms < LONG_MAX and lg.flushes.unflushed_ms >= lg.config.flush_ms:
                work.append((lg, None))
            elif lg.recovery_point < lg.active_segment.base_offset:
                work.append((lg, lg.active_segment.base_offset))  # Kafka's flush on roll
        return work

    def _timed_flush(self, lg: Log, up_to: int | None) -> None:
        started = time.perf_counter()
        lg.flush(up_to)
        if self.flush_observer is not None:
            self.flush_observer((time.perf_counter() - started) * 1000)

    async def run_background(self) -> None:
        """Periodic tasks until cancelled. Their disk work (fsync, checkpoint writes, segment
        deletion, compaction) runs in threads so the event loop never waits on the disk."""
        loop = asyncio.get_running_loop()
        last = dict.fromkeys(self.intervals, milliseconds())
        tick = max(0.01, min(1.0, min(self.intervals.values()) / 1000))
        while not self._stopping and not self.offline:
            await asyncio.sleep(tick)
            now = milliseconds()

            def due(name: str, now: int = now) -> bool:
                if now - last[name] >= self.intervals[name]:
                    last[name] = now
                    return True
                return False

            try:
                if due("flush"):
                    for lg, up_to in self._flush_work(now):
                        await loop.run_in_executor(None, self._timed_flush, lg, up_to)
                if due("retention"):
                    await self._retention_off_loop(now)
                if self.cleaner_enable and due("cleaner"):
                    await self._cleaner_off_loop(now)
                if due("producer_expiration"):
                    for lg in list(self._logs.values()):
                        lg.producer_state.remove_expired(now)
                if due("recovery_checkpoint"):
                    await loop.run_in_executor(None, self._recovery_cp.write,
                                               self._recovery_points())
                if due("start_checkpoint"):
                    await loop.run_in_executor(None, self._start_cp.write, self._start_offsets())
                if due("replication_checkpoint"):
                    await loop.run_in_executor(None, self._replication_cp.write,
                                               self._high_watermarks())
            except asyncio.CancelledError:
                raise
            except KafkaStorageError:
                pass  # reported (logged, directory offline) where it happened
            except OSError as exc:
                self.report_io_error("writing checkpoints", exc)
            except Exception:
                log.exception("log manager background task failed")


class _Progress:
    """Start-up progress: one line every PROGRESS_INTERVAL_S while logs load (a large
    recovery takes minutes), then one summary line."""

    def __init__(self, total: int, verb: str) -> None:
        self.total = total
        self.verb = verb
        self.count = self.segments = self.truncated = self.damaged = 0
        self.started = self._last = time.monotonic()

    def step(self, lg: Log) -> None:
        self.count += 1
        self.segments += lg.recovered_segments
        self.truncated += lg.recovery_truncated_bytes
        self.damaged += lg.recovery_truncated_bytes > 0
        now = time.monotonic()
        if now - self._last >= PROGRESS_INTERVAL_S and self.count < self.total:
            self._last = now
            log.info("%s logs: %d/%d done (%.0f%%) in %.0f s", self.verb, self.count, self.total,
                     100 * self.count / self.total, now - self.started)

    def done(self) -> None:
        if not self.total:
            return
        ms = (time.monotonic() - self.started) * 1000
        if self.verb == "recovering":
            log.info("recovered %d logs in %.0f ms: %d segments scanned, %d bytes truncated in "
                     "%d logs", self.total, ms, self.segments, self.truncated, self.damaged)
        else:
            log.debug("loaded %d logs in %.0f ms", self.total, ms)
