"""JSON Schemas: jsonschema checks a schema against its draft's meta-schema; the compatibility
check covers the cases Confluent documents for objects and values: a reader can read what a
writer wrote when every document the writer's schema accepts is accepted by the reader's.
Local "$ref"s ("#/definitions/...", "#/$defs/...") are followed; a reference to another
schema is compared by its text."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from . import JSON, ParsedSchema, Reference

_ANY: dict[str, Any] = {}


@dataclass
class JsonSchema:
    schema_type = JSON
    raw: Any
    canonical: str

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        assert isinstance(writer, JsonSchema)
        return _Check(self.raw, writer.raw).check(self.raw, writer.raw, "#")


def parse(schema: str, references: tuple[Reference, ...]) -> JsonSchema:
    try:
        raw = json.loads(schema)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(raw, (dict, bool)):
        raise ValueError("a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(raw).check_schema(raw)
    except jsonschema.SchemaError as exc:
        raise ValueError(exc.message) from exc
    return JsonSchema(raw, json.dumps(raw, separators=(",", ":"), sort_keys=True))


def _types(schema: dict[str, Any]) -> set[str] | None:
    """The JSON types the schema allows (None: any)."""
    t = schema.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _closed(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is False


class _Check:
    def __init__(self, reader_root: Any, writer_root: Any) -> None:
        self.roots = (reader_root, writer_root)
        self.pending: set[tuple[int, int]] = set()

    def _deref(self, schema: Any, root: Any) -> Any:
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) \
                and schema["$ref"].startswith("#") and seen < 32:
            target = root
            for part in schema["$ref"][1:].strip("/").split("/"):
                if part:
                    target = target[part.replace("~1", "/").replace("~0", "~")]
            schema, seen = target, seen + 1
        return _ANY if schema is True else schema

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self._deref(reader, self.roots[0])
        writer = self._deref(writer, self.roots[1])
        if reader is False or writer is False or reader == writer:
            return [] if writer is False or reader == writer else \
                [f"TYPE_CHANGED at {path}: the reader accepts nothing"]
        pair = (id(reader), id(writer))
        if pair in self.pending:
            return []
        self.pending.add(pair)
        try:
            return self._compare(reader, writer, path)
        finally:
            self.pending.discard(pair)

    def _compare(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        if "$ref" in reader or "$ref" in writer:
            return [] if reader.get("$ref") == writer.get("$ref") else \
                [f"TYPE_CHANGED at {path}: reference {writer.get('$ref')} changed"]
        errors = self._type(reader, writer, path)
        if errors:
            return errors
        errors += self._enum(reader, writer, path)
        errors += self._combined(reader, writer, path)
        if "properties" in reader or "properties" in writer or "required" in reader \
                or "additionalProperties" in reader:
            errors += self._object(reader, writer, path)
        if "items" in reader or "items" in writer:
            errors += self.check(reader.get("items", _ANY), writer.get("items", _ANY),
                                 path + "/items")
        return errors

    def _type(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        rt, wt = _types(reader), _types(writer)
        if rt is None:
            return []
        if wt is None:
            return [f"TYPE_NARROWED at {path}: the reader allows only {sorted(rt)}"]
        widened = rt | ({"integer"} if "number" in rt else set())
        if wt <= widened:
            return []
        return [f"TYPE_CHANGED at {path}: writer type {sorted(wt)}, reader type {sorted(rt)}"]

    @staticmethod
    def _enum(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        if "enum" not in reader:
            return []
        if "enum" not in writer:
            return [f"ENUM_ARRAY_NARROWED at {path}: the reader takes only {reader['enum']}"]
        missing = [v for v in writer["enum"] if v not in reader["enum"]]
        return [f"ENUM_ARRAY_NARROWED at {path}: {missing} removed"] if missing else []

    def _combined(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        errors: list[str] = []
        for key in ("oneOf", "anyOf"):
            if key not in reader:
                continue
            for i, branch in enumerate(writer.get(key, [writer])):
                if all(self.check(rb, branch, f"{path}/{key}/{i}") for rb in reader[key]):
                    errors.append(f"COMBINED_TYPE_SUBSCHEMAS_CHANGED at {path}/{key}: no "
                                  f"reader branch reads the writer's branch {i}")
        return errors

    def _object(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        errors: list[str] = []
        rprops, wprops = reader.get("properties", {}), writer.get("properties", {})
        for name, rprop in rprops.items():
            where = f"{path}/properties/{name}"
            if name in wprops:
                errors += self.check(rprop, wprops[name], where)
            elif not _closed(writer):
                extra = writer.get("additionalProperties", True)
                if self._deref(rprop, self.roots[0]) not in (_ANY,) and (
                        extra is True or self.check(rprop, extra, where)):
                    errors.append(f"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at {where}")
        for name, wprop in wprops.items():
            if name in rprops:
                continue
            where = f"{path}/properties/{name}"
            extra = reader.get("additionalProperties", True)
            if extra is False:
                errors.append(f"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at {where}")
            elif extra is not True and self.check(extra, wprop, where):
                errors.append(f"PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL at "
                              f"{where}")
        added = set(reader.get("required", ())) - set(writer.get("required", ()))
        errors += [f"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL at {path}/required: {n}"
                   for n in sorted(added) if "default" not in self._deref(
                       rprops.get(n, _ANY), self.roots[0])]
        if _closed(reader) and not _closed(writer):
            errors.append(f"ADDITIONAL_PROPERTIES_REMOVED at {path}/additionalProperties")
        return errors
