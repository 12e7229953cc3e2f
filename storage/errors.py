"""Storage-layer errors, each carrying the Kafka error code the broker answers with.

Every one derives from `protocol.errors.KafkaError`. The record-format errors (`CorruptRecord`,
`InvalidRecord`, `UnsupportedForMessageFormat`) belong to the protocol layer, where batches are
decoded; they are re-exported here for the storage code that raises and catches them, but they
are not `StorageError`s: code that means "anything a log operation raises with a code" catches
`KafkaError`."""

from protocol.errors import (
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
    "StorageError",
    "TransactionCoordinatorFenced",
    "UnsupportedForMessageFormat",
]


class StorageError(KafkaError):
    error_code = ErrorCode.unknown_server_error


class OffsetOutOfRange(StorageError):
    error_code = ErrorCode.offset_out_of_range


class MessageTooLarge(StorageError):
    error_code = ErrorCode.message_too_large


class RecordListTooLarge(StorageError):
    error_code = ErrorCode.record_list_too_large


class InvalidTimestamp(StorageError):
    error_code = ErrorCode.invalid_timestamp


class OutOfOrderSequence(StorageError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpoch(StorageError):
    error_code = ErrorCode.invalid_producer_epoch


class InvalidTxnState(StorageError):
    error_code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFenced(StorageError):
    error_code = ErrorCode.transaction_coordinator_fenced


class KafkaStorageError(StorageError):
    error_code = ErrorCode.kafka_storage_error
