"""Read a request as Kafka's generated readers (`*Data.read`) read it.

kio's native reader refuses some values Kafka reads: a boolean byte other than 0 and 1 (Kafka:
`readByte() != 0`), a string that is not valid UTF-8 (Kafka: `new String(bytes, UTF_8)`, which
puts U+FFFD for each malformed sequence), a tagged field it does not know (Kafka keeps it
unread), a null in a tagged field whose default is null, and an int64 duration beyond what
kio holds (clamped here to ~292,000 years). It silently reads two others otherwise than Kafka:
a length below -1 in a nullable field (Kafka: a null) and a nullable struct's marker other
than -1 and 1 (Kafka: a null below zero, a struct else); the guard stops at those with
NotNormal. A client sending any of them gets an answer from Kafka, so it gets one here:
`decode_request` reads the frame as it came (the usual case, at no extra cost), and only when
kio or the guard balks rewrites it into the form Kafka would have read (`normal_form`) and
reads that. What Kafka refuses, the guard (guard.py) refuses in its words.
"""

from __future__ import annotations

import struct
from typing import Any, TypeVar

from kio.serial.readers import Reader

from .encoder import uvarint
from .guard import MalformedRequest, NotNormal, check_request, read_uvarint
from .kio_adapter import Entity, SchemaField, schema_fields

E = TypeVar("E", bound=Entity)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_FIXED = {"int8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "timedelta_i32": 4,
          "int64": 8, "datetime_i64": 8, "float64": 8, "uuid": 16}
# the longest duration kio reads (it counts microseconds in an int64, ~292,000 years): a
# longer one is as good as forever
_MAX_MS = (2**63 - 1) // 1000


def decode_request(entity: type[E], read: Reader[E], buf: Any, offset: int) -> E:
    """The request in `buf[offset:]`, or MalformedRequest with the reason Kafka would close
    the connection for (lengths and nulls by the guard, anything else kio still refuses once
    the frame is in Kafka's normal form)."""
    try:
        check_request(entity, buf, offset)
        return read(buf, offset)[0]
    except MalformedRequest:
        raise
    except NotNormal as exc:  # the guard saw a value kio reads otherwise than Kafka
        refused: Exception = exc
    except Exception as exc:  # kio raises assorted errors; the retry below decides
        refused = exc
    fixed = normal_form(entity, buf, offset)
    if fixed is not None:
        try:
            check_request(entity, fixed, offset)
            return read(fixed, offset)[0]
        except MalformedRequest:
            raise
        except Exception as exc:
            refused = exc
    raise MalformedRequest(f"{type(refused).__name__}: {refused}")


def normal_form(entity: type[Entity], buf: Any, offset: int) -> bytes | None:
    """`buf` with the request at `offset` rewritten as Kafka reads it (booleans 0/1, strings
    valid UTF-8, nulls as -1, struct markers -1/1, durations clamped, unknown tags left out),
    None when that changes nothing. Lengths are checked again here: the guard may have stopped
    before them (NotNormal)."""
    out = bytearray(buf[:offset])
    try:
        pos = _entity(entity, buf, offset, out)
    except (IndexError, struct.error) as exc:
        raise MalformedRequest(f"truncated request: {exc}") from None
    out += buf[pos:]
    return None if out == buf else bytes(out)


def _entity(entity: type[Entity], buf: Any, pos: int, out: bytearray) -> int:
    flexible = bool(getattr(entity, "__flexible__", False))
    fields = schema_fields(entity)
    for s in fields:
        if s.tag is None:
            pos = _field(s, flexible, buf, pos, out)
    if not flexible:
        return pos
    count, pos = read_uvarint(buf, pos, len(buf))
    tagged = {s.tag: s for s in fields if s.tag is not None}
    kept = []
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, len(buf))
        size, pos = read_uvarint(buf, pos, len(buf))
        _fits(buf, pos, size)
        known = tagged.get(tag)
        start, pos = pos, pos + size
        if known is None:
            continue  # Kafka keeps it aside, unread (kio refuses a tag it does not know)
        content = bytearray()  # read as Kafka reads it; its size follows what it became
        _field(known, True, buf[:pos], start, content)
        if content == b"\x00" and known.field.default is None:
            continue  # a null where null is the default: as if left out (kio refuses a
            # tagged null, which it writes by leaving the field out)
        kept.append(uvarint(tag) + uvarint(len(content)) + content)
    out += uvarint(len(kept))
    for entry in kept:
        out += entry
    return pos


def _field(s: SchemaField, flexible: bool, buf: Any, pos: int, out: bytearray) -> int:
    if s.is_array:
        n, pos = _read_length(buf, pos, flexible, True)
        _fits(buf, pos, n)  # every element takes a byte at least
        _write_length(out, n, flexible, True)
        for _ in range(max(n, 0)):
            pos = _element(s, flexible, buf, pos, out)
        return pos
    if s.entity is not None and s.nullable:
        null = buf[pos] >= 0x80  # a negative signed byte
        out.append(0xFF if null else 0x01)
        return pos + 1 if null else _entity(s.entity, buf, pos + 1, out)
    return _element(s, flexible, buf, pos, out)


def _element(s: SchemaField, flexible: bool, buf: Any, pos: int, out: bytearray) -> int:
    """One value of field `s` (the field itself, or an element of it when it is an array)."""
    if s.entity is not None:
        return _entity(s.entity, buf, pos, out)
    kind = s.kafka_type
    if kind == "bool":
        out.append(1 if buf[pos] else 0)
        return pos + 1
    if kind == "timedelta_i64":
        (ms,) = _I64.unpack_from(buf, pos)
        out += _I64.pack(max(-_MAX_MS, min(ms, _MAX_MS)))
        return pos + 8
    if kind in _FIXED:
        end = pos + _FIXED[kind]
        out += buf[pos:end]
        return end
    wide = kind != "string"
    n, pos = _read_length(buf, pos, flexible, wide)
    _fits(buf, pos, n)
    _write_length_of(out, buf, pos, n, flexible, wide, kind == "string")
    return pos + max(n, 0)


def _write_length_of(out: bytearray, buf: Any, pos: int, n: int, flexible: bool, wide: bool,
                     string: bool) -> None:
    """A string or bytes value of length `n` at `pos`: a string's bytes as valid UTF-8."""
    if n < 0:
        _write_length(out, -1, flexible, wide)
        return
    value = bytes(buf[pos:pos + n])
    if string:
        value = value.decode("utf-8", errors="replace").encode("utf-8")
    _write_length(out, len(value), flexible, wide)
    out += value


def _fits(buf: Any, pos: int, n: int) -> None:
    if n > len(buf) - pos:  # the walk behind the guard's first stop is not checked yet
        raise MalformedRequest(f"length {n} exceeds the {len(buf) - pos} bytes left")


def _read_length(buf: Any, pos: int, flexible: bool, wide: bool) -> tuple[int, int]:
    if flexible:
        n, pos = read_uvarint(buf, pos, len(buf))
        return n - 1, pos
    if wide:
        return _I32.unpack_from(buf, pos)[0], pos + 4
    return _I16.unpack_from(buf, pos)[0], pos + 2


def _write_length(out: bytearray, n: int, flexible: bool, wide: bool) -> None:
    n = max(n, -1)  # any negative length is a null
    if flexible:
        out += uvarint(n + 1)
    else:
        out += (_I32 if wide else _I16).pack(n)
