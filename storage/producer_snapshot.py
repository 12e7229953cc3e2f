"""Producer-state snapshots (`<20-digit offset>.snapshot`) in Kafka's ProducerSnapshot v1 byte
format, so that a data directory stays readable by either broker."""

from __future__ import annotations

import struct

import crc32c

from samsa.storage.producer_entry import NO_SEQUENCE, BatchMetadata, ProducerStateEntry

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">hIi")  # version, crc32c, entry count
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_ENTRY_SIZE = _SNAP_ENTRY.size  # 46
_CRC_START = 6  # the CRC covers everything after version + crc


class CorruptSnapshot(Exception):
    """Internal: a snapshot file failed validation; it is deleted and an older one is tried."""


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_snapshot(entries: list[ProducerStateEntry]) -> bytes:
    """Kafka ProducerSnapshot v1; only the last retained batch of each producer is kept."""
    body = bytearray(struct.pack(">i", len(entries)))
    for e in entries:
        last = e.batches[-1] if e.batches else None
        body += _SNAP_ENTRY.pack(
            e.producer_id,
            e.epoch,
            last.last_seq if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            e.last_timestamp,
            e.coordinator_epoch,
            e.txn_first_offset if e.txn_first_offset is not None else -1,
        )
    crc = crc32c.crc32c(bytes(body))
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + bytes(body)


def decode_snapshot(buf: bytes) -> list[ProducerStateEntry]:
    if len(buf) < _SNAP_HEADER.size:
        raise CorruptSnapshot(f"snapshot too short ({len(buf)} bytes)")
    version, crc, count = _SNAP_HEADER.unpack_from(buf, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"unknown snapshot version {version}")
    if count < 0 or len(buf) != _SNAP_HEADER.size + count * SNAPSHOT_ENTRY_SIZE:
        raise CorruptSnapshot(f"snapshot length {len(buf)} does not match {count} entries")
    computed = crc32c.crc32c(buf[_CRC_START:])
    if computed != crc:
        raise CorruptSnapshot(f"snapshot crc mismatch: stored {crc}, computed {computed}")
    entries = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first = (
            _SNAP_ENTRY.unpack_from(buf, _SNAP_HEADER.size + i * SNAPSHOT_ENTRY_SIZE)
        )
        e = ProducerStateEntry(pid, epoch, coord_epoch, ts, txn_first if txn_first >= 0 else None)
        if last_offset >= 0:
            e.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
        entries.append(e)
    return entries
