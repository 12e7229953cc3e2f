"""value_schema_id_prefix mode: each record's value is a schema id (magic byte 0 and 4 bytes,
Confluent's wire format) and an Avro body; the columns are the fields of the record schemas the
values carry, with the record's metadata. A schema with a new field (an evolution registered in
the schema registry) adds that column to the table. Avro records of primitive fields, optional
ones as a union with null; other schemas are refused. Runs in the worker thread but for
`fetch_schemas`, which asks the registry on the event loop."""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from samsa.protocol.records import Record

from ..schema_registry import SchemaRegistry
from ..schema_registry import errors as registry_errors

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]

_ID = struct.Struct(">I")
METADATA = ("partition", "offset", "timestamp")


class UnsupportedValue(Exception):
    """A value this mode cannot turn into columns (no schema id, not an Avro record...)."""


def schema_id(value: bytes | None) -> int:
    if value is None or len(value) < 5 or value[0] != 0:
        raise UnsupportedValue("the value does not start with a schema id")
    return int(_ID.unpack_from(value, 1)[0])


async def fetch_schemas(registry: SchemaRegistry | None, ids: Iterable[int]) -> dict[int, str]:
    """The Avro schema text of each id, from this broker's registry (or its primary's)."""
    if registry is None:
        raise UnsupportedValue("value_schema_id_prefix needs schema.registry.listeners")
    found: dict[int, str] = {}
    for sid in ids:
        try:
            await registry.registry.log.catch_up()
            versions = registry.store.by_id(sid)
            text = versions[0].schema if versions else None
            kind = versions[0].schema_type if versions else None
        except registry_errors.RegistryError as exc:
            if not exc.forwardable:
                raise
            answer: Any = await registry.forwarder.get(f"/schemas/ids/{sid}")
            text = answer["schema"] if answer else None
            kind = (answer or {}).get("schemaType") or "AVRO"
        if text is None or kind != "AVRO":
            raise UnsupportedValue(f"schema id {sid}: not a registered Avro schema")
        found[sid] = text
    return found


def _arrow_type(avro: Any) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of a field's Avro type."""
    import pyarrow as pa
    if isinstance(avro, list):
        kinds = [t for t in avro if t != "null"]
        if len(kinds) != 1 or len(kinds) == len(avro):
            raise UnsupportedValue(f"union {avro}: only [null, T] is supported")
        return _arrow_type(kinds[0])[0], True
    primitive = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
                 "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
                 "bytes": pa.binary()}
    name = avro.get("type") if isinstance(avro, dict) else avro
    if name not in primitive:
        raise UnsupportedValue(f"Avro type {avro}: only primitive fields are supported")
    return primitive[name], False


def arrow_schema(avro_text: str) -> pa.Schema:
    """The record metadata and the Avro record's fields as Arrow columns."""
    import pyarrow as pa
    avro = json.loads(avro_text)
    if not isinstance(avro, dict) or avro.get("type") != "record":
        raise UnsupportedValue("the value schema is not an Avro record")
    fields = [pa.field("partition", pa.int32(), nullable=False),
              pa.field("offset", pa.int64(), nullable=False),
              pa.field("timestamp", pa.timestamp("us", tz="UTC"), nullable=False)]
    for f in avro["fields"]:
        if f["name"] in METADATA:
            raise UnsupportedValue(f"field {f['name']} would hide the record's {f['name']}")
        kind, nullable = _arrow_type(f["type"])
        fields.append(pa.field(f["name"], kind, nullable=nullable))
    return pa.schema(fields)


def decode(rows: list[tuple[int, Record]], schemas: dict[int, str]) -> list[dict[str, Any]]:
    """Each value decoded with the schema its id names, with the record's metadata."""
    from fastavro import parse_schema, schemaless_reader
    parsed = {sid: parse_schema(json.loads(text)) for sid, text in schemas.items()}
    out: list[dict[str, Any]] = []
    for partition, r in rows:
        assert r.value is not None  # schema_id() let it through
        body = schemaless_reader(io.BytesIO(r.value[5:]), parsed[schema_id(r.value)], None)
        assert isinstance(body, dict)
        out.append({**body, "partition": partition, "offset": r.offset,
                    "timestamp": r.timestamp * 1000})
    return out
