"""What the group coordinator's parts share: Kafka's error codes, limits, `GroupError`, the
offset-commit input, the clock."""

from __future__ import annotations

import time
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"

# Kafka error codes
NONE = 0
UNKNOWN_SERVER_ERROR = -1
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86
UNSTABLE_OFFSET_COMMIT = 88

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
_LOAD_YIELD_EVERY = 500


class GroupError(Exception):
    def __init__(self, error_code: int, message: str | None = None) -> None:
        super().__init__(message or str(error_code))
        self.error_code = error_code


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class OffsetCommitEntry:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


class Done:
    """An already-finished awaitable: lets callers either ignore or `await` a sync call."""

    def __await__(self):  # noqa: ANN204
        return iter(())

