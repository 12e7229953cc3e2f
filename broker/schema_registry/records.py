"""The records of the `_schemas` topic in Confluent Schema Registry's format: JSON keys with a
`keytype` (SCHEMA, CONFIG, MODE, DELETE_SUBJECT) and JSON values; a null value (a tombstone) is
a hard delete, which compaction then removes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .formats import AVRO


@dataclass(frozen=True)
class SchemaRef:
    """A reference as the REST API and the topic spell it."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass
class SchemaValue:
    """One version of a subject (a SCHEMA record's value)."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[SchemaRef, ...] = ()
    deleted: bool = False
    canonical: str = field(default="", compare=False)  # set by the store when it parses it

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != AVRO:  # Confluent leaves AVRO, the default, out
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return out

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SchemaValue:
        return cls(doc["subject"], int(doc["version"]), int(doc["id"]), doc["schema"],
                   doc.get("schemaType") or AVRO, parse_references(doc.get("references")),
                   bool(doc.get("deleted", False)))


def parse_references(refs: Any) -> tuple[SchemaRef, ...]:
    return tuple(SchemaRef(r["name"], r["subject"], int(r["version"])) for r in refs or ())


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": "CONFIG", "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": "MODE", "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0})


def encode(doc: dict[str, Any] | None) -> bytes | None:
    return None if doc is None else _dump(doc)


def decode(data: bytes | None) -> dict[str, Any] | None:
    return None if data is None else json.loads(data)
