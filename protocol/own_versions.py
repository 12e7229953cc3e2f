"""Versions of Kafka 4.4's APIs that kio 0.6.5 (generated from older schemas) lacks, written in
kio's form from Kafka 4.4's message schemas (kafka-clients-4.4.0.jar,
common/message/*Request.json / *Response.json), so that kio's readers and writers, and Samsa's
guard, codec and encoder, treat them as any other schema. The codec finds them through
`request_schema` and `response_schema` (protocol/codec.py); a version kio gains later can go.

- DeleteGroups (42) v3: the request as v2; each result carries an ErrorMessage (nullable).
- TxnOffsetCommit (28) v6 (KIP-1319): topics by TopicId instead of Name, in the request and the
  response; GenerationIdOrMemberEpoch keeps kio's older name, generation_id.
- ApiVersions (18) v5 (KIP-1242): the request adds ClusterId (nullable) and NodeId, the cluster
  and broker the client believes it talks to; the response is v4's (header v0, as every
  ApiVersions response).
- StreamsGroupHeartbeat (88) v1: the request as v0; the response's AcceptableRecoveryLag becomes
  an int64 and it gains TopologyDescriptionRequired (KIP-1331).
- StreamsGroupDescribe (89) v1 (KIP-1331): the request adds IncludeTopologyDescription; each
  described group adds TopologyDescription (nullable), TopologyDescriptionStatus and
  AssignorName (nullable).
- StreamsGroupTopologyDescriptionUpdate (93) v0 (KIP-1331, new in Kafka 4.4): a member sends its
  topology's description (the nested structures of StreamsGroupDescribe v1's); the response is
  an error code and message.
"""

import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.streams_group_describe.v0 import request as describe_v0
from kio.schema.streams_group_describe.v0 import response as described_v0
from kio.schema.streams_group_heartbeat.v0 import request as heartbeat_v0
from kio.schema.streams_group_heartbeat.v0.response import EndpointToPartitions, Status, TaskIds
from kio.schema.types import GroupId, ProducerId, TopicName, TransactionalId
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from .errors import ErrorCode

__all__ = ["request_schema", "response_schema"]

API_VERSIONS, TXN_OFFSET_COMMIT, DELETE_GROUPS = 18, 28, 42
STREAMS_HEARTBEAT, STREAMS_DESCRIBE, STREAMS_TOPOLOGY_UPDATE = 88, 89, 93


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


