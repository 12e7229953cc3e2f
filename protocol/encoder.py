"""Responses encoded straight from the handlers' dicts.

The bytes are exactly those of `encode(build(entity, data))` (codec.py: kio's frozen
dataclasses, then kio's writer); tests/protocol/test_encoder.py checks that for every response
type the broker serves, and the test suite runs every broker with SAMSA_CHECK_ENCODER=1, which
compares the two on every response. Why: profiling a Produce request (docs/performance.md,
"Where the time goes") put `build` plus kio's writer at ~30 % of the broker's CPU per request,
most of it constructing dataclasses and validating each primitive's range on the way out.

A step is compiled once per kio entity type and field; values may be what handlers use (ints for
milliseconds and error codes, dicts for nested entities) or kio's own types (timedelta,
datetime, ErrorCode, dataclass instances, which go through kio's writer unchanged).
"""

from __future__ import annotations

import datetime
import io
import struct
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from kio.serial import entity_writer

from .codec import FieldPlan, absent_value, convert, plans
from .framing import Part
from .generated import bind, make_function
from .kio_adapter import Entity, SchemaField, TaggedField, schema_fields, tagged_fields

# Writes one value to the buffer; what it returns is ignored (a lambda's `buf.write` count).
Step = Callable[["_Buffer", Any], object]
_PACK = {k: struct.Struct(f">{c}").pack for k, c in {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B", "uint16": "H",
    "uint32": "I", "uint64": "Q", "float64": "d",
}.items()}  # fmt: skip
_I16, _I32, _I64 = _PACK["int16"], _PACK["int32"], _PACK["int64"]


_UVARINTS = [bytes((n,)) for n in range(0x80)]  # nearly every length and count


def uvarint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return _UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Byte values at least this big (Fetch records) are not copied into the output: they become
# parts of their own, written to the socket as they are (writev).
LARGE_VALUE = 32 * 1024


class _Buffer(io.BytesIO):
    """The output: finished parts, plus the bytes being written; and the non-zero error codes
    written (for the error metrics: the encoder visits every field anyway, so nothing walks
    the response a second time)."""

    parts: list[Part]
    errors: list[int]

    @classmethod
    def new(cls) -> _Buffer:
        """An empty one (BytesIO's own __init__; one in Python cost ~0.3 us per response)."""
        buf = cls()
        buf.parts, buf.errors = [], []
        return buf

    def write_large(self, value: Part) -> None:
        self.parts.append(self.getvalue())
        self.parts.append(value)
        self.seek(0)
        self.truncate()


class Encoded(dict[str, Any]):
    """A nested entity's dict together with its bytes, encoded once for reuse (a handler's
    cached response piece: Metadata's topics). The encoder writes the bytes as they are; to
    everything else (kio's `build`, the encoder check) it is the dict it was made from."""

    __slots__ = ("data", "errors")

    def __init__(self, fields: Mapping[str, Any], data: bytes, errors: list[int]) -> None:
        super().__init__(fields)
        self.data = data
        self.errors = errors


def encode_entity(entity: type[Entity], fields: Mapping[str, Any]) -> Encoded:
    """`fields` as an `Encoded` of `entity` (a nested entity of some response version)."""
    buf = _Buffer.new()
    entity_step(entity)(buf, fields)
    buf.parts.append(buf.getvalue())
    data = bytearray()
    for part in buf.parts:
        if not isinstance(part, bytes | memoryview):  # a Region is sent from its file
            raise TypeError("an encoded entity cannot hold records sent from a file")
        data += part
    return Encoded(fields, bytes(data), buf.errors)


def encode_response(
    entity: type[Entity], data: Mapping[str, Any]
) -> tuple[list[Part], list[int]]:
    """The response as parts to write in order (large values are not copied, and a Region,
    records sent from a file, stays one), and its non-zero error codes (top level and nested,
    in dicts)."""
    buf = _Buffer.new()
    entity_step(entity)(buf, data)
    buf.parts.append(buf.getvalue())
    return buf.parts, buf.errors


