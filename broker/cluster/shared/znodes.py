"""A ZooKeeper-like tree of znodes in one SQLite file (WAL mode) that the broker processes of one
host share, used through the part of kazoo's KazooClient the ZooKeeper metadata store's parts
call (get, set, create, delete, exists, get_children, transactions, DataWatch, ChildrenWatch,
sessions and their ephemeral znodes): those parts (zk/*.py) then run unchanged on it.

    znodes(path, parent, data, czxid, mzxid, pzxid, ctime, mtime, version, cversion, owner)
    sessions(id, expires_ms, pid, host)
                               a process's lease, renewed every third of its timeout
    changes(zxid, path)        the znodes each write touched (and their parents), read by every
                               process's watches; pruned after CHANGES_KEPT_MS
    meta(key, value)           zxid: the last write's; pruned: changes below it are gone;
                               format: of these tables (1)

Each write is one SQLite transaction (BEGIN IMMEDIATE: writers queue on the file's lock) that
takes the next zxid. Every process reads the changes when a write or an exit wakes it
(wakeup.py; every POLL_S where nothing can) and re-reads what its watches follow among the
paths changed; a session whose lease has passed is expired by whichever process
sees it first, its ephemeral znodes deleted in the same transaction, as ZooKeeper's leader does;
a session of a process that is gone (its pid no longer runs, seen from the same kernel and pid
namespace) is expired at once: a kill -9 moves leaderships in a poll, not a lease.
No consensus: the file is on one host and SQLite's locks order the writers.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.protocol.states import ZnodeStat

from .wakeup import StoreWakeup

log = logging.getLogger(__name__)

POLL_S = 0.05  # how soon a process sees another's write, where nothing wakes the poller
IDLE_POLL_S = 1.0  # at the latest, when a write or an exit wakes it (StoreWakeup)
# Passes after a wake-up, each this long after the one before: the write that woke the poller
# may not be visible yet (SQLite writes the -wal file, then makes the commit visible in the
# -shm index, which it maps: no event tells that).
SETTLE_S = (0.002, 0.01, POLL_S)
CHANGES_KEPT_MS = 60_000  # a process paused longer re-reads everything it watches
PRUNE_EVERY_S = 10.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS znodes (
    path TEXT PRIMARY KEY, parent TEXT NOT NULL, data BLOB NOT NULL,
    czxid INTEGER NOT NULL, mzxid INTEGER NOT NULL, pzxid INTEGER NOT NULL,
    ctime INTEGER NOT NULL, mtime INTEGER NOT NULL,
    version INTEGER NOT NULL, cversion INTEGER NOT NULL, owner INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS znodes_parent ON znodes(parent);
CREATE INDEX IF NOT EXISTS znodes_owner ON znodes(owner) WHERE owner != 0;
CREATE TABLE IF NOT EXISTS sessions (id INTEGER PRIMARY KEY, expires_ms INTEGER NOT NULL,
                                     pid INTEGER NOT NULL, host TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS changes (zxid INTEGER NOT NULL, path TEXT NOT NULL,
                                    ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS changes_zxid ON changes(zxid);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('zxid', 0), ('pruned', 0), ('format', 1);
INSERT OR IGNORE INTO znodes VALUES ('/', '', x'', 0, 0, 0, 0, 0, 0, 0, 0);
"""
_COLUMNS = "data, czxid, mzxid, ctime, mtime, version, cversion, owner, pzxid"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _pid_space() -> str:
    """Where a pid means one process: this boot of the kernel and this pid namespace (two
    containers sharing the file see each other's pids as nobody's); '' where unknown."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return ""


_PID_SPACE = _pid_space()


def _gone(pid: int, space: str) -> bool:
    """Whether the process of a session is known to have ended (a pid reused since is taken
    as alive: the lease decides then)."""
    if not space or space != _PID_SPACE:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # EPERM: someone else's process, alive
        return False
    return False


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


def _read(db: sqlite3.Connection, path: str) -> tuple[bytes | None, ZnodeStat | None]:
    row = db.execute(f"SELECT {_COLUMNS} FROM znodes WHERE path = ?", (path,)).fetchone()
    if row is None:
        return None, None
    children = db.execute("SELECT count(*) FROM znodes WHERE parent = ?", (path,)).fetchone()[0]
    data, czxid, mzxid, ctime, mtime, version, cversion, owner, pzxid = row
    return bytes(data), ZnodeStat(czxid, mzxid, ctime, mtime, version, cversion, 0, owner,
                                  len(data), children, pzxid)


def _subtree(path: str) -> tuple[str, str]:
    """The bounds of the paths under `path` ('0' is the character after '/')."""
    return path + "/", path + "0"


class _Write:
    """The znode operations of one write transaction, at its zxid."""

    def __init__(self, db: sqlite3.Connection, zxid: int, session: int) -> None:
        self.db = db
        self.zxid = zxid
        self.now = _now_ms()
        self.session = session
        self.touched: set[str] = set()

    def row(self, path: str) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.db.execute(
            "SELECT version, cversion, owner FROM znodes WHERE path = ?", (path,)).fetchone()
        return row

    def _version_row(self, path: str, version: int) -> tuple[Any, ...]:
        row = self.row(path)
        if row is None:
            raise NoNodeError(path)
        if version != -1 and row[0] != version:
            raise BadVersionError(path)
        return row

    def _child_changed(self, parent: str) -> int:
        """The parent's cversion before this change (a sequential child's number)."""
        row = self.row(parent)
        if row is None:
            raise NoNodeError(parent)
        self.db.execute("UPDATE znodes SET cversion = cversion + 1, pzxid = ? WHERE path = ?",
                        (self.zxid, parent))
        self.touched.add(parent)
        return int(row[1])

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False) -> str:
        parent = _parent(path)
        if makepath and self.row(parent) is None:
            self.ensure(parent)
        number = self._child_changed(parent)
        if sequence:
            path = f"{path}{number:010d}"
        if self.row(path) is not None:
            raise NodeExistsError(path)
        self.db.execute("INSERT INTO znodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?)",
                        (path, parent, bytes(value), self.zxid, self.zxid, self.zxid, self.now,
                         self.now, self.session if ephemeral else 0))
        self.touched.add(path)
        return path

    def ensure(self, path: str) -> None:
        if path != "/" and self.row(path) is None:
            self.ensure(_parent(path))
            self.create(path)

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        self._version_row(path, version)
        self.db.execute("UPDATE znodes SET data = ?, version = version + 1, mzxid = ?, mtime = ?"
                        " WHERE path = ?", (bytes(value), self.zxid, self.now, path))
        self.touched.add(path)
        stat = _read(self.db, path)[1]
        assert stat is not None
        return stat

    def check(self, path: str, version: int) -> bool:
        self._version_row(path, version)
        return True

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        self._version_row(path, version)
        low, high = _subtree(path)
        below = [r[0] for r in self.db.execute(
            "SELECT path FROM znodes WHERE path >= ? AND path < ? ORDER BY length(path) DESC",
            (low, high))]
        if below and not recursive:
            raise NotEmptyError(path)
        for p in [*below, path]:
            self.db.execute("DELETE FROM znodes WHERE path = ?", (p,))
            self.touched.add(p)
            if p != path:
                self.touched.add(_parent(p))
        self._child_changed(_parent(path))
        return True

    def expire_sessions(self, ids: list[int] | None = None,
                        exited: Container[int] = frozenset()) -> None:
        """Sessions whose lease has passed, whose process is gone or in `exited` (or `ids`)
        go, and their ephemeral znodes with them."""
        if ids is None:
            ids = []
            for session, expires_ms, pid, space in self.db.execute(
                    "SELECT id, expires_ms, pid, host FROM sessions WHERE id != ?",
                    (self.session,)).fetchall():
                if expires_ms < self.now:
                    log.info("session 0x%x expired: its lease passed", session)
                elif session in exited or _gone(pid, space):
                    log.info("session 0x%x expired: its process %d is gone", session, pid)
                else:
                    continue
                ids.append(session)
        for session in ids:
            self.db.execute("DELETE FROM sessions WHERE id = ?", (session,))
            for (path,) in self.db.execute(
                    "SELECT path FROM znodes WHERE owner = ?", (session,)).fetchall():
                self.delete(path)


class _Done:
    """What kazoo's *_async calls return, already answered."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        try:
            self._value, self._error = fn(), None
        except Exception as exc:  # raised again by get(), as kazoo's AsyncResult does
            self._value, self._error = None, exc

    def get(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


@dataclasses.dataclass(eq=False)
class _Watch:
    """A DataWatch or ChildrenWatch: `func` is called at once, then after each change of what
    it follows (the node's mzxid, or its children's cversion) until it returns False."""

    client: SqliteZk
    path: str
    func: Callable[..., Any]
    children: bool
    stopped: bool = False
    # nothing seen yet: the first read calls func
    _seen: object = dataclasses.field(default_factory=object)
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def refresh(self) -> None:
        with self._lock:
            if self.stopped:
                return
            key: object  # what changes when the watched thing does
            if self.children:
                try:
                    names, key = self.client.children_versioned(self.path)
                except NoNodeError:  # kazoo's ChildrenWatch ends on a missing znode
                    self.stopped = True
                    return
                args: tuple[Any, ...] = (names,)
            else:
                data, stat = self.client.get_or_none(self.path)
                key, args = (None if stat is None else stat.mzxid), (data, stat)
            if key == self._seen:
                return
            self._seen = key
            try:
                result = self.func(*args)
            except Exception:
                log.exception("watch of %s failed", self.path)
                return
            if result is False:
                self.stopped = True


class _Transaction:
    """kazoo's TransactionRequest: the operations run in one SQLite transaction."""

    def __init__(self, client: SqliteZk) -> None:
        self._client = client
        self._ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False) -> None:
        self._ops.append(("create", (path, value), {"ephemeral": ephemeral,
                                                    "sequence": sequence}))

    def delete(self, path: str, version: int = -1) -> None:
        self._ops.append(("delete", (path, version), {}))

    def set_data(self, path: str, value: bytes, version: int = -1) -> None:
        self._ops.append(("set", (path, value, version), {}))

    def check(self, path: str, version: int) -> None:
        self._ops.append(("check", (path, version), {}))

    def commit(self) -> list[Any]:
        """Each operation's result, or (nothing written) the failed one's error and kazoo's
        RolledBackError / RuntimeInconsistency for the others."""
        return self._client.run_transaction(self._ops)


