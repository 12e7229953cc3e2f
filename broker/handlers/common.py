"""Small helpers shared by handlers."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, TypeVar

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.storage.errors import StorageError

from ..cluster.metadata_store import MetadataStore
from ..replication.replica_manager import PartitionError
from ..security.authorizer import AclOperation, ResourceType

if TYPE_CHECKING:
    from ..context import HandlerContext

T = TypeVar("T")

# What looking up, reading or appending to one partition may raise; each carries the error
# code that partition's entry of the response answers with.
PARTITION_ERRORS = (PartitionError, StorageError, KafkaError)


def error_code_of(exc: BaseException) -> int:
    """The Kafka error code an exception carries (UNKNOWN_SERVER_ERROR if none)."""
    return int(getattr(exc, "error_code", ErrorCode.unknown_server_error))


def field(entity: object, name: str, default: T) -> T:
    """A request field that older versions of the schema do not have."""
    value: T = getattr(entity, name, default)
    return value


def topic_name_by_id(store: MetadataStore, topic_id: uuid.UUID) -> str | None:
    return store.topic_name_by_id(topic_id)


def refused_on_cluster(ctx: HandlerContext, op: AclOperation,
                       **fields: Any) -> dict[str, Any] | None:
    """None when the principal may do `op` on the cluster; else the answer of a cluster API
    that refuses the whole request: CLUSTER_AUTHORIZATION_FAILED, with the response's other
    `fields` as a refusal fills them."""
    if ctx.authorize(op, ResourceType.CLUSTER):
        return None
    return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, **fields}