@cache
def entity_step(entity: type[Entity]) -> Step:
    """The writer of `entity` as one generated function: each field's write in place
    (a fused run's struct, a fixed-size primitive, an error code, an array's length and loop)
    rather than a closure per field called in turn; strings, nested entities and the tagged
    section stay calls."""
    env: dict[str, Any] = {"Encoded": Encoded, "Mapping": Mapping, "uvarint": uvarint,
                           "kio_write": entity_writer(entity)}
    lines = [
        "def write_entity(buf, data):",
        "    if type(data) is Encoded:  # written before: its bytes",
        "        buf.write(data.data)",
        "        buf.errors.extend(data.errors)",
        "        return",
        "    if type(data) is not dict and not isinstance(data, Mapping):  # a kio instance",
        "        kio_write(buf, data)",
        "        return",
        "    write, get = buf.write, data.get",
    ]
    lines += ["    " + line for line in _fixed_lines(entity, env)]
    if entity.__flexible__:
        env["tagged"] = _tagged_step(entity)
        lines.append("    tagged(buf, data)")
    write_entity: Step = make_function(lines, env, f"encoder of {entity.__name__}")
    return write_entity


# Fixed-size primitives written as one struct: (struct code, value conversion or None).
_FUSABLE: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    **{k: (c, None) for k, c in {
        "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint8": "B", "uint16": "H",
        "uint32": "I", "uint64": "Q", "float64": "d", "error_code": "h"}.items()},
    "timedelta_i32": ("i", lambda v: _millis(v)),
    "timedelta_i64": ("q", lambda v: _millis(v)),
    "datetime_i64": ("q", lambda v: -1 if v is None else _millis(v)),
}  # fmt: skip


def _fixed_lines(entity: type[Entity], env: dict[str, Any]) -> list[str]:
    """Source lines writing the untagged fields, in order (`write` and `get` bound); a run of
    two or more fixed-size primitives (Produce's index, error code, base offset, append time,
    log start offset) is packed with one struct: the same bytes, a fraction of the calls.
    What a line uses is put in `env` under a name of its own."""
    lines: list[str] = []
    run: list[SchemaField] = []

    def close_run() -> None:
        if len(run) > 1:
            lines.extend(_fused_lines(entity, list(run), env))
        else:
            for s in run:
                lines.extend(_field_lines(entity, s, env))
        run.clear()

    for s in schema_fields(entity):
        if s.tag is not None:
            continue
        if s.entity is None and not s.is_array and s.kafka_type in _FUSABLE:
            run.append(s)
            continue
        close_run()
        lines.extend(_field_lines(entity, s, env))
    close_run()
    return lines


def _fused_lines(entity: type[Entity], run: list[SchemaField], env: dict[str, Any]
                 ) -> list[str]:
    entity_plans = plans(entity)
    pack = bind(env, struct.Struct(">" + "".join(_FUSABLE[s.kafka_type][0] for s in run)).pack)
    values = []
    for s in run:
        got = f"get({s.name!r}, {bind(env, absent_value(entity_plans[s.name]))})"
        conv = _FUSABLE[s.kafka_type][1]
        values.append(got if conv is None else f"{bind(env, conv)}({got})")
    lines = [f"v = ({', '.join(values)},)", f"write({pack}(*v))"]
    for i, s in enumerate(run):
        if s.kafka_type == "error_code":
            lines += [f"if v[{i}]:", f"    buf.errors.append(int(v[{i}]))"]
    return lines


def _field_lines(entity: type[Entity], schema: SchemaField, env: dict[str, Any]
                 ) -> list[str]:
    flexible = entity.__flexible__
    got = f"get({schema.name!r}, {bind(env, absent_value(plans(entity)[schema.name]))})"
    kafka_type = schema.kafka_type
    if schema.entity is None and not schema.is_array:
        if kafka_type == "error_code":
            return [f"v = {got}", f"write({bind(env, _I16)}(v))", "if v:",
                    "    buf.errors.append(int(v))"]
        if (fixed := _PACK.get(kafka_type)) is not None:
            return [f"write({bind(env, fixed)}({got}))"]
    if schema.entity is not None and schema.is_array:
        item = bind(env, entity_step(schema.entity))
        null = b"\x00" if flexible else b"\xff\xff\xff\xff"
        count = "uvarint(len(items) + 1)" if flexible else f"{bind(env, _I32)}(len(items))"
        return [f"items = {got}", "if items is None:", f"    write({null!r})", "else:",
                f"    write({count})", "    for item in items:", f"        {item}(buf, item)"]
    return [f"{bind(env, _value_writer(schema, flexible))}(buf, {got})"]


