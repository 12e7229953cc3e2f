"""Avro schemas: fastavro parses them; the compatibility check is the Avro specification's
schema resolution (a reader can read what a writer wrote when every writer type resolves to a
reader type), as Avro's SchemaCompatibility implements it for Confluent's registry."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import fastavro

from . import AVRO, ParsedSchema, Reference

_PRIMITIVES = frozenset(
    ("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
# writer type -> the reader types it is promoted to (the specification's "Schema Resolution")
_PROMOTIONS = {
    "int": frozenset(("long", "float", "double")),
    "long": frozenset(("float", "double")),
    "float": frozenset(("double",)),
    "string": frozenset(("bytes",)),
    "bytes": frozenset(("string",)),
}


@dataclass
class AvroSchema:
    schema_type = AVRO
    parsed: Any
    named: dict[str, Any]
    canonical: str = field(default="")

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        assert isinstance(writer, AvroSchema)
        return _Resolution(self.named, writer.named).check(self.parsed, writer.parsed, "/")


def parse(schema: str, references: tuple[Reference, ...]) -> AvroSchema:
    named: dict[str, Any] = {}
    for ref in _flatten(references):
        fastavro.parse_schema(json.loads(ref.schema), named_schemas=named)
    try:
        raw = json.loads(schema)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    _check_required(raw)
    try:
        parsed = fastavro.parse_schema(raw, named_schemas=named)
    except fastavro.schema.SchemaParseException as exc:
        raise ValueError(str(exc)) from exc
    return AvroSchema(parsed, named, json.dumps(_plain(parsed), separators=(",", ":"),
                                                sort_keys=True))


def _plain(schema: Any) -> Any:
    """The parsed schema as identity compares it (as Avro's Schema.toString prints it): names
    full (the namespace folded in), a primitive written {"type": "string"} as "string", and
    without fastavro's bookkeeping."""
    if isinstance(schema, list):
        return [_plain(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    if set(schema) == {"type"} and schema["type"] in _PRIMITIVES:
        return schema["type"]
    return {k: _plain(v) if k in ("type", "items", "values", "fields") else v
            for k, v in schema.items() if not k.startswith("__") and k != "namespace"}


_REQUIRED = {"record": "fields", "error": "fields", "enum": "symbols", "fixed": "size"}


def _check_required(raw: Any) -> None:
    """What Avro requires and fastavro lets pass (a record without "fields")."""
    if isinstance(raw, list):
        for item in raw:
            _check_required(item)
    elif isinstance(raw, dict):
        kind = raw.get("type")
        needed = _REQUIRED.get(kind) if isinstance(kind, str) else None
        if needed and needed not in raw:
            raise ValueError(f"{raw['type']} {raw.get('name')!r} has no {needed!r}")
        for f in raw.get("fields", ()) if isinstance(raw.get("fields"), list) else ():
            _check_required(f.get("type") if isinstance(f, dict) else None)
        for key in ("type", "items", "values"):
            if isinstance(raw.get(key), (dict, list)):
                _check_required(raw[key])


def _flatten(references: tuple[Reference, ...]) -> list[Reference]:
    """The references and theirs, each after the ones it needs."""
    out: list[Reference] = []
    for ref in references:
        out.extend(_flatten(ref.references))
        out.append(ref)
    return out


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return str(schema["type"]) if not isinstance(schema["type"], (dict, list)) \
            else _kind(schema["type"])
    return str(schema)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Resolution:
    """One reader/writer check; `pending` holds the named pairs being checked, so a recursive
    type ends its own recursion (assumed compatible, as Avro does)."""

    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self.reader_names = reader_names
        self.writer_names = writer_names
        self.pending: set[tuple[str, str]] = set()

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self._resolve(reader, self.reader_names)
        writer = self._resolve(writer, self.writer_names)
        rk, wk = _kind(reader), _kind(writer)
        if wk == "union":
            return [e for i, branch in enumerate(writer)
                    for e in self.check(reader, branch, f"{path}{i}/")]
        if rk == "union":
            if any(not self.check(branch, writer, path) for branch in reader):
                return []
            return [f"READER_UNION_MISSING_WRITER_TYPE at {path}: the reader's union has no "
                    f"branch for the writer's {_describe(writer)}"]
        if rk != wk:
            if rk in _PROMOTIONS.get(wk, ()):
                return []
            return [f"TYPE_MISMATCH at {path}: reader type {rk} not compatible with writer "
                    f"type {wk}"]
        return self._same_kind(rk, reader, writer, path)

    def _resolve(self, schema: Any, names: dict[str, Any]) -> Any:
        while isinstance(schema, str) and schema not in _PRIMITIVES:
            schema = names[schema]
        if isinstance(schema, dict) and isinstance(schema["type"], (str, list)) \
                and schema["type"] not in ("record", "error", "enum", "fixed", "array", "map"):
            return self._resolve(schema["type"], names)  # a primitive with a logicalType
        return schema

    def _same_kind(self, kind: str, reader: Any, writer: Any, path: str) -> list[str]:
        if kind == "array":
            return self.check(reader["items"], writer["items"], path + "items/")
        if kind == "map":
            return self.check(reader["values"], writer["values"], path + "values/")
        if kind in ("record", "error", "enum", "fixed"):
            if not _names_match(reader, writer):
                return [f"NAME_MISMATCH at {path}: expected {_short(writer['name'])}, found "
                        f"{_short(reader['name'])}"]
        if kind == "fixed" and reader["size"] != writer["size"]:
            return [f"FIXED_SIZE_MISMATCH at {path}: expected {writer['size']}, found "
                    f"{reader['size']}"]
        if kind == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                return [f"MISSING_ENUM_SYMBOLS at {path}symbols: {missing}"]
        if kind in ("record", "error"):
            return self._record(reader, writer, path)
        return []

    def _record(self, reader: Any, writer: Any, path: str) -> list[str]:
        pair = (reader["name"], writer["name"])
        if pair in self.pending:
            return []
        self.pending.add(pair)
        try:
            errors: list[str] = []
            by_name = {f["name"]: f for f in writer["fields"]}
            for i, rf in enumerate(reader["fields"]):
                wf = next((by_name[n] for n in (rf["name"], *rf.get("aliases", ()))
                           if n in by_name), None)
                if wf is not None:
                    errors += self.check(rf["type"], wf["type"], f"{path}fields/{i}/type/")
                elif "default" not in rf:
                    errors.append(f"READER_FIELD_MISSING_DEFAULT_VALUE at {path}fields/{i}: "
                                  f"{rf['name']}")
            return errors
        finally:
            self.pending.discard(pair)


def _names_match(reader: Any, writer: Any) -> bool:
    name = _short(writer["name"])
    return _short(reader["name"]) == name or name in map(_short, reader.get("aliases", ()))


def _describe(schema: Any) -> str:
    kind = _kind(schema)
    return f"{kind} {_short(schema['name'])}" if isinstance(schema, dict) and "name" in schema \
        else kind
