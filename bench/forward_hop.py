"""The CPU of one forwarded request: what a shard-per-core broker (one broker id, one shared
port, partitions owned by shards) pays when a request arrives on a process that does not own
its partition and goes to the owner over a local socket (issue 51, docs/design/cores.md).

Two processes on uvloop: the forwarder writes a frame of --size bytes (the request) on a Unix
or loopback TCP socket, the owner reads it whole and answers --answer bytes (the response the
forwarder then relays), --in-flight at a time. Printed: both processes' CPU (user + system, from
getrusage) per round trip, the median of --rounds rounds. No broker work is done: the
figure is the hop alone, to set against the broker's CPU per request (bench/batch_cost.py).

    .venv/bin/python bench/forward_hop.py --size 16384 --in-flight 5
    .venv/bin/python bench/forward_hop.py --size 200 --transport tcp
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import struct
import tempfile
import time
from multiprocessing import Process, Queue

import uvloop

HEADER = struct.Struct(">i")


class _Framed(asyncio.Protocol):
    """Reads length-prefixed frames and calls on_frame with each one's length."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 4:
            (size,) = HEADER.unpack_from(self.buffer)
            if len(self.buffer) < 4 + size:
                return
            del self.buffer[:4 + size]
            self.on_frame(size)

    def on_frame(self, size: int) -> None:
        raise NotImplementedError


class _Owner(_Framed):
    def __init__(self, answer: bytes) -> None:
        super().__init__()
        self.answer = answer

    def on_frame(self, size: int) -> None:
        assert self.transport is not None
        self.transport.write(self.answer)


class _Forwarder(_Framed):
    def __init__(self, done: asyncio.Queue[int]) -> None:
        super().__init__()
        self.done = done

    def on_frame(self, size: int) -> None:
        self.done.put_nowait(size)


def _frame(size: int) -> bytes:
    return HEADER.pack(size) + b"x" * size


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _serve(address: str | tuple[str, int], answer: int, ready: Queue, cpu: Queue) -> None:
    loop = asyncio.get_running_loop()
    reply = _frame(answer)
    if isinstance(address, str):
        server = await loop.create_unix_server(lambda: _Owner(reply), address)
    else:
        server = await loop.create_server(lambda: _Owner(reply), *address)
    ready.put(server.sockets[0].getsockname())
    while True:  # a CPU reading per round, asked for by the forwarder
        await loop.run_in_executor(None, cpu.get)
        cpu.put(("owner", _cpu()))
        await asyncio.sleep(0.05)


def _owner_main(address: str | tuple[str, int], answer: int, ready: Queue, cpu: Queue) -> None:
    uvloop.run(_serve(address, answer, ready, cpu))


async def _round(proto: _Forwarder, frame: bytes, requests: int, in_flight: int) -> None:
    assert proto.transport is not None
    sent = min(in_flight, requests)
    for _ in range(sent):
        proto.transport.write(frame)
    for _ in range(requests):
        await proto.done.get()
        if sent < requests:
            proto.transport.write(frame)
            sent += 1


async def _forward(args: argparse.Namespace, address: object, cpu: Queue, owner_cpu: Queue
                   ) -> list[float]:
    loop = asyncio.get_running_loop()
    done: asyncio.Queue[int] = asyncio.Queue()
    if isinstance(address, str):
        _, proto = await loop.create_unix_connection(lambda: _Forwarder(done), address)
    else:
        host, port = address  # type: ignore[misc]
        _, proto = await loop.create_connection(lambda: _Forwarder(done), host, port)
        proto.transport.get_extra_info("socket").setsockopt(  # type: ignore[union-attr]
            socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    frame = _frame(args.size)
    per_round: list[float] = []
    for r in range(args.rounds + 1):  # the first round warms up
        cpu.put("ask")
        _, before = owner_cpu.get()
        mine = _cpu()
        await _round(proto, frame, args.requests, args.in_flight)
        cpu.put("ask")
        _, after = owner_cpu.get()
        if r:
            per_round.append((_cpu() - mine + after - before) / args.requests)
    return per_round


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=16384, help="request bytes (default 16384)")
    p.add_argument("--answer", type=int, default=60, help="response bytes (default 60)")
    p.add_argument("--in-flight", type=int, default=5)
    p.add_argument("--requests", type=int, default=20000, help="round trips a round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--transport", choices=("unix", "tcp"), default="unix")
    args = p.parse_args()
    ready: Queue = Queue()
    to_owner: Queue = Queue()
    from_owner: Queue = Queue()
    with tempfile.TemporaryDirectory() as tmp:
        address: str | tuple[str, int] = (os.path.join(tmp, "owner.sock")
                                         if args.transport == "unix" else ("127.0.0.1", 0))
        owner = Process(target=_owner_main, args=(address, args.answer, ready, _Pipe(to_owner,
                        from_owner)), daemon=True)
        owner.start()
        bound = ready.get(timeout=30)
        target = bound if args.transport == "unix" else tuple(bound)
        started = time.perf_counter()
        rounds = uvloop.run(_forward(args, target, to_owner, from_owner))
        owner.terminate()
    us = [r * 1e6 for r in rounds]
    print(f"{args.transport} hop, {args.size} B request, {args.answer} B answer, "
          f"{args.in_flight} in flight: {statistics.median(us):.1f} us CPU per round trip "
          f"(both processes; rounds {', '.join(f'{u:.1f}' for u in us)}; "
          f"{time.perf_counter() - started:.1f} s)")


class _Pipe:
    """The owner's side of the two queues: get a request for a reading, put the reading."""

    def __init__(self, requests: Queue, readings: Queue) -> None:
        self.requests = requests
        self.readings = readings

    def get(self) -> object:
        return self.requests.get()

    def put(self, item: object) -> None:
        self.readings.put(item)


if __name__ == "__main__":
    main()
