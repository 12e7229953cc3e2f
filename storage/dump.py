"""`samsa dump-log` for a partition's other files, printed the way Kafka's DumpLogSegments
prints them: `.index`, `.timeindex`, `.txnindex` and producer `.snapshot` files.

Offsets are absolute (base offset + relative). A trailing run of zero entries (Kafka
preallocates the active segment's indexes) is not printed. Damage is reported on the output,
not raised: this is a tool for looking at broken directories too.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from samsa.storage.producer_snapshot import CorruptSnapshot, decode_snapshot
from samsa.storage.txn_index import AbortedTxn, CorruptIndex

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset
SUFFIXES = (".index", ".timeindex", ".txnindex", ".snapshot")


def _base_offset(path: Path) -> int:
    try:
        return int(path.name.split(".", 1)[0])
    except ValueError:
        return 0


def _entries(data: bytes, entry: struct.Struct) -> tuple[list[tuple[int, ...]], int]:
    """Whole entries without the trailing zero ones, and the count of leftover bytes."""
    whole = len(data) - len(data) % entry.size
    rows = list(entry.iter_unpack(data[:whole]))
    while len(rows) > 1 and not any(rows[-1]):
        rows.pop()
    if len(rows) == 1 and not any(rows[0]) and entry is _TIME_ENTRY:
        rows.pop()
    return rows, len(data) - whole


def dump_offset_index(path: Path, out: TextIO) -> int:
    base = _base_offset(path)
    rows, extra = _entries(path.read_bytes(), _OFFSET_ENTRY)
    last = -1
    for rel, position in rows:
        print(f"offset: {base + rel} position: {position}", file=out)
        if base + rel <= last:
            print(f"  (not increasing: previous entry was offset {last})", file=out)
        last = base + rel
    if extra:
        print(f"Found {extra} trailing bytes that are not a whole entry", file=out)
    return len(rows)


def dump_time_index(path: Path, out: TextIO) -> int:
    base = _base_offset(path)
    rows, extra = _entries(path.read_bytes(), _TIME_ENTRY)
    for timestamp, rel in rows:
        print(f"timestamp: {timestamp} offset: {base + rel}", file=out)
    if extra:
        print(f"Found {extra} trailing bytes that are not a whole entry", file=out)
    return len(rows)


def dump_txn_index(path: Path, out: TextIO) -> int:
    data = path.read_bytes()
    count = 0
    for pos in range(0, len(data) - len(data) % _TXN_ENTRY.size, _TXN_ENTRY.size):
        version = _TXN_ENTRY.unpack_from(data, pos)[0]
        try:
            txn = AbortedTxn.from_bytes(data, pos)
        except CorruptIndex as exc:
            print(f"position {pos}: {exc}", file=out)
            break
        print(
            f"version: {version} producerId: {txn.producer_id} firstOffset: {txn.first_offset} "
            f"lastOffset: {txn.last_offset} lastStableOffset: {txn.last_stable_offset}",
            file=out,
        )
        count += 1
    extra = len(data) % _TXN_ENTRY.size
    if extra:
        print(f"Found {extra} trailing bytes that are not a whole entry", file=out)
    return count


def dump_producer_snapshot(path: Path, out: TextIO) -> int:
    try:
        entries = decode_snapshot(path.read_bytes())
    except (CorruptSnapshot, struct.error) as exc:
        print(f"Corrupt producer snapshot: {exc}", file=out)
        return 0
    for e in entries:
        first = "OptionalLong.empty" if e.txn_first_offset is None else (
            f"OptionalLong[{e.txn_first_offset}]"
        )
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
            f"coordinatorEpoch: {e.coordinator_epoch} currentTxnFirstOffset: {first} "
            f"lastTimestamp: {e.last_timestamp}"
        )
        if e.batches:
            b = e.batches[-1]
            line += (
                f" firstSequence: {b.first_seq} lastSequence: {b.last_seq} "
                f"lastOffset: {b.last_offset} offsetDelta: {b.offset_delta} "
                f"timestamp: {b.timestamp}"
            )
        print(line, file=out)
    return len(entries)


_DUMPERS: dict[str, Callable[[Path, TextIO], int]] = {
    ".index": dump_offset_index,
    ".timeindex": dump_time_index,
    ".txnindex": dump_txn_index,
    ".snapshot": dump_producer_snapshot,
}


def dump_file(path: Path, out: TextIO | None = None) -> int:
    """Print one index or snapshot file (by its suffix); returns the number of entries."""
    out = sys.stdout if out is None else out
    dumper = _DUMPERS.get(path.suffix)
    if dumper is None:
        raise ValueError(f"not an index or snapshot file: {path.name}")
    print(f"Dumping {path}", file=out)
    return dumper(path, out)
