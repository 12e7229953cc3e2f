"""A tiny raw Kafka client for protocol tests: kio-encoded requests over a plain socket."""

from __future__ import annotations

import socket
import struct
from typing import Any

from samsa.protocol.codec import build, encode, reader, request_type, response_type
from samsa.protocol.framing import API_VERSIONS_KEY


class WireClient:
    client_id = b"wire-test"  # the request header's client id (also without __init__)

    def __init__(self, bootstrap: str, timeout: float = 10.0,
                 client_id: bytes = b"wire-test") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation = 0
        self.client_id = client_id

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode_request(self, api_key: int, version: int, body: dict[str, Any]) -> tuple[int, bytes]:
        self._correlation += 1
        req_type = request_type(api_key, version)
        header = struct.pack(">hhi", api_key, version, self._correlation)
        header += struct.pack(">h", len(self.client_id)) + self.client_id
        if req_type.__flexible__:
            header += b"\x00"
        payload = header + encode(build(req_type, body))
        return self._correlation, struct.pack(">i", len(payload)) + payload

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def read_response(self, api_key: int, version: int, correlation: int) -> Any:
        frame = self.read_frame()
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == correlation, f"correlation id {got} != expected {correlation}"
        resp_type = response_type(api_key, version)
        offset = 4
        if resp_type.__flexible__ and api_key != API_VERSIONS_KEY:
            offset += 1  # empty tagged fields of response header v1
        value, _ = reader(resp_type)(frame, offset)
        return value

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        correlation, data = self.encode_request(api_key, version, body)
        self.send_raw(data)
        return self.read_response(api_key, version, correlation)

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True if the broker closed the connection (EOF) within `timeout`."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def _read_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("connection closed by broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)
