"""ControlledShutdown (API 7), versions 1-3, as Kafka 3.x defined them
(ControlledShutdownRequest.json / ControlledShutdownResponse.json).

Kafka 4 removed the API with ZooKeeper, so kio (generated from Kafka 4's schemas) has no
classes for it; these are written in kio's form so that its readers and writers, and Samsa's
guard, codec and encoder, treat them as any other schema. Version 0 (a request header without
client id) is not defined: brokers have sent v1+ since Kafka 0.9. v2 added BrokerEpoch
(KIP-380), v3 is the flexible one.
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

from .errors import ErrorCode

API_KEY = 7
VERSIONS = (1, 3)

__all__ = ["API_KEY", "VERSIONS", "request_schema", "response_schema"]


class _Schema:
    """The class attributes kio's readers and writers look for, set from the class line's kind
    and version (v3 is flexible, with the next header versions)."""

    __slots__ = ()
    __type__: ClassVar[EntityType]
    __version__: ClassVar[i16]
    __flexible__: ClassVar[bool]
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type]

    def __init_subclass__(cls, *, kind: EntityType | None = None, version: int = 0) -> None:
        super().__init_subclass__()
        if kind is None:  # dataclass(slots=True) making the class again: already set
            return
        cls.__type__ = kind
        cls.__version__ = i16(version)
        cls.__flexible__ = version >= 3
        if kind is EntityType.request:
            cls.__header_schema__ = RequestHeaderV2 if cls.__flexible__ else RequestHeaderV1
        else:
            cls.__header_schema__ = ResponseHeaderV1 if cls.__flexible__ else ResponseHeaderV0


# ---- the fields, then one class per version ------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class _Request(_Schema):
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    """The id of the broker for which controlled shutdown has been requested."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _RequestWithEpoch(_Request):
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The broker epoch (v2+, KIP-380)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _RemainingPartition(_Schema):
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Response(_Schema):
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The top-level error code."""


class ControlledShutdownRequestV1(_Request, kind=EntityType.request, version=1):
    __slots__ = ()


class ControlledShutdownRequestV2(_RequestWithEpoch, kind=EntityType.request, version=2):
    __slots__ = ()


class ControlledShutdownRequestV3(_RequestWithEpoch, kind=EntityType.request, version=3):
    __slots__ = ()


class RemainingPartitionV1(_RemainingPartition, kind=EntityType.nested, version=1):
    __slots__ = ()


class RemainingPartitionV2(_RemainingPartition, kind=EntityType.nested, version=2):
    __slots__ = ()


class RemainingPartitionV3(_RemainingPartition, kind=EntityType.nested, version=3):
    __slots__ = ()


# A response's field is typed by its version's nested class (kio's readers follow the type).
@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponseV1(_Response, kind=EntityType.response, version=1):
    remaining_partitions: tuple[RemainingPartitionV1, ...]
    """The partitions that the broker still leads."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponseV2(_Response, kind=EntityType.response, version=2):
    remaining_partitions: tuple[RemainingPartitionV2, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponseV3(_Response, kind=EntityType.response, version=3):
    remaining_partitions: tuple[RemainingPartitionV3, ...]


_REQUESTS: dict[int, type] = {1: ControlledShutdownRequestV1, 2: ControlledShutdownRequestV2,
                              3: ControlledShutdownRequestV3}
_RESPONSES: dict[int, type] = {1: ControlledShutdownResponseV1, 2: ControlledShutdownResponseV2,
                               3: ControlledShutdownResponseV3}


def request_schema(version: int) -> type | None:
    return _REQUESTS.get(version)


def response_schema(version: int) -> type | None:
    return _RESPONSES.get(version)
