"""ClientConnection reads size-prefixed frames over real sockets, on the broker's event loops
(uvloop, and asyncio's own), in plaintext and over TLS: frames whole in one read, split across
reads at every byte, larger than its scratch buffer while its task is busy (reading pauses,
then resumes), a size refused by the task, and the end of the stream before and inside a
frame."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import socket
import ssl
import struct
import time
import tracemalloc
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from samsa.broker.network.connection import (
    GROW_STEP,
    SCRATCH_BYTES,
    ClientConnection,
    Frame,
    MemoryPool,
)
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


# -- memory: what arrives, not what a prefix announces ----------------------------------------
async def _pair(pool: MemoryPool | None = None) -> tuple[ClientConnection, socket.socket]:
    """A server-side ClientConnection and the blocking client socket connected to it."""
    loop = asyncio.get_running_loop()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    client = socket.socket()
    client.setblocking(False)
    client.connect_ex(listener.getsockname())
    sock, _ = await loop.sock_accept(listener)
    listener.close()
    connection = ClientConnection(pool)
    await loop.connect_accepted_socket(lambda: connection, sock)
    client.setblocking(True)
    return connection, client


async def _send(client: socket.socket, data: bytes) -> None:
    await asyncio.get_running_loop().run_in_executor(None, client.sendall, data)


async def _until(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_frame_buffer_grows_with_the_bytes_that_arrive(loop: str) -> None:
    announced = 100_000_000
    body = os.urandom(5 * GROW_STEP + 123)

    async def run() -> tuple[int, int, int, bytes]:
        connection, client = await _pair()
        reading = asyncio.create_task(connection.read_frame(_size_of))
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            await _send(client, struct.pack(">i", announced) + b"abc")
            await _until(lambda: connection.unread_bytes >= 3)
            after_prefix = tracemalloc.get_traced_memory()[0] - before
            await _send(client, body)
            await _until(lambda: connection.unread_bytes >= 3 + len(body))
            after_body = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        client.close()
        with pytest.raises(asyncio.IncompleteReadError):
            await reading
        return after_prefix, after_body, connection.unread_bytes, body

    after_prefix, after_body, unread, _ = LOOPS[loop](run())
    # Before: the whole announced 100 MB at once, zero-filled.
    assert after_prefix <= SCRATCH_BYTES + GROW_STEP + 65536, after_prefix
    assert after_body <= len(body) + SCRATCH_BYTES + 2 * GROW_STEP, after_body
    assert unread == 0  # the end of the stream dropped the frame cut short


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_reset_connection_releases_its_buffers_at_once(loop: str) -> None:
    pool = MemoryPool(200_000_000)

    async def run() -> tuple[int, type, int]:
        connection, client = await _pair(pool)
        held = []

        async def attack() -> None:
            await _send(client, struct.pack(">i", 50_000_000) + os.urandom(3 * GROW_STEP))
            await _until(lambda: connection.unread_bytes >= 3 * GROW_STEP)
            held.append(pool.used)
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()  # a RST

        attacking = asyncio.create_task(attack())
        try:  # awaited as the server's connection task does
            await connection.read_frame(_size_of)
        except Exception as exc:  # its traceback holds the reading frames: not kept
            error = type(exc)
        else:
            raise AssertionError("a frame from a reset connection")
        try:
            await connection.read_frame(_size_of)  # asking again raises it again
        except ConnectionError:
            pass
        await attacking
        gone.append(weakref.ref(connection))
        return held[0], error, pool.used

    gone: list[weakref.ref[ClientConnection]] = []
    gc.collect()
    gc.disable()  # freed by reference counting alone, not by the cyclic collector
    try:
        held, error, used = LOOPS[loop](run())
        freed = gone[0]() is None
    finally:
        gc.enable()
    assert held == 50_000_000
    assert issubclass(error, ConnectionError), error
    assert used == 0
    assert freed, "the connection (and its partly read frame) outlived its reset"


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_an_exhausted_pool_pauses_only_the_connections_that_need_it(loop: str) -> None:
    pool = MemoryPool(100_000)  # granted while any is left: the first frame takes it all
    big = [os.urandom(100_000), os.urandom(120_000)]

    async def run() -> list[Any]:
        first, c1 = await _pair(pool)
        second, c2 = await _pair(pool)
        small, c3 = await _pair(pool)
        got1 = await asyncio.wait_for(_one(first, c1, big[0]), 10)
        # The first frame is being answered: its 100,000 bytes still count.
        reading2 = asyncio.create_task(second.read_frame(_size_of))
        await _send(c2, _framed([big[1]]))
        await _until(lambda: pool.waiting == 1)
        waiting = pool.waiting, second.unread_bytes <= SCRATCH_BYTES
        got3 = await asyncio.wait_for(_one(small, c3, b"small request"), 10)
        assert not reading2.done()
        reading1 = asyncio.create_task(first.read_frame(_size_of))  # the first is answered
        got2 = await asyncio.wait_for(reading2, 10)
        for c in (c1, c2, c3):
            c.close()
        with pytest.raises(asyncio.IncompleteReadError):
            await reading1
        return [bytes(got1), waiting, bytes(got3), bytes(got2), pool.depletions]

    got1, waiting, got3, got2, depletions = LOOPS[loop](run())
    assert got1 == big[0] and got2 == big[1] and got3 == b"small request"
    assert waiting == (1, True)
    assert depletions == 1


async def _one(connection: ClientConnection, client: socket.socket, payload: bytes) -> Frame:
    reading = asyncio.create_task(connection.read_frame(_size_of))
    await _send(client, _framed([payload]))
    return await reading
