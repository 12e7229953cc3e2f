"""Requests of any schema, written field by field from kio's schema classes, with a null
anywhere: kio's own writer refuses a null where the schema forbids one, which is what the
decoding tests must send.

    tree = sample(entity)                      # every field set, every array one element
    for path, field in null_paths(entity):     # each string, bytes, array, struct that can
        body = encode_body(entity, with_null(tree, path))   # hold a null on the wire
"""

from __future__ import annotations

import copy
import struct
import uuid
from dataclasses import dataclass
from typing import Any

from samsa.protocol.kio_adapter import Entity, SchemaField, schema_fields

_PACK = {
    "bool": ">B", "int8": ">b", "int16": ">h", "uint16": ">H", "error_code": ">h",
    "int32": ">i", "timedelta_i32": ">i", "int64": ">q", "timedelta_i64": ">q",
    "datetime_i64": ">q", "float64": ">d",
}
_VALUE: dict[str, Any] = {
    "bool": True, "string": "x", "bytes": b"x", "records": b"",
    "uuid": uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), "float64": 1.0,
}
Path = tuple[str | int, ...]
UNKNOWN_TAGS = "unknown tags"  # a key of an entity's dict: [(tag, content)] written as well


@dataclass(frozen=True)
class Forged:
    """A value written as it is, not as Kafka's writers would: `length` for an array, a string
    or bytes (no content follows), or `marker` (then `struct`, unless None) for a nullable
    struct."""

    length: int | None = None
    marker: int | None = None
    struct: dict[str, Any] | None = None


def sample(entity: type[Entity]) -> dict[str, Any]:
    """Every field of `entity` with a plain value: 1 for numbers, "x" for strings, one element
    in each array, each nullable struct present, tagged fields included."""
    return {s.name: _sample_field(s) for s in schema_fields(entity)}


def _sample_field(s: SchemaField) -> Any:
    one = sample(s.entity) if s.entity is not None else _VALUE.get(s.kafka_type, 1)
    return [one] if s.is_array else one


def null_paths(entity: type[Entity], path: Path = ()) -> list[tuple[Path, SchemaField]]:
    """Every place in `sample(entity)` whose wire form has a null: strings, bytes, arrays and
    nullable structs (whether or not the version allows the null), array elements of strings
    and bytes (never nullable)."""
    out: list[tuple[Path, SchemaField]] = []
    for s in schema_fields(entity):
        here = (*path, s.name)
        if s.is_array or s.kafka_type in ("string", "bytes", "records") or (
                s.entity is not None and s.nullable):
            out.append((here, s))
        if s.is_array and s.entity is None and s.kafka_type in ("string", "bytes"):
            out.append(((*here, 0), s))
        if s.entity is not None:
            out.extend(null_paths(s.entity, (*here, 0) if s.is_array else here))
    return out


def value_paths(entity: type[Entity], kafka_type: str, path: Path = ()) -> list[Path]:
    """Every place in `sample(entity)` holding one value of `kafka_type` (an array's: its
    element)."""
    out: list[Path] = []
    for s in schema_fields(entity):
        here = (*path, s.name)
        if s.entity is not None:
            out.extend(value_paths(s.entity, kafka_type, (*here, 0) if s.is_array else here))
        elif s.kafka_type == kafka_type:
            out.append((*here, 0) if s.is_array else here)
    return out


def with_null(tree: dict[str, Any], path: Path) -> dict[str, Any]:
    """A copy of `tree` with the value at `path` replaced by None."""
    return with_value(tree, path, None)


def with_value(tree: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    """A copy of `tree` with `value` at `path` (for a string: bytes are written as they are;
    for a bool: an int is written as that byte)."""
    out = copy.deepcopy(tree)
    node: Any = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def encode_body(entity: type[Entity], value: dict[str, Any]) -> bytes:
    """`value` (as `sample` makes it) written as Kafka writes `entity`; None is a null."""
    out = bytearray()
    _entity(entity, value, out)
    return bytes(out)


def _entity(entity: type[Entity], value: dict[str, Any], out: bytearray) -> None:
    flexible = bool(getattr(entity, "__flexible__", False))
    tagged = []
    for s in schema_fields(entity):
        if s.tag is not None:
            if s.name in value:
                content = bytearray()
                _field(s, True, value[s.name], out=content)
                tagged.append((s.tag, bytes(content)))
            continue
        _field(s, flexible, value[s.name], out)
    if flexible:
        tagged += value.get(UNKNOWN_TAGS, [])
        out += _uvarint(len(tagged))
        for tag, content in sorted(tagged):
            out += _uvarint(tag) + _uvarint(len(content)) + content


def _field(s: SchemaField, flexible: bool, value: Any, out: bytearray) -> None:
    if isinstance(value, Forged):
        if value.marker is not None:
            out.append(value.marker)
            if value.struct is not None:
                assert s.entity is not None
                _entity(s.entity, value.struct, out)
        else:
            _raw_length(out, value.length or 0, flexible, s.is_array or s.kafka_type != "string")
        return
    if s.is_array:
        _length(out, None if value is None else len(value), flexible, True)
        for v in value or ():
            _one(s, flexible, v, out)
    elif s.entity is not None and s.nullable:
        out.append(0xFF if value is None else 0x01)
        if value is not None:
            _entity(s.entity, value, out)
    else:
        _one(s, flexible, value, out)


def _one(s: SchemaField, flexible: bool, value: Any, out: bytearray) -> None:
    if s.entity is not None:
        if value is None:  # a non-nullable struct has no null on the wire
            raise ValueError(f"{s.name} cannot be written as null")
        _entity(s.entity, value, out)
    elif s.kafka_type == "uuid":
        out += (value or uuid.UUID(int=0)).bytes
    elif s.kafka_type in _PACK:
        out += struct.pack(_PACK[s.kafka_type], int(value) if s.kafka_type == "bool" else value)
    else:
        data = value.encode() if isinstance(value, str) else value
        _length(out, None if data is None else len(data), flexible, s.kafka_type != "string")
        out += data or b""


def _length(out: bytearray, n: int | None, flexible: bool, wide: bool) -> None:
    _raw_length(out, -1 if n is None else n, flexible, wide)


def _raw_length(out: bytearray, n: int, flexible: bool, wide: bool) -> None:
    if flexible:
        out += _uvarint(n + 1)
    else:
        out += struct.pack(">i" if wide else ">h", n)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def frame(api_key: int, version: int, flexible: bool, body: bytes, correlation: int = 1,
          client_id: bytes = b"samples") -> bytes:
    """A request frame (no size prefix): header v1, or v2 when `flexible`, then `body`."""
    header = struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id
    return header + (b"\x00" if flexible else b"") + body
