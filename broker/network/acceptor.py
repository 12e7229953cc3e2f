"""Accepting a listener's connections: Kafka's socket-server limits (max.connections,
max.connections.per.ip, connection creation rates) and the acceptor that applies them before
a connection is handed to the server.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .. import metrics

if TYPE_CHECKING:
    from .server import Endpoint

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1


class AcceptingServer(Protocol):
    """What an acceptor asks of the server it hands connections to (KafkaServer)."""

    @property
    def connection_count(self) -> int: ...

    @property
    def limits(self) -> ServerLimits: ...

    def accepted(self, sock: socket.socket, address: Any, endpoint: Endpoint) -> None: ...


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Kafka's socket-server settings (SocketServerConfigs)."""

    max_connections: int = INT_MAX  # max.connections: more wait in the listen backlog
    max_connections_per_ip: int = INT_MAX  # max.connections.per.ip: more are closed at once
    idle_ms: int = 600_000  # connections.max.idle.ms; -1: never close an idle connection
    send_buffer_bytes: int = -1  # socket.send.buffer.bytes; -1: the OS default
    receive_buffer_bytes: int = -1  # socket.receive.buffer.bytes
    backlog: int = 4096  # socket.listen.backlog.size
    sendfile: bool = False  # samsa.fetch.sendfile.enable: zero-copy Fetch on plaintext listeners
    queued_max_request_bytes: int = -1  # queued.max.request.bytes; -1: unbounded
    creation_rate: int = INT_MAX  # max.connection.creation.rate: new connections a second
    # listener.name.<listener>.max.connection.creation.rate, by listener name
    listener_creation_rates: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_config(cls, config: Any) -> ServerLimits:
        rates = []
        for listener in config.listeners:
            rate = config.listener_value(listener.name, "max.connection.creation.rate")
            if rate is not None and int(rate) < INT_MAX:
                rates.append((listener.name, int(rate)))
        return cls(
            config["max.connections"],
            config["max.connections.per.ip"],
            config["connections.max.idle.ms"],
            config["socket.send.buffer.bytes"],
            config["socket.receive.buffer.bytes"],
            config["socket.listen.backlog.size"],
            config["samsa.fetch.sendfile.enable"],
            config["queued.max.request.bytes"],
            config["max.connection.creation.rate"],
            tuple(rates),
        )


class RateLimit:
    """A connection creation rate (Kafka's ConnectionQuotas): a token bucket holding one
    second's worth of connections."""

    __slots__ = ("rate", "_tokens", "_stamp")

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self._tokens = float(rate)
        self._stamp = time.monotonic()

    def delay(self) -> float:
        """Seconds until a connection may be accepted (0: now)."""
        if self.rate >= INT_MAX:
            return 0.0
        if self.rate <= 0:
            return 1.0  # accept none: look again later (the rate may be raised)
        now = time.monotonic()
        self._tokens = min(float(self.rate), self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self.rate

    def take(self) -> None:
        if 0 < self.rate < INT_MAX:
            self._tokens -= 1


class Acceptor:
    """Accepts a listening socket's connections: every one pending each time the socket is
    readable (one accept per event-loop pass leaves a burst waiting in a listen backlog of 50,
    and the kernel drops the SYNs that find it full), until max.connections is reached or a
    connection creation rate says to wait."""

    def __init__(self, server: AcceptingServer, sock: socket.socket, endpoint: Endpoint,
                 rates: list[RateLimit]) -> None:
        self._loop = asyncio.get_running_loop()
        self._server = server
        self._sock = sock
        self._endpoint = endpoint
        self._rates = rates  # the broker's and the listener's
        self._reading = False
        self._timer: asyncio.TimerHandle | None = None
        self._held: tuple[socket.socket, Any] | None = None  # accepted, waiting for the rate
        self.waiting_for_slot = False

    def start(self) -> None:
        if not self._reading:
            self._reading = True
            self._loop.add_reader(self._sock.fileno(), self._ready)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._held is not None:
            self._held[0].close()
            self._held = None
        self.waiting_for_slot = False
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._sock.fileno())

    def _pause(self, delay_s: float) -> None:
        self.stop()
        self._timer = self._loop.call_later(delay_s, self._resume)

    def _resume(self) -> None:
        self._timer = None
        held, self._held = self._held, None
        if held is not None:  # its wait for the creation rate is over
            self._hand_over(*held)
        self.start()
        self._ready()

    def _hand_over(self, sock: socket.socket, address: Any) -> None:
        for rate in self._rates:
            rate.take()
        self._server.accepted(sock, address, self._endpoint)

    def slot_freed(self) -> None:
        if self.waiting_for_slot:
            self.waiting_for_slot = False
            self._resume()

    def _ready(self) -> None:
        server = self._server
        while True:
            # Kafka's acceptor stops accepting at max.connections: new connections wait in
            # the listen backlog until one closes.
            if server.connection_count >= server.limits.max_connections:
                self.stop()
                self.waiting_for_slot = True
                return
            try:
                sock, address = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. EMFILE: back off instead of spinning
                log.warning("accept failed: %s", exc)
                self._pause(0.1)
                return
            # Over a creation rate, Kafka's acceptor holds the connection it accepted, and
            # accepts no other, until the rate allows it.
            delay_s = max(rate.delay() for rate in self._rates)
            if delay_s > 0:
                metrics.accept_throttled(self._endpoint.name, delay_s)
                log.debug("Throttling the acceptor of listener %s for %.0f ms (connection "
                          "creation rate)", self._endpoint.name, delay_s * 1000)
                self._pause(delay_s)
                self._held = (sock, address)
                return
            self._hand_over(sock, address)
