"""Storage-layer errors, each carrying the Kafka error code the broker answers with."""


class StorageError(Exception):
    error_code: int = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRange(StorageError):
    error_code = 1


class CorruptRecord(StorageError):
    error_code = 2  # CORRUPT_MESSAGE


class MessageTooLarge(StorageError):
    error_code = 10


class RecordListTooLarge(StorageError):
    error_code = 18


class InvalidTimestamp(StorageError):
    error_code = 32


class OutOfOrderSequence(StorageError):
    error_code = 45


class InvalidProducerEpoch(StorageError):
    error_code = 47


class InvalidTxnState(StorageError):
    error_code = 48


class TransactionCoordinatorFenced(StorageError):
    error_code = 52


class UnsupportedForMessageFormat(StorageError):
    error_code = 43


class InvalidRecord(StorageError):
    error_code = 87


class KafkaStorageError(StorageError):
    error_code = 56