# ---- TxnOffsetCommit v6 ---------------------------------------------------------------------
class _TxnOffsetCommitV6:
    __slots__ = ()
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(TXN_OFFSET_COMMIT)


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestPartitionV6(_TxnOffsetCommitV6):
    __type__: ClassVar = EntityType.nested
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The index of the partition within the topic."""
    committed_offset: i64 = field(metadata={"kafka_type": "int64"})
    """The message offset to be committed."""
    committed_leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The leader epoch of the last consumed record."""
    committed_metadata: str | None = field(metadata={"kafka_type": "string"})
    """Any associated metadata the client wants to keep."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestTopicV6(_TxnOffsetCommitV6):
    __type__: ClassVar = EntityType.nested
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic ID."""
    partitions: tuple[TxnOffsetCommitRequestPartitionV6, ...]
    """The partitions inside the topic that we want to commit offsets for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequestV6(_TxnOffsetCommitV6):
    __type__: ClassVar = EntityType.request
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    transactional_id: TransactionalId = field(metadata={"kafka_type": "string"})
    """The ID of the transaction."""
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    """The ID of the group."""
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    """The current producer ID in use by the transactional ID."""
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    """The current epoch associated with the producer ID."""
    generation_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The generation of the consumer (classic groups) or its member epoch (consumer groups)."""
    member_id: str = field(metadata={"kafka_type": "string"}, default="")
    """The member ID assigned by the group coordinator."""
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The unique identifier of the consumer instance provided by end user."""
    topics: tuple[TxnOffsetCommitRequestTopicV6, ...]
    """Each topic that we want to commit offsets for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponsePartitionV6(_TxnOffsetCommitV6):
    __type__: ClassVar = EntityType.nested
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The error code, or 0 if there was no error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponseTopicV6(_TxnOffsetCommitV6):
    __type__: ClassVar = EntityType.nested
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic ID."""
    partitions: tuple[TxnOffsetCommitResponsePartitionV6, ...]
    """The responses for each partition in the topic."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponseV6(_TxnOffsetCommitV6):
    __type__: ClassVar = EntityType.response
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled due to a quota
    violation, or zero if the request did not violate any quota."""
    topics: tuple[TxnOffsetCommitResponseTopicV6, ...]
    """The responses for each topic."""


# ---- ApiVersions v5 -------------------------------------------------------------------------
class _ApiVersionsV5:
    __slots__ = ()
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_VERSIONS)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsRequestV5(_ApiVersionsV5):
    __type__: ClassVar = EntityType.request
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    client_software_name: str = field(metadata={"kafka_type": "string"})
    """The name of the client."""
    client_software_version: str = field(metadata={"kafka_type": "string"})
    """The version of the client."""
    cluster_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The cluster id the client believes it talks to, or null if it does not know one."""
    node_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The node id the client believes it talks to, or -1."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionV5(_ApiVersionsV5):
    __type__: ClassVar = EntityType.nested
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    api_key: i16 = field(metadata={"kafka_type": "int16"})
    """The API index."""
    min_version: i16 = field(metadata={"kafka_type": "int16"})
    """The minimum supported version, inclusive."""
    max_version: i16 = field(metadata={"kafka_type": "int16"})
    """The maximum supported version, inclusive."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SupportedFeatureKeyV5(_ApiVersionsV5):
    __type__: ClassVar = EntityType.nested
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    name: str = field(metadata={"kafka_type": "string"})
    """The name of the feature."""
    min_version: i16 = field(metadata={"kafka_type": "int16"})
    """The minimum supported version for the feature."""
    max_version: i16 = field(metadata={"kafka_type": "int16"})
    """The maximum supported version for the feature."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalizedFeatureKeyV5(_ApiVersionsV5):
    __type__: ClassVar = EntityType.nested
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    name: str = field(metadata={"kafka_type": "string"})
    """The name of the feature."""
    max_version_level: i16 = field(metadata={"kafka_type": "int16"})
    """The cluster-wide finalized max version level for the feature."""
    min_version_level: i16 = field(metadata={"kafka_type": "int16"})
    """The cluster-wide finalized min version level for the feature."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsResponseV5(_ApiVersionsV5):
    __type__: ClassVar = EntityType.response
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    """The top-level error code."""
    api_keys: tuple[ApiVersionV5, ...]
    """The APIs supported by the broker."""
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled due to a quota
    violation, or zero if the request did not violate any quota."""
    supported_features: tuple[SupportedFeatureKeyV5, ...] = field(metadata={"tag": 0},
                                                                  default=())
    """Features supported by the broker."""
    finalized_features_epoch: i64 = field(metadata={"kafka_type": "int64", "tag": 1},
                                          default=i64(-1))
    """The monotonically increasing epoch for the finalized features information."""
    finalized_features: tuple[FinalizedFeatureKeyV5, ...] = field(metadata={"tag": 2},
                                                                  default=())
    """List of cluster-wide finalized features."""
    zk_migration_ready: bool = field(metadata={"kafka_type": "bool", "tag": 3}, default=False)
    """Set by a KRaft controller if the required configurations for ZK migration are
    present."""


# ---- StreamsGroupHeartbeat v1 ---------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatRequestV1(heartbeat_v0.StreamsGroupHeartbeatRequest):
    __version__: ClassVar[i16] = i16(1)


class _StreamsV1:
    __slots__ = ()
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatResponseV1(_StreamsV1):
    __type__: ClassVar = EntityType.response
    __api_key__: ClassVar[i16] = i16(STREAMS_HEARTBEAT)
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    member_id: str = field(metadata={"kafka_type": "string"})
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    heartbeat_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    task_offset_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    acceptable_recovery_lag: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """The most offsets a warm-up task may lag to count as caught up; an int64 from v1."""
    status: tuple[Status, ...] | None
    active_tasks: tuple[TaskIds, ...] | None
    standby_tasks: tuple[TaskIds, ...] | None
    warmup_tasks: tuple[TaskIds, ...] | None
    topology_description_required: bool = field(metadata={"kafka_type": "bool"},
                                                default=False)
    """Whether the client is to send its topology description (key 93)."""
    endpoint_information_epoch: i32 = field(metadata={"kafka_type": "int32"})
    partitions_by_user_endpoint: tuple[EndpointToPartitions, ...] | None


