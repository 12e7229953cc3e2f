"""Kafka's share-coordinator records of `__share_group_state` (its share-coordinator module's
ShareSnapshotKey/Value and ShareUpdateKey/Value), byte for byte, so Kafka's tooling reads the log.

key   = int16 record type (0 ShareSnapshot, 1 ShareUpdate) | GroupId string | TopicId uuid
        | Partition int32                                   (key version 0, not flexible)
value = int16 version (0) | flexible ShareSnapshotValue or ShareUpdateValue:
  ShareSnapshotValue: SnapshotEpoch int32 | StateEpoch int32 | LeaderEpoch int32
                      | StartOffset int64 | CreateTimestamp int64 | WriteTimestamp int64
                      | StateBatches compact [FirstOffset int64 | LastOffset int64
                        | DeliveryState int8 | DeliveryCount int16 | tags] | tags
  ShareUpdateValue:   SnapshotEpoch int32 | LeaderEpoch int32 | StartOffset int64 (-1: not
                      updated) | StateBatches (as above) | tags
A null value (always under a ShareSnapshot key) is a tombstone: the share-partition's state was
deleted.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from samsa.protocol.encoder import uvarint
from samsa.protocol.errors import ErrorCode, KafkaError

SNAPSHOT, UPDATE = 0, 1  # the key's record type (Kafka's CoordinatorRecordType ids)
VALUE_VERSION = 0


class CorruptShareRecord(KafkaError):
    error_code = ErrorCode.corrupt_message


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of offsets in one delivery state (0 available, 2 acknowledged, 4 archived) with
    one delivery count, as the persister APIs and the records carry it."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareKey:
    record_type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: not updated
    batches: tuple[StateBatch, ...]


def encode_key(record_type: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    raw = group_id.encode()
    return (struct.pack(">hh", record_type, len(raw)) + raw + topic_id.bytes
            + struct.pack(">i", partition))


def _batches(batches: tuple[StateBatch, ...]) -> bytes:
    out = bytearray(uvarint(len(batches) + 1))
    for b in batches:
        out += struct.pack(">qqbh", b.first_offset, b.last_offset, b.delivery_state,
                           b.delivery_count)
        out += b"\x00"  # the batch's tagged fields: none
    return bytes(out)


def encode_snapshot(v: ShareSnapshot) -> bytes:
    return (struct.pack(">hiiiqqq", VALUE_VERSION, v.snapshot_epoch, v.state_epoch,
                        v.leader_epoch, v.start_offset, v.create_timestamp, v.write_timestamp)
            + _batches(v.batches) + b"\x00")


def encode_update(v: ShareUpdate) -> bytes:
    return (struct.pack(">hiiq", VALUE_VERSION, v.snapshot_epoch, v.leader_epoch,
                        v.start_offset) + _batches(v.batches) + b"\x00")


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def unpack(self, fmt: str) -> tuple[int, ...]:
        s = struct.Struct(fmt)
        if self.pos + s.size > len(self.buf):
            raise CorruptShareRecord("share-coordinator record too short")
        values = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return values

    def uvarint(self) -> int:
        shift = value = 0
        while shift < 35:
            (b,) = self.unpack(">B")
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise CorruptShareRecord("varint too long")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            if self.pos + size > len(self.buf):
                raise CorruptShareRecord("share-coordinator record too short")
            self.pos += size

    def batches(self) -> tuple[StateBatch, ...]:
        n = self.uvarint() - 1
        if n < 0:
            raise CorruptShareRecord("null state batches")
        out = []
        for _ in range(n):
            first, last, state, count = self.unpack(">qqbh")
            self.skip_tags()
            out.append(StateBatch(first, last, state, count))
        return tuple(out)


def decode_key(buf: bytes) -> ShareKey | None:
    """The key, or None if it is not a share-coordinator record type this code knows."""
    r = _Reader(buf)
    record_type, size = r.unpack(">hh")
    if record_type not in (SNAPSHOT, UPDATE):
        return None
    if size < 0 or r.pos + size + 20 > len(buf):
        raise CorruptShareRecord("share-coordinator key too short")
    try:
        group_id = buf[r.pos:r.pos + size].decode()
    except UnicodeDecodeError as exc:
        raise CorruptShareRecord(f"group id is not UTF-8: {exc}") from None
    r.pos += size
    topic_id = uuid.UUID(bytes=bytes(buf[r.pos:r.pos + 16]))
    r.pos += 16
    (partition,) = r.unpack(">i")
    return ShareKey(record_type, group_id, topic_id, partition)


def decode_snapshot(buf: bytes) -> ShareSnapshot:
    r = _Reader(buf)
    (version,) = r.unpack(">h")
    if version != VALUE_VERSION:
        raise CorruptShareRecord(f"unknown ShareSnapshotValue version {version}")
    snapshot_epoch, state_epoch, leader_epoch, start, created, written = r.unpack(">iiiqqq")
    batches = r.batches()
    r.skip_tags()
    return ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start, created, written,
                         batches)


def decode_update(buf: bytes) -> ShareUpdate:
    r = _Reader(buf)
    (version,) = r.unpack(">h")
    if version != VALUE_VERSION:
        raise CorruptShareRecord(f"unknown ShareUpdateValue version {version}")
    snapshot_epoch, leader_epoch, start = r.unpack(">iiq")
    batches = r.batches()
    r.skip_tags()
    return ShareUpdate(snapshot_epoch, leader_epoch, start, batches)
