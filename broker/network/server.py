"""The socket layer: one task per connection, requests answered strictly in arrival order.

Like Kafka, a connection processes one request at a time (Kafka mutes the channel until the
response is sent), so pipelined requests keep their order and their side effects' order.
Responses are written once per event-loop pass (ResponseWriter): requests a client pipelined
are often all answered in one pass, and then share one writev instead of one send each. The
answer to a request with nothing read after it is written at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import socket
import ssl
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from samsa.config.schema.values import ConfigError
from samsa.protocol.framing import FrameError, Part, frame_size
from samsa.storage.fdcache import FD_CACHE
from samsa.storage.file_region import FileRegion, RegionTruncated

from .. import metrics
from ..context import ANONYMOUS, KafkaPrincipal
from ..security.sasl import SaslConfig, SaslSession
from ..security.tls import subject_dn
from .acceptor import INT_MAX, Acceptor, RateLimit, ServerLimits
from .connection import ClientConnection, Frame, MemoryPool
from .signals import CloseConnection

log = logging.getLogger(__name__)

_HIGH_WATER = 1 << 20
_BYTES_ONLY = {bytes}  # the parts' types of a response without regions or views
_HAS_SENDFILE = hasattr(os, "sendfile")
_TCP_CORK: int | None = getattr(socket, "TCP_CORK", None)  # Linux


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: its name, address, security protocol and, for SSL and SASL_SSL, its TLS
    context."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    sasl: SaslConfig | None = None  # SASL_PLAINTEXT and SASL_SSL


class Writer(Protocol):
    """A connection's write side: a ClientConnection, or a StreamWriter."""

    @property
    def transport(self) -> asyncio.WriteTransport: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class ConnectionInfo:
    __slots__ = ("peer", "writer", "busy", "last_active", "listener", "security_protocol",
                 "principal", "authenticator", "throttle_ms", "zero_copy")

    def __init__(self, peer: str, writer: Writer,
                 endpoint: Endpoint | None = None, principal: KafkaPrincipal = ANONYMOUS
                 ) -> None:
        self.peer = peer
        self.writer = writer
        self.busy = False  # a request is being answered
        self.last_active = time.monotonic()  # when the last request was answered
        self.listener = endpoint.name if endpoint else "PLAINTEXT"
        self.security_protocol = endpoint.security_protocol if endpoint else "PLAINTEXT"
        # Who the client is: a TLS client certificate's subject, a SASL user once
        # authenticated, else ANONYMOUS.
        self.principal = principal
        # A SASL listener's authentication (security/sasl.py): nothing else is served before
        # it completes.
        self.authenticator: SaslSession | None = None
        if endpoint is not None and endpoint.sasl is not None:
            self.authenticator = SaslSession(endpoint.sasl, peer)
        # Set by the dispatcher when a client quota throttles the request just answered: the
        # connection is not read for that long once the response is out (broker/network/quotas.py).
        self.throttle_ms = 0
        # Fetch records are sent from the segment files (sendfile): a plaintext listener with
        # samsa.fetch.sendfile.enable (TLS needs the bytes in memory to encrypt them).
        self.zero_copy = False


_HANDSHAKE_TIMEOUT_S = 10.0

# A response is a list of parts (the size prefix first), written without joining them: bytes,
# or a FileRegion of a segment (Fetch records read with zero_copy), sent from the file.
Response = list[Part]
Dispatch = Callable[[Frame, ConnectionInfo], Awaitable[Response | None]]

# Why a zero-copy send stopped (ResponseWriter._pump).
_DONE, _SOCKET_FULL, _TRANSPORT_BUSY = 0, 1, 2


