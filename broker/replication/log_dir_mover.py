"""Moving a replica to another of this broker's log directories while it keeps serving
(AlterReplicaLogDirs; Kafka's ReplicaManager.alterReplicaLogDirs and ReplicaAlterLogDirsThread).

The move creates `<topic>-<partition>.<uuid>-future` in the target directory and copies the
current log's batches into it as a follower would (offsets, leader epochs, producer state and
the aborted transactions' index rebuilt from them), throttled by
`replica.alter.log.dirs.io.max.bytes.per.second`. Once it holds everything the current log
holds, on the event loop with no await between the check and the swap (so no append comes in
between), the future log replaces the current one under the partition. A truncation of the
current log (a follower's) starts the copy again. A restart resumes a move cut short (see
`LogDirs.startup`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from samsa.protocol.errors import ErrorCode
from samsa.storage.config import LONG_MAX
from samsa.storage.errors import KafkaStorageError
from samsa.storage.file_region import FileRegion
from samsa.storage.log import Log, future_dir_name
from samsa.storage.log_dir_failure import dir_key

from .partition import Partition
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20  # copied per step, at most (one batch if it is larger)
RESUME_WAIT_S = 60.0  # a move resumed at start-up waits this long for its partition


class LogDirMover:
    def __init__(self, replicas: ReplicaManager, rate: Callable[[], int]) -> None:
        self.replicas = replicas
        self.dirs = replicas.log_manager
        self.rate = rate  # bytes per second (LONG_MAX: unthrottled)
        self._tasks: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._quota_free_at = 0.0  # when the bytes copied so far are paid for (monotonic)

    def alter(self, topic: str, index: int, path: str) -> ErrorCode:
        """Move the replica of `topic`-`index` to the log directory `path`; Kafka's errors."""
        key = dir_key(path)
        tp = (topic, index)
        if len(future_dir_name(topic, index)) > 255:
            return ErrorCode.invalid_topic_exception
        if key not in self.dirs.dirs:
            return ErrorCode.log_dir_not_found
        if not self.dirs.is_online(key) or tp in self.replicas.offline:
            return ErrorCode.kafka_storage_error
        if key in self.dirs.cordoned:  # KIP-1066: "Log directory <path> is cordoned"
            return ErrorCode.invalid_replica_assignment
        partition = self.replicas.get(topic, index)
        if partition is None:
            # Created in that directory if it comes here later (Kafka's preferred log dir).
            if self.dirs.get_log(topic, index) is None:
                self.dirs.preferred[tp] = key
            state = self.replicas.store.topic(topic)
            if state is not None and index in state.partitions:
                return ErrorCode.replica_not_available
            return ErrorCode.unknown_topic_or_partition
        moving_to = self.dirs.future_dir_of(topic, index)
        if moving_to == key:
            return ErrorCode.none
        if moving_to is not None:  # a move to another directory stops
            self.cancel(topic, index)
        if partition.log_dir == key:
            return ErrorCode.none
        try:
            self.dirs.create_future_log(topic, index, key, partition.config,
                                        partition.topic_id)
        except KafkaStorageError as exc:
            log.warning("Unable to alter log dirs for %s-%d: %s", topic, index, exc)
            return ErrorCode.kafka_storage_error
        log.info("%s-%d: moving from log dir %s to %s", topic, index, partition.log_dir, key)
        self._tasks[tp] = asyncio.get_running_loop().create_task(self._run(tp))
        return ErrorCode.none

    def cancel(self, topic: str, index: int) -> None:
        task = self._tasks.pop((topic, index), None)
        if task is not None:
            task.cancel()
        self.dirs.remove_future_log(topic, index)

    def resume(self) -> None:
        """Start-up: moves cut short by the previous stop start again."""
        moves, self.dirs.resumed_moves = self.dirs.resumed_moves, {}
        for (topic, index), key in moves.items():
            task = asyncio.get_running_loop().create_task(self._resume(topic, index, key))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _resume(self, topic: str, index: int, key: str) -> None:
        deadline = asyncio.get_running_loop().time() + RESUME_WAIT_S
        while True:
            code = self.alter(topic, index, key)
            if code != ErrorCode.replica_not_available:
                if code != ErrorCode.none:
                    log.warning("%s-%d: its move to %s not resumed: %s", topic, index, key,
                                code.name)
                return
            if asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(1.0)

    async def stop(self) -> None:
        """Shutdown: the moves stop; their future logs stay for the next start."""
        tasks = [*self._tasks.values(), *self._background]
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(self, tp: tuple[str, int]) -> None:
        try:
            await self._copy(*tp)
        except asyncio.CancelledError:
            raise
        except KafkaStorageError as exc:
            # The failed directory's handler ends the move (LogDirs.handle_dir_failure), with
            # no more I/O in that directory.
            log.error("%s-%d: the move to another log dir failed: %s", tp[0], tp[1], exc)
        except Exception:
            log.exception("%s-%d: the move to another log dir failed", *tp)
            self.dirs.remove_future_log(*tp)
        finally:
            if self._tasks.get(tp) is asyncio.current_task():
                del self._tasks[tp]

    async def _copy(self, topic: str, index: int) -> None:
        generation: int | None = None
        source: Log | None = None
        synced = False
        while True:
            partition = self.replicas.get(topic, index)
            fut = self.dirs.future_log(topic, index)
            if partition is None or fut is None:
                self.dirs.remove_future_log(topic, index)
                return  # the replica is gone, or the move was cancelled
            cur = partition.log
            if (cur is not source or cur.generation != generation
                    or cur.log_start_offset > fut.log_end_offset):
                # First pass, or the current log was truncated (a follower's) or its start
                # passed what was copied: copy again from its first batch.
                start = cur.log_start_offset
                if start < cur.log_end_offset:
                    start = min(start, cur.read(start, 1).first_batch_offset)
                if source is not None:  # a fresh future log, not one truncated in place
                    fut = self.dirs.create_future_log(topic, index, fut.parent_dir,
                                                      cur.config, partition.topic_id)
                if start != fut.log_end_offset:
                    fut.truncate_fully_and_start_at(start)
                source, generation, synced = cur, cur.generation, False
            position = fut.log_end_offset
            if position < cur.log_end_offset:
                rate = max(1, self.rate())
                chunk = CHUNK_BYTES if rate >= LONG_MAX else max(1, min(CHUNK_BYTES, rate))
                data = cur.read(position, chunk).records
                assert not isinstance(data, FileRegion)  # read without zero_copy
                if not data:  # nothing readable there yet: not expected, but no busy loop
                    await asyncio.sleep(0.01)
                    continue
                fut.append_as_follower(data)
                await asyncio.sleep(self._throttle(len(data), rate) if rate < LONG_MAX else 0)
                continue
            if not synced:
                # Caught up: fsync what was copied in a thread, once, so that the swap (which
                # flushes on the loop) has only what came in meanwhile left to sync.
                synced = True
                await asyncio.get_running_loop().run_in_executor(None, fut.flush)
                continue
            self._swap(partition, cur, fut)
            return

    def _throttle(self, size: int, rate: int) -> float:
        """Seconds to wait after copying `size` bytes: the rate bounds all moves together
        (one quota, as Kafka's for its ReplicaAlterLogDirs threads)."""
        now = time.monotonic()
        self._quota_free_at = max(now, self._quota_free_at) + size / rate
        return self._quota_free_at - now

    def _swap(self, partition: Partition, cur: Log, fut: Log) -> None:
        """The future log has caught up: it becomes the partition's log (no await here)."""
        # The batches brought their epochs; an epoch begun with no batch yet (a leader that
        # has not written), or the one in force at the log start, comes from the cache.
        entries = cur.leader_epoch_cache.entries
        first = fut.log_start_offset
        for i, (epoch, start) in enumerate(entries):
            if i + 1 < len(entries) and entries[i + 1][1] <= first:
                continue  # ended before the log starts
            fut.leader_epoch_cache.assign(epoch, max(start, first))
        partition.replace_log(self.dirs.replace_current_with_future(
            partition.topic, partition.index, cur.high_watermark))


__all__ = ["LogDirMover"]
