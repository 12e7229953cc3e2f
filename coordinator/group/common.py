"""What the group coordinator's parts share: limits, `GroupError`, a request's `Step`, the
offset-commit input, the clock, new member ids and ListGroups entries."""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Generator, Iterable
from dataclasses import dataclass, field
from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.uuids import random_kafka_uuid_string

OFFSETS_TOPIC = "__consumer_offsets"

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupError(KafkaError):
    """A group request answered with `error_code`."""

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or str(int(error_code)), error_code)


Records = list[tuple[bytes, bytes | None]]


@dataclass(frozen=True, slots=True)
class Step:
    """What a group request does, decided without I/O (the parts' transitions modules): the
    records to write, the answer, and the in-memory change the records say (`apply`), made
    once they are in the local log (`GroupPartitions.take`): a write refused outright leaves
    nothing to undo."""

    records: Records
    answer: dict[str, Any] = field(default_factory=dict)
    apply: tuple[Callable[[], None], ...] = ()


def static_member_id(static_id: str | None, member_id: str) -> str:
    """The member a request naming a static instance stands for: `static_id`, the member
    that holds the instance (UNKNOWN_MEMBER_ID if none does, FENCED_INSTANCE_ID if the
    request names another member)."""
    if static_id is None:
        raise GroupError(ErrorCode.unknown_member_id)
    if member_id and member_id != static_id:
        raise GroupError(ErrorCode.fenced_instance_id)
    return static_id


def new_commit_errors(version: int, transactional: bool) -> bool:
    """Whether a commit's request version knows GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH:
    OffsetCommit v9+ (KIP-848) and TxnOffsetCommit v6+ (KIP-1319); older ones are answered
    ILLEGAL_GENERATION instead."""
    return version >= (6 if transactional else 9)


def now_ms() -> int:
    return int(time.time() * 1000)


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString()."""
    return random_kafka_uuid_string()


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
