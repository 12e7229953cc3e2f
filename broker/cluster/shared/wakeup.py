"""What wakes a shared store's poller (znodes.SqliteZk) instead of a timer: a write to the
store's file by any process (inotify on its directory: SQLite writes the `-wal` file, and the
database itself when it checkpoints) and the exit of another process with a session (a pidfd
each, readable once it has exited, before its parent reaps it), so that an idle process sleeps
until there is something to read. Without inotify (`available` False) the poller keeps its
short timer; without pidfds, it has no StoreWakeup at all."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import select
import struct
import time
from pathlib import Path

log = logging.getLogger(__name__)

_IN_MODIFY = 0x002
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)


def _inotify(directory: Path) -> int | None:
    """An inotify descriptor watching `directory`'s files being written, or None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    mask = _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO
    if libc.inotify_add_watch(fd, os.fsencode(directory), mask) < 0:
        log.warning("no inotify watch on %s (%s): polling on a timer",
                    directory, os.strerror(ctypes.get_errno()))
        os.close(fd)
        return None
    return fd


class StoreWakeup:
    """`wait(timeout)` returns once a file named `path` or after it (its `-wal`, `-journal`)
    was written, a watched process exited, `wake()` was called, or `timeout` passed."""

    @classmethod
    def create(cls, path: Path) -> StoreWakeup | None:
        """None where the system has no pidfds (Linux before 5.3, other systems)."""
        if not hasattr(os, "pidfd_open") or not hasattr(os, "pipe2"):
            return None
        return cls(path)

    def __init__(self, path: Path) -> None:
        self._prefix = os.fsencode(path.name)
        self._inotify = _inotify(path.parent)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._pidfds: dict[int, int] = {}  # session id -> its process's pidfd
        # sessions whose process has exited (a zombie still answers kill(pid, 0))
        self.exited: set[int] = set()
        self._poller = select.poll()
        self._closed = False
        self._poller.register(self._wake_r, select.POLLIN)
        if self._inotify is not None:
            self._poller.register(self._inotify, select.POLLIN)

    @property
    def available(self) -> bool:
        return self._inotify is not None

    def watch_sessions(self, pids: dict[int, int]) -> None:
        """Wake when the process of one of these sessions (session id -> pid, processes of
        this pid namespace) exits; stop watching those not given."""
        for session in set(self._pidfds) - set(pids):
            self._unwatch(session)
        self.exited &= set(pids)
        for session in set(pids) - set(self._pidfds) - self.exited:
            try:
                fd = os.pidfd_open(pids[session])
            except ProcessLookupError:  # gone already
                self.exited.add(session)
                continue
            except OSError as exc:  # e.g. ENOSYS under seccomp: its lease decides
                log.debug("no pidfd for %d: %r", pids[session], exc)
                continue
            self._pidfds[session] = fd
            self._poller.register(fd, select.POLLIN)

    def _unwatch(self, session: int) -> None:
        fd = self._pidfds.pop(session)
        self._poller.unregister(fd)
        os.close(fd)

    def wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"\0")

    def wait(self, timeout: float) -> bool:
        """Whether something woke it (False: the timeout passed). Writes to other files of
        the directory are not waited out."""
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self._closed:
            ready = self._poller.poll(max(deadline - time.monotonic(), 0.0) * 1000)
            if not ready:
                return False
            woke = False
            for fd, _ in ready:
                if fd == self._inotify:
                    woke = self._store_written() or woke
                elif fd == self._wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._wake_r, 4096)
                    woke = True
                else:  # a watched process exited (its pidfd would stay readable)
                    session = next(k for k, v in self._pidfds.items() if v == fd)
                    self._unwatch(session)
                    self.exited.add(session)
                    woke = True
            if woke:
                return True
        return False

    def _store_written(self) -> bool:
        """Drain the inotify events: whether one names the store's files."""
        assert self._inotify is not None
        written = False
        while True:
            try:
                data = os.read(self._inotify, 65536)
            except BlockingIOError:
                return written
            pos = 0
            while pos + _EVENT.size <= len(data):
                _wd, _mask, _cookie, size = _EVENT.unpack_from(data, pos)
                name = data[pos + _EVENT.size:pos + _EVENT.size + size].rstrip(b"\0")
                written = written or name.startswith(self._prefix)
                pos += _EVENT.size + size

    def close(self) -> None:
        self._closed = True
        for fd in [self._wake_r, self._wake_w, *self._pidfds.values()]:
            os.close(fd)
        self._pidfds.clear()
        if self._inotify is not None:
            os.close(self._inotify)
            self._inotify = None
