"""What a request handler sees: the request's own facts and the broker services it may use.

`BrokerServices` is built once by the broker (app.py) and names every part of the broker a
handler may call; `RequestContext` is built per request by the dispatcher and exposes those
services as attributes (`ctx.replicas`, `ctx.groups`, ...), so a handler never reaches through
the broker object. Everything here is typed: the type checker follows a request from the
dispatcher through the handler into the replica manager and the coordinators.

A handler family's functions take a narrower view of the context (`HandlerContext` and the
family views below it, Protocols that `RequestContext` meets): mypy then refuses one that
reaches for a service its view does not name. The registered handlers themselves take
`RequestContext` (the dispatcher's contract, tests/unit/test_handler_contracts.py) and hand it
on as their family's view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar, overload

from .security.authorizer import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType

T = TypeVar("T")

if TYPE_CHECKING:
    from samsa.config.schema import BrokerConfig
    from samsa.coordinator.group import GroupCoordinator
    from samsa.coordinator.internal_log import InternalTopic
    from samsa.coordinator.producer_ids import ProducerIdSource
    from samsa.coordinator.share import ShareStateCoordinator
    from samsa.coordinator.transaction import TransactionCoordinator
    from samsa.storage.log_dirs import LogDirs

    from .cluster.controller import Controller
    from .cluster.metadata_cache import TopicMetadataCache
    from .cluster.metadata_store import MetadataStore
    from .cluster.topic_admin import TopicAdmin
    from .dynamic_config import DynamicBrokerConfig
    from .network.quotas import QuotaManager
    from .replication.fetch_sessions import FetchSessionCache
    from .replication.produce_appends import ProduceAppender
    from .replication.replica_manager import ReplicaManager
    from .security.authorizer import Authorizer
    from .security.sasl import SaslSession
    from .share.fetch import ShareFetcher
    from .share.persister import SharePersister
    from .telemetry import TelemetryManager
    from .txn.verification import TxnPartitionVerifier


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """Who sent a request (Kafka's KafkaPrincipal): `User:<name>` of a SASL user, `User:<DN>` of
    a TLS client certificate, else Kafka's anonymous user."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


@dataclass(frozen=True, slots=True)
class BrokerServices:
    """The parts of the broker that request handlers use."""

    broker_id: int
    config: BrokerConfig
    store: MetadataStore  # cluster metadata: brokers, topics, partition states
    replicas: ReplicaManager  # the partitions hosted here (the one way to a partition)
    appends: ProduceAppender  # a Produce's appends to the partitions led here
    topics: TopicAdmin  # topic lifecycle and topic configs
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    txn_topic: InternalTopic  # __transaction_state
    producer_ids: ProducerIdSource  # ids for idempotent producers
    log_dirs: LogDirs
    controller: Controller | None = None  # with ZooKeeper: this broker's controller elector
    quotas: QuotaManager | None = None  # client quotas (the dispatcher enforces them)
    authorizer: Authorizer | None = None  # authorizer.class.name set: ACLs decide
    # KIP-890 verification with a transaction coordinator on another broker
    txn_verifier: TxnPartitionVerifier | None = None
    dynamic_config: DynamicBrokerConfig | None = None  # dynamic broker configs
    shares: ShareFetcher | None = None  # share groups' sessions and share-partitions led here
    share_state: ShareStateCoordinator | None = None  # the share coordinator (__share_group_state)
    share_persister: SharePersister | None = None  # its state, wherever it is coordinated
    # Metadata responses' encoded topic entries (None: every response built afresh).
    metadata_cache: TopicMetadataCache | None = None
    # KIP-714 client telemetry: subscriptions, client instances, their pushed metrics
    telemetry: TelemetryManager | None = None
    # KIP-227 incremental fetch sessions (consumers' and followers')
    fetch_sessions: FetchSessionCache | None = None


class Service(Generic[T]):
    """A service of `BrokerServices` as an attribute of the request context, one line a name
    (`store = Service["MetadataStore"]()`): mypy reads it as an attribute of type T, which the
    family views name as plain attributes (`store: MetadataStore`). In its place on the class
    it puts a plain property reading `services.<its name>`, as fast as a hand-written one."""

    def __set_name__(self, owner: type, name: str) -> None:
        setattr(owner, name, property(attrgetter(f"services.{name}")))

    @overload
    def __get__(self, obj: None, owner: type) -> Service[T]: ...

    @overload
    def __get__(self, obj: object, owner: type) -> T: ...

    def __get__(self, obj: object, owner: type) -> T | Service[T]:
        raise AssertionError("replaced by a property when its class was made")

    # A data descriptor to mypy, so that the views may name it as a plain attribute (and a
    # test's fake context be a dataclass); the property in its place is read-only.
    def __set__(self, obj: object, value: T) -> None:
        raise AttributeError("a request context's services are read-only")


@dataclass(slots=True)
class RequestContext:
    """One request: its header, where it came from, when, who sent it, and the services."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    listener: str  # the name of the listener the request came in on
    peer: str  # "host:port" of the client
    received_ms: int  # wall clock when the request was decoded
    services: BrokerServices
    principal: KafkaPrincipal = ANONYMOUS
    # The connection's SASL authentication on a SASL listener (until and after it passes).
    sasl: SaslSession | None = None
    # The connection sends records from segment files (sendfile; not over TLS): Fetch may
    # answer with FileRegions of the log instead of the bytes (broker/network/server.py).
    zero_copy: bool = False

    @property
    def version(self) -> int:
        return self.api_version

    @property
    def client_host(self) -> str:
        """The peer's address without the port."""
        return self.peer.rsplit(":", 1)[0]

    # ---- services: each reads the BrokerServices attribute of its name (see Service) -------
    broker_id = Service["int"]()
    config = Service["BrokerConfig"]()
    store = Service["MetadataStore"]()
    replicas = Service["ReplicaManager"]()
    appends = Service["ProduceAppender"]()
    topics = Service["TopicAdmin"]()
    groups = Service["GroupCoordinator"]()
    transactions = Service["TransactionCoordinator"]()
    txn_topic = Service["InternalTopic"]()
    producer_ids = Service["ProducerIdSource"]()
    log_dirs = Service["LogDirs"]()
    controller = Service["Controller | None"]()
    quotas = Service["QuotaManager | None"]()
    authorizer = Service["Authorizer | None"]()
    txn_verifier = Service["TxnPartitionVerifier | None"]()
    dynamic_config = Service["DynamicBrokerConfig | None"]()
    shares = Service["ShareFetcher | None"]()
    share_state = Service["ShareStateCoordinator | None"]()
    share_persister = Service["SharePersister | None"]()
    metadata_cache = Service["TopicMetadataCache | None"]()
    telemetry = Service["TelemetryManager"]()
    fetch_sessions = Service["FetchSessionCache"]()

    # ---- authorization (Kafka's AuthHelper) -----------------------------------------------
    def authorize(self, op: AclOperation, rtype: ResourceType, name: str = CLUSTER_NAME,
                  log_denied: bool = True) -> bool:
        """May this request's principal, from its host, do `op` on the resource? Always
        without an authorizer (authorizer.class.name unset)."""
        a = self.services.authorizer
        if a is None:
            return True
        return a.authorize(str(self.principal), self.client_host, op, rtype, name, log_denied)

    def authorized(self, op: AclOperation, rtype: ResourceType, items: Iterable[T],
                   name: Callable[[T], str] = str, log_denied: bool = True) -> list[T]:
        """The items whose resource (`name(item)`) the principal may do `op` on (each name
        decided once)."""
        if self.services.authorizer is None:
            return list(items)
        decided: dict[str, bool] = {}
        out = []
        for item in items:
            n = name(item)
            if n not in decided:
                decided[n] = self.authorize(op, rtype, n, log_denied)
            if decided[n]:
                out.append(item)
        return out

    def authorized_operations(self, rtype: ResourceType, name: str = CLUSTER_NAME) -> int:
        """KIP-430: the bit field (1 << operation code) of the operations the principal may do
        on the resource, out of those its type supports (all of them without an
        authorizer)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[rtype]:
            if self.authorize(op, rtype, name, log_denied=False):
                bits |= 1 << op
        return bits

    def authorize_any(self, op: AclOperation, rtype: ResourceType) -> bool:
        """May the principal do `op` on at least one resource of the type (Kafka's
        authorizeByResourceType)?"""
        a = self.services.authorizer
        if a is None:
            return True
        return a.authorize_by_resource_type(str(self.principal), self.client_host, op, rtype)


# ---- the families' views of a request's context ---------------------------------------------
class HandlerContext(Protocol):
    """What every handler may use: the request's facts, who sent it, its authorization, this
    broker's id and configuration and the cluster metadata."""

    client_id: str | None
    peer: str
    listener: str
    principal: KafkaPrincipal
    broker_id: int
    config: BrokerConfig
    store: MetadataStore

    @property
    def version(self) -> int: ...

    @property
    def client_host(self) -> str: ...

    def authorize(self, op: AclOperation, rtype: ResourceType, name: str = CLUSTER_NAME,
                  log_denied: bool = True) -> bool: ...

    def authorized(self, op: AclOperation, rtype: ResourceType, items: Iterable[T],
                   name: Callable[[T], str] = str, log_denied: bool = True) -> list[T]: ...

    def authorized_operations(self, rtype: ResourceType, name: str = CLUSTER_NAME) -> int: ...

    def authorize_any(self, op: AclOperation, rtype: ResourceType) -> bool: ...


class TxnContext(HandlerContext, Protocol):
    """The transaction family (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
    WriteTxnMarkers, DescribeProducers, DescribeTransactions, ListTransactions, and the
    Produce path's KIP-890 verification)."""

    transactions: TransactionCoordinator
    txn_topic: InternalTopic
    producer_ids: ProducerIdSource
    txn_verifier: TxnPartitionVerifier | None
    replicas: ReplicaManager


class ShareStateContext(HandlerContext, Protocol):
    """The share coordinator's family (Initialize/Read/Write/Delete ShareGroupState and
    ReadShareGroupStateSummary)."""

    share_state: ShareStateCoordinator | None


class GroupContext(HandlerContext, Protocol):
    """The group family: classic, consumer and share groups and their offsets (JoinGroup to
    LeaveGroup, the heartbeats, OffsetCommit/Fetch/Delete, the Describe/List/Delete of
    groups, the share groups' offsets)."""

    groups: GroupCoordinator
    # the share-partitions' state, wherever it is coordinated
    share_persister: SharePersister | None


class AdminContext(HandlerContext, Protocol):
    """The topic and configuration administration family (CreateTopics, DeleteTopics,
    CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs)."""

    topics: TopicAdmin
    quotas: QuotaManager | None  # the controller mutation quota
    dynamic_config: DynamicBrokerConfig | None
    telemetry: TelemetryManager  # CLIENT_METRICS resources
    received_ms: int


class ControllerContext(HandlerContext, Protocol):
    """What this broker's controller answers (ElectLeaders, AlterPartitionReassignments,
    ListPartitionReassignments, ControlledShutdown)."""

    controller: Controller | None


class AclContext(HandlerContext, Protocol):
    """DescribeAcls, CreateAcls, DeleteAcls."""

    authorizer: Authorizer | None


class ReplicaContext(HandlerContext, Protocol):
    """The family that reads and administers the partitions hosted here (Fetch, ListOffsets,
    OffsetForLeaderEpoch, DeleteRecords, DescribeLogDirs, AlterReplicaLogDirs)."""

    replicas: ReplicaManager
    log_dirs: LogDirs
    quotas: QuotaManager | None  # the fetch byte-rate quota caps a Fetch
    authorizer: Authorizer | None
    zero_copy: bool
    fetch_sessions: FetchSessionCache


class MetadataContext(HandlerContext, Protocol):
    """Metadata and DescribeTopicPartitions: the cluster as the clients see it."""

    replicas: ReplicaManager  # which replicas here are offline
    topics: TopicAdmin  # Metadata's auto-creation of topics
    metadata_cache: TopicMetadataCache | None


class ShareFetchContext(GroupContext, Protocol):
    """ShareFetch and ShareAcknowledge: share sessions on the share-partitions led here, for
    members of share groups (whose configs the group family reads)."""

    shares: ShareFetcher | None
    replicas: ReplicaManager


class CoordinatorLookupContext(HandlerContext, Protocol):
    """FindCoordinator: which broker coordinates a group, a transactional id or a
    share-partition's state."""

    groups: GroupCoordinator
    share_state: ShareStateCoordinator | None
    txn_topic: InternalTopic


class ProduceContext(TxnContext, ReplicaContext, Protocol):
    """Produce: an append to the partitions led here, with KIP-890's verification of a
    transactional batch by the transaction coordinator."""

    appends: ProduceAppender


if TYPE_CHECKING:
    def _meets_views(ctx: RequestContext) -> tuple[
            TxnContext, ShareStateContext, GroupContext, AdminContext, ControllerContext,
            AclContext, ReplicaContext, MetadataContext, ShareFetchContext,
            CoordinatorLookupContext, ProduceContext]:
        """Checked by mypy only: every request context is each family's view."""
        return ctx, ctx, ctx, ctx, ctx, ctx, ctx, ctx, ctx, ctx, ctx
