"""What the coordinators (transaction, group, share) share of Kafka's coordinator runtime:
the load of a partition (its replay, yielding to the event loop, at the leader epoch it is
led at, retried with back-off), the background tasks and periodic jobs (expiry, pruning),
the one write (`begin_write`: the local append now, the wait for the ISR when awaited) and the
answer a client gets when a write to the coordinator's partition fails.

A coordinator changes its in-memory state with the records it writes. As in Kafka's runtime,
it undoes the change only when the append itself fails (`begin_write` raises: not the leader,
fewer in-sync replicas than min.insync.replicas, a batch too large); once the records are in
the local log, a wait for the ISR that fails or times out answers the client with its error
and keeps the change: the records may still commit, and a broker that loses the partition
unloads its state, which the next leader rebuilds from its log. Undoing it then would make
memory disagree with the log.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.storage.verification_state import VerificationState

from .internal_log import APPEND_TIMEOUT_S, InternalTopic, ReplayedMarker, ReplayedRecord

log = logging.getLogger(__name__)

LOAD_YIELD_EVERY = 500  # records replayed between two yields to the event loop
LOAD_RETRY_S = (0.2, 5.0)  # first and longest wait before a failed load is tried again

# A failed append's error -> what the coordinator's client is told (Kafka's
# CoordinatorRuntime, GroupMetadataManager and TransactionStateManager agree on it).
APPEND_ERROR_ANSWER: dict[int, ErrorCode] = {
    # another broker coordinates now
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    # this broker still coordinates, but cannot write right now
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
}


def error_code_of(exc: BaseException) -> int:
    """The Kafka error an append's exception carries (a KafkaError's or a StorageError's);
    UNKNOWN_SERVER_ERROR for any other."""
    code = getattr(exc, "error_code", None)
    return int(code) if isinstance(code, int) else int(ErrorCode.unknown_server_error)


def append_answer(exc: BaseException) -> ErrorCode:
    """What a client is told when an append failed with `exc` (UNKNOWN_SERVER_ERROR for an
    error that is not one of a partition's)."""
    return APPEND_ERROR_ANSWER.get(error_code_of(exc), ErrorCode.unknown_server_error)


T = TypeVar("T")


class WriteFailed(KafkaError):
    """A coordinator write whose records are not known to be replicated; `error_code` is what
    the coordinator's client is told (APPEND_ERROR_ANSWER)."""

    def __init__(self, answer: ErrorCode, cause: BaseException) -> None:
        super().__init__(f"{answer.name}: {cause!r}", answer)
        self.cause = cause


Records = list[tuple[bytes, bytes | None]]


def write_failed(topic: str, p: int, what: str, exc: BaseException,
                 answer: Callable[[BaseException], ErrorCode] = append_answer) -> WriteFailed:
    """The WriteFailed of a write of `what` to `topic`-p that raised `exc`, logged: a
    partition's error as a warning, one the coordinator cannot name with its traceback."""
    code = answer(exc)
    if error_code_of(exc) in APPEND_ERROR_ANSWER:
        log.warning("writing %s to %s-%d failed (%r): answering %s", what, topic, p, exc,
                    code.name)
    elif code == ErrorCode.unknown_server_error:
        log.error("writing %s to %s-%d failed", what, topic, p, exc_info=exc)
    return WriteFailed(code, exc)


def begin_write(topic: InternalTopic, p: int, records: Records, *, what: str,
                leader_epoch: int | None = None, timestamp_ms: int | None = None,
                timeout_s: float = APPEND_TIMEOUT_S,
                answer: Callable[[BaseException], ErrorCode] = append_answer,
                producer_id: int = -1, producer_epoch: int = -1,
                transactional: bool = False, verify: bool = False,
                guard: VerificationState | None = None) -> Awaitable[int]:
    """The one write of the coordinators, in two halves: the checks and the append of
    `records` to partition p's local log as one batch happen now, fenced to `leader_epoch`
    if given (the epoch the coordinator loaded the partition at); the wait for the ISR is the
    awaitable returned, which yields the offset of the last record. Either raises WriteFailed
    (logged, naming `what`), whose error is `answer`'s for the failure."""
    try:
        waiting = topic.begin_append_replicated(
            p, records, leader_epoch=leader_epoch, timeout_s=timeout_s,
            timestamp_ms=int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
            producer_id=producer_id, producer_epoch=producer_epoch,
            transactional=transactional, verify=verify, guard=guard)
    except Exception as exc:  # a KafkaError, a StorageError, or a fault of this broker
        raise write_failed(topic.name, p, what, exc, answer) from exc
    return _replicated(topic.name, p, what, waiting, answer)


async def _replicated(topic: str, p: int, what: str, waiting: Awaitable[int],
                      answer: Callable[[BaseException], ErrorCode]) -> int:
    try:
        return await waiting
    except Exception as exc:
        raise write_failed(topic, p, what, exc, answer) from exc


async def write(topic: InternalTopic, p: int, records: Records, *, what: str,
                leader_epoch: int | None = None, timestamp_ms: int | None = None,
                timeout_s: float = APPEND_TIMEOUT_S) -> int:
    """`begin_write`, awaited: returns once the ISR has the records."""
    return await begin_write(topic, p, records, what=what, leader_epoch=leader_epoch,
                             timestamp_ms=timestamp_ms, timeout_s=timeout_s)


class Tasks:
    """A coordinator's background tasks (loads, marker sends, periodic jobs): a failure is
    logged, and `cancel_all` ends them all when the coordinator stops."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def every(self, interval_s: float, job: Callable[[], object], what: str
              ) -> asyncio.Task[None]:
        """Run `job` (a function or a coroutine function) every `interval_s` seconds; a run
        that fails is logged and the next one comes as usual."""
        return self.spawn(_every(interval_s, job, f"{self.owner}: {what}"))

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: task failed", self.owner, exc_info=task.exception())

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def __len__(self) -> int:
        return len(self._tasks)


async def _every(interval_s: float, job: Callable[[], object], what: str) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            result = job()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("%s failed", what)


async def replay(topic: InternalTopic, p: int
                 ) -> AsyncIterator[ReplayedRecord | ReplayedMarker]:
    """The partition's records and markers from its start, yielding to the event loop every
    LOAD_YIELD_EVERY of them: a long load does not stall the requests of other partitions."""
    for count, entry in enumerate(topic.replay(p), 1):
        if count % LOAD_YIELD_EVERY == 0:
            await asyncio.sleep(0)
        yield entry


@dataclass(frozen=True, slots=True)
class Loaded(Generic[T]):
    epoch: int  # the leader epoch the partition was read at, and is still led at here
    state: T
    attempts: int
    started: float  # time.monotonic() of the attempt that succeeded

    def took_ms(self) -> float:
        return (time.monotonic() - self.started) * 1000


def _epoch_here(topic: InternalTopic, p: int) -> int | None:
    try:
        return topic.leader_epoch(p)
    except KafkaError:
        return None


async def load(topic: InternalTopic, p: int, read: Callable[[], Awaitable[T]], *,
               stopping: Callable[[], bool], serving: str) -> Loaded[T] | None:
    """Read partition p with `read` until a read ends at the leader epoch it started at; None
    once the partition is not led here or the coordinator stops. A failed read is tried again
    with back-off, and never served: with part of the state missing the coordinator would
    answer wrongly (`serving`: what is answered COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
    delay, longest = LOAD_RETRY_S
    attempts = 0
    while not stopping():
        attempts += 1
        started = time.monotonic()
        epoch = _epoch_here(topic, p)
        if epoch is None:
            return None
        try:
            state = await read()
        except Exception as exc:
            if not topic.is_led_here(p):
                return None
            log.error("loading %s-%d failed (attempt %d), retrying in %.1f s; its %s answer "
                      "COORDINATOR_LOAD_IN_PROGRESS meanwhile: %r",
                      topic.name, p, attempts, delay, serving, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, longest)
            continue
        if stopping():
            return None
        if _epoch_here(topic, p) == epoch:
            return Loaded(epoch, state, attempts, started)
        if not topic.is_led_here(p):
            return None
        # led here at a new epoch: what was read may miss the new leader's records
    return None


class Loads(Generic[T]):
    """The partitions a coordinator is loading (its requests for them answer
    COORDINATOR_LOAD_IN_PROGRESS), each with the task that reads it through `load` (`read`)
    and hands what was read to `install` once it is read at the epoch still led here."""

    def __init__(self, topic: InternalTopic, tasks: Tasks, read: Callable[[int], Awaitable[T]],
                 install: Callable[[int, Loaded[T]], None], *, stopping: Callable[[], bool],
                 serving: str) -> None:
        self.topic = topic
        self.tasks = tasks
        self.read = read
        self.install = install
        self.stopping = stopping
        self.serving = serving
        self._loading: dict[int, asyncio.Task[None]] = {}

    def start(self, p: int) -> None:
        """Load partition p, unless it is being loaded."""
        if p not in self._loading:
            self._loading[p] = self.tasks.spawn(self._load(p))

    def cancel(self, p: int) -> None:
        """Partition p moved away: its load, if any, stops."""
        task = self._loading.pop(p, None)
        if task is not None:
            task.cancel()

    def __contains__(self, p: object) -> bool:
        return p in self._loading

    def __len__(self) -> int:
        return len(self._loading)

    async def _load(self, p: int) -> None:
        loaded = await load(self.topic, p, lambda: self.read(p), stopping=self.stopping,
                            serving=self.serving)
        if loaded is None and self.stopping():
            return
        # (a load cancelled by a move away ends in CancelledError above: the entry it would
        # drop here is its own)
        self._loading.pop(p, None)
        if loaded is not None:
            self.install(p, loaded)
