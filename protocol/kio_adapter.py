"""The one module that uses kio's private API (`kio.serial._*`).

Samsa walks kio's generated schema classes itself: to check a request's lengths before kio's
native reader allocates them (guard.py), to build entities from handler dicts (codec.py) and to
encode responses straight from those dicts (encoder.py). Each needs the same facts about a
schema field, which kio only computes in private modules: is it a nested entity, an array, a
nullable value, a tagged field, and how does kio write a tagged field and decide that it holds
its default (and so is left out). They are read here, once per entity type, into
`SchemaField` and `TaggedField`; tests/unit/test_kio_adapter.py pins every assumption, so a kio
release that moves or changes them fails this module and its test, not the wire path.
"""

from __future__ import annotations

import dataclasses
import io
from functools import cache
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import Writer, write_tagged_field
from kio.static.primitive import uvarint
from kio.static.protocol import Entity

__all__ = ["Entity", "SchemaField", "TaggedField", "schema_fields", "tagged_fields"]


@dataclasses.dataclass(frozen=True, slots=True)
class SchemaField:
    """One field of a kio entity, as kio's own reader and writer see it."""

    field: dataclasses.Field[Any]  # the dataclass field (name, default, default_factory)
    kafka_type: str  # "int32", "string", "error_code", ...; "" for a nested entity
    entity: type[Entity] | None  # the nested entity type (struct or array of structs)
    is_array: bool
    nullable: bool  # None is a valid value (a nullable string, array or struct)
    tag: int | None  # the tag of a tagged field, None for a field of the fixed part

    @property
    def name(self) -> str:
        return self.field.name


@cache
def schema_fields(entity: type[Entity]) -> tuple[SchemaField, ...]:
    """Every field of `entity`, in declaration order (the order of the fixed part on the
    wire); tagged fields have `tag` set."""
    out = []
    for f in dataclasses.fields(entity):
        kind = classify_field(f)
        nested = kind.type_ if isinstance(kind, EntityField | EntityTupleField) else None
        tag = get_field_tag(f)
        out.append(
            SchemaField(
                field=f,
                kafka_type=f.metadata.get("kafka_type", ""),
                entity=nested,
                is_array=kind.is_array,
                nullable=is_optional(f),
                tag=None if tag is None else int(tag),
            )
        )
    return tuple(out)


class TaggedField:
    """A tagged field of a flexible entity, written and left out exactly as kio does."""

    __slots__ = ("_default", "_implicit", "_tag", "_writer", "name", "tag")

    def __init__(self, schema: SchemaField) -> None:
        assert schema.tag is not None, schema.name
        f = schema.field
        self.name = schema.name
        self.tag = schema.tag
        self._tag = uvarint(schema.tag)
        self._default: object = f.default
        # kio's own rule: a field without a declared default is left out when it equals its
        # type's implicit default (for a nested entity: the entity of its fields' defaults).
        self._implicit: object = (
            get_tagged_field_default(f) if f.default is dataclasses.MISSING else dataclasses.MISSING
        )
        self._writer: Writer[Any] = get_field_writer(
            f, flexible=True, is_request_header=False, is_tag=True
        )

    def is_default(self, value: object) -> bool:
        """True when kio leaves the field out (the value is its default)."""
        if self._default is not dataclasses.MISSING:
            return bool(value == self._default)
        return bool(value == self._implicit)

    def write(self, out: io.BytesIO, value: object) -> None:
        """The tag, the value's size and the value (KIP-482), by kio's writer."""
        write_tagged_field(buffer=out, tag=self._tag, writer=self._writer, value=value)


@cache
def tagged_fields(entity: type[Entity]) -> tuple[TaggedField, ...]:
    """The tagged fields of `entity` in tag order (the order kio writes them)."""
    tagged = [TaggedField(s) for s in schema_fields(entity) if s.tag is not None]
    return tuple(sorted(tagged, key=lambda t: t.tag))
