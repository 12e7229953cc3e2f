"""`<base>.txnindex`: aborted transactions whose abort marker lies in one segment.

Byte format is Kafka's (`TransactionIndex`/`AbortedTxn`): 34-byte big-endian entries
`int16 version(0), int64 producerId, int64 firstOffset, int64 lastOffset, int64 lastStableOffset`,
appended in strictly increasing lastOffset order. The file is created on first append so that
segments without aborted transactions have no index file, as in Kafka.

Reads (every read_committed Fetch asks for the aborted transactions of its range) are served
from the entries kept in memory after the first read: the raw 34-byte entries plus an array of
their last offsets to bisect on. Writes go through this object to the file and the copy alike.
What all indexes keep in memory is bounded (`MAX_CACHED_BYTES`, least recently read dropped
first); a dropped index reads its file again when next asked.
"""

from __future__ import annotations

import bisect
import os
import struct
import threading
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

from samsa.protocol.errors import ErrorCode
from samsa.storage.errors import StorageError
from samsa.storage.fdcache import CachedFile

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0
# Bytes of entries (34 each, plus 8 for the offset array) all indexes may keep in memory.
MAX_CACHED_BYTES = 64 * 1024 * 1024


class CorruptIndex(StorageError):
    """A .txnindex whose contents cannot be trusted; the Log rebuilds it from the segment."""

    error_code = ErrorCode.unknown_server_error  # as Kafka's CorruptIndexException surfaces


