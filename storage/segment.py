"""One log segment: `<base>.log` plus its offset, time and transaction indexes.

No file of a segment is held open for the segment's life: each is a `storage.fdcache.CachedFile`
whose fd is opened on first use and closed by the process-wide fd cache when idle, so a broker's
open files follow the partitions in use, not partitions x segments."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from samsa.protocol.errors import KafkaError
from samsa.protocol.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Buf,
    iter_batches,
    iter_record_timestamps,
    validate_batch,
)
from samsa.storage.clock import milliseconds
from samsa.storage.config import LogConfig
from samsa.storage.errors import CorruptRecord
from samsa.storage.fdcache import CachedFile
from samsa.storage.file_region import FileRegion
from samsa.storage.index import OffsetIndex, TimeIndex
from samsa.storage.txn_index import TransactionIndex

INT32_MAX = 0x7FFFFFFF
_SCAN_CHUNK = 1 << 20
_HEADER_WALK_CHUNK = 16 * 1024
# Records at least this big are sent from the file by a zero-copy read (smaller ones cost less
# copied into the response than sent by a system call of their own); as the encoder's
# LARGE_VALUE, above which values are written as parts of their own.
ZERO_COPY_MIN_BYTES = 32 * 1024


_DEFAULTS = LogConfig()


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


class LogSegment:
    def __init__(self, dir: Path, base_offset: int, suffix: str = "",
                 config: LogConfig = _DEFAULTS) -> None:
        """`<base_offset>.log<suffix>` in `dir`, indexed as its log's `config` says."""
        self.dir = Path(dir)
        self.base_offset = base_offset
        self.index_interval_bytes = config.index_interval_bytes
        self.roll_jitter_ms = config.segment_jitter_ms
        self.suffix = suffix
        max_index_size = config.segment_index_bytes
        prefix = filename_prefix(base_offset)
        self.log_path = self.dir / f"{prefix}.log{suffix}"
        # The fd lives in the process-wide fd cache: opened on use, closed when idle.
        try:
            st = os.stat(self.log_path)
        except FileNotFoundError:
            self._log = CachedFile(self.log_path, os.O_RDWR | os.O_APPEND, create=True,
                                   dirty=True)
            self._log.acquire()  # create the file now, as Kafka does
            self._log.release()
            self.size = 0
            self.created_ms = milliseconds()
        else:
            # An existing file is durable as found: a clean shutdown fsynced it, or it lies
            # below the recovery point, or recover() marks it dirty.
            self._log = CachedFile(self.log_path, os.O_RDWR | os.O_APPEND, create=False)
            self.size = st.st_size
            self.created_ms = int(st.st_mtime * 1000) if self.size else milliseconds()
        self.offset_index = OffsetIndex(self.dir / f"{prefix}.index{suffix}", base_offset,
                                        max_index_size)
        self.time_index = TimeIndex(self.dir / f"{prefix}.timeindex{suffix}", base_offset,
                                    max_index_size)
        self.txn_index = TransactionIndex(self.dir / f"{prefix}.txnindex{suffix}", base_offset)
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp = base_offset
        self.rolling_based_timestamp: int | None = None
        self._bytes_since_last_index_entry = 0
        self._next_offset: int | None = None  # cached after load / append
        self._dirty = False

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> None:
        """Open an existing segment after a clean shutdown: trust the indexes if sane, else
        rebuild them; compute the next offset and max timestamp from the tail."""
        if not (self.offset_index.load() and self.time_index.load()
                and self.offset_index.last_entry[1] <= self.size):
            self.rebuild_indexes()
            return
        ts, off = self.time_index.last_entry
        if ts > self.max_timestamp_so_far:
            self.max_timestamp_so_far, self.offset_of_max_timestamp = ts, off
        start = self.offset_index.last_entry[1]
        nxt = self.base_offset
        for _pos, h in self._scan(start):
            nxt = h.next_offset
            self._track_timestamp(h)
        if start > 0 and nxt == self.base_offset:
            self.rebuild_indexes()  # index points past the data
            return
        self._next_offset = nxt
        self._load_first_batch_timestamp()

    def rebuild_indexes(self) -> None:
        """Rebuild offset/time indexes from the log without CRC checks."""
        self.recover(validate=False)

    def recover(
        self,
        *,
        validate: bool = True,
        max_message_bytes: int | None = None,
        on_batch: Callable[[int, BatchHeader, memoryview], None] | None = None,
    ) -> int:
        """Reset and rebuild the indexes by scanning every batch; with validate=True check CRCs
        and offsets and truncate at the first invalid or torn batch. Returns bytes truncated."""
        self._log.dirty = True  # what a crash left in the page cache is not durable yet
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far, self.offset_of_max_timestamp = -1, self.base_offset
        self.rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        valid_end = 0
        next_offset = self.base_offset
        try:
            for pos, h, chunk, rel in self._scan_data(0):
                if validate:
                    validate_batch(chunk, rel, h)
                    if h.base_offset < max(next_offset, self.base_offset):
                        raise CorruptRecord(f"offset {h.base_offset} out of order in segment")
                    if h.last_offset - self.base_offset > INT32_MAX:
                        raise CorruptRecord("offset does not fit the segment")
                self._index_batch(pos, h)
                if on_batch is not None:
                    on_batch(pos, h, chunk[rel : rel + h.size])
                valid_end = pos + h.size
                next_offset = h.next_offset
        except KafkaError:  # a record-format error (CorruptRecord, ...) or a StorageError
            pass  # everything from here on is not part of the log
        truncated = self.size - valid_end
        if truncated > 0:
            self._log.ftruncate(valid_end)
            self.size = valid_end
        self._next_offset = next_offset
        return truncated

    # -- scanning ------------------------------------------------------------------------------

    def _scan_data(self, start: int, end: int | None = None,
                   chunk_size: int = _SCAN_CHUNK
                   ) -> Iterator[tuple[int, BatchHeader, memoryview, int]]:
        """Yield (position, header, chunk, position in chunk) for whole batches in [start, end)."""
        end = self.size if end is None else end
        pos = start
        while pos + HEADER_SIZE <= end:
            want = min(max(chunk_size, HEADER_SIZE), end - pos)
            chunk = memoryview(self._log.pread(want, pos))
            advanced = False
            for rel, h in iter_batches(chunk):
                yield pos + rel, h, chunk, rel
                advanced = True
                last = rel + h.size
            if advanced:
                pos += last
                continue
            # The chunk holds no whole batch: a big batch (reread whole) or the torn tail.
            h = BatchHeader.parse(chunk, 0)
            if pos + h.size > end or h.size <= len(chunk):
                return
            chunk = memoryview(self._log.pread(h.size, pos))
            if len(chunk) < h.size:
                return
            yield pos, h, chunk, 0
            pos += h.size

    def _headers(self, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the whole batches in [start, end), reading 16 KiB at a
        time and skipping the body of a batch that does not fit in it: finding a position
        among 1 MiB batches reads their headers, not their bytes."""
        pos = start
        while pos + HEADER_SIZE <= end:
            chunk = self._log.pread(min(_HEADER_WALK_CHUNK, end - pos), pos)
            rel, n = 0, len(chunk)
            if n < HEADER_SIZE:
                return
            while rel + HEADER_SIZE <= n:
                h = BatchHeader.parse(chunk, rel)
                if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                    raise CorruptRecord(f"batch at position {pos + rel} has invalid length "
                                        f"{h.batch_length}")
                if pos + rel + h.size > end:
                    return
                yield pos + rel, h
                rel += h.size
            pos += rel

    def _scan(self, start: int, end: int | None = None,
              chunk_size: int = _SCAN_CHUNK) -> Iterator[tuple[int, BatchHeader]]:
        for pos, h, _chunk, _rel in self._scan_data(start, end, chunk_size):
            yield pos, h

    def batches(self, start: int = 0) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, batch bytes) for every batch from position `start`."""
        for pos, h, chunk, rel in self._scan_data(start):
            yield pos, h, chunk[rel : rel + h.size]

    # -- append --------------------------------------------------------------------------------

    def _load_first_batch_timestamp(self) -> None:
        self.rolling_based_timestamp = None
        if self.size >= HEADER_SIZE:
            first = BatchHeader.parse(self.read_bytes(0, HEADER_SIZE))
            self.rolling_based_timestamp = first.max_timestamp

    def _track_timestamp(self, h: BatchHeader) -> None:
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = h.max_timestamp
        if h.max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = h.max_timestamp
            self.offset_of_max_timestamp = h.last_offset

    def _index_batch(self, pos: int, h: BatchHeader) -> None:
        self._track_timestamp(h)
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(h.last_offset, pos)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += h.size

    def append(self, parts: list[Buf], batches: list[tuple[int, BatchHeader]]) -> None:
        """Append already-validated batches, written as `parts` in order; `batches` holds
        (position in the parts together, header)."""
        start = self.size
        try:
            self._log.write_parts(parts)
        except OSError:
            self._undo_partial_write(start)
            raise
        for rel, h in batches:
            self._index_batch(start + rel, h)
        self.size = start + sum(len(p) for p in parts)
        if batches:
            self._next_offset = batches[-1][1].next_offset
        self._dirty = True

    def append_batch(self, prefix: bytes, rest: memoryview, h: BatchHeader) -> None:
        """`append` of one batch, written as `prefix` then `rest` (a producer's usual append,
        without append's lists and loops)."""
        start = self.size
        try:
            self._log.write_parts([prefix, rest])
        except OSError:
            self._undo_partial_write(start)
            raise
        self._index_batch(start, h)
        self.size = start + len(prefix) + len(rest)
        self._next_offset = h.next_offset
        self._dirty = True

    def _undo_partial_write(self, size: int) -> None:
        """A failed write (ENOSPC, EIO) may have left part of the data in the file: cut it off,
        so that the file never holds more than `size` says. If even that fails, the log dir goes
        offline and recovery cuts the torn tail at the next start."""
        try:
            self._log.ftruncate(size)
        except OSError:
            pass

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return message_timestamp - self.rolling_based_timestamp
        return now_ms - self.created_ms

    def should_roll(self, *, messages_size: int, max_timestamp: int, max_offset: int,
                    now_ms: int, segment_bytes: int, segment_ms: int) -> bool:
        # asked before every append: the helpers' logic inline, the cheap tests first
        size = self.size
        if size > segment_bytes - messages_size:
            return True
        if size > 0:
            rolling = self.rolling_based_timestamp  # time_waited_for_roll
            waited = (max_timestamp - rolling if rolling is not None and rolling >= 0
                      else now_ms - self.created_ms)
            if waited > segment_ms - self.roll_jitter_ms:
                return True
        return (self.offset_index.is_full or self.time_index.is_full
                or not 0 <= max_offset - self.base_offset <= INT32_MAX)

    # -- read ----------------------------------------------------------------------------------

    @property
    def next_offset(self) -> int:
        if self._next_offset is None:
            nxt = self.base_offset
            for _pos, h in self._scan(self.offset_index.last_entry[1]):
                nxt = h.next_offset
            self._next_offset = nxt
        return self._next_offset

    def translate_offset(self, offset: int,
                         start_position: int = 0) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset >= `offset` (position, header), or None."""
        _, pos = self.offset_index.lookup(offset)
        pos = max(pos, start_position)
        for p, h in self._headers(pos, self.size):
            if h.last_offset >= offset:
                return p, h
        return None

    def read(self, start_offset: int, max_size: int, max_offset: int | None = None,
             min_one_message: bool = True, zero_copy: bool = False
             ) -> tuple[bytes | memoryview | FileRegion, int, int] | None:
        """Whole batches from the one containing `start_offset`; none with last offset >=
        max_offset; at most max_size bytes unless min_one_message and the first batch is
        bigger. Returns (records, first batch base offset, offset after the returned data) or
        None if the offset is past this segment's data. With `zero_copy`, records of at least
        ZERO_COPY_MIN_BYTES are a FileRegion (not read: the socket layer sends them from the
        file), else the bytes read."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        pos, first = found
        if max_offset is not None and first.last_offset >= max_offset:
            return b"", first.base_offset, start_offset
        if first.size > max_size:
            if not min_one_message:
                return b"", first.base_offset, start_offset
            end, next_offset = pos + first.size, first.next_offset
        else:
            end, next_offset = self._answer_end(pos, first, max_size, max_offset)
        size = end - pos
        if zero_copy and size >= ZERO_COPY_MIN_BYTES:
            return FileRegion(self._log, pos, size), first.base_offset, next_offset
        return self._log.pread(size, pos), first.base_offset, next_offset

    def _answer_end(self, pos: int, first: BatchHeader, max_size: int,
                    max_offset: int | None) -> tuple[int, int]:
        """(end position, next offset) of the whole batches from `first` (at `pos`, within
        max_size and max_offset itself) that fit in max_size bytes and end below max_offset.
        The offset index tells where to look for the last one (OffsetIndex.scan_bounds), and
        only batch headers are read there: a 1 MiB read parses a few KiB of headers, not a
        thousand of them, nor the bytes of a 1 MiB batch."""
        limit = min(pos + max_size, self.size)
        end, next_offset = pos + first.size, first.next_offset  # the first batch is in
        scan_from, scan_to = self.offset_index.scan_bounds(pos, limit, max_offset)
        # translate_offset has just read the first batch's header: walk from the one after it
        # (the common fetch of one big batch then reads only the next header, not both again).
        scan_from = max(scan_from, end)
        for p, h in self._headers(scan_from, scan_to):
            if max_offset is not None and h.last_offset >= max_offset:
                break
            end, next_offset = p + h.size, h.next_offset
        return end, next_offset

    def read_bytes(self, position: int, size: int) -> bytes:
        return self._log.pread(size, position)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at/after start_offset with ts >= timestamp."""
        _, idx_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(idx_offset, start_offset))
        for _p, h, chunk, rel in self._scan_data(pos, chunk_size=65536):
            if h.max_timestamp < timestamp or h.last_offset < start_offset:
                continue
            for off, ts in iter_record_timestamps(chunk[rel : rel + h.size], 0, h):
                if ts >= timestamp and off >= start_offset:
                    return off, ts
        return None

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's mtime when the segment has none (Kafka)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)  # no fd needed

    # -- truncation / lifecycle ----------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove the batch containing `offset` and everything after it; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos, _h = found  # the batch containing `offset` goes too, as in Kafka
        if pos >= self.size:
            return 0
        removed = self.size - pos
        self._log.ftruncate(pos)
        self.size = pos
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # Recompute the timestamp/indexing state from what remains.
        self.max_timestamp_so_far, self.offset_of_max_timestamp = self.time_index.last_entry
        self._next_offset = None
        for _p, hh in self._scan(self.offset_index.last_entry[1]):
            self._track_timestamp(hh)
        self._load_first_batch_timestamp()
        if self.size == 0:
            self.created_ms = milliseconds()
        self._bytes_since_last_index_entry = 0
        return removed

    def on_become_inactive(self) -> None:
        """Record the final max timestamp in the time index (roll / close)."""
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp)

    @property
    def open_files(self) -> int:
        """How many of this segment's files have an open fd right now."""
        return sum(f.is_open for f in (self._log, self.offset_index, self.time_index,
                                       self.txn_index))

    def flush(self) -> None:
        """fsync the files written (or truncated) since their last fsync."""
        self._log.fsync()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        self._dirty = False

    def close(self) -> None:
        """Release the open fds; the segment stays usable (files reopen on demand)."""
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self._log.close()

    def close_handlers(self) -> None:
        """Close every fd without writing anything more (the directory has failed)."""
        self.offset_index.close_handlers()
        self.time_index.close_handlers()
        self.txn_index.close()
        self._log.close()

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def change_suffix(self, suffix: str) -> None:
        """Rename every file of the segment (e.g. '' <-> '.cleaned' / '.swap')."""
        prefix = filename_prefix(self.base_offset)
        new_log = self.dir / f"{prefix}.log{suffix}"
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        self._log.rename(new_log)
        self.offset_index.rename(self.dir / f"{prefix}.index{suffix}")
        self.time_index.rename(self.dir / f"{prefix}.timeindex{suffix}")
        self.txn_index.rename_to(self.dir / f"{prefix}.txnindex{suffix}")
        self.suffix = suffix

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size})"
