"""What a request handler sees: the request's own facts and the broker services it may use.

`BrokerServices` is built once by the broker (app.py) and names every part of the broker a
handler may call; `RequestContext` is built per request by the dispatcher and exposes those
services as attributes (`ctx.replicas`, `ctx.groups`, ...), so a handler never reaches through
the broker object. Everything here is typed: the type checker follows a request from the
dispatcher through the handler into the replica manager and the coordinators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from config.schema import BrokerConfig
    from coordinator.group import GroupCoordinator
    from coordinator.internal_log import InternalTopic
    from coordinator.producer_ids import ProducerIdSource
    from coordinator.transaction import TransactionCoordinator
    from storage.log_dirs import LogDirs

    from .controller import Controller
    from .metadata_store import MetadataStore
    from .replica_manager import ReplicaManager
    from .security.sasl import SaslSession
    from .topic_admin import TopicAdmin
    from .txn_verification import TxnPartitionVerifier


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
    topics: TopicAdmin  # topic lifecycle and topic configs
    groups: GroupCoordinator
    transactions: TransactionCoordinator
    txn_topic: InternalTopic  # __transaction_state
    producer_ids: ProducerIdSource  # ids for idempotent producers
    log_dirs: LogDirs
    controller: Controller | None = None  # with ZooKeeper: this broker's controller elector
    # KIP-890 verification with a transaction coordinator on another broker
    txn_verifier: TxnPartitionVerifier | None = None


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

    @property
    def version(self) -> int:
        return self.api_version

    @property
    def client_host(self) -> str:
        """The peer's address without the port."""
        return self.peer.rsplit(":", 1)[0]

    # ---- services -----------------------------------------------------------------------
    @property
    def broker_id(self) -> int:
        return self.services.broker_id

    @property
    def config(self) -> BrokerConfig:
        return self.services.config

    @property
    def store(self) -> MetadataStore:
        return self.services.store

    @property
    def replicas(self) -> ReplicaManager:
        return self.services.replicas

    @property
    def topics(self) -> TopicAdmin:
        return self.services.topics

    @property
    def groups(self) -> GroupCoordinator:
        return self.services.groups

    @property
    def transactions(self) -> TransactionCoordinator:
        return self.services.transactions

    @property
    def txn_topic(self) -> InternalTopic:
        return self.services.txn_topic

    @property
    def producer_ids(self) -> ProducerIdSource:
        return self.services.producer_ids

    @property
    def log_dirs(self) -> LogDirs:
        return self.services.log_dirs

    @property
    def controller(self) -> Controller | None:
        return self.services.controller

    @property
    def txn_verifier(self) -> TxnPartitionVerifier | None:
        return self.services.txn_verifier
