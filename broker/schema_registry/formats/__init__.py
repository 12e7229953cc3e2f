"""The schema formats the registry accepts: each parses a schema (with the schemas it
references) into a ParsedSchema, which knows its identity and checks whether it can read data
written with another version of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..errors import invalid_schema

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
TYPES = (JSON, PROTOBUF, AVRO)  # GET /schemas/types lists them so


@dataclass(frozen=True)
class Reference:
    """A schema the one being parsed imports (its `name` there), already looked up."""

    name: str
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()


class ParsedSchema(Protocol):
    schema_type: str

    @property
    def canonical(self) -> str:
        """The schema's text in a form that is equal for equal schemas (the registry's id
        reuse and lookups compare it)."""
        ...

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        """Why data written with `writer` cannot be read with this schema (empty: it can)."""
        ...


def parse(schema_type: str, schema: str, references: tuple[Reference, ...] = ()) -> ParsedSchema:
    """The schema parsed; RegistryError 42201 when it is not a valid schema of its type."""
    from . import avro, json_schema, protobuf  # each imports its library only when used

    parsers: dict[str, Callable[[str, tuple[Reference, ...]], ParsedSchema]] = {
        AVRO: avro.parse, JSON: json_schema.parse, PROTOBUF: protobuf.parse}
    if schema_type not in parsers:
        raise invalid_schema(f"unknown schema type {schema_type!r}")
    try:
        return parsers[schema_type](schema, references)
    except (ValueError, TypeError, KeyError) as exc:  # the libraries' parse errors
        raise invalid_schema(str(exc) or type(exc).__name__) from exc
