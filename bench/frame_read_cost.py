"""The server's CPU per request frame read off a socket: asyncio's StreamReader (readexactly of
the size, then of the frame; what the broker used before) against the broker's ClientConnection
(broker/network/connection.py), on uvloop.

A client process sends size-prefixed frames of --size bytes back to back (about 1 MiB per
send) for --mib MiB, then closes; the server reads every frame and does nothing with it. A
figure is the server thread's CPU time over the frames read. The two readers alternate for
--rounds rounds; printed: each round, and the medians. No assertions: this measures.

    .venv/bin/python bench/frame_read_cost.py --size 16384
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import struct
import time

import uvloop

from samsa.broker.network.connection import ClientConnection


def _send(port: int, size: int, count: int) -> None:
    frame = struct.pack(">i", size) + os.urandom(size)
    per_send = max(1, (1 << 20) // len(frame))
    chunk = frame * per_send
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for _ in range(max(1, count // per_send)):
            sock.sendall(chunk)
        sock.shutdown(socket.SHUT_WR)


def _size_of(prefix: bytes) -> int:
    size: int = struct.unpack(">i", prefix)[0]
    return size


async def _read_with_stream(sock: socket.socket) -> int:
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
    frames = 0
    try:
        while True:
            await reader.readexactly(_size_of(await reader.readexactly(4)))
            frames += 1
    except asyncio.IncompleteReadError:
        pass
    writer.close()
    return frames


async def _read_with_connection(sock: socket.socket) -> int:
    connection = ClientConnection()
    await asyncio.get_running_loop().connect_accepted_socket(lambda: connection, sock)
    frames = 0
    try:
        while True:
            await connection.read_frame(_size_of)
            frames += 1
    except asyncio.IncompleteReadError:
        pass
    connection.close()
    return frames


READERS = {"StreamReader": _read_with_stream, "ClientConnection": _read_with_connection}


async def _round(reader: str, size: int, count: int) -> float:
    """Microseconds of server CPU per frame."""
    loop = asyncio.get_running_loop()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    client = multiprocessing.Process(target=_send,
                                     args=(listener.getsockname()[1], size, count))
    client.start()
    sock, _ = await loop.sock_accept(listener)
    started = time.thread_time()
    frames = await READERS[reader](sock)
    cpu = time.thread_time() - started
    await asyncio.sleep(0.05)  # the close goes out before the loop blocks in join
    client.join()
    listener.close()
    return cpu / frames * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=16_384, help="frame size in bytes")
    ap.add_argument("--mib", type=float, default=256, help="MiB sent per round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    count = max(1, int(args.mib * 2**20) // (args.size + 4))
    figures: dict[str, list[float]] = {name: [] for name in READERS}
    for n in range(args.rounds):
        for name, values in figures.items():
            values.append(uvloop.run(_round(name, args.size, count)))
            print(f"round {n}: {name:16} {values[-1]:9.2f} us per frame", flush=True)
    for name, values in figures.items():
        print(f"{args.size:>9} B {name:16} median {statistics.median(values):9.2f} us per frame "
              f"({min(values):.2f}-{max(values):.2f})")


if __name__ == "__main__":
    main()
