"""Varints of record batches: zig-zag encoded, as protobuf's sint32/sint64 (Kafka's
ByteUtils.readVarint/readVarlong)."""

from __future__ import annotations

from samsa.protocol.errors import InvalidRecord

Buf = bytes | bytearray | memoryview


def read_varint(buf: Buf, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        try:
            b = buf[pos]
        except IndexError:
            raise InvalidRecord("truncated varint") from None
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidRecord("varint too long")
    return (raw >> 1) ^ -(raw & 1), pos


def write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)
    raw &= 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
