"""Check a request's lengths before kio's native reader sees it.

kio's Rust reader reserves memory for an array from the length the client sent, so a frame
claiming 2^32 elements aborts the whole process. This walker follows the same schema without
building anything and refuses any string, bytes or array length larger than the bytes left in
the frame (every element takes at least one byte), so the native reader only sees frames
whose lengths are plausible.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache

from .kio_adapter import Entity, SchemaField, schema_fields

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

Step = Callable[[bytes, int, int], int]


class MalformedRequest(ValueError):
    pass


def check_request(entity: type[Entity], buf: bytes, offset: int) -> None:
    """Raise MalformedRequest unless every length in `buf[offset:]` fits in the frame."""
    try:
        _walker(entity)(buf, offset, len(buf))
    except (IndexError, struct.error) as exc:
        raise MalformedRequest(f"truncated request: {exc}") from None


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 28:
            raise MalformedRequest("bad unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _length(buf: bytes, pos: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """(length or -1 for null, new position) of a string (wide=False) or bytes/array."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    if wide:
        return _I32.unpack_from(buf, pos)[0], pos + 4
    return _I16.unpack_from(buf, pos)[0], pos + 2


def _fits(n: int, pos: int, end: int, unit: int = 1) -> None:
    if n < -1 or (n > 0 and pos + n * unit > end):
        raise MalformedRequest(f"length {n} exceeds the {end - pos} bytes left")


@cache
def _walker(entity: type[Entity]) -> Step:
    flexible = bool(getattr(entity, "__flexible__", False))
    # tagged fields live in the tagged section, walked below
    steps: list[Step] = []
    fixed = 0  # bytes of the fixed-size fields since the last other step: one step for them
    for s in schema_fields(entity):
        if s.tag is not None:
            continue
        if s.entity is None and not s.is_array and s.kafka_type in _FIXED:
            fixed += _FIXED[s.kafka_type]
            continue
        if fixed:
            steps.append(_skip(fixed))
            fixed = 0
        steps.append(_field_step(s, flexible))
    if fixed:
        steps.append(_skip(fixed))

    def walk(buf: bytes, pos: int, end: int) -> int:
        for step in steps:
            pos = step(buf, pos, end)
        if flexible:
            count, pos = _uvarint(buf, pos, end)
            _fits(count, pos, end)
            for _ in range(count):
                _, pos = _uvarint(buf, pos, end)
                size, pos = _uvarint(buf, pos, end)
                _fits(size, pos, end)
                pos += size
        if pos > end:
            raise MalformedRequest("request shorter than its fields")
        return pos

    return walk


def _skip(size: int) -> Step:
    return lambda buf, pos, end: pos + size


def _field_step(schema: SchemaField, flexible: bool) -> Step:
    if schema.entity is not None:
        inner = _walker(schema.entity)
        if not schema.is_array:
            return _nullable_entity(inner) if schema.nullable else inner

        def entity_array(buf: bytes, pos: int, end: int) -> int:
            n, pos = _length(buf, pos, end, flexible, wide=True)
            _fits(n, pos, end)
            for _ in range(max(n, 0)):
                pos = inner(buf, pos, end)
            return pos

        return entity_array
    kafka_type = schema.kafka_type
    element = _primitive_step(kafka_type, flexible)
    if not schema.is_array:
        return element
    unit = _FIXED.get(kafka_type, 1)

    def primitive_array(buf: bytes, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, wide=True)
        _fits(n, pos, end, unit)
        for _ in range(max(n, 0)):
            pos = element(buf, pos, end)
        return pos

    return primitive_array


def _nullable_entity(inner: Step) -> Step:
    """A nullable struct (KIP-893): a marker byte, -1 for null or 1, then the struct."""

    def nullable(buf: bytes, pos: int, end: int) -> int:
        if pos >= end:
            raise MalformedRequest("request shorter than its fields")
        marker = buf[pos]
        if marker == 0xFF:
            return pos + 1
        if marker != 0x01:
            raise MalformedRequest(f"bad nullable struct marker {marker}")
        return inner(buf, pos + 1, end)

    return nullable


def _primitive_step(kafka_type: str, flexible: bool) -> Step:
    if kafka_type in _FIXED:
        size = _FIXED[kafka_type]
        return lambda buf, pos, end: pos + size
    wide = kafka_type in ("bytes", "records")
    if kafka_type not in ("string", "bytes", "records"):
        raise TypeError(f"unknown kafka_type {kafka_type!r}")

    def variable(buf: bytes, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, wide)
        _fits(n, pos, end)
        return pos + max(n, 0)

    return variable
