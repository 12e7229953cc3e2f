"""Storage-layer errors, each carrying the Kafka error code the broker answers with.

Every one derives from `protocol.errors.KafkaError`. The record-format errors (`CorruptRecord`,
`InvalidRecord`, `UnsupportedForMessageFormat`) belong to the protocol layer, where batches are
decoded; they are re-exported here for the storage code that raises and catches them, but they
are not `StorageError`s: code that means "anything a log operation raises with a code" catches
`KafkaError`."""

from typing import Any

from samsa.protocol.errors import (
    CorruptRecord,
    ErrorCode,
    InvalidRecord,
    KafkaError,
    UnsupportedForMessageFormat,
)

__all__ = [
    "CorruptRecord",
    "InvalidProducerEpoch",
    "InvalidRecord",
    "InvalidTimestamp",
    "InvalidTxnState",
    "KafkaStorageError",
    "MessageTooLarge",
    "OffsetOutOfRange",
    "OutOfOrderSequence",
    "RecordListTooLarge",
    "RecordValidationError",
    "StorageError",
    "TransactionCoordinatorFenced",
    "UnsupportedForMessageFormat",
]


class StorageError(KafkaError):
    """A log operation's error; a subclass names its code as a class keyword."""

    error_code = ErrorCode.unknown_server_error

    def __init_subclass__(cls, code: ErrorCode | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.error_code = code


# Kafka's exceptions of the same names, each answered with its code.
class OffsetOutOfRange(StorageError, code=ErrorCode.offset_out_of_range): ...
class MessageTooLarge(StorageError, code=ErrorCode.message_too_large): ...
class RecordListTooLarge(StorageError, code=ErrorCode.record_list_too_large): ...
class InvalidTimestamp(StorageError, code=ErrorCode.invalid_timestamp): ...
class OutOfOrderSequence(StorageError, code=ErrorCode.out_of_order_sequence_number): ...
class InvalidProducerEpoch(StorageError, code=ErrorCode.invalid_producer_epoch): ...
class InvalidTxnState(StorageError, code=ErrorCode.invalid_txn_state): ...
class TransactionCoordinatorFenced(StorageError, code=ErrorCode.transaction_coordinator_fenced): ...
class KafkaStorageError(StorageError, code=ErrorCode.kafka_storage_error): ...


class RecordValidationError(StorageError, code=ErrorCode.invalid_record):
    """Records of a client's batch broke a per-record rule (Kafka's RecordValidationException):
    the batch is refused as a whole, and `record_errors` names each bad record by its index
    in the batch with a message (Produce v8+ `record_errors`). The code is INVALID_RECORD, or
    INVALID_TIMESTAMP when any record's timestamp was refused."""

    def __init__(
        self, message: str, record_errors: list[tuple[int, str]], error_code: ErrorCode
    ) -> None:
        super().__init__(message, error_code)
        self.record_errors = record_errors
