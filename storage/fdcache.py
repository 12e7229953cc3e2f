"""Bounded cache of open file descriptors for segment and index files.

A broker with 10,000 partitions used to hold every partition's `.log` (and, once written, its
`.index` / `.timeindex`) open for its whole life, and recovery opened three files per
partition, so open files grew with partitions x segments and start-up after a crash ran out of
them (`EMFILE`). Here every such file is a `CachedFile`: its fd is opened on first use and kept
in one process-wide LRU (`FdCache`) of at most `capacity` fds; the least recently used are
closed when the cap is passed, and reopened on their next use. Open files thus follow the
partitions being worked on, not the partitions that exist.

Correctness notes:
- Every use of an fd pins it (`acquire` ... `release`) so that no other thread (the flush
  executor, parallel shutdown/recovery) can close it under a syscall and let the number be
  reused for another file. Pinned fds are never evicted; the cap may be passed while more
  than `capacity` fds are pinned at once (never, in practice: a pin lasts one syscall).
- Data written through an fd stays in the page cache when the fd is closed; `fsync` through a
  later fd of the same file makes it durable (fsync is per inode). Acknowledged appends are
  still `os.write` before the response, so closing fds changes nothing for `kill -9`.
- Files are created only by the first open of their owner (`create=True`); later reopens do
  not pass O_CREAT, so a file deleted behind a stale reference is not silently recreated.
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path

# Kafka keeps every segment's files open; this bound keeps the active files of a few thousand
# partitions open (each append to a closed one costs an open and a close: at 2,000 partitions
# a 1,024 bound made a one-record Produce some 25 % dearer) while RLIMIT_NOFILE sets the rest.
DEFAULT_MAX_OPEN_FILES = 8192
_IOV_MAX = os.sysconf("SC_IOV_MAX")  # parts one writev takes


def default_capacity() -> int:
    """A quarter of the soft RLIMIT_NOFILE (sockets, snapshots and checkpoints need the rest),
    at most DEFAULT_MAX_OPEN_FILES and at least 16."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = resource.RLIM_INFINITY
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return DEFAULT_MAX_OPEN_FILES
    return max(16, min(DEFAULT_MAX_OPEN_FILES, soft // 4))


class FdCache:
    """LRU of open `CachedFile` fds, at most `capacity` unpinned ones open at a time."""

    def __init__(self, capacity: int | None = None) -> None:
        # Reentrant: a FileRegion (storage/file_region.py) unpins its fd when garbage, which
        # may happen while this thread holds the lock (a garbage collection in acquire()).
        self._lock = threading.RLock()
        self._open: OrderedDict[CachedFile, None] = OrderedDict()
        self._capacity = default_capacity() if capacity is None else max(1, capacity)
        self._configured = capacity is not None
        self.opens = 0  # fds opened over the cache's life (tests, diagnostics)
        self.evictions = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    @capacity.setter
    def capacity(self, value: int) -> None:
        with self._lock:
            self._capacity = max(1, value)
            self._configured = True
            self._evict_locked()

    def follow_open_files_limit(self) -> None:
        """The default bound again, from RLIMIT_NOFILE as it is now (a broker raises its soft
        limit when it starts: the bound taken at import was the lower one); a configured
        bound stays."""
        with self._lock:
            if not self._configured:
                self._capacity = default_capacity()
                self._evict_locked()

    @property
    def open_count(self) -> int:
        return len(self._open)

    def _evict_locked(self) -> None:
        while len(self._open) > self._capacity:
            victim = next((f for f in self._open if not f._pins), None)  # oldest unpinned
            if victim is None:
                return
            del self._open[victim]
            fd, victim._fd = victim._fd, None
            if fd is not None:
                os.close(fd)
            self.evictions += 1

    def acquire(self, f: CachedFile) -> int:
        with self._lock:
            fd = f._fd
            if fd is None:
                flags = f.flags | (os.O_CREAT if f._create else 0)
                fd = os.open(f.path, flags, 0o644)
                f._fd = fd
                f._create = False
                self.opens += 1
                self._open[f] = None
                f._pins += 1
                self._evict_locked()
            else:
                self._open.move_to_end(f)
                f._pins += 1
            return fd

    def release(self, f: CachedFile) -> None:
        with self._lock:
            f._pins -= 1

    def close(self, f: CachedFile) -> None:
        """Close `f`'s fd now. A pinned fd (another thread is in a syscall on it) is left to
        the LRU instead, which closes it once unpinned and old enough."""
        with self._lock:
            if f._fd is None or f._pins:
                return
            self._open.pop(f, None)
            fd, f._fd = f._fd, None
        os.close(fd)

    def close_all(self) -> None:
        """Close every unpinned fd (tests; a log dir being released)."""
        with self._lock:
            for f in list(self._open):
                if not f._pins:
                    del self._open[f]
                    fd, f._fd = f._fd, None
                    if fd is not None:
                        os.close(fd)


FD_CACHE = FdCache()


class CachedFile:
    """One file whose fd lives in an `FdCache`. Writes mark it dirty; `fsync` is skipped when
    nothing was written (or truncated) through it since the last one."""

    __slots__ = ("__weakref__", "_cache", "_create", "_fd", "_pins", "dirty", "flags", "path")

    def __init__(self, path: Path, flags: int, *, create: bool = True, dirty: bool = False,
                 cache: FdCache | None = None) -> None:
        self.path = path if isinstance(path, Path) else Path(path)
        self.flags = flags
        self._create = create
        self._fd: int | None = None
        self._pins = 0
        self._cache = FD_CACHE if cache is None else cache
        self.dirty = dirty

    @property
    def is_open(self) -> bool:
        return self._fd is not None

    def acquire(self) -> int:
        return self._cache.acquire(self)

    def release(self) -> None:
        self._cache.release(self)

    def write_all(self, data: bytes | bytearray | memoryview) -> None:
        self.write_parts([data])

    def write_parts(self, parts: list[bytes | bytearray | memoryview]) -> None:
        """Write `parts` in order, as one `writev` where the kernel takes them all."""
        fd = self._cache.acquire(self)
        try:
            self.dirty = True
            if len(parts) <= _IOV_MAX:
                written = os.writev(fd, parts)
                if written == sum(map(len, parts)):  # all of it: nearly always
                    return
            else:
                written = 0
            views = [memoryview(p).cast("B") for p in parts]
            first = 0  # the first part not yet wholly written
            while True:
                while first < len(views) and written >= len(views[first]):
                    written -= len(views[first])
                    first += 1
                if first == len(views):
                    return
                views[first] = views[first][written:]
                written = os.writev(fd, views[first:first + _IOV_MAX])
        finally:
            self._cache.release(self)

    def pwrite(self, data: bytes, pos: int) -> None:
        fd = self._cache.acquire(self)
        try:
            self.dirty = True
            os.pwrite(fd, data, pos)
        finally:
            self._cache.release(self)

    def pread(self, size: int, pos: int) -> bytes:
        fd = self._cache.acquire(self)
        try:
            return os.pread(fd, size, pos)
        finally:
            self._cache.release(self)

    def ftruncate(self, size: int) -> None:
        fd = self._cache.acquire(self)
        try:
            self.dirty = True
            os.ftruncate(fd, size)
        finally:
            self._cache.release(self)

    def fstat(self) -> os.stat_result:
        fd = self._cache.acquire(self)
        try:
            return os.fstat(fd)
        finally:
            self._cache.release(self)

    def fsync(self, *, force: bool = False) -> None:
        """fsync if anything was written since the last fsync (or always with force)."""
        if not (self.dirty or force):
            return
        fd = self._cache.acquire(self)
        try:
            self.dirty = False  # a write racing with this fsync sets it again
            try:
                os.fsync(fd)
            except BaseException:
                self.dirty = True
                raise
        finally:
            self._cache.release(self)

    def close(self) -> None:
        self._cache.close(self)

    def rename(self, path: Path) -> None:
        """The file was renamed to `path` (the open fd, if any, stays valid)."""
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"CachedFile({self.path}, open={self._fd is not None}, dirty={self.dirty})"


__all__ = ["FD_CACHE", "CachedFile", "FdCache", "default_capacity"]
