"""The broker process, its front door: builds the rooms (metadata, storage, replication, the
cluster duties, coordinators, share groups, the request path), wires them to each other, and
starts and stops them in order. What each room does lives in the room."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from pathlib import Path
from typing import Any

from samsa.config.schema import ConfigError
from samsa.coordinator.group import GroupCoordinator
from samsa.coordinator.internal_log import InternalTopic
from samsa.coordinator.producer_ids import (
    ClusterProducerIdAllocator,
    PrefetchingProducerIds,
    ProducerIdAllocator,
)
from samsa.coordinator.share import ShareStateCoordinator
from samsa.coordinator.transaction import TransactionCoordinator
from samsa.storage.config import LogConfig
from samsa.storage.log_dir_lock import LogDirLockError
from samsa.storage.log_dirs import LogDirs

from . import metrics, metrics_endpoint
from .apis import build_registry, policies
from .cluster.controller import Controller
from .cluster.features import TRANSACTION_VERSION
from .cluster.log_dir_failure import LogDirFailureHandler
from .cluster.member import ClusterMember
from .cluster.metadata_cache import TopicMetadataCache
from .cluster.metadata_store import TopicState
from .cluster.stores import open_metadata_store
from .cluster.topic_admin import TopicAdmin
from .cluster.zk.store import ZkMetadataStore
from .context import BrokerServices
from .coordinator_host import BrokerLogHost
from .dynamic_config import DynamicBrokerConfig
from .lakehouse import Lakehouse
from .malloc_tuning import tune_malloc
from .network.dispatch import Dispatcher
from .network.interbroker import set_client_security
from .network.loop_watchdog import LoopWatchdog
from .network.quotas import QuotaManager
from .network.server import KafkaServer, ServerLimits, raise_open_files_limit
from .reconfiguration import BrokerReconfiguration, check_cordoned
from .replication.fetch_sessions import FetchSessionCache
from .replication.log_dir_mover import LogDirMover
from .replication.partition import Partition
from .replication.produce_appends import ProduceAppender
from .replication.replica_manager import ReplicaManager
from .schema_registry import SchemaRegistry
from .security.authorizer import configured_authorizer
from .security.client import ClientSecurity
from .security.listeners import listener_endpoints
from .security.scram import ScramCredential
from .security.tokens import TokenManager, expire_tokens_forever
from .share.fetch import ShareFetcher
from .share.persister import SHARE_STATE_TOPIC, SharePersister
from .telemetry import TelemetryManager
from .txn.markers import TxnMarkerChannel
from .txn.verification import ProduceVerification, TxnPartitionVerifier

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: Any) -> None:
        self.config = config
        self.broker_id: int = config.broker_id
        self.data_dir = Path(config.data_dir)
        for prop in config.ignored_settings():
            log.warning("%s is set but has no effect in Samsa: %s", prop.name, prop.ignored)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.zookeeper: str | None = config["zookeeper.connect"]
        # The parts in the order each needs the ones before it.
        self.store = open_metadata_store(config, self.data_dir)
        self.metadata_cache = TopicMetadataCache()  # Metadata responses' encoded topics
        self.store.add_listener(self.metadata_cache.on_change)
        self.log_manager = LogDirs.from_config(config)
        check_cordoned(self.log_manager, config)
        self.log_manager.set_cordoned(config["cordoned.log.dirs"])
        self._build_replication(config)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        self.controller: Controller | None = None
        self.cluster_member: ClusterMember | None = None  # with ZooKeeper (or a node's file)
        self.producer_ids: PrefetchingProducerIds
        if isinstance(self.store, ZkMetadataStore):
            self._build_cluster(config, self.store)
        else:
            self.producer_ids = ProducerIdAllocator(self.data_dir / "producer-id-block")
        self._build_coordinators(config)
        self._build_share_groups(config)
        # the schema registry's HTTP listener, when schema.registry.listeners names one
        self.schema_registry = (SchemaRegistry(config, self._coordinator_host, self.store)
                                if config["schema.registry.listeners"] else None)
        if self.schema_registry is not None:  # no registry: no check on the Produce path
            self.appends.produce_check = self.schema_registry.validation.check
        # Iceberg topics: the partitions led here that have samsa.iceberg.mode set
        self.lakehouse = Lakehouse(config, self.replicas, self.store, self.data_dir,
                                   self.schema_registry)
        self._build_front(config)
        self._background: list[asyncio.Task[None]] = []
        self.loop_watchdog = LoopWatchdog()  # logs where a blocked event loop is stuck

    # ---- the parts, built once by __init__ --------------------------------------------------
    def _build_replication(self, config: Any) -> None:
        """The replica manager, what a failed log directory stops, the log-directory mover
        and the topic admin."""
        self.replicas = ReplicaManager(
            self.broker_id, self.log_manager, self.store, self._log_config
        )
        self.appends = ProduceAppender(self.replicas)  # a Produce's records to its partitions
        self.log_dir_failures = LogDirFailureHandler(self.replicas, self.log_manager,
                                                     self.store, self.data_dir)
        self.log_dir_mover = LogDirMover(
            self.replicas, lambda: config["replica.alter.log.dirs.io.max.bytes.per.second"])
        self.replicas.log_dir_mover = self.log_dir_mover
        self.topics = TopicAdmin(config, self.store, self.replicas)
        self.replicas.min_isr = lambda topic: int(
            str(self.topics.effective_properties(topic)["min.insync.replicas"])
        )

    def _build_cluster(self, config: Any, zk: ZkMetadataStore) -> None:
        """With ZooKeeper: this broker's duties as a member of the cluster (replica fetchers
        and throttles, ISR writes, the controller elector), and the cluster's producer-id
        blocks."""
        self.cluster_member = ClusterMember(config, zk, self.replicas, self.topics)
        self.controller = self.cluster_member.controller
        self.replicas.leadership_listeners.append(self._on_leadership)
        self.producer_ids = ClusterProducerIdAllocator(zk.producer_ids.claim)

    def _build_coordinators(self, config: Any) -> None:
        """The transaction and group coordinators and __transaction_state; they see this
        broker through the interfaces of coordinator/ports.py."""
        self._coordinator_host = BrokerLogHost(self.store, self.topics, self.replicas)
        self.txn_topic = InternalTopic.configured(
            self._coordinator_host, "__transaction_state", config, "transaction.state.log",
            "transaction.state.log.load.buffer.size")
        self.transactions = TransactionCoordinator(
            self.txn_topic,
            config,
            markers=TxnMarkerChannel(self),
            producer_ids=self.producer_ids,
            metrics=metrics,
            transaction_version=lambda: self.store.finalized_features().level(
                TRANSACTION_VERSION),
        )
        self.groups = GroupCoordinator(self._coordinator_host, config,
                                       topics=self._coordinator_host)
        self.txn_verifier = TxnPartitionVerifier(
            self.store, self.broker_id, config["transaction.state.log.num.partitions"])
        self.appends.txn_verification = ProduceVerification(
            self.transactions, self.txn_verifier, self.broker_id, config)

    def _build_share_groups(self, config: Any) -> None:
        """Share groups (KIP-932): the share coordinator keeps the share-partitions' state in
        __share_group_state; the persister reaches it here or on the broker leading the state
        partition; the fetcher holds the share-partitions led here."""
        host = self._coordinator_host
        self.share_state_topic = InternalTopic.configured(
            host, SHARE_STATE_TOPIC, config, "share.coordinator.state.topic",
            "share.coordinator.load.buffer.size",
            # as Kafka: deleted by the share coordinator's pruning, not compacted (a
            # compaction would keep only the last update record of a share-partition)
            configs={"cleanup.policy": "delete", "retention.ms": "-1"})
        self.share_state = ShareStateCoordinator(
            self.share_state_topic, host,
            updates_per_snapshot=config["share.coordinator.snapshot.update.records.per.snapshot"],
            write_timeout_ms=config["share.coordinator.write.timeout.ms"],
            prune_interval_ms=config["share.coordinator.state.topic.prune.interval.ms"],
            cold_snapshot_interval_ms=config[
                "share.coordinator.cold.partition.snapshot.interval.ms"])
        self.share_persister = SharePersister(self.share_state, self.store, self.broker_id)
        # a member that leaves its group (coordinated here) has its share session closed and
        # its records released
        self.shares = ShareFetcher(config["group.share.record.lock.duration.ms"],
                                   config["group.share.delivery.count.limit"], self._wake_fetches,
                                   persister=self.share_persister)
        self.groups.share_member_removed.append(self.shares.close_session)

    def _build_front(self, config: Any) -> None:
        """What faces the clients: quotas, dynamic broker configs and the request dispatcher.
        The listeners themselves are made by start() (_create_listeners)."""
        # Client quotas hold client listeners only: the inter-broker listener is exempt when
        # other listeners serve the clients.
        exempt = (config.inter_broker_listener_name
                  if len({li.name for li in config.listeners}) > 1 else None)
        self.quotas = QuotaManager(config["quota.window.num"],
                                   config["quota.window.size.seconds"], exempt,
                                   (config["controller.quota.window.num"],
                                    config["controller.quota.window.size.seconds"]))
        self.store.add_client_quota_listener(self.quotas.update)
        # Dynamic broker configs (kafka-configs --entity-type brokers): applied to `config`
        # in place; what holds a value of its own is told here.
        self.dynamic_config = DynamicBrokerConfig(config, self.store, self.broker_id,
                                                  encrypt_passwords=bool(self.zookeeper))
        self.reconfiguration = BrokerReconfiguration(
            config, self.store, self.replicas, self.log_manager, self.controller,
            self.transactions)
        self.reconfiguration.register(self.dynamic_config)
        self.telemetry = TelemetryManager(self.store, config["telemetry.max.bytes"])
        self.registry = build_registry()
        self.dispatcher = Dispatcher(self.registry, self._services(), policies())
        # The listeners (TLS contexts, SASL logins) and this broker's security towards the
        # others are made by start() once the dynamic broker configs are in (Kafka's
        # KafkaServer.startup: DynamicBrokerConfig.initialize before the SocketServer), so a
        # key store altered live (listener.name.<l>.ssl.keystore.*) serves from the first
        # accept and the static one it replaced need not load any more.
        self._server: KafkaServer | None = None

    @property
    def zk_store(self) -> ZkMetadataStore:
        """The ZooKeeper store, for what only a cluster broker (zookeeper.connect) does."""
        if not isinstance(self.store, ZkMetadataStore):
            raise RuntimeError("a broker without zookeeper.connect has no ZooKeeper store")
        return self.store

    @property
    def server(self) -> KafkaServer:
        """The socket server (made by start())."""
        if self._server is None:
            raise RuntimeError("the listeners are made when the broker starts")
        return self._server

    def _create_listeners(self) -> None:
        """The socket server's listeners and the inter-broker client security, from the
        configuration with its dynamic layers; ConfigError when a store does not load."""
        config = self.config
        # How this broker reaches the others: the inter-broker listener's TLS and SASL login.
        set_client_security(ClientSecurity.from_config(config))
        server = KafkaServer(
            listener_endpoints(config, self._scram_credential, self._token_login),
            self.dispatcher,
            config["socket.request.max.bytes"],
            ServerLimits.from_config(config),
            self.dispatcher.answer_at_once,
        )
        server.disconnect_listeners.append(self.shares.connection_closed)
        server.disconnect_listeners.append(self.telemetry.connection_closed)
        self.reconfiguration.serve(server)
        self._server = server

    def _scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        """A user's SCRAM credential, from the cluster metadata."""
        credential: ScramCredential | None = self.store.scram_credential(user, mechanism)
        return credential

    def _token_login(self, token_id: str,
                     mechanism: str) -> tuple[ScramCredential, str, int] | None:
        """A SCRAM login with a delegation token (tokenauth=true), from the cluster's tokens."""
        tokens = TokenManager(self.config, self.store.delegation_tokens)
        return tokens.login(token_id, mechanism, int(time.time() * 1000))

    def _services(self) -> BrokerServices:
        """What request handlers may use of this broker (broker/context.py)."""
        return BrokerServices(
            broker_id=self.broker_id,
            config=self.config,
            store=self.store,
            replicas=self.replicas,
            appends=self.appends,
            topics=self.topics,
            groups=self.groups,
            transactions=self.transactions,
            txn_topic=self.txn_topic,
            producer_ids=self.producer_ids,
            log_dirs=self.log_manager,
            controller=self.controller,
            quotas=self.quotas,
            authorizer=configured_authorizer(self.config, self.store.acls,
                                             isinstance(self.store, ZkMetadataStore)),
            txn_verifier=self.txn_verifier,
            shares=self.shares,
            share_state=self.share_state,
            share_persister=self.share_persister,
            dynamic_config=self.dynamic_config,
            metadata_cache=self.metadata_cache,
            telemetry=self.telemetry,
            fetch_sessions=self.fetch_sessions,
        )

    def _log_config(self, topic: TopicState) -> LogConfig:
        return self.topics.log_config(topic)

    def _on_leadership(self, partition: Partition, is_leader: bool) -> None:
        if not is_leader:
            self.shares.leadership_lost(partition.topic, partition.index)
        if partition.topic == self.txn_topic.name:
            self.transactions.on_leadership(partition.index, is_leader)
        elif partition.topic == self.groups.topic.name:
            self.groups.on_leadership(partition.index, is_leader)
        elif partition.topic == self.share_state_topic.name:
            self.share_state.on_leadership(partition.index, is_leader)

    async def start(self) -> None:
        raise_open_files_limit()  # before the logs load: their segment files use a share
        self.log_dir_failures.listen()  # first: a dir that cannot be locked is a failed one
        # Then, as Kafka's LogManager.lockLogDirs: a second broker on these log dirs stops
        # before it registers, loads a log or listens anywhere (LogDirLockError).
        self.log_manager.lock()
        try:
            await self._start()
        except BaseException:
            self.log_manager.unlock()  # a failed start holds no dir: this process may retry
            raise

    async def _start(self) -> None:
        started = time.monotonic()
        if isinstance(self.store, ZkMetadataStore):
            await self.store.start()
        try:
            # before the logs load (their defaults may be dynamic) and the listeners are made
            await self.dynamic_config.start()
            self._create_listeners()
        except ConfigError:
            if isinstance(self.store, ZkMetadataStore):
                await self.store.close()  # the registration goes at once
            raise
        self.producer_ids.start()  # the first block of ids, claimed in the background
        self.log_manager.startup(self._config_for_topic_name)
        self.replicas.load_all()
        self.log_dir_mover.resume()
        if isinstance(self.store, ZkMetadataStore):
            self.store.add_listener(self.replicas.on_metadata_change)
        await self.transactions.start()
        await self.groups.start()
        await self.share_state.start()
        # The metrics endpoint before the listeners: once a client (or a readiness probe) can
        # connect, a scrape finds it, and a metrics.port already taken stops the start-up
        # before the broker has accepted anyone.
        if self.config["metrics.port"] is not None:
            metrics_endpoint.start_endpoint(self, self.server.host,
                                            self.config["metrics.port"])
        if self.schema_registry is not None:  # as the metrics: ready once the broker is
            await self.schema_registry.start()
        await self.server.start()
        self.lakehouse.start()
        self._background.append(asyncio.create_task(self.log_manager.run_background()))
        self._background.append(asyncio.create_task(metrics.watch_loop_lag()))
        self._background.append(asyncio.create_task(expire_tokens_forever(
            lambda: TokenManager(self.config, self.store.delegation_tokens),
            self.config["delegation.token.expiry.check.interval.ms"])))
        self.loop_watchdog.start()
        if self.cluster_member is not None:
            self._background += self.cluster_member.start()
        log.info(
            "Samsa broker %d serving on %s:%d (data in %s; %d partitions loaded in %.0f ms)",
            self.broker_id,
            self.server.host,
            self.server.port,
            ",".join(self.log_manager.dirs),
            len(list(self.replicas.partitions())),
            (time.monotonic() - started) * 1000,
        )

    def _config_for_topic_name(self, name: str) -> LogConfig:
        topic = self.store.topic(name)
        return self._log_config(topic) if topic else LogConfig.from_properties({})

    def _wake_fetches(self, topic: str, index: int) -> None:
        partition = self.replicas.get(topic, index)
        if partition is not None:
            partition.notify_waiters()

    async def stop(self) -> None:
        log.info("shutting down")
        if self.cluster_member is not None:
            await self.cluster_member.leave()  # a controlled shutdown, if enabled
        await self.lakehouse.stop()
        if self.schema_registry is not None:
            await self.schema_registry.stop()
        if self._server is not None:
            await self._server.stop()
        # Logs not created yet stay so until the restart creates them (the store has them).
        await self.replicas.stop_creating()
        await self.log_dir_mover.stop()
        if self.cluster_member is not None:
            await self.cluster_member.stop()  # the controller moves what is left at once
        await self.transactions.stop()
        self.txn_verifier.close()
        await self.groups.stop()
        self.shares.stop()
        await self.share_state.stop()
        self.share_persister.close()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.loop_watchdog.stop()
        self.log_manager.shutdown()
        log.info("shut down cleanly")


async def _main(config: Any) -> int:
    broker = Broker(config)
    # Before the start: a SIGTERM that comes once the listeners accept (a supervisor's readiness
    # probe can see that before the start has returned) must still be a clean shutdown.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await broker.start()
    except LogDirLockError as e:
        log.error("Fatal error during broker start-up, shutting down: %s", e)
        return 1
    await stop.wait()
    await broker.stop()
    return 0


def run(config: Any) -> int:
    """Run one broker until SIGTERM/SIGINT; returns the process exit code."""
    tune_malloc()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a hard dependency, kept soft for debugging
        return asyncio.run(_main(config))
    return uvloop.run(_main(config))
