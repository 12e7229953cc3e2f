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
Both values carry DeliveryCompleteCount (KIP-1226: how many offsets from the start offset on
have been delivered for good, -1 unknown) as their tagged field 0, written only when it is not
-1, as Kafka 4.2+ writes it; older records, without it, read as -1.
A null value (always under a ShareSnapshot key) is a tombstone: the share-partition's state was
deleted.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from samsa.protocol.errors import ErrorCode, KafkaError

from ..records_codec import RecordReader, RecordWriter

SNAPSHOT, UPDATE = 0, 1  # the key's record type (Kafka's CoordinatorRecordType ids)
VALUE_VERSION = 0
DELIVERY_COMPLETE_COUNT_TAG = 0
UNKNOWN_DELIVERY_COMPLETE_COUNT = -1


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


@dataclass(slots=True)
class ShareSnapshot:
    """A ShareSnapshotValue; not frozen, as the coordinator's ShareState is one kept up to
    date."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: not updated
    batches: tuple[StateBatch, ...]
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT


def encode_key(record_type: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return RecordWriter().i16(record_type).string(group_id).uuid(topic_id).i32(partition).value()


def _write_batches(w: RecordWriter, batches: tuple[StateBatch, ...]) -> None:
    w.compact_array_len(len(batches))
    for b in batches:
        w.pack(">qqbh", b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        w.tags()


def _write_tags(w: RecordWriter, delivery_complete_count: int) -> None:
    if delivery_complete_count == UNKNOWN_DELIVERY_COMPLETE_COUNT:
        w.tags()
    else:
        w.tags([(DELIVERY_COMPLETE_COUNT_TAG,
                 RecordWriter().i32(delivery_complete_count).value())])


def _read_tags(r: RecordReader) -> int:
    """The value's tagged fields: its delivery-complete count (-1 without one)."""
    count = UNKNOWN_DELIVERY_COMPLETE_COUNT
    for tag in r.tagged_fields():
        if tag == DELIVERY_COMPLETE_COUNT_TAG:
            count = r.i32()
    return count


def encode_snapshot(v: ShareSnapshot) -> bytes:
    w = RecordWriter()
    w.pack(">hiiiqqq", VALUE_VERSION, v.snapshot_epoch, v.state_epoch, v.leader_epoch,
           v.start_offset, v.create_timestamp, v.write_timestamp)
    _write_batches(w, v.batches)
    _write_tags(w, v.delivery_complete_count)
    return w.value()


def encode_update(v: ShareUpdate) -> bytes:
    w = RecordWriter()
    w.pack(">hiiq", VALUE_VERSION, v.snapshot_epoch, v.leader_epoch, v.start_offset)
    _write_batches(w, v.batches)
    _write_tags(w, v.delivery_complete_count)
    return w.value()


def _reader(buf: bytes) -> RecordReader:
    return RecordReader(buf, flexible=True, error=CorruptShareRecord)


def _read_batches(r: RecordReader) -> tuple[StateBatch, ...]:
    n = r.array_len()
    if n < 0:
        raise CorruptShareRecord("null state batches")
    out = []
    for _ in range(n):
        first, last, state, count = r.unpack(">qqbh")
        r.skip_tags()
        out.append(StateBatch(first, last, state, count))
    return tuple(out)


def decode_key(buf: bytes) -> ShareKey | None:
    """The key, or None if it is not a share-coordinator record type this code knows."""
    r = _reader(buf)
    record_type, size = r.unpack(">hh")
    if record_type not in (SNAPSHOT, UPDATE):
        return None
    if size < 0 or r.pos + size + 20 > len(buf):
        raise CorruptShareRecord("share-coordinator key too short")
    try:
        group_id = r.take(size).decode()
    except UnicodeDecodeError as exc:
        raise CorruptShareRecord(f"group id is not UTF-8: {exc}") from None
    return ShareKey(record_type, group_id, r.uuid(), r.i32())


def decode_snapshot(buf: bytes) -> ShareSnapshot:
    r = _reader(buf)
    (version,) = r.unpack(">h")
    if version != VALUE_VERSION:
        raise CorruptShareRecord(f"unknown ShareSnapshotValue version {version}")
    snapshot_epoch, state_epoch, leader_epoch, start, created, written = r.unpack(">iiiqqq")
    batches = _read_batches(r)
    return ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start, created, written,
                         batches, _read_tags(r))


def decode_update(buf: bytes) -> ShareUpdate:
    r = _reader(buf)
    (version,) = r.unpack(">h")
    if version != VALUE_VERSION:
        raise CorruptShareRecord(f"unknown ShareUpdateValue version {version}")
    snapshot_epoch, leader_epoch, start = r.unpack(">iiq")
    batches = _read_batches(r)
    return ShareUpdate(snapshot_epoch, leader_epoch, start, batches, _read_tags(r))
