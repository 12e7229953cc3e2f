"""ClientConnection reads size-prefixed frames over real sockets, on the broker's event loops
(uvloop, and asyncio's own), in plaintext and over TLS: frames whole in one read, split across
reads at every byte, larger than its scratch buffer while its task is busy (reading pauses,
then resumes), a size refused by the task, and the end of the stream before and inside a
frame."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import ssl
import struct
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from samsa.broker.connection import SCRATCH_BYTES, ClientConnection, Frame
from tests.security.certs import Certs, make_certs

LOOPS: dict[str, Callable[[Coroutine[Any, Any, Any]], Any]] = {
    "uvloop": uvloop.run, "asyncio": asyncio.run}


def _size_of(prefix: bytes) -> int:
    size: int = struct.unpack(">i", prefix)[0]
    if size < 0:
        raise ValueError(f"refused: {size}")
    return size


def _framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def _exchange(data: bytes, chunks: list[int], tls: Certs | None,
                    serve: Callable[[ClientConnection], Coroutine[Any, Any, Any]]) -> Any:
    """Send `data` in pieces of `chunks` bytes (the rest at once), each flushed before the
    next, then close; `serve` runs on the server's ClientConnection meanwhile."""
    loop = asyncio.get_running_loop()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    server_ctx = client_ctx = None
    if tls is not None:
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(tls.broker.cert, tls.broker.key)
        client_ctx = ssl.create_default_context(cafile=str(tls.ca))

    async def accept() -> Any:
        sock, _ = await loop.sock_accept(listener)
        connection = ClientConnection()
        await loop.connect_accepted_socket(lambda: connection, sock, ssl=server_ctx)
        try:
            return await serve(connection)
        finally:
            connection.close()

    server = asyncio.create_task(accept())
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx)
    pos = 0
    for n in chunks:
        writer.write(data[pos:pos + n])
        await writer.drain()
        await asyncio.sleep(0)  # let the server read this piece on its own
        pos += n
    writer.write(data[pos:])
    await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()
    else:  # TLS has no half-close: the client's close_notify ends the stream
        writer.close()
    try:
        return await asyncio.wait_for(server, 30)
    finally:
        writer.close()
        listener.close()


async def _read_all(connection: ClientConnection, pause_s: float = 0.0
                    ) -> tuple[list[bytes], BaseException]:
    """Every frame until the read fails, and what it failed with."""
    frames: list[bytes] = []
    while True:
        if pause_s:
            await asyncio.sleep(pause_s)  # a busy task: reading pauses once the scratch fills
        try:
            frame: Frame = await connection.read_frame(_size_of)
        except Exception as exc:  # the end of the stream, or a refused size
            return frames, exc
        frames.append(bytes(frame))


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_frames_whole_split_and_larger_than_the_scratch_buffer(loop: str, tls: bool,
                                                               certs: Certs) -> None:
    rng = random.Random(7)
    sizes = [0, 1, 3, 4, 100, 5000, SCRATCH_BYTES - 4, SCRATCH_BYTES, 3 * SCRATCH_BYTES + 1,
             1 << 20, 17, 2]
    payloads = [os.urandom(n) for n in sizes]
    data = _framed(payloads)
    dribble = [1] * 40  # the first frames' bytes one at a time: splits at every byte
    pieces = dribble + [rng.randint(1, 9000) for _ in range(200)]

    frames, end = LOOPS[loop](_exchange(data, pieces, certs if tls else None, _read_all))

    assert frames == payloads
    assert isinstance(end, asyncio.IncompleteReadError) and end.partial == b""


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_busy_task_pauses_reading_and_loses_nothing(loop: str) -> None:
    payloads = [os.urandom(n) for n in [10] * 200 + [SCRATCH_BYTES * 5, 50, 300_000, 9] * 3]

    async def slow_then_check(connection: ClientConnection) -> Any:
        await asyncio.sleep(0.3)  # the client has sent everything the sockets take by now
        held = connection.unread_bytes
        frames, end = await _read_all(connection, pause_s=0.001)
        return held, frames, end

    data = _framed(payloads)
    held, frames, end = LOOPS[loop](_exchange(data, [], None, slow_then_check))

    assert 0 < held <= SCRATCH_BYTES < len(data), "reading went on past the scratch buffer"
    assert frames == payloads
    assert isinstance(end, asyncio.IncompleteReadError)


@pytest.mark.parametrize("waiting", [False, True], ids=["prefix-buffered", "prefix-awaited"])
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_refused_size_is_raised_to_the_task(loop: str, waiting: bool) -> None:
    data = _framed([b"first"]) + struct.pack(">i", -5) + b"never read"

    async def serve(connection: ClientConnection) -> Any:
        if not waiting:
            await asyncio.sleep(0.2)  # both frames' bytes are in before the task asks
        return await _read_all(connection)

    # Awaited: the refused prefix arrives while the task waits for it.
    pieces = [9, 1] if waiting else []
    frames, end = LOOPS[loop](_exchange(data, pieces, None, serve))

    assert frames == [b"first"]
    assert isinstance(end, ValueError) and "refused: -5" in str(end)


@pytest.mark.parametrize("cut", [2, 4 + 70_000 // 2], ids=["in-prefix", "in-large-frame"])
@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_the_stream_ending_inside_a_frame(loop: str, cut: int) -> None:
    data = _framed([b"whole", os.urandom(70_000)])
    cut_at = 9 + cut  # the first frame, then part of the second

    frames, end = LOOPS[loop](_exchange(data[:cut_at], [], None, _read_all))

    assert frames == [b"whole"]
    assert isinstance(end, asyncio.IncompleteReadError)
