"""Versions of Kafka 4.4's APIs that kio 0.6.5 (generated from older schemas) lacks, written in
kio's form from Kafka 4.4's message schemas (kafka-clients-4.4.0.jar,
common/message/*Request.json / *Response.json), so that kio's readers and writers, and Samsa's
guard, codec and encoder, treat them as any other schema. The codec finds them through
`request_schema` and `response_schema` (protocol/codec.py); a version kio gains later can go.

- DeleteGroups (42) v3: the request as v2; each result carries an ErrorMessage (nullable).
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import GroupId
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32Timedelta

from .errors import ErrorCode

__all__ = ["request_schema", "response_schema"]

DELETE_GROUPS = 42


# ---- DeleteGroups v3 ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsRequestV3:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(DELETE_GROUPS)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    groups_names: tuple[GroupId, ...] = field(metadata={"kafka_type": "string"}, default=())
    """The group names to delete."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletableGroupResultV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(DELETE_GROUPS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    """The group id."""
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The deletion error, or 0 if the deletion succeeded."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The error message, or null if there was no error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteGroupsResponseV3:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(DELETE_GROUPS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled due to a quota
    violation, or zero if the request did not violate any quota."""
    results: tuple[DeletableGroupResultV3, ...]
    """The deletion results."""


_REQUESTS: dict[tuple[int, int], type] = {(DELETE_GROUPS, 3): DeleteGroupsRequestV3}
_RESPONSES: dict[tuple[int, int], type] = {(DELETE_GROUPS, 3): DeleteGroupsResponseV3}


def request_schema(api_key: int, version: int) -> type | None:
    return _REQUESTS.get((api_key, version))


def response_schema(api_key: int, version: int) -> type | None:
    return _RESPONSES.get((api_key, version))
