"""The socket layer: one task per connection, requests answered strictly in arrival order.

Like Kafka, a connection processes one request at a time (Kafka mutes the channel until the
response is sent), so pipelined requests keep their order and their side effects' order.
Responses are written once per event-loop pass (ResponseWriter): requests a client pipelined
are often all answered in one pass, and then share one writev instead of one send each.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from protocol.framing import FrameError, frame_size

log = logging.getLogger(__name__)

_HIGH_WATER = 1 << 20


class CloseConnection(Exception):
    """Kafka's answer to this request is to close the connection."""


class ConnectionInfo:
    __slots__ = ("peer", "writer")

    def __init__(self, peer: str, writer: asyncio.StreamWriter) -> None:
        self.peer = peer
        self.writer = writer


# A response is a list of buffers (the size prefix first), written without joining them.
Response = list[bytes | memoryview]
Dispatch = Callable[[bytes, ConnectionInfo], Awaitable[Response | None]]


class ResponseWriter:
    """Collects a connection's responses and writes them in one writev at the end of the
    current event-loop pass (loop.call_soon): at most one pass of delay, and a client's
    pipelined requests answered in that pass cost one system call."""

    __slots__ = ("_writer", "_parts", "_size", "_scheduled")

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._parts: Response = []
        self._size = 0
        self._scheduled = False

    def add(self, parts: Response) -> None:
        self._parts.extend(parts)
        self._size += sum(len(p) for p in parts)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        parts, self._parts, self._size = self._parts, [], 0
        if parts and not self._writer.is_closing():
            self._writer.writelines(parts)

    def backlog(self) -> int:
        """Bytes not yet handed to the kernel: collected here or buffered by the transport."""
        return self._size + self._writer.transport.get_write_buffer_size()


class KafkaServer:
    def __init__(self, host: str, port: int, dispatch: Dispatch, max_request_bytes: int) -> None:
        self.host = host
        self.port = port
        self._dispatch = dispatch
        self._max_request_bytes = max_request_bytes
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve_connection, self.host, self.port, reuse_address=True, limit=1 << 16
        )
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        # Abort the sockets as well as cancelling: a handler can swallow a cancellation
        # (Python 3.11's wait_for racing a completion) and would then read the next request.
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peername = writer.get_extra_info("peername")
        conn = ConnectionInfo(f"{peername[0]}:{peername[1]}" if peername else "?", writer)
        self._writers.add(writer)
        responses = ResponseWriter(writer)
        try:
            while True:
                prefix = await reader.readexactly(4)
                size = frame_size(prefix, self._max_request_bytes)
                request = await reader.readexactly(size)
                response = await self._dispatch(request, conn)
                if response is not None:
                    responses.add(response)
                    if responses.backlog() > _HIGH_WATER:  # a slow reader: stop reading
                        responses.flush()
                        await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except FrameError as exc:
            log.warning("closing connection from %s: %s", conn.peer, exc)
        except CloseConnection as exc:
            log.warning("closing connection from %s: %s", conn.peer, exc)
        except asyncio.CancelledError:
            pass
        finally:
            self._connections.discard(task)
            self._writers.discard(writer)
            responses.flush()  # answers to the requests before a close still go out
            writer.close()
