"""CreateTopics and Metadata over a plain socket, encoded with Samsa's own codec (kio)."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from samsa.protocol.codec import build, encode, reader, request_type, response_type

CREATE_TOPICS, METADATA = 19, 3
NOT_CONTROLLER, TOPIC_ALREADY_EXISTS = 41, 36
_RETRIABLE = {NOT_CONTROLLER, 5, 3, 6, 15}  # not controller, leader n/a, unknown topic, ...


def _call(sock: socket.socket, api_key: int, version: int, body: dict[str, Any],
          correlation: int) -> Any:
    req_type = request_type(api_key, version)
    header = struct.pack(">hhi", api_key, version, correlation)
    header += struct.pack(">h", 13) + b"samsa.testing"
    if req_type.__flexible__:
        header += b"\x00"
    payload = header + encode(build(req_type, body))
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    size = struct.unpack(">i", _read(sock, 4))[0]
    frame = _read(sock, size)
    resp_type = response_type(api_key, version)
    value, _ = reader(resp_type)(frame, 4 + (1 if resp_type.__flexible__ else 0))
    return value


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return buf


def _connect(address: str, timeout: float) -> socket.socket:
    host, port = address.strip().rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int,
                 config: dict[str, str], timeout: float) -> None:
    """Create `name` (an existing topic is an error) and wait until every partition has a
    leader that every broker of `bootstrap` knows."""
    addresses = bootstrap.split(",")
    deadline = time.monotonic() + timeout
    body = {"topics": [{"name": name, "num_partitions": partitions,
                        "replication_factor": replication_factor, "assignments": [],
                        "configs": [{"name": k, "value": v} for k, v in config.items()]}],
            "timeout": int(timeout * 1000), "validate_only": False}
    created = False
    while not created:
        for address in addresses:
            with _connect(address, timeout) as s:
                topic = _call(s, CREATE_TOPICS, 7, body, 1).topics[0]
            if topic.error_code == 0:
                created = True
                break
            if topic.error_code not in _RETRIABLE:
                raise RuntimeError(f"CreateTopics {name}: error {topic.error_code} "
                                   f"{topic.error_message or ''}".strip())
        if not created:
            if time.monotonic() > deadline:
                raise TimeoutError(f"CreateTopics {name}: no broker of {bootstrap} created it")
            time.sleep(0.1)
    for address in addresses:
        while not _has_leaders(address, name, partitions, timeout):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: no leader for every partition on {address}")
            time.sleep(0.05)


def _has_leaders(address: str, name: str, partitions: int, timeout: float) -> bool:
    with _connect(address, timeout) as s:
        resp = _call(s, METADATA, 12, {"topics": [{"name": name}],
                                       "allow_auto_topic_creation": False}, 2)
    t = resp.topics[0]
    return (t.error_code == 0 and len(t.partitions) == partitions
            and all(p.error_code == 0 and p.leader_id >= 0 for p in t.partitions))
