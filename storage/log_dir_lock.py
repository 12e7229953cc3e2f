"""Kafka's lock on a log directory (LogManager.lockLogDirs): a `.lock` file in each of
`log.dirs`, locked exclusively and without waiting when the broker starts and held until it
stops. A second broker on the same directory is refused instead of writing the same segments.

The lock is the kernel's (flock): it ends with the process, so a broker killed with -9 leaves
nothing stale to clean up. Brokers on threads of one process (samsa.testing's embedded broker)
are refused too, by the set of lock files this process holds (Kafka's JVM-wide check for
overlapping locks): a file system whose flock does not tell two descriptors of one process
apart still refuses them."""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from samsa.storage.log_dir_failure import dir_key

LOCK_FILE = ".lock"

# The lock files this process holds, by (device, inode): a directory named two ways (a symlink,
# a relative path) is still one directory.
_held: set[tuple[int, int]] = set()
_held_guard = threading.Lock()


class LogDirLockError(Exception):
    """Kafka's KafkaException from lockLogDirs: the broker does not start."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = dir_key(log_dir)
        super().__init__(f"Failed to acquire lock on file {LOCK_FILE} in {self.log_dir}. A Kafka "
                         "instance in another process or thread is using this directory.")


class LogDirLock:
    """The held lock of one log directory (Kafka's FileLock)."""

    def __init__(self, log_dir: Path, fd: int, key: tuple[int, int]) -> None:
        self.log_dir = log_dir
        self._fd = fd
        self._key = key

    @classmethod
    def acquire(cls, log_dir: Path) -> LogDirLock:
        """Create the directory and its `.lock` if missing and lock it; LogDirLockError when
        another process or broker of this process holds it."""
        log_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            with _held_guard:
                if key in _held:
                    raise LogDirLockError(log_dir)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as e:
                    if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                        raise LogDirLockError(log_dir) from None
                    raise
                _held.add(key)
        except BaseException:
            os.close(fd)
            raise
        return cls(log_dir, fd, key)

    def release(self) -> None:
        """Unlock (the file stays, as Kafka's: the next start locks it again)."""
        with _held_guard:
            if self._fd < 0:
                return
            # closing the only descriptor of the lock releases it; under the guard, so that
            # this process never holds the flock of a key it no longer lists
            os.close(self._fd)
            self._fd = -1
            _held.discard(self._key)


def lock_log_dirs(dirs: Sequence[Path],
                  on_io_error: Callable[[Path, OSError], None] | None = None) -> list[LogDirLock]:
    """Lock every directory, or none: on a refusal the ones already locked are released. A
    directory that cannot be locked for an I/O error goes to `on_io_error` and stays unlocked
    (Kafka takes it offline and locks the others); without `on_io_error` the error is raised."""
    locks: list[LogDirLock] = []
    try:
        for d in dirs:
            try:
                locks.append(LogDirLock.acquire(d))
            except OSError as exc:
                if on_io_error is None:
                    raise
                on_io_error(d, exc)
    except BaseException:
        for held in locks:
            held.release()
        raise
    return locks


__all__ = ["LOCK_FILE", "LogDirLock", "LogDirLockError", "lock_log_dirs"]
