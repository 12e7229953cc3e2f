"""What the group coordinator's parts share: limits, `GroupError`, the offset-commit input,
the clock, new member ids, and `GroupCoordinatorParts` (the state and operations each part
relies on)."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Awaitable, Callable, Container, Generator, Iterable
from dataclasses import dataclass
from typing import Any

from samsa.coordinator.ports import TopicsView
from samsa.protocol.errors import ErrorCode, KafkaError

from .classic import ClassicGroup, Member
from .consumer import ConsumerGroup
from .share import ShareGroup

OFFSETS_TOPIC = "__consumer_offsets"

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupError(KafkaError):
    """A group request answered with `error_code`."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or str(int(error_code)), error_code)


def now_ms() -> int:
    return int(time.time() * 1000)


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@dataclass(slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


class Done:
    """An already-finished awaitable: lets callers either ignore or `await` a sync call."""

    def __await__(self) -> Generator[None, None, None]:
        yield from ()


class GroupCoordinatorParts:
    """What the parts of `GroupCoordinator` (membership.py, offsets.py) use of one another:
    the coordinator's state and settings, and the operations another part defines. Every
    method here is overridden by the part that owns it."""

    # settings (from the broker config)
    initial_rebalance_delay_ms: int
    min_session_ms: int
    max_session_ms: int
    max_group_size: int
    retention_ms: int
    retention_check_ms: int
    offset_metadata_max_bytes: int
    consumer_assignors: list[str]  # group.consumer.assignors (short names), the default first
    consumer_max_size: int
    consumer_heartbeat_ms: int
    consumer_session_ms: int
    migration_policy: str
    topics_view: TopicsView
    # state: the groups of the offsets partitions led (and loaded) here
    groups: dict[str, ClassicGroup]  # classic groups, and the offsets of every group
    consumer_groups: dict[str, ConsumerGroup]  # consumer-protocol (KIP-848) groups
    share_groups: dict[str, ShareGroup]  # share groups (KIP-932), in memory
    loaded: set[int]
    # offsets partition -> producer id -> group ids with pending transactional offsets
    _txn_groups: dict[int, dict[int, set[str]]]

    # ---- coordinator.py
    def coordinator_partition(self, group_id: str) -> int:
        raise NotImplementedError

    def has_pending_txn(self, group: ClassicGroup, tp: tuple[str, int]) -> bool:
        raise NotImplementedError

    def _append(self, p: int, records: list[tuple[bytes, bytes | None]], **kw: Any) -> int:
        raise NotImplementedError

    async def _append_replicated(self, p: int, records: list[tuple[bytes, bytes | None]],
                                 **kw: Any) -> int:
        raise NotImplementedError

    def _begin_append_replicated(self, p: int, records: list[tuple[bytes, bytes | None]],
                                 **kw: Any) -> Awaitable[int]:
        raise NotImplementedError

    def _store_group(self, group: ClassicGroup) -> None:
        raise NotImplementedError

    async def _apply_and_await(self, p: int, after: Iterable[Callable[[], object]],
                               replicated: Awaitable[int] | None) -> None:
        """A consumer-group change whose records are in the local log: run its in-memory
        actions, then wait for the records to be replicated; NOT_COORDINATOR if the partition
        was unloaded meanwhile. A wait that fails (times out) answers its error but keeps the
        change, as Kafka's runtime does: the records may still commit, and if this broker
        loses the partition the next leader rebuilds the group from its log."""
        for action in after:
            action()
        if replicated is None:
            return
        await replicated
        if p not in self.loaded:
            raise GroupError(ErrorCode.not_coordinator)

    # ---- consumer_groups.py (the classic_* methods: consumer_migration.py)
    def validate_consumer_offset_commit(self, group: ConsumerGroup, member_id: str,
                                        member_epoch: int, transactional: bool, version: int,
                                        partitions: list[tuple[str, int]]) -> None:
        raise NotImplementedError

    def delete_empty_consumer_group(self, group: ConsumerGroup) -> None:
        raise NotImplementedError

    def consumer_subscribed_topics(self, group: ConsumerGroup) -> set[str]:
        raise NotImplementedError

    def validate_consumer_offset_fetch(self, group_id: str, member_id: str | None,
                                       member_epoch: int) -> None:
        raise NotImplementedError

    async def classic_join_consumer_group(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None,
        protocol_type: str, protocols: list[tuple[str, bytes]], session_timeout_ms: int,
        rebalance_timeout_ms: int, client_id: str, client_host: str, version: int,
    ) -> dict[str, Any]:
        raise NotImplementedError

    def classic_sync_consumer_group(self, group: ConsumerGroup, generation: int,
                                    member_id: str, instance_id: str | None,
                                    protocol_type: str | None,
                                    protocol_name: str | None) -> dict[str, Any]:
        raise NotImplementedError

    def classic_heartbeat_consumer_group(self, group: ConsumerGroup, generation: int,
                                         member_id: str, instance_id: str | None) -> ErrorCode:
        raise NotImplementedError

    def classic_leave_consumer_group(self, group: ConsumerGroup, member_id: str,
                                     instance_id: str | None) -> ErrorCode:
        raise NotImplementedError

    # ---- membership.py
    def _cancel_timers(self, group: ClassicGroup) -> None:
        raise NotImplementedError

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        raise NotImplementedError

    def _validate_member(self, group: ClassicGroup, member_id: str,
                         instance_id: str | None) -> Member:
        raise NotImplementedError

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, timeout_ms: int) -> None:
        raise NotImplementedError



def listed_groups(groups: Iterable[Any], loaded: Container[int], states: set[str],
                  kind: str) -> list[dict[str, Any]]:
    """ListGroups entries for the live groups of one type, on loaded partitions, in `states`."""
    out = []
    for group in groups:
        if group.partition not in loaded or group.dead:
            continue
        state = group.state().value
        if states and state.lower() not in states:
            continue
        out.append({"group_id": group.group_id, "protocol_type": kind,
                    "group_state": state, "group_type": kind})
    return out
