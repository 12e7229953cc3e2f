"""The `__consumer_offsets` partitions as the group coordinator's parts see them: which are
loaded here (and may be served), and the writes to them through the coordinator runtime, with
the answers a group's client gets when a write fails. Shared by every part; owns no group."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Container, Iterable
from typing import Any

from samsa.config.schema import BrokerConfig
from samsa.coordinator.internal_log import InternalTopic
from samsa.coordinator.ports import InternalLogHost, TopicsView
from samsa.coordinator.runtime import (
    WriteFailed,
    append_answer,
    begin_write,
    error_code_of,
    write_failed,
)
from samsa.protocol.errors import ErrorCode

from .common import OFFSETS_TOPIC, GroupError, Records, Step, now_ms
from .consumer.model import TopicsMetadata


class GroupPartitions:
    """The offsets topic, the partitions loaded (`loaded`) or loading here, and the writes."""

    def __init__(self, host: InternalLogHost, cfg: BrokerConfig,
                 topics: TopicsView | None) -> None:
        self.topic = InternalTopic.configured(host, OFFSETS_TOPIC, cfg, "offsets.topic",
                                              "offsets.load.buffer.size")
        self.commit_timeout_ms: int = cfg["offsets.commit.timeout.ms"]
        self.topics_view: TopicsView = topics if topics is not None else _NoTopics()
        self.loaded: set[int] = set()
        # the partitions being loaded (the coordinator's runtime.Loads)
        self.loading: Container[int] = frozenset()
        # starts the loads of the partitions led here and not loaded (the coordinator's)
        self.load_led: Callable[[], None] = lambda: None

    def partition_for(self, group_id: str) -> int:
        return self.topic.partition_for(group_id)

    def coordinator_partition(self, group_id: str) -> int:
        """The offsets partition of `group_id`, if this broker may serve it now."""
        p = self.topic.partition_for(group_id)
        if p in self.loaded:
            return p
        if p in self.loading:
            raise GroupError(ErrorCode.coordinator_load_in_progress)
        if not self.topic.is_led_here(p):
            raise GroupError(ErrorCode.not_coordinator)
        self.load_led()
        if p in self.loaded:
            return p
        raise GroupError(ErrorCode.coordinator_load_in_progress)

    def topics_metadata(self, names: Iterable[str]) -> TopicsMetadata:
        """The id and partition count of each of `names` that exists with partitions."""
        out: TopicsMetadata = {}
        for name in names:
            info = self.topics_view.topic_info(name)
            if info is not None and info[1] > 0:
                out[name] = info
        return out

    # ------------------------------------------------------------------ writes
    def append(self, p: int, records: Records, **kw: Any) -> int:
        """Write records to the offsets partition's local log (not waiting for the ISR);
        returns the last offset. Raises GroupError."""
        try:
            return self.topic.append(p, records, timestamp_ms=now_ms(), **kw)
        except Exception as exc:
            failed = write_failed(OFFSETS_TOPIC, p, _WHAT, exc, _answer)
            raise GroupError(failed.error_code) from exc

    async def append_replicated(self, p: int, records: Records, **kw: Any) -> int:
        """`append` with acks=all: returns once the ISR has the records (the caller applies
        them then); raises GroupError with Kafka's answer for a write that did not become
        durable."""
        return await self.begin_append_replicated(p, records, **kw)

    def begin_append_replicated(self, p: int, records: Records, **kw: Any) -> Awaitable[int]:
        """`append_replicated` in two halves: appends to the local log now (raising
        GroupError if it cannot), and returns the wait for the ISR (raising GroupError too)."""
        try:
            waiting = begin_write(self.topic, p, records, what=_WHAT, answer=_answer,
                                  timeout_s=self.commit_timeout_ms / 1000, **kw)
        except WriteFailed as exc:
            raise GroupError(exc.error_code) from exc.cause
        return _group_errors(waiting)

    async def apply_and_await(self, p: int, after: Iterable[Callable[[], object]],
                              replicated: Awaitable[int] | None) -> None:
        """A change whose records are in the local log: run its in-memory actions, then wait
        for the records to be replicated; NOT_COORDINATOR if the partition was unloaded
        meanwhile. A wait that fails (times out) answers its error but keeps the change, as
        Kafka's runtime does: the records may still commit, and if this broker loses the
        partition the next leader rebuilds the group from its log."""
        for action in after:
            action()
        if replicated is None:
            return
        await replicated
        if p not in self.loaded:
            raise GroupError(ErrorCode.not_coordinator)


    async def take(self, p: int, step: Step) -> dict[str, Any]:
        """Write the step's records (acks=all), apply it once they are in the local log, and
        return its answer once the ISR has them (raises GroupError, as `apply_and_await`)."""
        replicated = self.begin_append_replicated(p, step.records) if step.records else None
        await self.apply_and_await(p, step.apply, replicated)
        return step.answer

    def take_now(self, p: int, step: Step) -> None:
        """`take` without the wait for the ISR (a change no client waits for: a timeout's);
        raises GroupError, with nothing applied, if the records cannot be appended."""
        if step.records:
            self.append(p, step.records)
        for action in step.apply:
            action()


class _NoTopics:
    """A `TopicsView` without topics (a coordinator built without the broker's metadata)."""

    def topic_info(self, name: str) -> tuple[uuid.UUID, int] | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None

    def topic_names(self) -> Iterable[str]:
        return ()


_OFFSET_SIZE_ERRORS = frozenset({ErrorCode.message_too_large, ErrorCode.record_list_too_large})
# Answered as they are (a transactional commit by a fenced or out-of-order producer).
_PRODUCER_ERRORS = frozenset({
    ErrorCode.invalid_producer_epoch,
    ErrorCode.producer_fenced,
    ErrorCode.out_of_order_sequence_number,
    ErrorCode.invalid_txn_state,  # a transaction's offsets whose verification ended (KIP-890)
})

_WHAT = "group records"


def _answer(exc: BaseException) -> ErrorCode:
    """What a group's client is told when an append to the offsets partition failed: the
    runtime's answer, and Kafka's for a commit too large or by a fenced producer."""
    code = error_code_of(exc)
    if code in _OFFSET_SIZE_ERRORS:
        return ErrorCode.invalid_commit_offset_size
    if code in _PRODUCER_ERRORS:
        return ErrorCode(code)
    return append_answer(exc)


async def _group_errors(waiting: Awaitable[int]) -> int:
    try:
        return await waiting
    except WriteFailed as exc:
        raise GroupError(exc.error_code) from exc.cause
