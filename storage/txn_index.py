"""`<base>.txnindex`: aborted transactions whose abort marker lies in one segment.

Byte format is Kafka's (`TransactionIndex`/`AbortedTxn`): 34-byte big-endian entries
`int16 version(0), int64 producerId, int64 firstOffset, int64 lastOffset, int64 lastStableOffset`,
appended in strictly increasing lastOffset order. The file is created on first append so that
segments without aborted transactions have no index file, as in Kafka.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ErrorCode
from storage.errors import StorageError
from storage.fdcache import CachedFile

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


class CorruptIndex(StorageError):
    """A .txnindex whose contents cannot be trusted; the Log rebuilds it from the segment."""

    error_code = ErrorCode.unknown_server_error  # as Kafka's CorruptIndexException surfaces


@dataclass(frozen=True, slots=True)
class AbortedTxn:
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
    def from_bytes(cls, buf: bytes | memoryview, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = _ENTRY.unpack_from(buf, pos)
        if version > CURRENT_VERSION:
            raise CorruptIndex(f"unexpected aborted transaction version {version}")
        return cls(pid, first, last, lso)


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
        self._last_offset: int | None = None
        if self.path.exists():
            entries = self.all_entries()
            if entries:
                self._last_offset = entries[-1].last_offset

    # -- writing -------------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise ValueError(
                f"last offset of appended transactions must increase: {txn.last_offset} is not "
                f"greater than {self._last_offset} in {self.path}"
            )
        fd = self._file.acquire()
        try:
            self._file.dirty = True
            size = os.fstat(fd).st_size
            # Overwrite a torn tail (crash mid-write) instead of misaligning every later entry.
            pos = size - size % ENTRY_SIZE
            if pos != size:
                os.ftruncate(fd, pos)
            os.pwrite(fd, txn.to_bytes(), pos)
        finally:
            self._file.release()
        self._last_offset = txn.last_offset

    def truncate_to(self, offset: int) -> None:
        """Drop entries with last_offset >= offset (log truncation)."""
        new_last: int | None = None
        for i, txn in enumerate(self.all_entries()):
            if txn.last_offset >= offset:
                self._file.ftruncate(i * ENTRY_SIZE)
                self._last_offset = new_last
                return
            new_last = txn.last_offset

    def reset(self) -> None:
        if self.path.exists():
            self._file.ftruncate(0)
        self._last_offset = None

    def flush(self) -> None:
        self._file.fsync()

    def close(self) -> None:
        self._file.close()

    @property
    def is_open(self) -> bool:
        return self._file.is_open

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self._last_offset = None

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

    def all_entries(self) -> list[AbortedTxn]:
        buf = self._read_all()
        # A torn trailing entry is ignored, like Kafka's iterator.
        n = len(buf) // ENTRY_SIZE
        return [AbortedTxn.from_bytes(buf, i * ENTRY_SIZE) for i in range(n)]

    def collect_aborted(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """Aborted txns overlapping [fetch_offset, upper_bound_offset).

        The flag is True once an entry's last_stable_offset reaches the upper bound: no txn
        recorded in a later segment can then start below the bound, so the caller stops scanning.
        """
        found: list[AbortedTxn] = []
        for txn in self.all_entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
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