class SqliteZk:
    """The kazoo client calls the ZooKeeper store's parts make, on the SQLite tree."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout_ms = int(timeout * 1000)
        self._lock = threading.RLock()  # one connection, used by the loop's workers and poller
        self._db: sqlite3.Connection | None = None
        self._session = 0  # 0: none (lost, or not started)
        self._listeners: list[Callable[[str], Any]] = []
        self._watches: dict[str, list[_Watch]] = {}
        self._seen_zxid = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._renewed = 0.0
        self._pruned = 0.0
        self._wakeup: StoreWakeup | None = None
        self.passes = 0  # of the poller; `woken`: those a write or an exit began
        self.woken = 0

    # ---- the connection and the session ---------------------------------------------------
    def start(self, timeout: float | None = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None,
                             check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")  # a committed write survives a power loss
        with self._lock:
            self._db = db
            db.executescript(_SCHEMA)  # each statement idempotent: processes may race here
            self._seen_zxid = self._meta("zxid")
            self._open_session()
        self._stop.clear()
        self._wakeup = StoreWakeup.create(self.path)
        self._thread = threading.Thread(target=self._poll, name=f"sqlite-zk {self.path.name}",
                                        daemon=True)
        self._thread.start()
        self._tell(KazooState.CONNECTED)

    def stop(self) -> None:
        """End the session (its ephemeral znodes go at once, as a closed ZooKeeper session's)
        and the polling."""
        self._stop.set()
        if self._wakeup is not None:
            self._wakeup.wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None
        if self._wakeup is not None:
            self._wakeup.close()
            self._wakeup = None
        if self._db is not None and self._session:
            with self._write() as w:
                w.expire_sessions([self._session])
            self._session = 0

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        return (self._session, b"") if self._session else None

    @property
    def connected(self) -> bool:
        return bool(self._session)

    def add_listener(self, fn: Callable[[str], Any]) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[str], Any]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _tell(self, state: str) -> None:
        for fn in list(self._listeners):
            fn(state)

    def _open_session(self) -> None:
        with self._lock:
            session = secrets.randbits(62) | 1
            self._conn().execute("INSERT INTO sessions VALUES (?, ?, ?, ?)",
                                 (session, _now_ms() + self.timeout_ms, os.getpid(),
                                  _PID_SPACE))
            self._session = session
            self._renewed = time.monotonic()

    def _renew(self) -> None:
        """Extend our lease; a lease another process found passed is a lost session: LOST,
        then a new session (CONNECTED), as kazoo reports an expired one."""
        with self._lock:
            renewed = self._conn().execute("UPDATE sessions SET expires_ms = ? WHERE id = ?",
                                           (_now_ms() + self.timeout_ms, self._session))
        self._renewed = time.monotonic()
        if renewed.rowcount:
            return
        log.warning("session 0x%x of %s expired", self._session, self.path)
        self._session = 0
        self._tell(KazooState.LOST)
        self._open_session()
        self._tell(KazooState.CONNECTED)
        self._refresh(None)

    def _expire_others(self, wakeup: StoreWakeup | None) -> int | None:
        """Looked for first outside a write: the file's write lock only when one is due.
        Returns when the first lease of another session ends (ms), if any."""
        now = _now_ms()
        exited = wakeup.exited if wakeup is not None else set()
        with self._lock:
            others = self._conn().execute(
                "SELECT id, expires_ms, pid, host FROM sessions WHERE id != ?",
                (self._session,)).fetchall()
            if any(expires_ms < now or session in exited or _gone(pid, space)
                   for session, expires_ms, pid, space in others):
                with self._write() as w:
                    w.expire_sessions(exited=exited)
        if wakeup is not None:
            wakeup.watch_sessions({session: pid for session, _, pid, space in others
                                   if space and space == _PID_SPACE})
        return min((expires_ms for _, expires_ms, _, _ in others), default=None)

    # ---- polling --------------------------------------------------------------------------
    def _poll(self) -> None:
        wakeup = self._wakeup
        wait = POLL_S
        settle: list[float] = []
        while not self._stop.is_set():
            # Asleep until another process writes or exits (or the next timed duty), where
            # that can be watched: an idle node's processes cost nothing (issue 51).
            if wakeup is not None:
                if wakeup.wait(wait if wakeup.available else POLL_S):
                    self.woken += 1
                    settle = list(SETTLE_S)
                if self._stop.is_set():
                    return
            elif self._stop.wait(POLL_S):
                return
            self.passes += 1
            lease_ends: int | None = None
            try:
                if time.monotonic() - self._renewed >= self.timeout_ms / 3000:
                    self._renew()
                lease_ends = self._expire_others(wakeup)
                self._refresh(self._changed())
                if time.monotonic() - self._pruned >= PRUNE_EVERY_S:
                    self._prune()
            except sqlite3.Error as exc:  # the file busy beyond the timeout: next round
                log.warning("shared metadata %s: %r", self.path, exc)
            except Exception:  # the thread must live on: it renews the lease
                log.exception("shared metadata %s: polling failed", self.path)
            wait = settle.pop(0) if settle else self._next_duty(lease_ends)

    def _next_duty(self, lease_ends: int | None) -> float:
        """Seconds to the poller's next timed duty: our lease's renewal, another's lease
        ending, the changes' pruning; IDLE_POLL_S at most (a missed wake-up costs that)."""
        now = time.monotonic()
        duties = [self._renewed + self.timeout_ms / 3000 - now,
                  self._pruned + PRUNE_EVERY_S - now, IDLE_POLL_S]
        if lease_ends is not None:
            duties.append((lease_ends - _now_ms()) / 1000 + 0.01)
        return max(min(duties), POLL_S)

    def _changed(self) -> set[str] | None:
        """The paths written since the last poll; None when the changes were pruned meanwhile
        (then everything watched is read again)."""
        with self._lock:
            rows = self._conn().execute("SELECT zxid, path FROM changes WHERE zxid > ?",
                                        (self._seen_zxid,)).fetchall()
            # changes below `pruned` are gone: some past the last seen among them?
            gap = self._meta("pruned") > self._seen_zxid + 1
            if gap:  # everything is read again: nothing up to the current zxid is missed
                self._seen_zxid = self._meta("zxid")
        if rows:
            self._seen_zxid = max(self._seen_zxid, *(r[0] for r in rows))
        return None if gap else {r[1] for r in rows}

    def _refresh(self, paths: set[str] | None) -> None:
        """Call the watches of `paths` (None: of every path) whose znode changed."""
        with self._lock:
            if paths is None:
                paths = set(self._watches)
            watched = [w for p in paths for w in self._watches.get(p, ())]
        if not watched:
            return
        for w in watched:
            w.refresh()
        with self._lock:
            for p in paths:
                kept = [w for w in self._watches.get(p, ()) if not w.stopped]
                if kept:
                    self._watches[p] = kept
                else:
                    self._watches.pop(p, None)

    def _prune(self) -> None:
        self._pruned = time.monotonic()
        with self._transaction() as db:
            top = db.execute("SELECT max(zxid) FROM changes WHERE ms < ?",
                             (_now_ms() - CHANGES_KEPT_MS,)).fetchone()[0]
            if top is not None:
                db.execute("DELETE FROM changes WHERE zxid <= ?", (top,))
                db.execute("UPDATE meta SET value = max(value, ?) WHERE key = 'pruned'",
                           (top + 1,))

    # ---- reads ----------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError(f"{self.path}: not started")
        return self._db

    def _meta(self, key: str) -> int:
        return int(self._conn().execute("SELECT value FROM meta WHERE key = ?",
                                        (key,)).fetchone()[0])

    def get_or_none(self, path: str) -> tuple[bytes | None, ZnodeStat | None]:
        with self._lock:
            return _read(self._conn(), path)

    def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        data, stat = self.get_or_none(path)
        if data is None or stat is None:
            raise NoNodeError(path)
        return data, stat

    def exists(self, path: str) -> ZnodeStat | None:
        return self.get_or_none(path)[1]

    def children_versioned(self, path: str) -> tuple[list[str], tuple[int, int]]:
        """The children's names, and what changes when they do (czxid, cversion)."""
        with self._lock:
            db = self._conn()
            row = db.execute("SELECT czxid, cversion FROM znodes WHERE path = ?",
                             (path,)).fetchone()
            if row is None:
                raise NoNodeError(path)
            names = [p.rsplit("/", 1)[1] for (p,) in db.execute(
                "SELECT path FROM znodes WHERE parent = ? ORDER BY path", (path,))]
        return names, (row[0], row[1])

    def get_children(self, path: str) -> list[str]:
        return self.children_versioned(path)[0]

    def get_async(self, path: str) -> _Done:
        return _Done(lambda: self.get(path))

    def exists_async(self, path: str) -> _Done:
        return _Done(lambda: self.exists(path))

    def retry(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """No connection to lose: called once."""
        return fn(*args, **kwargs)

    # ---- writes ---------------------------------------------------------------------------
    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: BEGIN IMMEDIATE takes the file's write lock at once (a reader
        turned writer could not upgrade in WAL mode when another wrote meanwhile)."""
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    @contextmanager
    def _write(self) -> Iterator[_Write]:
        """Znode writes at the next zxid, recorded in `changes` for every process's watches."""
        with self._transaction() as db:
            w = _Write(db, self._meta("zxid") + 1, self._session)
            yield w
            if w.touched:
                db.execute("UPDATE meta SET value = ? WHERE key = 'zxid'", (w.zxid,))
                db.executemany("INSERT INTO changes VALUES (?, ?, ?)",
                               [(w.zxid, p, w.now) for p in w.touched])

    def create(self, path: str, value: bytes = b"", acl: Any = None, ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False) -> str:
        with self._write() as w:
            return w.create(path, value, ephemeral, sequence, makepath)

    def ensure_path(self, path: str, acl: Any = None) -> None:
        if self.exists(path) is None:
            with self._write() as w:
                w.ensure(path)

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        with self._write() as w:
            return w.set(path, value, version)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        with self._write() as w:
            return w.delete(path, version, recursive)

    def transaction(self) -> _Transaction:
        return _Transaction(self)

    def run_transaction(self, ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]]
                        ) -> list[Any]:
        results: list[Any] = []
        try:
            with self._write() as w:
                for name, args, kwargs in ops:
                    try:
                        results.append(getattr(w, name)(*args, **kwargs))
                    except (NoNodeError, NodeExistsError, BadVersionError,
                            NotEmptyError) as exc:
                        raise _RolledBack(len(results), exc) from None
        except _RolledBack as failed:
            return ([RolledBackError()] * failed.index + [failed.error]
                    + [RuntimeInconsistency()] * (len(ops) - failed.index - 1))
        return results  # kazoo's: the created paths, set_data's new stats, else True

    # ---- watches ----------------------------------------------------------------------------
    def DataWatch(self, path: str, func: Callable[[bytes | None, Any], Any]) -> None:  # noqa: N802
        self._watch(_Watch(self, path, func, children=False))

    def ChildrenWatch(self, path: str, func: Callable[[list[str]], Any]) -> None:  # noqa: N802
        self._watch(_Watch(self, path, func, children=True))

    def _watch(self, watch: _Watch) -> None:
        """Registered before its first read: a write in between is seen by the next poll."""
        with self._lock:
            self._watches.setdefault(watch.path, []).append(watch)
        watch.refresh()


class _RolledBack(Exception):
    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error