def _value_writer(schema: SchemaField, flexible: bool) -> Step:
    if schema.entity is not None:
        item = entity_step(schema.entity)
        if not schema.is_array and schema.nullable:
            item = _nullable_entity(item)
    else:
        item = _primitive(schema.kafka_type, flexible, schema.name)
    if schema.is_array:
        return _array(item, flexible)
    return item


def _nullable_entity(write_entity: Step) -> Step:
    def step(buf: _Buffer, value: Any) -> None:  # KIP-893 marker, as kio writes it
        if value is None:
            buf.write(b"\xff")
        else:
            buf.write(b"\x01")
            write_entity(buf, value)

    return step


def _array(item: Step, flexible: bool) -> Step:
    def step(buf: _Buffer, items: Any) -> None:
        if items is None:
            buf.write(b"\x00" if flexible else b"\xff\xff\xff\xff")
            return
        buf.write(uvarint(len(items) + 1) if flexible else _I32(len(items)))
        for value in items:
            item(buf, value)

    return step


def _millis(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


def _primitive(kafka_type: str, flexible: bool, name: str) -> Step:  # noqa: C901 - a type table
    if kafka_type == "error_code":
        return _error_code
    if (fixed := _PACK.get(kafka_type)) is not None:
        return lambda buf, v: buf.write(fixed(v))
    if kafka_type == "bool":
        return lambda buf, v: buf.write(b"\x01" if v else b"\x00")
    if kafka_type == "uuid":
        return lambda buf, v: buf.write(v.bytes if v is not None else bytes(16))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        pack_ms = _I32 if kafka_type == "timedelta_i32" else _I64
        return lambda buf, v: buf.write(pack_ms(_millis(v)))
    if kafka_type == "datetime_i64":
        return lambda buf, v: buf.write(_I64(-1 if v is None else _millis(v)))
    if kafka_type in ("string", "bytes", "records"):
        return _bytes_writer(kafka_type == "string", flexible)
    raise NotImplementedError(f"no writer for {kafka_type!r} ({name})")


def _error_code(buf: _Buffer, v: Any) -> None:
    buf.write(_I16(v))
    if v:
        buf.errors.append(int(v))


def _bytes_writer(is_string: bool, flexible: bool) -> Step:
    def step(buf: _Buffer, v: Any) -> None:
        if v is None:
            buf.write(b"\x00" if flexible else b"\xff\xff" if is_string else b"\xff\xff\xff\xff")
            return
        if isinstance(v, str):
            v = v.encode()
        n = len(v)
        buf.write(uvarint(n + 1) if flexible else _I16(n) if is_string else _I32(n))
        if n >= LARGE_VALUE or not isinstance(v, (bytes, bytearray, memoryview)):
            buf.write_large(v)
        else:
            buf.write(v)

    return step


def _tagged_step(entity: type[Entity]) -> Step:
    """Tagged fields in tag order, each written only when it differs from its default, as
    kio does. They are rare, so each present one is converted and written by kio itself."""
    entity_plans = plans(entity)
    fields: list[tuple[TaggedField, FieldPlan]] = [
        (t, entity_plans[t.name]) for t in tagged_fields(entity)
    ]
    if not fields:
        return lambda buf, data: buf.write(b"\x00")
    names = [field.name for field, _ in fields]

    def step(buf: _Buffer, data: Mapping[str, Any]) -> None:
        for name in names:
            if name in data:
                break
        else:  # none given (Produce's current leader, most of the time): an empty section
            buf.write(b"\x00")
            return
        out = io.BytesIO()  # kio's writers: error codes in tagged fields are not counted
        count = 0
        for field, plan in fields:
            if field.name not in data:
                continue  # the default, which kio leaves out
            value = convert(plan, data[field.name])
            if field.is_default(value):
                continue
            field.write(out, value)
            count += 1
        buf.write(uvarint(count))
        buf.write(out.getvalue())

    return step
