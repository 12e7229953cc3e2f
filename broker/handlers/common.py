"""Small helpers shared by handlers."""

from __future__ import annotations

from typing import Any

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
INVALID_REQUEST = 42
UNSUPPORTED_VERSION = 35


def error_code_of(exc: BaseException) -> int:
    return int(getattr(exc, "error_code", UNKNOWN_SERVER_ERROR))


def field(entity: Any, name: str, default: Any = None) -> Any:
    """A request field that older versions of the schema do not have."""
    return getattr(entity, name, default)
