"""Sparse offset index (.index) and time index (.timeindex) of a log segment.

Entries are held in memory (arrays) and appended to the file 8 KiB at a time, on flush and on
close (`write_pending`); the files are not checksummed and are rebuilt from the log on unclean
recovery, so their durability is a convenience only. No preallocation: the file length is always
entries x entry size. The fd is a `samsa.storage.fdcache.CachedFile`: opened on first write, closed
again when idle."""

from __future__ import annotations

import operator
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from itertools import islice
from pathlib import Path
from typing import NamedTuple

from samsa.config.forward import Forward
from samsa.storage.fdcache import CachedFile

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


_PENDING_LIMIT = 8192  # bytes of entries held before a write


def _increasing(values: array[int], *, strictly: bool) -> bool:
    return all(map(operator.lt if strictly else operator.le, values, islice(values, 1, None)))


class _Column(NamedTuple):
    """One field of an index's entries, held in memory as an array."""

    name: str  # the index's attribute holding it
    strictly: bool  # strictly increasing (else never decreasing)
    nonnegative: bool  # never negative (an offset: relative to the base)


class _IndexFile:
    """An index's entries are two fields (`fields`, in the file's order), each a column in
    memory; the offset field's values are absolute there, relative to the base in the file."""

    entry: struct.Struct
    fields: tuple[_Column, _Column]
    offset_field: int  # which of `fields` is the entry's offset
    _offsets: array[int]  # each entry's absolute offset, whatever else the entry holds

    def __init__(self, path: Path, base_offset: int, max_index_size: int = 10485760) -> None:
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self._set_columns(array("q"), array("q"))
        # Opened (and created) on the first write, closed by the fd cache when idle.
        self._file = CachedFile(path, os.O_RDWR | os.O_APPEND)
        # Entries not yet written to the file. Lookups use the in-memory arrays, so the file
        # only has to be complete once flushed or closed; a crash loses nothing either, since
        # recovery rebuilds the indexes of every segment past the recovery point. Writing them
        # per batch was one of three write() calls per produced batch.
        self._pending = bytearray()

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    path = Forward[Path]("_file.path")
    is_open = Forward[bool]("_file.is_open")

    def _read_raw(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""

    def _columns(self) -> tuple[array[int], array[int]]:
        first, second = self.fields
        return getattr(self, first.name), getattr(self, second.name)

    def _set_columns(self, first: array[int], second: array[int]) -> None:
        setattr(self, self.fields[0].name, first)
        setattr(self, self.fields[1].name, second)

    def load(self) -> bool:
        """Read entries from the file; False (and nothing loaded) if the file looks corrupt:
        not whole entries, or entries out of order or negative where `fields` forbid it."""
        raw = self._read_raw()
        if len(raw) % self.entry.size:
            return False
        first, second = array("q"), array("q")
        add_first, add_second = first.append, second.append
        for a, b in self.entry.iter_unpack(raw):  # checked below, a column at a time
            add_first(a)
            add_second(b)
        columns = [first, second]
        for field, values in zip(self.fields, columns, strict=True):
            if values and field.nonnegative and values[0] < 0:  # the least, if in order
                return False
        base = self.base_offset
        columns[self.offset_field] = array("q", [base + r for r in columns[self.offset_field]])
        for field, values in zip(self.fields, columns, strict=True):
            if not _increasing(values, strictly=field.strictly):
                return False
        self._set_columns(*columns)
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop entries with offset >= `offset`."""
        i = bisect_right(self._offsets, offset - 1)
        if i == len(self._offsets):
            return
        for column in self._columns():
            del column[i:]
        self._rewrite_all()

    def reset(self) -> None:
        self._set_columns(array("q"), array("q"))
        self._clear_file()

    def _rewrite_all(self) -> None:
        columns: list[array[int] | map[int]] = list(self._columns())
        columns[self.offset_field] = map((-self.base_offset).__add__, self._offsets)
        self._rewrite(b"".join(map(self.entry.pack, *columns)))

    def _last(self, empty: tuple[int, int]) -> tuple[int, int]:
        """The last entry (both fields absolute), else `empty`."""
        first, second = self._columns()
        return (first[-1], second[-1]) if first else empty

    def _add(self, first: int, second: int) -> None:
        """An entry (both fields absolute) into the columns and, the offset relative, to
        the file."""
        columns = self._columns()
        columns[0].append(first)
        columns[1].append(second)
        fields = [first, second]
        fields[self.offset_field] -= self.base_offset
        self._write_entry(*fields)

    def _write_entry(self, *fields: int) -> None:
        self._pending += self.entry.pack(*fields)
        if len(self._pending) >= _PENDING_LIMIT:
            self.write_pending()

    def write_pending(self) -> None:
        if self._pending:
            self._file.write_all(self._pending)
            self._pending = bytearray()

    def _rewrite(self, payload: bytes) -> None:
        self._pending = bytearray()  # the payload is made from the in-memory entries
        fd = self._file.acquire()
        try:
            self._file.dirty = True
            os.ftruncate(fd, 0)
            if payload:
                os.write(fd, payload)
        finally:
            self._file.release()

    def _clear_file(self) -> None:
        """Empty the file, without creating it (it is created by the first entry) and without
        a truncate (and later fsync) when it is already empty: recovery resets two indexes
        per partition, and most are empty."""
        if not self._file.is_open:
            try:
                if os.stat(self.path).st_size == 0:
                    return
            except FileNotFoundError:
                return
        self._rewrite(b"")

    def flush(self) -> None:
        self.write_pending()
        self._file.fsync()

    def close(self) -> None:
        self.write_pending()
        self._file.close()

    def close_handlers(self) -> None:
        """Close the fd without writing what is pending (the directory has failed)."""
        self._pending = bytearray()
        self._file.close()

    def delete(self) -> None:
        self._pending = bytearray()
        self.close()
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        self.close()
        if self.path.exists():
            os.replace(self.path, path)
        self._file.rename(path)


class OffsetIndex(_IndexFile):
    """{int32 relativeOffset, int32 position}; lookup gives the greatest entry <= target."""

    entry = _OFFSET_ENTRY
    fields = (_Column("_offsets", strictly=True, nonnegative=True),
              _Column("_positions", strictly=True, nonnegative=True))
    offset_field = 0
    _positions: array[int]

    @property
    def last_entry(self) -> tuple[int, int]:
        """(offset, position); (base, 0) when empty."""
        return self._last((self.base_offset, 0))

    def append(self, offset: int, position: int) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            return  # entries must be strictly increasing (can repeat after truncation)
        self._add(offset, position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry with offset <= target, else (base, 0)."""
        i = bisect_right(self._offsets, target_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self._offsets[i], self._positions[i]

    def scan_bounds(self, start: int, limit: int, max_offset: int | None) -> tuple[int, int]:
        """Where a read of whole batches from the batch at position `start`, ending at or
        before position `limit` and before the first batch with last offset >= `max_offset`,
        must look for its last batch: (from, to) positions, both batch boundaries or `limit`,
        with every batch before `from` in the answer and none at or after `to`.

        Entries are batch starts (position, last offset of that batch). Of the entries at or
        after `start` whose batch starts at or before `limit` and ends below `max_offset`, the
        last but one starts a batch that ends at or before the last one, so it is in the
        answer: scanning from it reads about two index intervals, not the whole answer. The
        first entry after those is a batch the answer cannot reach."""
        positions = self._positions
        lo = bisect_left(positions, start)
        hi = bisect_right(positions, limit)
        if max_offset is not None:
            hi = min(hi, bisect_left(self._offsets, max_offset))
        scan_from = positions[hi - 2] if hi - lo >= 2 else start
        after = max(hi, lo)  # the first entry at or after `start` not in the answer
        scan_to = min(positions[after], limit) if after < len(positions) else limit
        return scan_from, scan_to


class TimeIndex(_IndexFile):
    """{int64 maxTimestampSoFar, int32 relativeOffset}; timestamps strictly increase."""

    entry = _TIME_ENTRY
    fields = (_Column("_timestamps", strictly=True, nonnegative=False),
              _Column("_offsets", strictly=False, nonnegative=True))
    offset_field = 1
    _timestamps: array[int]

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset); (-1, base) when empty."""
        return self._last((-1, self.base_offset))

    def maybe_append(self, timestamp: int, offset: int) -> None:
        if timestamp < 0 or (self._timestamps and timestamp <= self._timestamps[-1]):
            return
        self._add(timestamp, offset)

    def lookup(self, target_ts: int) -> tuple[int, int]:
        """(timestamp, offset) of the greatest entry with timestamp <= target, else (-1, base)."""
        i = bisect_right(self._timestamps, target_ts) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self._offsets[i]
