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

import struct
from dataclasses import dataclass

from samsa.protocol.encoder import uvarint

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


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def encode_value(v: TxnLogValue, version: int = VALUE_VERSION) -> bytes:
    """The value record in version 0 (non-flexible) or 1 (flexible, with tagged fields)."""
    if version not in (0, 1):
        raise ValueError(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    out = bytearray(
        struct.pack(">hqhib", version, v.producer_id, v.producer_epoch, v.timeout_ms, v.status)
    )
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(p)
    out += uvarint(len(by_topic) + 1) if flexible else struct.pack(">i", len(by_topic))
    for topic, parts in by_topic.items():
        if flexible:
            raw = topic.encode()
            out += uvarint(len(raw) + 1) + raw + uvarint(len(parts) + 1)
        else:
            out += _string(topic) + struct.pack(">i", len(parts))
        out += b"".join(struct.pack(">i", p) for p in parts)
        if flexible:
            out += uvarint(0)  # the partition entry's tagged fields: none
    out += struct.pack(">qq", v.last_update_ms, v.start_ms)
    if flexible:
        tags = []
        if v.previous_producer_id != -1:
            tags.append((0, struct.pack(">q", v.previous_producer_id)))
        if v.next_producer_id != -1:
            tags.append((1, struct.pack(">q", v.next_producer_id)))
        if v.client_transaction_version != 0:
            tags.append((2, struct.pack(">h", v.client_transaction_version)))
        out += uvarint(len(tags))
        for tag, raw in tags:
            out += uvarint(tag) + uvarint(len(raw)) + raw
    return bytes(out)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def unpack(self, fmt: str) -> tuple:
        s = struct.Struct(fmt)
        if self.pos + s.size > len(self.buf):
            raise CorruptTxnLogRecord("record too short")
        vals = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return vals

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            (b,) = self.unpack(">B")
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self, compact: bool = False) -> str:
        n = self.uvarint() - 1 if compact else self.unpack(">h")[0]
        if n < 0:
            raise CorruptTxnLogRecord("null string")
        raw = self.buf[self.pos : self.pos + n]
        if len(raw) != n:
            raise CorruptTxnLogRecord("record too short")
        self.pos += n
        return raw.decode()

    def array_len(self, compact: bool = False) -> int:
        return self.uvarint() - 1 if compact else self.unpack(">i")[0]

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.pos += self.uvarint()


def decode_key(buf: bytes) -> str | None:
    """The transactional id, or None if the key is not a TransactionLogKey."""
    r = _Reader(buf)
    (version,) = r.unpack(">h")
    if version != KEY_VERSION:
        return None
    return r.string()


def decode_value(buf: bytes) -> TxnLogValue:
    r = _Reader(buf)
    (version,) = r.unpack(">h")
    if version not in (0, 1):
        raise CorruptTxnLogRecord(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    pid, epoch, timeout, status = r.unpack(">qhib")
    partitions: list[tuple[str, int]] = []
    n = r.array_len(flexible)
    for _ in range(max(n, 0)):
        topic = r.string(flexible)
        for _ in range(r.array_len(flexible)):
            partitions.append((topic, r.unpack(">i")[0]))
        if flexible:
            r.skip_tags()
    last_update, start = r.unpack(">qq")
    previous = next_pid = -1
    client_version = 0
    if flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            end = r.pos + size
            if tag == 0:
                (previous,) = r.unpack(">q")
            elif tag == 1:
                (next_pid,) = r.unpack(">q")
            elif tag == 2:
                (client_version,) = r.unpack(">h")
            r.pos = end
    return TxnLogValue(pid, epoch, timeout, status, tuple(partitions), last_update, start,
                       previous, next_pid, client_version)
