"""Record-batch compression codecs (attribute bits 0-2), backed by cramjam.

Decompression can be bounded: a batch's records are inflated into a buffer of a guessed size
that grows (x4) up to the limit, and decompression stops where the buffer is full, so a small
batch that inflates to gigabytes (a decompression bomb) costs at most the limit in memory and
time. Kafka streams a batch's records instead and so needs no such bound; Samsa checks a
batch's records in memory, so it refuses a batch whose records exceed the limit
(`InflatedTooLarge`, INVALID_RECORD)."""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable

import cramjam

from samsa.protocol.errors import CorruptRecord, InvalidRecord

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# Java's SnappyOutputStream (xerial) framing: 8-byte magic, int32 version, int32 compatible
# version, then repeated {int32 compressed length, raw snappy block}.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size

# A batch's records may inflate to max.message.bytes, or to this where that is larger: the
# Java producer fills a batch to batch.size bytes by its estimate of the compressed size, so
# the records alone may well exceed max.message.bytes (a 1 MB batch.size compressed to 5 %:
# 20 MB). Kafka sets no such limit (it streams the records); this one bounds what a batch
# costs Samsa, which holds a batch's records in memory to check them.
RECORDS_LIMIT_FLOOR = 32 << 20
# Records up to this size are inflated into a buffer each thread keeps (allocated and zeroed
# once), then copied out; larger ones into new buffers, x4 each time (from 4x this), each
# attempt inflating from the start again.
SCRATCH_BYTES = 4 << 20
_GROWTH = 4
_scratch = threading.local()
_FULL = "failed to write whole buffer"  # cramjam's error when the output buffer is full


class InflatedTooLarge(InvalidRecord):
    """A compressed batch's records inflate past the limit."""


def records_limit(max_message_bytes: int) -> int:
    """The most a batch's records may inflate to in a log of this max.message.bytes."""
    return max(max_message_bytes, RECORDS_LIMIT_FLOOR)


def _too_large(codec: int, limit: int) -> InflatedTooLarge:
    return InflatedTooLarge(f"{CODEC_NAMES[codec]} batch inflates to more than {limit} bytes")


def _snappy_decompress(data: bytes, limit: int | None = None) -> bytes:
    """Raw snappy or xerial blocks; each block's length is declared ahead of it, so a limit is
    enforced before any block is inflated."""
    budget = -1 if limit is None else limit
    if data[:8] != _XERIAL_MAGIC:
        if budget >= 0 and cramjam.snappy.decompress_raw_len(data) > budget:
            raise _too_large(SNAPPY, budget)
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos, end = 16, len(data)
    while pos < end:
        if pos + 4 > end:
            raise CorruptRecord("truncated xerial snappy block header")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecord("truncated xerial snappy block")
        block = data[pos : pos + n]
        if budget >= 0 and len(out) + cramjam.snappy.decompress_raw_len(block) > budget:
            raise _too_large(SNAPPY, budget)
        out += cramjam.snappy.decompress_raw(block)
        pos += n
    return bytes(out)


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


Into = Callable[[bytes, bytearray | memoryview], int]
_INTO: dict[int, Into] = {
    GZIP: cramjam.gzip.decompress_into,
    LZ4: cramjam.lz4.decompress_into,  # the frame format (KafkaLZ4BlockOutputStream's)
    ZSTD: cramjam.zstd.decompress_into,
}


def _into(into: Into, data: bytes, out: bytearray | memoryview) -> int:
    """The bytes inflated into `out`; -1 if they do not fit."""
    try:
        return into(data, out)
    except Exception as e:  # cramjam's DecompressionError, or a full buffer
        if _FULL not in str(e):
            raise
    return -1


def _inflate(codec: int, data: bytes, limit: int) -> bytes | bytearray:
    """Decompress into buffers of at most limit + 1 bytes: a full one of that size means the
    records exceed the limit."""
    into = _INTO[codec]
    scratch: bytearray | None = getattr(_scratch, "buffer", None)
    if scratch is None:
        scratch = _scratch.buffer = bytearray(SCRATCH_BYTES)
    size = min(limit + 1, SCRATCH_BYTES)
    with memoryview(scratch)[:size] as view:
        n = _into(into, data, view)
        if 0 <= n <= limit:
            return bytes(view[:n])
    while size <= limit:
        size = min(limit + 1, size * _GROWTH)
        out = bytearray(size)
        n = _into(into, data, out)
        if 0 <= n <= limit:
            del out[n:]
            return out
        del out  # before a larger one, or before raising (the error must not hold it)
    raise _too_large(codec, limit)


def decompress(codec: int, data: bytes | memoryview,
               limit: int | None = None) -> bytes | bytearray:
    """Decompress a batch's records region; raises CorruptRecord on malformed input, and
    InflatedTooLarge if `limit` is given and the records inflate past it."""
    data = bytes(data)
    try:
        if codec == NONE:
            return data
        if codec == SNAPPY:
            return _snappy_decompress(data, limit)
        if codec in _INTO:
            if limit is not None:
                return _inflate(codec, data, limit)
            if codec == GZIP:
                return bytes(cramjam.gzip.decompress(data))
            if codec == LZ4:
                return bytes(cramjam.lz4.decompress(data))
            return bytes(cramjam.zstd.decompress(data))
    except (CorruptRecord, InvalidRecord):
        raise
    except Exception as e:  # cramjam raises its own DecompressionError / ValueError
        raise CorruptRecord(f"failed to decompress {CODEC_NAMES[codec]} batch: {e}") from e
    raise InvalidRecord(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return _snappy_compress(data)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise InvalidRecord(f"unknown compression codec {codec}")
