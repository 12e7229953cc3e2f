"""ResponseWriter's zero-copy path over a real TCP connection on the broker's event loops
(uvloop, and asyncio's own): FileRegions sent with sendfile between the bytes around them,
in order, through a socket kept full by a slow reader (partial sends, waits for room), a
file deleted after the read still sent whole, a file truncated after the read closing the
connection short of the announced bytes."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import uvloop
from prometheus_client import REGISTRY

from samsa.broker.network.server import ResponseWriter
from samsa.storage.fdcache import CachedFile
from samsa.storage.file_region import FileRegion

LOOPS: dict[str, Callable[[Coroutine[Any, Any, Any]], Any]] = {
    "uvloop": uvloop.run, "asyncio": asyncio.run}


def _sent(listener: str) -> float:
    return REGISTRY.get_sample_value("samsa_network_sendfile_bytes_total",
                                     {"listener": listener}) or 0.0


def _file(tmp_path: Path, name: str, size: int) -> tuple[CachedFile, bytes]:
    data = os.urandom(size)
    path = tmp_path / name
    path.write_bytes(data)
    return CachedFile(path, os.O_RDONLY, create=False), data


async def _serve(send: Callable[[ResponseWriter], Coroutine[Any, Any, None]], sendfile: bool,
                 listener: str, read_slowly: bool) -> bytes:
    """Run `send` on the server side of a fresh connection, then close it (once all is
    sent); the bytes the client received until the connection closed."""
    done = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # full after a few KiB
        responses = ResponseWriter(writer, sendfile, listener)
        try:
            await send(responses)
            responses.close()
        finally:
            done.set_result(None)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.setblocking(False)
    await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", port))
    received = bytearray()
    loop = asyncio.get_running_loop()
    while True:
        if read_slowly:
            await asyncio.sleep(0.001)
        chunk = await loop.sock_recv(client, 2048 if read_slowly else 1 << 16)
        if not chunk:
            break
        received += chunk
    await done
    client.close()
    server.close()
    await server.wait_closed()
    return bytes(received)


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_regions_go_out_in_order_between_the_bytes_around_them(tmp_path: Path, loop: str):
    a, data_a = _file(tmp_path, "a.log", 300_000)
    b, data_b = _file(tmp_path, "b.log", 120_000)
    listener = f"order-{loop}"

    async def send(responses: ResponseWriter) -> None:
        assert responses.sendfile
        responses.add([b"first:", FileRegion(a, 1000, 250_000), b":after-a"])
        responses.add([b"second" * 20_000])  # the socket is full: the transport keeps it
        responses.add([b"third:", FileRegion(b, 0, 120_000), FileRegion(a, 0, 50_000), b"."])
        await responses.drain()
        responses.add([b"fourth"])

    received = LOOPS[loop](_serve(send, True, listener, read_slowly=True))
    assert received == (b"first:" + data_a[1000:251_000] + b":after-a" + b"second" * 20_000
                        + b"third:" + data_b + data_a[:50_000] + b"." + b"fourth")
    # nearly all of the regions went by sendfile (a few KiB through the transport per wait)
    assert _sent(listener) == 250_000 + 120_000 + 50_000


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_without_sendfile_regions_are_read_and_written(tmp_path: Path, loop: str):
    a, data_a = _file(tmp_path, "a.log", 100_000)
    listener = f"no-sendfile-{loop}"

    async def send(responses: ResponseWriter) -> None:
        assert not responses.sendfile
        responses.add([b"x", FileRegion(a, 10, 90_000), b"y"])

    received = LOOPS[loop](_serve(send, False, listener, read_slowly=False))
    assert received == b"x" + data_a[10:90_010] + b"y"
    assert _sent(listener) == 0


def test_a_file_deleted_after_the_read_is_still_sent_whole(tmp_path: Path):
    a, data_a = _file(tmp_path, "a.log", 200_000)
    region = FileRegion(a, 0, 200_000)
    os.unlink(a.path)
    a.close()  # pinned by the region: stays open

    async def send(responses: ResponseWriter) -> None:
        responses.add([b"<", region, b">"])

    received = uvloop.run(_serve(send, True, "deleted", read_slowly=True))
    assert received == b"<" + data_a + b">"


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_file_truncated_after_the_read_closes_the_connection(tmp_path: Path, loop: str):
    a, data_a = _file(tmp_path, "a.log", 200_000)
    region = FileRegion(a, 0, 200_000)
    os.truncate(a.path, 150_000)

    async def send(responses: ResponseWriter) -> None:
        responses.add([b"<", region, b">"])
        responses.add([b"never"])

    received = LOOPS[loop](_serve(send, True, f"truncated-{loop}", read_slowly=True))
    # what the file still had went out, then the connection closed: the client never sees
    # the rest of a frame whose length promised more
    assert len(received) < 1 + 200_000
    assert data_a[:150_000].startswith(received[1:]) and received[:1] == b"<"


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_an_answer_written_at_once_waits_behind_a_region_still_sending(tmp_path: Path,
                                                                         loop: str):
    # `add(..., now=True)` with nothing queued writes at once (one writelines); with a region
    # still going out (the socket full), it must queue behind it as before
    a, data_a = _file(tmp_path, "a.log", 300_000)
    listener = f"at-once-{loop}"

    async def send(responses: ResponseWriter) -> None:
        responses.add([b"lone"], now=True)
        responses.add([b"first:", FileRegion(a, 0, 300_000)], now=True)
        responses.add([b":now"], now=True)
        responses.add([b":then"], now=True)
        await responses.drain()
        responses.add([b":last"], now=True)

    received = LOOPS[loop](_serve(send, True, listener, read_slowly=True))
    assert received == b"lone" + b"first:" + data_a + b":now:then:last"
