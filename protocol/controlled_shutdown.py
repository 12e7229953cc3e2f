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


# ---- v1 -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    """The id of the broker for which controlled shutdown has been requested."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartitionV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The top-level error code."""
    remaining_partitions: tuple[RemainingPartitionV1, ...]
    """The partitions that the broker still leads."""


# ---- v2: BrokerEpoch ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequestV2:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The broker epoch."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartitionV2:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponseV2:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    remaining_partitions: tuple[RemainingPartitionV2, ...]


# ---- v3: flexible ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequestV3:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartitionV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponseV3:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    remaining_partitions: tuple[RemainingPartitionV3, ...]


_REQUESTS: dict[int, type] = {1: ControlledShutdownRequestV1, 2: ControlledShutdownRequestV2,
                              3: ControlledShutdownRequestV3}
_RESPONSES: dict[int, type] = {1: ControlledShutdownResponseV1, 2: ControlledShutdownResponseV2,
                               3: ControlledShutdownResponseV3}


def request_schema(version: int) -> type | None:
    return _REQUESTS.get(version)


def response_schema(version: int) -> type | None:
    return _RESPONSES.get(version)
