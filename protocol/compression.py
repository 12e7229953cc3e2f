"""Record-batch compression codecs (attribute bits 0-2), backed by cramjam."""

from __future__ import annotations

import struct

import cramjam

from samsa.protocol.errors import CorruptRecord, InvalidRecord

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# Java's SnappyOutputStream (xerial) framing: 8-byte magic, int32 version, int32 compatible
# version, then repeated {int32 compressed length, raw snappy block}.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size


def _snappy_decompress(data: bytes) -> bytes:
    if data[:8] != _XERIAL_MAGIC:
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
        out += cramjam.snappy.decompress_raw(data[pos : pos + n])
        pos += n
    return bytes(out)


def _snappy_compress(data: bytes) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
        out += struct.pack(">i", len(block))
        out += block
    return bytes(out)


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Decompress a batch's records region; raises CorruptRecord on malformed input."""
    data = bytes(data)
    try:
        if codec == NONE:
            return data
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptRecord:
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
