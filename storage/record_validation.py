"""Per-record checks of a batch a client appends (Kafka's LogValidator.validateRecord).

A record that breaks a rule is named by its index in the batch; if any record of a batch
fails, the whole append fails with `RecordValidationError`, which carries every record's
error so that Produce v8+ can answer them in `record_errors` (KIP-467):

- a record without a key, to a compacted topic: INVALID_RECORD
- a CreateTime timestamp out of [now - message.timestamp.before.max.ms,
  now + message.timestamp.after.max.ms]: INVALID_TIMESTAMP
- a LogAppendTime batch from a producer (where Kafka refuses it): INVALID_TIMESTAMP
"""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import LOG_APPEND_TIME, BatchHeader, Buf, Record, decode_records
from samsa.storage.config import LONG_MAX, LogConfig
from samsa.storage.errors import RecordValidationError

NO_TIMESTAMP = -1


def _describe(record: Record) -> str:
    """A record as Kafka's DefaultRecord.toString shows it."""
    key = 0 if record.key is None else len(record.key)
    value = 0 if record.value is None else len(record.value)
    return (f"DefaultRecord(offset={record.offset}, timestamp={record.timestamp}, "
            f"key={key} bytes, value={value} bytes)")


def has_record_rules(config: LogConfig) -> bool:
    """Whether `validate_records` checks anything in a batch with CreateTime timestamps
    under `config` (a LogAppendTime batch from a producer it always checks)."""
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    return config.compact or (not config.log_append_time
                              and (before != LONG_MAX or after != LONG_MAX))


def validate_records(
    buf: Buf, pos: int, h: BatchHeader, config: LogConfig, topic_partition: str, now: int,
    region: bytes | bytearray | None = None,
) -> None:
    """Check each record of the batch at `pos` (`region`: its records, if already
    decompressed); raise RecordValidationError naming the bad ones (the batch is then not
    appended at all)."""
    compact = config.compact
    create_time = not config.log_append_time
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    bounded = create_time and (before != LONG_MAX or after != LONG_MAX)
    producer_log_append = h.timestamp_type == LOG_APPEND_TIME
    if not (compact or bounded or producer_log_append):
        return  # no record of this batch can fail: do not decode it
    errors: list[tuple[int, str]] = []
    timestamp_error = False
    for index, record in enumerate(decode_records(buf, pos, h, region)):
        if compact and record.key is None:
            errors.append((index, "Compacted topic cannot accept message without key in "
                                  f"topic partition {topic_partition}"))
            continue
        ts = record.timestamp
        if create_time and ts != NO_TIMESTAMP:
            if now - ts > before or ts - now > after:
                timestamp_error = True
                errors.append((index, f"Timestamp {ts} of message with offset {record.offset} "
                                      f"is out of range. The timestamp should be within "
                                      f"[{now - before}, {now + after}]"))
        elif producer_log_append:
            timestamp_error = True
            errors.append((index, f"Invalid timestamp type in message {_describe(record)}. "
                                  "Producer should not set timestamp type to LogAppendTime."))
    if not errors:
        return
    if timestamp_error:
        raise RecordValidationError(
            "One or more records have been rejected due to invalid timestamp",
            errors, ErrorCode.invalid_timestamp)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        errors, ErrorCode.invalid_record)
