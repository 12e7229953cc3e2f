"""Reading requests and writing responses with kio's generated entity types.

Handlers describe a response once, as a version-agnostic dict; `build` turns it into the kio
dataclass of the version the client asked for: fields that version lacks are dropped, fields
it has that the dict lacks get their schema default (or the type's zero value).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import Reader
from kio.static.constants import EntityType

from . import controlled_shutdown, own_versions
from .errors import ErrorCode
from .kio_adapter import Entity, schema_fields

_EPOCH = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
ZERO_UUID = uuid.UUID(int=0)

E = TypeVar("E", bound=Entity)


class UnknownVersion(Exception):
    """kio has no schema for this (api, version)."""


@cache
def request_type(api_key: int, version: int) -> type[Entity]:
    return _payload_type(api_key, version, EntityType.request)


@cache
def response_type(api_key: int, version: int) -> type[Entity]:
    return _payload_type(api_key, version, EntityType.response)


def _payload_type(api_key: int, version: int, kind: EntityType) -> type[Entity]:
    if api_key == controlled_shutdown.API_KEY:  # gone from Kafka 4, so from kio too
        own = (controlled_shutdown.request_schema(version) if kind is EntityType.request
               else controlled_shutdown.response_schema(version))
        if own is None:
            raise UnknownVersion(f"api {api_key} v{version}")
        return own
    newer = (own_versions.request_schema(api_key, version) if kind is EntityType.request
             else own_versions.response_schema(api_key, version))  # Kafka 4.4's, not kio's
    if newer is not None:
        return newer
    try:
        if kind is EntityType.request:
            return load_request_schema(api_key, version)
        return load_response_schema(api_key, version)
    except KioIndexError as exc:
        raise UnknownVersion(f"api {api_key} v{version}") from exc


def reader(entity: type[E]) -> Reader[E]:
    """kio's reader of `entity`: (buffer, offset) -> (instance, offset after it)."""
    return entity_reader(entity)


def encode(entity: Entity) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


# ---- building entities from dicts -------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class FieldPlan:
    """How `build` fills one field of an entity."""

    name: str
    kafka_type: str
    nested: type[Entity] | None
    is_array: bool
    default: Any  # dataclasses.MISSING when the field has none


@cache
def plans(entity: type[Entity]) -> Mapping[str, FieldPlan]:
    """The plan of every field of `entity` by name, in declaration order (shared: read only)."""
    out: dict[str, FieldPlan] = {}
    for s in schema_fields(entity):
        f = s.field
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        out[s.name] = FieldPlan(s.name, s.kafka_type, s.entity, s.is_array, default)
    return out


_ZERO: dict[str, Any] = {
    "bool": False,
    "bytes": b"",
    "records": None,
    "string": "",
    "uuid": ZERO_UUID,
    "float64": 0.0,
}


def build(entity: type[E], data: Mapping[str, Any]) -> E:
    """Make an instance of kio `entity` from `data` (nested dicts and lists)."""
    kwargs = {}
    for plan in plans(entity).values():
        if plan.name in data:
            kwargs[plan.name] = convert(plan, data[plan.name])
        elif plan.default is not dataclasses.MISSING:
            continue
        else:
            kwargs[plan.name] = _zero(plan)
    return entity(**kwargs)


def absent_value(plan: FieldPlan) -> Any:
    """What an instance made by `build` holds in a field its dict lacks."""
    return plan.default if plan.default is not dataclasses.MISSING else _zero(plan)


def _zero(plan: FieldPlan) -> Any:
    if plan.is_array:
        return ()
    if plan.nested is not None:
        return build(plan.nested, {})
    return convert(plan, _ZERO.get(plan.kafka_type, 0))


def convert(plan: FieldPlan, value: Any) -> Any:
    """`value` from a handler's dict as the kio type of the field `plan` describes."""
    if value is None:
        return None
    if plan.nested is not None:
        if plan.is_array:
            return tuple(v if dataclasses.is_dataclass(v) else build(plan.nested, v) for v in value)
        return value if dataclasses.is_dataclass(value) else build(plan.nested, value)
    if plan.is_array:
        return tuple(value)
    kt = plan.kafka_type
    if kt == "error_code":
        return value if isinstance(value, ErrorCode) else ErrorCode(int(value))
    if kt in ("timedelta_i32", "timedelta_i64"):
        if isinstance(value, datetime.timedelta):
            return value
        return datetime.timedelta(milliseconds=int(value))
    if kt == "datetime_i64":
        if isinstance(value, datetime.datetime):
            return value
        return _EPOCH + datetime.timedelta(milliseconds=int(value))
    return value


def millis(value: datetime.timedelta | datetime.datetime | int | None) -> int:
    """A kio duration/instant back to Kafka's int milliseconds."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)
