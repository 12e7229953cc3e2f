"""Kafka's TransactionLogKey / TransactionLogValue records of `__transaction_state`.

key   = int16 version (0) | TransactionalId string
value = int16 version (0) | ProducerId int64 | ProducerEpoch int16 | TransactionTimeoutMs int32
        | TransactionStatus int8 | TransactionPartitions [Topic string, PartitionIds [int32]]
        | TransactionLastUpdateTimestampMs int64 | TransactionStartTimestampMs int64
A null value is a tombstone (the transactional id expired).
Value v1 (flexible; written once the cluster finalizes transaction.version >= 1, as Kafka 4.x
does) adds tagged fields: PreviousProducerId (tag 0, default -1), NextProducerId (tag 1,
default -1), ClientTransactionVersion (tag 2, int16, default 0); only non-defaults are written.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

from ..records_codec import RecordReader, RecordWriter

KEY_VERSION = 0
VALUE_VERSION = 0


class CorruptTxnLogRecord(Exception):
    pass


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: tuple[tuple[str, int], ...]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


@functools.lru_cache(maxsize=4096)  # written three times a transaction, always the same
def encode_key(transactional_id: str) -> bytes:
    return RecordWriter().i16(KEY_VERSION).string(transactional_id).value()


def encode_value(v: TxnLogValue, version: int = VALUE_VERSION) -> bytes:
    """The value record in version 0 (non-flexible) or 1 (flexible, with tagged fields)."""
    if version not in (0, 1):
        raise ValueError(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    w = RecordWriter()
    w.pack(">hqhib", version, v.producer_id, v.producer_epoch, v.timeout_ms, v.status)
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(p)
    if flexible:
        w.compact_array_len(len(by_topic))
    else:
        w.array_len(len(by_topic))
    for topic, parts in by_topic.items():
        if flexible:
            w.compact_string(topic)
            w.compact_array_len(len(parts))
        else:
            w.string(topic)
            w.array_len(len(parts))
        for p in parts:
            w.i32(p)
        if flexible:
            w.tags()  # the partition entry's: none
    w.pack(">qq", v.last_update_ms, v.start_ms)
    if flexible:
        w.tags(_value_tags(v))
    return w.value()


def _value_tags(v: TxnLogValue) -> list[tuple[int, bytes]]:
    """Value v1's tagged fields that differ from their defaults."""
    tags = []
    if v.previous_producer_id != -1:
        tags.append((0, struct.pack(">q", v.previous_producer_id)))
    if v.next_producer_id != -1:
        tags.append((1, struct.pack(">q", v.next_producer_id)))
    if v.client_transaction_version != 0:
        tags.append((2, struct.pack(">h", v.client_transaction_version)))
    return tags


def _string(r: RecordReader) -> str:
    s = r.string()
    if s is None:
        raise CorruptTxnLogRecord("null string")
    return s


def decode_key(buf: bytes) -> str | None:
    """The transactional id, or None if the key is not a TransactionLogKey."""
    r = RecordReader(buf, error=CorruptTxnLogRecord)
    if r.i16() != KEY_VERSION:
        return None
    return _string(r)


def decode_value(buf: bytes) -> TxnLogValue:
    r = RecordReader(buf, error=CorruptTxnLogRecord)
    version = r.i16()
    if version not in (0, 1):
        raise CorruptTxnLogRecord(f"unknown TransactionLogValue version {version}")
    r.flexible = version >= 1
    pid, epoch, timeout, status = r.unpack(">qhib")
    partitions: list[tuple[str, int]] = []
    for _ in range(max(r.array_len(), 0)):
        topic = _string(r)
        for _ in range(r.array_len()):
            partitions.append((topic, r.i32()))
        r.skip_tags()
    last_update, start = r.unpack(">qq")
    previous = next_pid = -1
    client_version = 0
    if r.flexible:
        for tag in r.tagged_fields():
            if tag == 0:
                previous = r.i64()
            elif tag == 1:
                next_pid = r.i64()
            elif tag == 2:
                client_version = r.i16()
    return TxnLogValue(pid, epoch, timeout, status, tuple(partitions), last_update, start,
                       previous, next_pid, client_version)