class ResponseWriter:
    """Collects a connection's responses and writes them in one writev at the end of the
    current event-loop pass (loop.call_soon): at most one pass of delay, and a client's
    pipelined requests answered in that pass cost one system call.

    Zero-copy (`sendfile`: a plaintext connection with samsa.fetch.sendfile.enable): a
    FileRegion in a response is sent with os.sendfile from the segment file to the socket
    instead of being read into memory. The event loop's transport owns the socket (uvloop
    refuses add_writer on it), so a region is sent only while the transport holds nothing:
    everything before it is out, and the bytes stay in order. The buffers around a region go
    through the transport as usual; the socket is corked meanwhile, so that they leave in the
    region's segments. Two waits:
    - the transport holds data (the socket was full when the framing before a region was
      written): a task waits until it is empty (the transport's write-buffer high water is 0,
      so `drain` returns only then) and goes on;
    - the socket is full in the middle of a region: a duplicate of the socket's fd (the
      transport's own is left alone) is watched for room with add_writer, and the region goes
      on from the callback.
    Responses added meanwhile queue behind. A file that ends before its region does (truncated
    since the read) cannot keep the length already announced: the connection is closed, as
    Kafka does (FileRecords.writeTo throws). Without sendfile a region is read and written
    like bytes."""

    __slots__ = ("_loop", "_writer", "_transport", "_queue", "_size", "_scheduled", "_sendfile",
                 "_sock_fd", "_dup", "_watching", "_corked", "_current",
                 "_offset", "_task", "_idle", "_close_when_done", "_listener")

    def __init__(self, writer: Writer, sendfile: bool = False,
                 listener: str = "PLAINTEXT") -> None:
        # Kept: each asyncio.get_running_loop() costs a getpid() system call (CPython 3.11).
        self._loop = asyncio.get_running_loop()
        self._writer = writer
        self._listener = listener
        self._transport = writer.transport
        self._queue: deque[Part] = deque()
        self._size = 0  # bytes in _queue
        self._scheduled = False
        self._sock_fd = -1
        # A socket object over a duplicate of the socket's fd, made at the first region: it
        # corks the socket and is watched for room. (The transport's own socket object is a
        # stand-in that builds a new socket, with a getsockname call, for every setsockopt.)
        self._dup: socket.socket | None = None
        self._watching = False  # add_writer on _dup
        self._corked = False
        if sendfile:
            sock = self._transport.get_extra_info("socket")
            self._sock_fd = sock.fileno() if sock is not None else -1
            if self._sock_fd >= 0:
                self._transport.set_write_buffer_limits(high=0)
        self._sendfile = self._sock_fd >= 0
        self._current: FileRegion | None = None  # the region being sent, from _offset
        self._offset = 0
        self._task: asyncio.Task[None] | None = None  # waiting for the transport to empty
        self._idle: list[asyncio.Future[None]] = []  # drain() callers waiting for the end
        self._close_when_done = False

    @property
    def sendfile(self) -> bool:
        return self._sendfile

    @property
    def _busy(self) -> bool:
        return self._task is not None or self._watching

    def add(self, parts: Response, now: bool = False) -> None:
        """Queue a response: written at the end of this loop pass, or at once with `now`."""
        if (now and not self._queue and self._current is None and self._task is None
                and not self._watching and not self._idle and not self._close_when_done
                and set(map(type, parts)) == _BYTES_ONLY):
            # what flush would do with nothing else queued or waiting (a lone request's
            # answer, issue 47), without its calls: one writelines
            if self._transport.is_closing():
                return  # flush would drop it (as _discard does)
            try:
                self._transport.writelines(parts)  # type: ignore[arg-type]  # bytes only
            except (OSError, ValueError) as exc:
                self._fail(exc)
            return
        self._queue.extend(parts)
        self._size += sum(map(len, parts))
        if now:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if self._busy or not self._queue:
            return  # what is queued goes once the region ahead of it is out
        if self._transport.is_closing():
            self._discard()
            return
        self._send()

    def backlog(self) -> int:
        """Bytes not yet handed to the kernel: collected here or buffered by the transport."""
        current = len(self._current) - self._offset if self._current is not None else 0
        return self._size + current + self._transport.get_write_buffer_size()

    async def drain(self) -> None:
        """Wait until everything added so far is handed to the kernel (a slow reader's back
        pressure)."""
        self.flush()
        if self._busy:
            idle = self._loop.create_future()
            self._idle.append(idle)
            await idle
        await self._writer.drain()

    def close(self) -> None:
        """Close the connection once everything added is sent (now if it is closing)."""
        self.flush()
        if self._busy and not self._transport.is_closing():
            self._close_when_done = True
            return
        self._stop()
        self._writer.close()

    def abort(self) -> None:
        """Close the connection now, dropping what is not sent."""
        self._stop()
        self._transport.abort()

    # -- sending -------------------------------------------------------------------------------
    def _send(self) -> None:
        """Send what is queued as far as possible now, then wait as needed for the rest."""
        try:
            state = self._pump()
        except (OSError, ValueError) as exc:
            self._fail(exc)
            return
        if state == _SOCKET_FULL:
            if not self._watching:
                self._loop.add_writer(self._duplicate(), self._writable)
                self._watching = True
            return
        self._unwatch()
        if state == _TRANSPORT_BUSY:
            self._task = self._loop.create_task(self._await_transport())
            return
        for idle in self._idle:
            if not idle.done():
                idle.set_result(None)
        self._idle.clear()
        if self._close_when_done:
            self.close()

    def _writable(self) -> None:
        self._send()

    async def _await_transport(self) -> None:
        try:
            await self._writer.drain()  # returns once the transport is empty
        except (OSError, ValueError) as exc:
            self._task = None
            self._fail(exc)
            return
        self._task = None
        self._send()

    def _pump(self) -> int:
        """Write what is queued, in order, as far as the socket takes it without waiting:
        _DONE when all of it is handed over, else why a region waits (in _current)."""
        buffers: list[bytes | memoryview] = []
        queue = self._queue
        while True:
            if self._current is None:
                if not queue:
                    break
                part = queue.popleft()
                self._size -= len(part)
                if not isinstance(part, FileRegion):
                    buffers.append(part)  # type: ignore[arg-type]  # bytes or a view
                    continue
                if not self._sendfile:
                    try:
                        buffers.append(part.read())
                    finally:
                        part.release()
                    continue
                self._current, self._offset = part, 0
                if not self._corked:
                    self._cork(True)
            if buffers:
                self._transport.writelines(buffers)
                buffers = []
            state = self._send_current()
            if state != _DONE:
                return state
        if buffers:
            self._transport.writelines(buffers)
        if self._corked:
            self._cork(False)
        return _DONE

    def _send_current(self) -> int:
        """sendfile the current region while the transport is empty and the socket takes it."""
        region = self._current
        assert region is not None
        size = len(region)
        while self._offset < size:
            if self._transport.is_closing():
                raise ConnectionResetError("the connection is closing")
            if self._transport.get_write_buffer_size():
                return _TRANSPORT_BUSY  # what the transport holds goes first
            want = size - self._offset
            try:
                sent = os.sendfile(self._sock_fd, region.fd, region.position + self._offset, want)
            except (BlockingIOError, InterruptedError):
                return _SOCKET_FULL
            if sent == 0:
                raise RegionTruncated(f"{region!r} was truncated after the read")
            self._offset += sent
            if sent < want:
                return _SOCKET_FULL  # no use asking again before there is room
        metrics.sent_from_file(self._listener, size)
        region.release()
        self._current = None
        return _DONE

    def _cork(self, on: bool) -> None:
        """TCP_CORK around responses with regions: the framing written before a region and
        the bytes after it would otherwise each leave as a small segment of their own (the
        socket has TCP_NODELAY), and the client wakes up for each; corked, they go out with
        the region's data, and uncorking pushes out what is left."""
        if _TCP_CORK is None:
            return
        self._corked = on
        self._duplicate().setsockopt(socket.IPPROTO_TCP, _TCP_CORK, int(on))

    def _duplicate(self) -> socket.socket:
        if self._dup is None:
            self._dup = socket.socket(fileno=os.dup(self._sock_fd))
        return self._dup

    def _unwatch(self) -> None:
        if self._watching:
            self._watching = False
            assert self._dup is not None
            self._loop.remove_writer(self._dup)

    def _fail(self, exc: BaseException) -> None:
        if isinstance(exc, RegionTruncated):
            log.warning("closing the connection: %s", exc)
        else:
            log.debug("sending failed: %r", exc)
        self.abort()

    def _stop(self) -> None:
        """No more sending: stop waiting, drop what is not sent (unpinning the regions'
        files), close the duplicate fd."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._unwatch()
        if self._dup is not None:
            self._dup.close()
            self._dup = None
        self._discard()
        for idle in self._idle:
            if not idle.done():
                idle.set_exception(ConnectionResetError("the connection was closed"))
        self._idle.clear()

    def _discard(self) -> None:
        if self._current is not None:
            self._current.release()
            self._current = None
        for part in self._queue:
            if isinstance(part, FileRegion):
                part.release()
        self._queue.clear()
        self._size = 0


class KafkaServer:
    """Serves every listener. `endpoints[0]` is the inter-broker listener: `host` and `port`
    are its address (`ports` has every listener's bound port once started)."""

    def __init__(self, endpoints: list[Endpoint], dispatch: Dispatch, max_request_bytes: int,
                 limits: ServerLimits | None = None, answer_at_once: Iterable[int] = ()
                 ) -> None:
        self.endpoints = list(endpoints)
        self.host = self.endpoints[0].host
        self.port = self.endpoints[0].port
        self.ports: dict[str, int] = {e.name: e.port for e in self.endpoints}
        # Each TLS listener's context for new connections (changed by set_tls).
        self._tls: dict[str, ssl.SSLContext] = {
            e.name: e.tls for e in self.endpoints if e.tls is not None}
        self._dispatch = dispatch
        # The APIs whose answers are written as soon as they are made (their registrations'
        # policy), by a request's first two bytes: its API key.
        self._answer_at_once = frozenset(answer_at_once)
        self._max_request_bytes = max_request_bytes
        self._limits = limits or ServerLimits()
        queued = self._limits.queued_max_request_bytes
        if 0 < queued < max_request_bytes:  # Kafka's SimpleMemoryPool refuses it too
            raise ConfigError.invalid("queued.max.request.bytes", queued,
                                      "must be at least socket.request.max.bytes "
                                      f"({max_request_bytes}) when set")
        # Bytes of requests in flight, across every connection.
        self.memory_pool = MemoryPool(queued)
        self._listeners: list[tuple[socket.socket, Endpoint]] = []
        self._acceptors: list[Acceptor] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[Writer] = set()
        self._open: dict[ConnectionInfo, str] = {}  # connection -> its peer's address
        self._per_ip: Counter[str] = Counter()
        self._count = 0  # connections accepted and not yet closed (handshaking or open)
        # called with (listener name, peer address) once a client connection has closed
        self.disconnect_listeners: list[Callable[[str, str], None]] = []

    def set_connection_limits(self, max_connections: int, max_connections_per_ip: int) -> None:
        """max.connections and max.connections.per.ip changed while running (dynamic broker
        configs): new limits for connections accepted from now on."""
        self._limits = replace(self._limits, max_connections=max_connections,
                               max_connections_per_ip=max_connections_per_ip)
        self._slot_freed()  # an acceptor waiting at the old limit looks again

    @property
    def limits(self) -> ServerLimits:
        return self._limits

    @property
    def connection_count(self) -> int:
        """Connections accepted and not yet closed."""
        return self._count

    async def start(self) -> None:
        raise_open_files_limit()
        for endpoint in self.endpoints:
            await self._bind(endpoint)
        broker_rate = RateLimit(self._limits.creation_rate)
        listener_rates = dict(self._limits.listener_creation_rates)
        for sock, endpoint in self._listeners:
            rates = [broker_rate]
            if endpoint.name in listener_rates:
                rates.append(RateLimit(listener_rates[endpoint.name]))
            acceptor = Acceptor(self, sock, endpoint, rates)
            self._acceptors.append(acceptor)
            acceptor.start()
        if self._limits.idle_ms >= 0:
            self._tasks.append(asyncio.create_task(self._close_idle_loop()))

    def set_tls(self, listener: str, context: ssl.SSLContext) -> None:
        """A TLS listener's new context (new key or trust store): for the connections it
        accepts from now on; those open keep theirs."""
        self._tls[listener] = context

    async def _bind(self, endpoint: Endpoint) -> None:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(endpoint.host or None, endpoint.port,
                                       type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        bound: int | None = None
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                # Kafka sets the receive buffer before bind so that the window scale fits it.
                _set_buffer(sock, socket.SO_RCVBUF, self._limits.receive_buffer_bytes)
                sock.bind(address)
                sock.listen(self._limits.backlog)
                sock.setblocking(False)
            except OSError:
                sock.close()
                raise
            self._listeners.append((sock, endpoint))
            if bound is None:
                bound = sock.getsockname()[1]
        if bound is not None:
            self.ports[endpoint.name] = bound
            if endpoint is self.endpoints[0]:
                self.port = bound
        log.info("listening on %s://%s:%s (%s)", endpoint.name, endpoint.host, bound,
                 endpoint.security_protocol)

    async def stop(self) -> None:
        for acceptor in self._acceptors:
            acceptor.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sock, _ in self._listeners:
            sock.close()
        # Abort the sockets as well as cancelling: a handler can swallow a cancellation
        # (Python 3.11's wait_for racing a completion) and would then read the next request.
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)

    # -- accepting -----------------------------------------------------------------------------
    def accepted(self, sock: socket.socket, address: Any, endpoint: Endpoint) -> None:
        """A connection the acceptor took: refused over max.connections.per.ip, else served
        by a task of its own."""
        ip = address[0]
        if self._per_ip[ip] >= self._limits.max_connections_per_ip:
            log.info("Rejected connection from %s, address already has the configured "
                     "maximum of %d connections.", ip, self._limits.max_connections_per_ip)
            sock.close()
            return
        try:
            sock.setblocking(False)
            _set_buffer(sock, socket.SO_SNDBUF, self._limits.send_buffer_bytes)
            _set_buffer(sock, socket.SO_RCVBUF, self._limits.receive_buffer_bytes)
        except OSError:
            sock.close()
            return
        metrics.connection_created(endpoint.name)
        peer = f"{ip}:{address[1]}" if len(address) >= 2 else ip
        self._count += 1
        self._per_ip[ip] += 1
        task = asyncio.create_task(self._connection(sock, ip, peer, endpoint))
        self._connections.add(task)

    def _slot_freed(self) -> None:
        if self._count < self._limits.max_connections:
            for acceptor in self._acceptors:
                acceptor.slot_freed()

    async def _connection(self, sock: socket.socket, ip: str, peer: str,
                          endpoint: Endpoint) -> None:
        """One accepted connection: the TLS handshake (in its own task, so that a slow or
        bogus client never holds up the acceptor), then its requests."""
        task = asyncio.current_task()
        assert task is not None
        try:
            opened = await self._open_connection(sock, peer, endpoint)
            if opened is None:
                return
            connection, principal = opened
            conn = ConnectionInfo(peer, connection, endpoint, principal)
            conn.zero_copy = endpoint.tls is None and self._limits.sendfile and _HAS_SENDFILE
            self._open[conn] = ip
            await self._serve_connection(connection, conn)
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(task)
            self._count -= 1
            self._per_ip[ip] -= 1
            if self._per_ip[ip] <= 0:
                del self._per_ip[ip]
            self._slot_freed()

    async def _open_connection(
        self, sock: socket.socket, peer: str, endpoint: Endpoint
    ) -> tuple[ClientConnection, KafkaPrincipal] | None:
        loop = asyncio.get_running_loop()
        # Made here, not by the loop: uvloop returns its own SSLProtocol, not this one.
        connection = ClientConnection(self.memory_pool)
        if endpoint.tls is None:
            try:
                await loop.connect_accepted_socket(lambda: connection, sock)
            except OSError:
                sock.close()
                return None
            return connection, ANONYMOUS
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: connection, sock, ssl=self._tls.get(endpoint.name, endpoint.tls),
                ssl_handshake_timeout=_HANDSHAKE_TIMEOUT_S)
        except (TimeoutError, OSError, ssl.SSLError, EOFError) as exc:
            # Kafka logs a failed handshake and closes: e.g. a plaintext client on a TLS port.
            log.info("Failed authentication with %s (SSL handshake failed on listener %s: %s)",
                     peer, endpoint.name, exc)
            metrics.authentication(endpoint.name, succeeded=False)
            sock.close()
            return None
        principal = ANONYMOUS
        if endpoint.sasl is None:  # SASL_SSL: counted when SASL completes (Kafka's count)
            metrics.authentication(endpoint.name, succeeded=True)
        cert = transport.get_extra_info("peercert")
        if cert:
            principal = KafkaPrincipal("User", subject_dn(cert))
            log.info("TLS client %s on listener %s authenticated as %s", peer, endpoint.name,
                     principal)
        return connection, principal

    def _closed(self, conn: ConnectionInfo) -> None:
        self._open.pop(conn, None)
        for listener in self.disconnect_listeners:
            try:
                listener(conn.listener, conn.peer)
            except Exception:  # one listener's bug must not keep the others from running
                log.exception("disconnect listener failed for %s", conn.peer)

    async def _close_idle_loop(self) -> None:
        """connections.max.idle.ms: close connections that sent no request for that long
        (one being answered is not idle)."""
        idle_s = self._limits.idle_ms / 1000
        while True:
            await asyncio.sleep(min(max(idle_s / 4, 0.01), 5.0))
            now = time.monotonic()
            for conn in list(self._open):
                if not conn.busy and now - conn.last_active > idle_s:
                    log.debug("closing the idle connection from %s (idle for %.0f ms)",
                              conn.peer, (now - conn.last_active) * 1000)
                    conn.writer.close()

    # -- serving -------------------------------------------------------------------------------
    async def _serve_connection(self, connection: ClientConnection, conn: ConnectionInfo
                                ) -> None:
        self._writers.add(connection)
        responses = ResponseWriter(connection, conn.zero_copy, conn.listener)
        conn.zero_copy = responses.sendfile
        max_request_bytes = self._max_request_bytes
        at_once = self._answer_at_once

        def size_of(prefix: bytes) -> int:  # judged by the state after the requests before
            auth = conn.authenticator
            if auth is not None and not auth.complete:
                return _sasl_frame_size(prefix, auth)
            return frame_size(prefix, max_request_bytes)

        cancelled = False
        try:
            while True:
                request = await connection.read_frame(size_of)
                conn.busy = True
                response = await self._dispatch(request, conn)
                if response is not None:
                    # Written at the end of the loop pass while more of the client's bytes are
                    # read (its pipelined requests, answered in this pass, share one writev),
                    # else now: a lone request's answer costs no loop callback (issue 47), and
                    # that of an API whose registration says so (ApiPolicy.answer_at_once).
                    responses.add(response, not connection.unread_bytes
                                  or (request[0] << 8 | request[1]) in at_once)
                    if responses.backlog() > _HIGH_WATER:  # a slow reader: stop reading
                        await responses.drain()
                if conn.throttle_ms:  # Kafka mutes a throttled channel after the response
                    delay_s, conn.throttle_ms = conn.throttle_ms / 1000, 0
                    responses.flush()
                    await asyncio.sleep(delay_s)
                conn.busy = False
                conn.last_active = time.monotonic()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except OSError as exc:  # e.g. ETIMEDOUT from a peer gone behind a network partition
            log.info("connection from %s failed: %r", conn.peer, exc)
        except FrameError as exc:
            log.warning("closing connection from %s: %s", conn.peer, exc)
        except CloseConnection as exc:
            if exc.response is not None:
                responses.add(exc.response)
                responses.flush()
            if exc.delay_s > 0:
                log.info("closing connection from %s in %.0f ms: %s", conn.peer,
                         exc.delay_s * 1000, exc)
                await asyncio.sleep(exc.delay_s)
            else:
                log.warning("closing connection from %s: %s", conn.peer, exc)
        except asyncio.CancelledError:
            cancelled = True
        finally:
            self._writers.discard(connection)
            self._closed(conn)
            if cancelled:  # the server stops
                responses.abort()
            else:  # answers to the requests before a close still go out
                responses.close()


