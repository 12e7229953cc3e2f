"""Dynamic broker configs reach what holds a value of its own (Kafka's BrokerReconfigurable
set: DynamicLogConfig, DynamicThreadPool, DynamicConnectionQuota, ...), and the TLS listeners'
key and trust stores reload live, per listener (Kafka's SslFactory). dynamic_config.py applies
the configs to the broker's BrokerConfig in place; this is told what changed."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from samsa.config.schema import (
    BROKER_PROPERTIES,
    TOPIC_SYNONYMS,
    BrokerConfig,
    ConfigError,
    split_listener_key,
)
from samsa.coordinator.transaction import TransactionCoordinator
from samsa.storage.log_dirs import LogDirs

from .cluster.controller import Controller
from .cluster.metadata_store import MetadataStore
from .dynamic_config import DynamicBrokerConfig
from .network.interbroker import set_client_security
from .network.server import KafkaServer
from .replication.replica_manager import ReplicaManager
from .security.client import ClientSecurity
from .security.tls import ListenerTls

log = logging.getLogger(__name__)

# The broker properties that are topic defaults (Kafka's DynamicLogConfig.ReconfigurableConfigs).
_LOG_DEFAULTS = frozenset(n for chain in TOPIC_SYNONYMS.values() for n, _ in chain)


def check_cordoned(log_dirs: LogDirs, candidate: BrokerConfig) -> None:
    """cordoned.log.dirs names only log directories of this broker (ConfigError if not)."""
    try:
        log_dirs.cordoned_keys(candidate["cordoned.log.dirs"])
    except ValueError as exc:
        raise ConfigError("cordoned.log.dirs", str(exc)) from None


@dataclass(eq=False)
class BrokerReconfiguration:
    """Registered with the broker's DynamicBrokerConfig (`register`): validates an alter
    against the TLS listeners and the log directories, then pushes the new values. The
    listeners are made at start (`serve`), once the dynamic configs are in."""

    config: Any
    store: MetadataStore
    replicas: ReplicaManager
    log_dirs: LogDirs
    controller: Controller | None
    transactions: TransactionCoordinator
    # The TLS listeners' key and trust stores, changed live per listener (SslFactory).
    listener_tls: list[ListenerTls] = field(default_factory=list, init=False)
    _server: KafkaServer | None = field(default=None, init=False)

    def register(self, dynamic_config: DynamicBrokerConfig) -> None:
        dynamic_config.add_reconfigurable(self.reconfigure)
        # what an alter must pass: every TLS listener's new stores load (a store file rewritten
        # in place reloads at once), and the cordoned directories are this broker's
        dynamic_config.add_validator(self._validate_listener_tls, self.reload_listener_tls)
        dynamic_config.add_validator(self._check_cordoned)

    def serve(self, server: KafkaServer) -> None:
        """The listeners are made: their TLS stores and connection limits change live."""
        config = self.config
        self.listener_tls = [
            ListenerTls(config, e.name, e.security_protocol == "SASL_SSL", e.tls,
                        e.name == config.inter_broker_listener_name)
            for e in server.endpoints if e.tls is not None]
        self._server = server

    def reconfigure(self, changed: set[str]) -> None:
        """Dynamic broker configs changed (Kafka's BrokerReconfigurables): push the new values
        to what does not read them from the config each time."""
        config = self.config
        if changed & _LOG_DEFAULTS:
            # topic defaults (DynamicLogConfig): every hosted topic without an override
            for topic in list(self.store.topics().values()):
                self.replicas.reconfigure(topic)
        if ("unclean.leader.election.enable" in changed and self.controller is not None
                and config["unclean.leader.election.enable"]):
            self.controller.reconsider()
        if self.replicas.leader_quota is not None:
            self.replicas.leader_quota.bound = config["leader.replication.throttled.rate"]
        if self.replicas.fetchers is not None and self.replicas.fetchers.quota is not None:
            self.replicas.fetchers.quota.bound = config["follower.replication.throttled.rate"]
        if changed & {"max.connections", "max.connections.per.ip"} and self._server is not None:
            self._server.set_connection_limits(config["max.connections"],
                                              config["max.connections.per.ip"])
        if "log.cleaner.backoff.ms" in changed:
            self.log_dirs.set_cleaner_backoff_ms(config["log.cleaner.backoff.ms"])
        if "producer.id.expiration.ms" in changed:
            self.log_dirs.set_producer_id_expiration_ms(config["producer.id.expiration.ms"])
        if "cordoned.log.dirs" in changed:
            self.log_dirs.set_cordoned(config["cordoned.log.dirs"])
        self.transactions.verification_enabled = config[
            "transaction.partition.verification.enable"]
        if any(split_listener_key(name) is not None for name in changed):
            self.reload_listener_tls(config)
        for name in sorted(changed):
            prop = BROKER_PROPERTIES.get(name)
            if prop is not None and prop.ignored is not None:
                log.warning("%s changed but has no effect in Samsa: %s", name, prop.ignored)

    def _check_cordoned(self, candidate: BrokerConfig) -> None:
        check_cordoned(self.log_dirs, candidate)

    def _validate_listener_tls(self, candidate: BrokerConfig) -> None:
        for tls in self.listener_tls:
            tls.prepare(candidate)

    def reload_listener_tls(self, config: BrokerConfig) -> None:
        """New connections of each TLS listener whose stores changed (configs or files) get
        the new ones; a store that no longer loads or fits leaves the listener as it was."""
        for tls in self.listener_tls:
            try:
                rebuilt = tls.prepare(config)
            except ConfigError as exc:
                log.error("listener %s keeps its TLS key and trust stores: %s", tls.listener, exc)
                continue
            if rebuilt is None:
                continue
            tls.apply(rebuilt)
            assert self._server is not None  # listener_tls is made with the server
            self._server.set_tls(tls.listener, rebuilt.context)
            log.info("listener %s: new TLS key and trust stores for new connections",
                     tls.listener)
            if tls.listener == config.inter_broker_listener_name:
                # this broker's own connections to the others use the listener's stores too
                try:
                    set_client_security(ClientSecurity.from_config(config))
                except ConfigError as exc:
                    log.error("inter-broker connections keep their TLS stores: %s", exc)
