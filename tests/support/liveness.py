"""What another client sees of a broker under attack: a thread that sends ApiVersions on a
connection of its own every `interval_s`, keeping each answer's latency, and samples the
broker process's resident memory (VmRSS) between requests."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def api_versions_v0(correlation: int) -> bytes:
    """A framed ApiVersions v0 request (key 18, client id "t")."""
    body = struct.pack(">hhih", 18, 0, correlation, 1) + b"t"
    return struct.pack(">i", len(body)) + body


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


class Liveness:
    """`latencies` of the answers in seconds, and `peak_mb`, the largest RSS sampled."""

    def __init__(self, port: int, pid: int, interval_s: float = 0.02) -> None:
        self.pid = pid
        self.peak_mb = rss_mb(pid)
        self.latencies: list[float] = []
        self._interval_s = interval_s
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            started = time.monotonic()
            self._sock.sendall(api_versions_v0(n))
            assert struct.unpack(">i", read_frame(self._sock)[:4])[0] == n
            self.latencies.append(time.monotonic() - started)
            self.peak_mb = max(self.peak_mb, rss_mb(self.pid))
            time.sleep(self._interval_s)

    @contextmanager
    def running(self) -> Iterator[Liveness]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(30)
            self._sock.close()
        assert not self._thread.is_alive()
