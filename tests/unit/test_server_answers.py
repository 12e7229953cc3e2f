"""When KafkaServer writes a connection's answer (issue 47): the answer to a request with
nothing read after it goes to the socket as the request's handling ends, not in a callback
of the next loop pass; pipelined requests read together go out in one write, in their order.
On both event loops the broker runs on."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from samsa.broker import apis
from samsa.broker.network.connection import Frame
from samsa.broker.network.server import ConnectionInfo, Endpoint, KafkaServer, Response
from samsa.protocol.framing import frame_parts

LOOPS: dict[str, Callable[[Coroutine[Any, Any, Any]], Any]] = {
    "uvloop": uvloop.run, "asyncio": asyncio.run}


def _request(correlation_id: int, api_key: int = 18, padding: int = 0) -> bytes:
    """A v0 request header (ApiVersions unless said), then `padding` bytes: all the fake
    dispatcher reads is the correlation id."""
    body = struct.pack(">hhih", api_key, 0, correlation_id, -1) + bytes(padding)
    return struct.pack(">i", len(body)) + body


def _answers(data: bytes) -> list[int]:
    """The correlation ids of the whole answers in `data`."""
    ids, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        if pos + 4 + size > len(data):
            break
        ids.append(struct.unpack_from(">i", data, pos + 4)[0])
        pos += 4 + size
    return ids


async def _exchange(requests: bytes, expected: int, answer_at_once: tuple[int, ...] = (),
                    yield_before: tuple[int, ...] = ()) -> tuple[list[int], list[bool]]:
    """A client thread sends `requests` in one write to a server whose dispatcher, before
    answering each, queues a check that runs as soon as the loop runs anything else: has the
    client got that answer by then? The check blocks the loop while it waits (up to a
    generous 2 s), so a write left to a later callback cannot happen meanwhile. The
    dispatcher lets the loop run before it answers the requests in `yield_before`."""
    loop = asyncio.get_running_loop()
    received: list[int] = []
    got = threading.Condition()
    seen: list[bool] = []

    def arrived(correlation_id: int) -> None:
        with got:
            seen.append(got.wait_for(lambda: correlation_id in received, 2.0))

    async def dispatch(raw: Frame, conn: ConnectionInfo) -> Response | None:
        correlation_id = struct.unpack_from(">i", raw, 4)[0]
        if correlation_id in yield_before:
            await asyncio.sleep(0)
        loop.call_soon(arrived, correlation_id)
        return frame_parts([struct.pack(">i", correlation_id)])

    def client(port: int) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(requests)
            data = b""
            while len(_answers(data)) < expected:
                chunk = sock.recv(1 << 16)
                assert chunk, "the server closed the connection"
                data += chunk
                with got:
                    received[:] = _answers(data)
                    got.notify_all()

    server = KafkaServer([Endpoint("PLAINTEXT", "127.0.0.1", 0)], dispatch, 1 << 20,
                         answer_at_once=answer_at_once)
    await server.start()
    try:
        await asyncio.wait_for(asyncio.to_thread(client, server.port), 20)
        while len(seen) < expected:
            await asyncio.sleep(0.01)
        return received, seen
    finally:
        await server.stop()


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_lone_requests_answer_is_written_when_it_is_handled(loop: str):
    answers, seen = LOOPS[loop](_exchange(_request(7), 1))
    assert answers == [7]
    assert seen == [True]  # before: written by a callback queued after the dispatcher's


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_pipelined_answers_keep_their_order_and_go_in_the_last_ones_write(loop: str):
    answers, seen = LOOPS[loop](_exchange(b"".join(_request(i) for i in (1, 2, 3)), 3))
    assert answers == [1, 2, 3]
    # The first two, with more bytes read behind them, wait; the last one (nothing read after
    # it) writes all three at once, before the loop runs anything else. Before: the first
    # answer was not out when the loop went on.
    assert seen == [True, True, True]


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_an_api_registered_to_answer_at_once_is_written_before_the_next_request(loop: str):
    # A Fetch (key 1) with two requests read behind it, the next of which lets the loop run
    # before it is answered: the Fetch's answer is out by then, as its registration says.
    requests = _request(1, api_key=1) + _request(2) + _request(3)
    answers, seen = LOOPS[loop](_exchange(requests, 3, answer_at_once=(1,), yield_before=(2,)))
    assert answers == [1, 2, 3]
    assert seen == [True, True, True]  # without answer_at_once the first is not out: False
    assert apis.policies()[1].answer_at_once  # Fetch's registration


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_large_pipelined_request_is_answered(loop: str):
    # A frame over the scratch buffer's 64 KiB gets a buffer of its own (a bytearray, as a
    # producer's batches do): with another request read behind it, the socket layer looks up
    # its API key to know whether to answer at once. Before: TypeError (a bytearray slice is
    # unhashable) and the connection closed, as every librdkafka produce connection was.
    # The dispatcher lets the loop run while it handles the large one, so the requests behind
    # it are read by the time its answer is queued.
    requests = _request(1, api_key=0, padding=200_000) + _request(2) + _request(3)
    answers, _ = LOOPS[loop](_exchange(requests, 3, answer_at_once=(1,), yield_before=(1,)))
    assert answers == [1, 2, 3]
