"""Size-prefixed frames and request/response headers.

Request header v1 (non-flexible APIs) / v2 (flexible); response header v0 / v1, except that the
ApiVersions response always uses v0 (KIP-511: clients parse it before they know our versions).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader

API_VERSIONS_KEY = 18

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_CORRELATION = struct.Struct(">i")
_read_v1 = entity_reader(RequestHeaderV1)
_read_v2 = entity_reader(RequestHeaderV2)


class FrameError(Exception):
    """The frame cannot be accepted; the connection is closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def frame_size(prefix: bytes, max_size: int) -> int:
    """Size from a 4-byte prefix, refusing oversized frames before anything is allocated."""
    (size,) = _SIZE.unpack(prefix)
    if size < 8:
        raise FrameError(f"frame of {size} bytes is too small for a request header")
    if size > max_size:
        raise FrameError(f"frame of {size} bytes exceeds socket.request.max.bytes={max_size}")
    return size


def peek_key_version(frame: bytes) -> tuple[int, int, int]:
    api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    (correlation_id,) = _CORRELATION.unpack_from(frame, 4)
    return api_key, api_version, correlation_id


def read_request_header(frame: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """Decode the header; returns it and the offset where the body starts."""
    header, size = (_read_v2 if flexible else _read_v1)(frame, 0)
    return (
        RequestHeader(
            header.request_api_key,
            header.request_api_version,
            header.correlation_id,
            header.client_id,
        ),
        size,
    )


def response_header(correlation_id: int, flexible: bool) -> bytes:
    # v1 adds an empty tagged-field section (one zero byte).
    return _CORRELATION.pack(correlation_id) + (b"\x00" if flexible else b"")


def frame(parts: list[bytes]) -> bytes:
    body = b"".join(parts)
    return _SIZE.pack(len(body)) + body
