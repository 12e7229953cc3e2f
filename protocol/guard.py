"""Check a request's lengths before kio's native reader sees it.

kio's Rust reader reserves memory for an array from the length the client sent, so a frame
claiming 2^32 elements aborts the whole process. This walker follows the same schema without
building anything and refuses any string, bytes or array length larger than the bytes left in
the frame (every element takes at least one byte), so the native reader only sees frames
whose lengths are plausible.

It also refuses what Kafka's generated readers (`*Data.read`) refuse, with their words: a null
(any negative length) in a field the version does not make nullable ("non-nullable field X
was serialized as null": kio would hand a handler None for an array) and a string longer than
0x7fff bytes. A negative length of a nullable field is a null to Kafka, whatever its value;
so is a nullable struct's marker byte below zero, any other marker a struct. kio reads a
length below -1 and a marker other than -1 and 1 differently: the walk stops there with
NotNormal, for the frame to be rewritten as Kafka reads it (lenient.py) and walked again.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache

from .generated import make_function
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


class NotNormal(Exception):
    """kio would read this frame otherwise than Kafka does; lenient.normal_form rewrites it."""


def check_request(entity: type[Entity], buf: bytes, offset: int) -> None:
    """Raise MalformedRequest unless every length in `buf[offset:]` fits in the frame."""
    try:
        _walker(entity)(buf, offset, len(buf))
    except (IndexError, struct.error) as exc:
        raise MalformedRequest(f"truncated request: {exc}") from None


def read_uvarint(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
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
        n, pos = read_uvarint(buf, pos, end)
        return n - 1, pos
    if wide:
        return _I32.unpack_from(buf, pos)[0], pos + 4
    return _I16.unpack_from(buf, pos)[0], pos + 2


def _fits(n: int, pos: int, end: int) -> None:
    if n < -1 or (n > 0 and pos + n > end):
        _refuse(n, pos, end)


@cache
def _walker(entity: type[Entity]) -> Step:
    """The walk of `entity` as one generated function: every field's step written out in
    place, nested entities inline, instead of a closure per field called in turn (this runs
    on every request; a Produce's walk took 2.1 us as closures)."""
    env = {"_length": _length, "_refuse": _refuse, "_tagged": _tagged,
           "MalformedRequest": MalformedRequest, "NotNormal": NotNormal}
    lines = ["def walk(buf, pos, end):"]
    _entity_lines(entity, lines, 1)
    lines.append("    return pos")
    walk: Step = make_function(lines, env, f"guard of {entity.__name__}")
    return walk


def _entity_lines(entity: type[Entity], out: list[str], indent: int) -> None:
    """Source lines that walk one `entity` from `pos` (untagged fields in order, then the
    tagged section of a flexible one), refusing a walk that ends past `end`."""
    pad = "    " * indent
    flexible = bool(getattr(entity, "__flexible__", False))
    fixed = 0  # bytes of the fixed-size fields since the last other field: skipped at once
    for s in schema_fields(entity):
        if s.tag is not None:
            continue  # tagged fields live in the tagged section
        if s.entity is None and not s.is_array and s.kafka_type in _FIXED:
            fixed += _FIXED[s.kafka_type]
            continue
        if fixed:
            out.append(f"{pad}pos += {fixed}")
            fixed = 0
        _field_lines(s, flexible, out, indent)
    if fixed:
        out.append(f"{pad}pos += {fixed}")
    if flexible:  # usually empty: one zero byte
        out.append(f"{pad}pos = pos + 1 if pos < end and not buf[pos] else "
                   f"_tagged(buf, pos, end)")
    out.append(f"{pad}if pos > end:")
    out.append(f"{pad}    raise MalformedRequest('request shorter than its fields')")


def _length_lines(pad: str, flexible: bool, wide: bool, unit: int, out: list[str],
                  name: str, nullable: bool, string: bool = False) -> None:
    """n = the length (negative: null) at pos, refused unless n units fit in the frame, and
    refused when negative unless the field is `nullable` (Kafka's check, its words)."""
    if flexible:  # a one-byte uvarint, the usual length
        out.append(f"{pad}if pos < end and buf[pos] < 0x80:")
        out.append(f"{pad}    n = buf[pos] - 1")
        out.append(f"{pad}    pos += 1")
        out.append(f"{pad}else:")
        out.append(f"{pad}    n, pos = _length(buf, pos, end, True, {wide})")
    else:
        out.append(f"{pad}n, pos = _length(buf, pos, end, False, {wide})")
    fits = f"n > 0 and pos + n * {unit} > end"
    out.append(f"{pad}if {fits}:" if nullable else f"{pad}if n < 0 or ({fits}):")
    out.append(f"{pad}    _refuse(n, pos, end, {name!r})")
    if nullable and not flexible:  # a null to Kafka, not to kio
        out.append(f"{pad}elif n < -1:")
        out.append(f"{pad}    raise NotNormal('null length {{n}}')")
    if string:
        out.append(f"{pad}if n > 0x7fff:")
        out.append(f"{pad}    raise MalformedRequest("
                   f"f'string field {name} had invalid length {{n}}')")


def _field_lines(s: SchemaField, flexible: bool, out: list[str], indent: int) -> None:
    pad = "    " * indent
    if s.entity is not None:
        inner = s.entity
        if s.is_array:
            _length_lines(pad, flexible, True, 1, out, s.name, s.nullable)
            out.append(f"{pad}for _ in range(n):")
            _entity_lines(inner, out, indent + 1)
        elif s.nullable:  # a nullable struct (KIP-893): -1 for null, else 1, then the struct
            out.append(f"{pad}if pos >= end:")
            out.append(f"{pad}    raise MalformedRequest('request shorter than its fields')")
            out.append(f"{pad}if buf[pos] == 0xFF:")
            out.append(f"{pad}    pos += 1")
            out.append(f"{pad}elif buf[pos] != 0x01:")
            out.append(f"{pad}    raise NotNormal(f'nullable struct marker {{buf[pos]}}')")
            out.append(f"{pad}else:")
            out.append(f"{pad}    pos += 1")
            _entity_lines(inner, out, indent + 1)
        else:
            _entity_lines(inner, out, indent)
        return
    kafka_type = s.kafka_type
    if kafka_type in _FIXED:
        unit = _FIXED[kafka_type]
        if not s.is_array:
            out.append(f"{pad}pos += {unit}")
            return
        _length_lines(pad, flexible, True, unit, out, s.name, s.nullable)
        out.append(f"{pad}if n > 0:")
        out.append(f"{pad}    pos += n * {unit}")
        return
    if kafka_type not in ("string", "bytes", "records"):
        raise TypeError(f"unknown kafka_type {kafka_type!r}")
    wide = kafka_type in ("bytes", "records")
    name = s.name
    if s.is_array:  # an array of strings, which are never null (Kafka's "X element")
        _length_lines(pad, flexible, True, 1, out, name, s.nullable)
        out.append(f"{pad}for _ in range(n):")
        pad += "    "
        name += " element"
    _length_lines(pad, flexible, wide, 1, out, name, s.nullable and not s.is_array,
                  kafka_type == "string")
    out.append(f"{pad}if n > 0:")
    out.append(f"{pad}    pos += n")


def _refuse(n: int, pos: int, end: int, name: str = "") -> None:
    if n < 0:
        raise MalformedRequest(f"non-nullable field {name} was serialized as null")
    raise MalformedRequest(f"length {n} of {name or 'a field'} exceeds the {end - pos} bytes "
                           f"left")


def _tagged(buf: bytes, pos: int, end: int) -> int:
    """Past a tagged-field section: a count, then per field a tag, a size and its bytes."""
    count, pos = read_uvarint(buf, pos, end)
    _fits(count, pos, end)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos, end)
        size, pos = read_uvarint(buf, pos, end)
        _fits(size, pos, end)
        pos += size
    return pos