class AbortedTxn(NamedTuple):
    """One entry. (A NamedTuple: a read_committed fetch collects many, and a frozen
    dataclass's construction costs several times a tuple's.)"""

    producer_id: int
    first_offset: int
    last_offset: int  # offset of the ABORT marker
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return _ENTRY.pack(
            CURRENT_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )

    @classmethod
    def from_bytes(cls, buf: bytes | bytearray | memoryview, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = _ENTRY.unpack_from(buf, pos)
        if version > CURRENT_VERSION:
            raise CorruptIndex(f"unexpected aborted transaction version {version}")
        return cls(pid, first, last, lso)


class _Entries:
    """An index's entries in memory: raw bytes and their last offsets, in file order."""

    __slots__ = ("buf", "lasts")

    def __init__(self, buf: bytes) -> None:
        self.buf = bytearray(buf[: len(buf) - len(buf) % ENTRY_SIZE])
        self.lasts = array("q", (e[3] for e in _ENTRY.iter_unpack(self.buf)))

    @property
    def cost(self) -> int:
        return len(self.buf) + 8 * len(self.lasts)

    def truncate(self, count: int) -> None:
        del self.buf[count * ENTRY_SIZE :]
        del self.lasts[count:]


class _Budget:
    """Which indexes hold their entries in memory, least recently read first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # fetches read from worker threads
        self._held: OrderedDict[int, TransactionIndex] = OrderedDict()
        self.total = 0

    def touch(self, index: TransactionIndex, added: int) -> None:
        with self._lock:
            self._held[id(index)] = index
            self._held.move_to_end(id(index))
            self.total += added
            while self.total > MAX_CACHED_BYTES and len(self._held) > 1:
                _, oldest = self._held.popitem(last=False)
                self.total -= oldest._drop_cache()

    def forget(self, index: TransactionIndex) -> None:
        with self._lock:
            if self._held.pop(id(index), None) is not None:
                self.total -= index._drop_cache()


_BUDGET = _Budget()


def _base_offset_of(path: Path) -> int | None:
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


class TransactionIndex:
    def __init__(self, path: Path, start_offset: int | None = None) -> None:
        self.path = Path(path)
        # The segment's base offset; entries may not end before it (Kafka's sanityCheck).
        self.start_offset = start_offset if start_offset is not None else _base_offset_of(self.path)
        # Opened (and created) on the first append, closed by the fd cache when idle.
        self._file = CachedFile(self.path, os.O_RDWR)
        self._cache: _Entries | None = None  # loaded on the first read
        self._last_offset: int | None = None
        # The file's size as this object's last append left it (None: ask the file): an abort
        # marker on each partition of a transaction appends here, and fstat is a system call.
        self._size: int | None = None
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = 0
        if size >= ENTRY_SIZE:  # only the last whole entry is needed here
            with open(self.path, "rb") as f:
                f.seek((size // ENTRY_SIZE - 1) * ENTRY_SIZE)
                self._last_offset = AbortedTxn.from_bytes(f.read(ENTRY_SIZE)).last_offset

    # -- writing -------------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise ValueError(
                f"last offset of appended transactions must increase: {txn.last_offset} is not "
                f"greater than {self._last_offset} in {self.path}"
            )
        pos, self._size = self._size, None  # unknown until this write is whole
        fd = self._file.acquire()
        try:
            self._file.dirty = True
            if pos is None:
                size = os.fstat(fd).st_size
                # Overwrite a torn tail (crash mid-write) instead of misaligning every later
                # entry.
                pos = size - size % ENTRY_SIZE
                if pos != size:
                    os.ftruncate(fd, pos)
            if os.pwrite(fd, txn.to_bytes(), pos) == ENTRY_SIZE:
                self._size = pos + ENTRY_SIZE
        finally:
            self._file.release()
        self._last_offset = txn.last_offset
        cache = self._cache
        if cache is not None:
            cache.buf += txn.to_bytes()
            cache.lasts.append(txn.last_offset)
            _BUDGET.touch(self, ENTRY_SIZE + 8)

    def truncate_to(self, offset: int) -> None:
        """Drop entries with last_offset >= offset (log truncation)."""
        cache = self._entries()
        keep = bisect.bisect_left(cache.lasts, offset)
        if keep == len(cache.lasts):
            return
        self._size = None
        self._file.ftruncate(keep * ENTRY_SIZE)
        self._last_offset = cache.lasts[keep - 1] if keep else None
        cache.truncate(keep)

    def reset(self) -> None:
        self._size = None
        if self.path.exists():
            self._file.ftruncate(0)
        self._last_offset = None
        _BUDGET.forget(self)

    def flush(self) -> None:
        self._file.fsync()

    def close(self) -> None:
        self._size = None
        self._file.close()

    @property
    def is_open(self) -> bool:
        return self._file.is_open

    def delete(self) -> None:
        self.close()  # (which forgets the size)
        self.path.unlink(missing_ok=True)
        self._last_offset = None
        _BUDGET.forget(self)

    def rename_to(self, new_path: Path) -> None:
        """Follow a segment rename (e.g. `.deleted` suffix); the open fd stays valid."""
        if self.path.exists():
            os.replace(self.path, new_path)
        self.path = Path(new_path)
        self._file.rename(self.path)

    # -- reading -------------------------------------------------------------------------------

    def _read_all(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def _entries(self) -> _Entries:
        """The entries, read from the file once (a torn trailing entry is ignored, like
        Kafka's iterator) and then kept while the memory budget allows."""
        cache = self._cache
        if cache is None:
            cache = self._cache = _Entries(self._read_all())
            _BUDGET.touch(self, cache.cost)
        else:
            _BUDGET.touch(self, 0)
        return cache

    def _drop_cache(self) -> int:
        """Forget the in-memory entries (the budget's call); returns the bytes freed."""
        cache, self._cache = self._cache, None
        return cache.cost if cache is not None else 0

    def all_entries(self) -> list[AbortedTxn]:
        buf = self._entries().buf
        return [AbortedTxn.from_bytes(buf, i) for i in range(0, len(buf), ENTRY_SIZE)]

    def collect_aborted(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """Aborted txns overlapping [fetch_offset, upper_bound_offset).

        The flag is True once an entry's last_stable_offset reaches the upper bound: no txn
        recorded in a later segment can then start below the bound, so the caller stops scanning.
        """
        found: list[AbortedTxn] = []
        cache = self._entries()
        # Entries ending before fetch_offset neither overlap nor can end the scan: an entry's
        # last stable offset is at most its last offset + 1 <= fetch_offset < the bound.
        start = bisect.bisect_left(cache.lasts, fetch_offset)
        buf = bytes(cache.buf[start * ENTRY_SIZE :])  # a copy: appends may follow meanwhile
        for pos in range(0, len(buf), ENTRY_SIZE):
            txn = AbortedTxn.from_bytes(buf, pos)
            if txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    @property
    def last_offset(self) -> int | None:
        return self._last_offset

    def sanity_check(self) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size % ENTRY_SIZE != 0:
            raise CorruptIndex(
                f"transaction index {self.path} has length {size}, not a multiple of {ENTRY_SIZE}"
            )
        for txn in self.all_entries():
            if self.start_offset is not None and txn.last_offset < self.start_offset:
                raise CorruptIndex(
                    f"last offset of aborted transaction {txn} in {self.path} is below the "
                    f"segment start offset {self.start_offset}"
                )