# ---- StreamsGroupDescribe v1 ----------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeRequestV1(describe_v0.StreamsGroupDescribeRequest):
    __version__: ClassVar[i16] = i16(1)
    include_topology_description: bool = field(metadata={"kafka_type": "bool"}, default=False)


class _DescribeV1(_StreamsV1):
    __slots__ = ()
    __type__: ClassVar = EntityType.nested
    __api_key__: ClassVar[i16] = i16(STREAMS_DESCRIBE)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionNodeV1(_DescribeV1):
    name: str = field(metadata={"kafka_type": "string"})
    node_type: i8 = field(metadata={"kafka_type": "int8"})
    """1 source, 2 processor, 3 sink."""
    source_topics: tuple[TopicName, ...] = field(metadata={"kafka_type": "string"}, default=())
    sink_topic: TopicName | None = field(metadata={"kafka_type": "string"}, default=None)
    stores: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    successors: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionSubtopologyV1(_DescribeV1):
    subtopology_id: str = field(metadata={"kafka_type": "string"})
    nodes: tuple[TopologyDescriptionNodeV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionGlobalStoreV1(_DescribeV1):
    source: TopologyDescriptionNodeV1
    processor: TopologyDescriptionNodeV1


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionV1(_DescribeV1):
    subtopologies: tuple[TopologyDescriptionSubtopologyV1, ...]
    global_stores: tuple[TopologyDescriptionGlobalStoreV1, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroupV1(described_v0.DescribedGroup):
    __version__: ClassVar[i16] = i16(1)
    topology_description: TopologyDescriptionV1 | None = field(default=None)
    topology_description_status: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    """0 not requested, 1 not stored, 2 error, 3 available (then the description is set)."""
    assignor_name: str | None = field(metadata={"kafka_type": "string"}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeResponseV1(described_v0.StreamsGroupDescribeResponse):
    __version__: ClassVar[i16] = i16(1)
    groups: tuple[DescribedGroupV1, ...]


# ---- StreamsGroupTopologyDescriptionUpdate v0 ----------------------------------------------
class _TopologyUpdateV0:
    __slots__ = ()
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(STREAMS_TOPOLOGY_UPDATE)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateRequestV0(_TopologyUpdateV0):
    __type__: ClassVar = EntityType.request
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    group_id: GroupId = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})
    topology_epoch: i32 = field(metadata={"kafka_type": "int32"})
    topology_description: TopologyDescriptionV1  # StreamsGroupDescribe v1's structures


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTopologyDescriptionUpdateResponseV0(_TopologyUpdateV0):
    __type__: ClassVar = EntityType.response
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)


_REQUESTS: dict[tuple[int, int], type] = {(DELETE_GROUPS, 3): DeleteGroupsRequestV3,
                                          (TXN_OFFSET_COMMIT, 6): TxnOffsetCommitRequestV6,
                                          (API_VERSIONS, 5): ApiVersionsRequestV5,
                                          (STREAMS_HEARTBEAT, 1): StreamsGroupHeartbeatRequestV1,
                                          (STREAMS_DESCRIBE, 1): StreamsGroupDescribeRequestV1,
                                          (STREAMS_TOPOLOGY_UPDATE, 0):
                                              StreamsGroupTopologyDescriptionUpdateRequestV0}
_RESPONSES: dict[tuple[int, int], type] = {(DELETE_GROUPS, 3): DeleteGroupsResponseV3,
                                           (TXN_OFFSET_COMMIT, 6): TxnOffsetCommitResponseV6,
                                           (API_VERSIONS, 5): ApiVersionsResponseV5,
                                           (STREAMS_HEARTBEAT, 1): StreamsGroupHeartbeatResponseV1,
                                           (STREAMS_DESCRIBE, 1): StreamsGroupDescribeResponseV1,
                                           (STREAMS_TOPOLOGY_UPDATE, 0):
                                               StreamsGroupTopologyDescriptionUpdateResponseV0}


def request_schema(api_key: int, version: int) -> type | None:
    return _REQUESTS.get((api_key, version))


def response_schema(api_key: int, version: int) -> type | None:
    return _RESPONSES.get((api_key, version))
