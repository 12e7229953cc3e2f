"""Kafka's error codes in one place, and the exception every layer raises with one of them.

`ErrorCode` is kio's enum, generated from Kafka's own error table: an `IntEnum`, so a member
goes into a response's int16 field as it is. Code that answers a client names a member
(`ErrorCode.not_leader_or_follower`), never a bare number or a module-local constant.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

__all__ = [
    "CorruptRecord",
    "ErrorCode",
    "InvalidRecord",
    "KafkaError",
    "UnsupportedForMessageFormat",
]


class KafkaError(Exception):
    """An error that reaches a client as one of Kafka's codes.

    A subclass names its code as a class keyword (`class X(KafkaError,
    code=ErrorCode.invalid_record)`) or attribute; a raise site may override it for one
    instance (`KafkaError("...", ErrorCode.request_timed_out)`)."""

    error_code: ErrorCode = ErrorCode.unknown_server_error

    def __init_subclass__(cls, code: ErrorCode | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.error_code = code

    def __init__(self, message: str = "", error_code: ErrorCode | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


# Record-batch format errors: raised where batches are decoded and checked (protocol/records.py,
# protocol/compression.py) and by the log that validates appends.
class CorruptRecord(KafkaError, code=ErrorCode.corrupt_message): ...
class InvalidRecord(KafkaError, code=ErrorCode.invalid_record): ...
class UnsupportedForMessageFormat(KafkaError, code=ErrorCode.unsupported_for_message_format): ...