def _sasl_frame_size(prefix: bytes, auth: SaslSession) -> int:
    """Before SASL authentication completes Kafka reads at most sasl.server.max.receive.size
    bytes; a raw token (after SaslHandshake v0) may be shorter than a request header."""
    limit = auth.config.max_receive_size
    if not auth.raw_tokens:
        size = frame_size(prefix, INT_MAX)
    else:
        size = int.from_bytes(prefix, "big", signed=True)
        if size < 0:
            raise FrameError(f"invalid SASL token size {size}")
    if size > limit:
        raise FrameError(f"frame of {size} bytes before authentication exceeds "
                         f"sasl.server.max.receive.size={limit}")
    return size


def raise_open_files_limit() -> None:
    """Every connection and open segment file is a file descriptor: the soft RLIMIT_NOFILE
    (often 1024) goes up to the hard limit, as Kafka's start scripts expect of `ulimit -n`;
    the broker does it before its logs load, the server again (a server alone, in tests)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if resource.RLIM_INFINITY not in (soft, hard) and soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            log.info("raised the open files limit from %d to %s", soft, hard)
            FD_CACHE.follow_open_files_limit()  # segment files may use a share of it
    except (OSError, ValueError) as exc:
        log.warning("could not raise the open files limit: %s", exc)


def _set_buffer(sock: socket.socket, option: int, size: int) -> None:
    if size != -1:
        sock.setsockopt(socket.SOL_SOCKET, option, size)
