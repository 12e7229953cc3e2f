"""Size-prefixed frames and request/response headers.

Request header v1 (non-flexible APIs) / v2 (flexible); response header v0 / v1, except that the
ApiVersions response always uses v0 (KIP-511: clients parse it before they know our versions).
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Protocol

from .errors import ErrorCode
from .guard import MalformedRequest, read_uvarint

API_VERSIONS_KEY = 18

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_CORRELATION = struct.Struct(">i")
_HEADER_START = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_API_VERSIONS_V0_ONE_KEY = struct.Struct(">hihhh")


class Region(Protocol):
    """A value whose bytes are not in memory: records a Fetch response sends from a segment
    file (storage/file_region.py's FileRegion), which the socket layer writes. Framing and
    encoding need only its length."""

    def __len__(self) -> int: ...


# A piece of a response to write in order: bytes, or a Region written by the socket layer.
Part = bytes | memoryview | Region


class FrameError(Exception):
    """The frame cannot be accepted; the connection is closed."""


class RequestHeader(NamedTuple):  # a tuple: one is made per request
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def frame_size(prefix: bytes, max_size: int) -> int:
    """Size from a 4-byte prefix, refusing oversized frames before anything is allocated."""
    size: int = _SIZE.unpack(prefix)[0]
    if size < 8:
        raise FrameError(f"frame of {size} bytes is too small for a request header")
    if size > max_size:
        raise FrameError(f"frame of {size} bytes exceeds socket.request.max.bytes={max_size}")
    return size


def peek_key_version(frame: bytes | memoryview) -> tuple[int, int, int]:
    api_key, api_version = _KEY_VERSION.unpack_from(frame, 0)
    (correlation_id,) = _CORRELATION.unpack_from(frame, 4)
    return api_key, api_version, correlation_id


def read_request_header(frame: bytes | memoryview, flexible: bool
                        ) -> tuple[RequestHeader, int]:
    """Decode the header; returns it and the offset where the body starts.

    Parsed here rather than by kio's native reader so that hostile lengths in the header's
    tagged fields are rejected (FrameError) instead of being allocated.
    """
    end = len(frame)
    if end < 10:
        raise FrameError("request header truncated")
    api_key, api_version, correlation_id, n = _HEADER_START.unpack_from(frame, 0)
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > end:
            raise FrameError("client id longer than the frame")
        client_id = bytes(frame[pos : pos + n]).decode("utf-8", errors="replace")
        pos += n
    if flexible and pos < end and frame[pos] == 0:  # no tagged fields: the usual header
        pos += 1
    elif flexible:
        try:
            count, pos = read_uvarint(frame, pos, end)
            for _ in range(count):
                _tag, pos = read_uvarint(frame, pos, end)
                size, pos = read_uvarint(frame, pos, end)
                if pos + size > end:
                    raise FrameError("tagged field longer than the frame")
                pos += size
        except MalformedRequest:
            raise FrameError("bad varint in request header") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def response_header(correlation_id: int, flexible: bool) -> bytes:
    # v1 adds an empty tagged-field section (one zero byte).
    return _CORRELATION.pack(correlation_id) + (b"\x00" if flexible else b"")


def frame_parts(parts: list[Part]) -> list[Part]:
    """A frame (size prefix, then `parts`) as buffers to write in order, not joined."""
    return [_SIZE.pack(sum(map(len, parts))), *parts]  # (map: no generator a response)


def api_versions_unsupported(max_version: int) -> bytes:
    """The ApiVersions v0 body answering a version the broker lacks (KIP-511): error
    UNSUPPORTED_VERSION and one entry, ApiVersions itself with its supported range, so the
    client can retry with a version it and the broker share. It goes after a v0 response
    header (`response_header(correlation_id, flexible=False)`)."""
    return _API_VERSIONS_V0_ONE_KEY.pack(
        ErrorCode.unsupported_version, 1, API_VERSIONS_KEY, 0, max_version
    )
