"""The ZooKeeper session the metadata store's parts share: the kazoo client, the event loop its
watches hand their updates to, the store's change listeners, and what the broker must know of
the session (lost, expired, registered in it)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import AuthFailedError, SessionClosedRequireSaslError
from kazoo.handlers.threading import KazooTimeoutError

from .client import ZkClientSettings

# The store's own logger, as before the store was split in parts (samsa.log.loggers).
log = logging.getLogger("samsa.broker.cluster.zk.store")


class ZkSession:
    def __init__(self, connect: str, settings: ZkClientSettings, session_timeout_ms: int,
                 connection_timeout_ms: int | None, client: Any = None) -> None:
        self.hosts = connect
        # TLS and ACLs from the zookeeper.* properties (zk/client.py)
        self.settings = settings
        # `client`: one with kazoo's calls but no ZooKeeper behind it (shared/znodes.py)
        self._kazoo = client is None
        self.zk = client if client is not None else settings.client(
            connect, timeout=session_timeout_ms / 1000)
        self.timeout_s = session_timeout_ms / 1000
        # Kafka's zookeeper.connection.timeout.ms: unset means the session timeout.
        connect_ms = session_timeout_ms if connection_timeout_ms is None else connection_timeout_ms
        self.connect_timeout_s = connect_ms / 1000
        self.loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[Callable[[str, str], None]] = []
        self._soon: dict[tuple[str, str], None] = {}  # emit_soon's, in the order asked
        self.session_lost = asyncio.Event()
        # Whether we hold a session and are registered in it: false from a session lost (or
        # given up, see _session_state) to the next registration. No leadership is taken up
        # meanwhile (ReplicaManager._previous_life).
        self.registered = False
        self._given_up: asyncio.TimerHandle | None = None  # see _session_state
        # Set with session_lost when ZooKeeper said the session expired (and with it
        # /controller): not when the store gave a silent connection up (the session may
        # live on, and a controller fenced by its epoch can wait for it).
        self.session_expired = False
        self._closing = False  # our own close ends the session: no loss to recover from

    # ---- the store's change listeners (event loop) ----------------------------------------
    def add_listener(self, fn: Callable[[str, str], None]) -> None:
        """fn(kind, name) on the event loop after the cache changed: kind is broker|topic."""
        self._listeners.append(fn)

    def emit(self, kind: str, name: str) -> None:
        for fn in self._listeners:
            fn(kind, name)

    def emit_soon(self, kind: str, name: str) -> None:
        """`emit`, once for all the times it is asked until the event loop's next pass: a
        partition state changes one by one, by thousands at an election, a controlled shutdown
        or a restart, and each emit has the listeners look at every partition of its topic
        (a 10,000-partition topic took minutes to be led again on a node of two processes)."""
        loop = self.loop
        if loop is None:  # no event loop yet: nothing listens on one
            self.emit(kind, name)
            return
        if not self._soon:
            loop.call_soon(self._emit_soon)
        self._soon[(kind, name)] = None

    def _emit_soon(self) -> None:
        soon, self._soon = self._soon, {}
        for kind, name in soon:
            self.emit(kind, name)

    def call(self, fn: Callable[..., None], *args: Any) -> None:
        """(kazoo thread) Run fn(*args) on the event loop."""
        assert self.loop is not None
        self.loop.call_soon_threadsafe(fn, *args)

    # ---- lifecycle --------------------------------------------------------------------------
    def connect(self) -> None:
        """(worker thread) Start the session; ConnectionError if ZooKeeper refused the login
        or did not answer within zookeeper.connection.timeout.ms."""
        if self._kazoo:
            self._start_kazoo()
        else:
            self.zk.start()
        self.zk.add_listener(self._on_state)

    def _start_kazoo(self) -> None:
        try:
            _ensure_chroot(self.hosts, self.settings, self.connect_timeout_s)
            self.zk.start(timeout=self.connect_timeout_s)
            # kazoo calls a session connected before its SASL login: the first request
            # waits for the login and fails if ZooKeeper refused it
            self.zk.exists("/")
        except (AuthFailedError, SessionClosedRequireSaslError, KazooTimeoutError) as exc:
            self.zk.stop()  # no more retries in the background
            # a refused login can also end start() at once, as a time-out
            if self.settings.sasl_error or not isinstance(exc, KazooTimeoutError):
                # Kafka's ZooKeeperClientAuthFailedException
                raise ConnectionError(
                    f"Auth failed either before or while waiting for connection to ZooKeeper "
                    f"at {self.hosts}: {self.settings.auth_failure(exc)}"
                ) from None
            why = self.settings.last_error()
            raise ConnectionError(
                f"Timed out waiting for a connection to ZooKeeper at {self.hosts} within "
                f"{self.connect_timeout_s * 1000:.0f} ms (zookeeper.connection.timeout.ms)"
                + (f"; {why}" if why else "")
            ) from None

    async def close(self) -> None:
        self._closing = True
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        self.zk.stop()
        self.zk.close()

    # ---- the session's state ----------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        if self.loop is not None and not self._closing:
            self.loop.call_soon_threadsafe(self._session_state, state)

    def _session_state(self, state: str) -> None:
        """(event loop) kazoo learns that a session expired only once it reaches ZooKeeper
        again (LOST): a broker cut off from ZooKeeper would go on leading, and accepting
        writes it cannot replicate, while the controller has moved its leaderships on. So a
        connection not back by the time ZooKeeper may have expired the session counts as a
        lost session: kazoo notices silence (SUSPENDED) after at most two thirds of the
        session timeout, ZooKeeper expires a session after a full one, and the controller
        moves the leaderships right after; a quarter (not the full third left) leaves room
        for a busy event loop."""
        if self._closing:
            return
        if state == KazooState.SUSPENDED:
            if self._given_up is None and self.loop is not None:
                self._given_up = self.loop.call_later(self._expiry_margin_s(),
                                                      self._give_up_session)
            return
        if self._given_up is not None:
            self._given_up.cancel()
            self._given_up = None
        if state == KazooState.LOST:
            self.session_expired = True
            self._lose_session()

    def _expiry_margin_s(self) -> float:
        """A quarter of zookeeper.session.timeout.ms (kazoo does not keep the timeout ZooKeeper
        granted; it is the one asked for while that lies within the server's bounds)."""
        return self.timeout_s / 4

    def _give_up_session(self) -> None:
        self._given_up = None
        if self.registered:
            log.warning("No connection to ZooKeeper for so long that the session may expire "
                        "before it is back: acting as if the session were lost")
        self._lose_session()

    def _lose_session(self) -> None:
        self.registered = False
        self.session_lost.set()


def _ensure_chroot(connect: str, client: ZkClientSettings, timeout: float) -> None:
    """Create the chroot (`host:port/samsa`) first, as Kafka's zookeeper.connect allows."""
    hosts, _, chroot = connect.partition("/")
    if not chroot:
        return
    bare = client.client(hosts)
    try:
        bare.start(timeout=timeout)
    except KazooTimeoutError:
        bare.stop()
        raise
    try:
        bare.ensure_path("/" + chroot)
    finally:
        bare.stop()
        bare.close()
