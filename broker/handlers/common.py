"""Small helpers shared by handlers."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.storage.errors import StorageError

from ..cluster.metadata_store import MetadataStore
from ..replication.replica_manager import PartitionError
from ..security.authorizer import AclOperation, ResourceType

if TYPE_CHECKING:
    from ..context import HandlerContext, ReplicaContext

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


def name_leaders(ctx: ReplicaContext, failed: Iterable[tuple[str | None, int, dict[str, Any]]]
                 ) -> list[dict[str, Any]]:
    """KIP-951's leader hints: each (topic, partition, its answer) given `current_leader`, the
    leader as this broker knows it (ReplicaManager.current_leader, Kafka's getCurrentLeader);
    returned, the endpoints of those leaders (`leader_endpoints`)."""
    leaders = []
    for name, index, answer in failed:
        leader, epoch = (ctx.replicas.current_leader(name, index) if name is not None
                         else (-1, -1))
        answer["current_leader"] = {"leader_id": leader, "leader_epoch": epoch}
        leaders.append(leader)
    return leader_endpoints(ctx, leaders) if leaders else []


def leader_endpoints(ctx: HandlerContext, leaders: Iterable[int]) -> list[dict[str, Any]]:
    """The node endpoints of KIP-951's hints: each live broker of `leaders` at its address on
    the listener the request came in on (Kafka's getAliveBrokerNode), by id; a broker
    without that listener is not listed."""
    brokers = {b.broker_id: b for b in ctx.store.brokers()}
    out = []
    for i in sorted(set(leaders)):
        if (b := brokers.get(i)) is not None and (e := b.endpoint(ctx.listener)) is not None:
            out.append({"node_id": i, "host": e.host, "port": e.port, "rack": b.rack})
    return out
