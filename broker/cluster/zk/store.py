"""Cluster metadata in ZooKeeper, laid out like Kafka 0.8-3.x (see cluster-coordination.md).

    /cluster/id                                  {"version":"1","id":...}
    /brokers/ids/<id>                  ephemeral {"version":5,"host","port","rack","endpoints",
                                                  "listener_security_protocol_map"}; epoch = czxid
    /brokers/topics/<t>              {"version":3,"topic_id","partitions":{"0":[1,2]},...}
    /brokers/topics/<t>/partitions/<p>/state     {"controller_epoch","leader","leader_epoch","isr"}
    /config/topics/<t>                           {"version":1,"config":{...}}
    /config/brokers/<id>|<default>               {"version":1,"config":{...}} (dynamic broker
                                                 configs; changes in /config/changes)
    /config/groups/<g>                           {"version":1,"config":{...}} (group configs;
                                                 <g> percent-encoded: a group id may hold '/')
    /latest_producer_id_block                    {"version":1,"broker","block_start","block_end"}
    /feature                                     {"version":2,"status":1,"features":
                                                  {"transaction.version":{"max_version_level":2}}}
                                                 finalized feature levels; epoch = zkVersion
    /log_dir_event_notification/log_dir_event_<seq>
                            ephemeral {"version":1,"broker","event":1,"partitions":[[t,p],...]}
    /kafka-acl/<ResourceType>/<name>             {"version":1,"acls":[{"principal","host",
                                                  "operation","permissionType"}]} (LITERAL)
    /kafka-acl-extended/prefixed/<ResourceType>/<name>      the same, PREFIXED
    /kafka-acl-changes/acl_changes_<seq>         "TOPIC:<name>": that LITERAL resource changed
    /kafka-acl-extended-changes/acl_changes_<seq>
                            {"version":1,"resourceType","name","patternType"} (PREFIXED)
    /delegation_token/tokens/<id>                a delegation token (see tokens.py)

kazoo runs its own threads: reads are served from a cache that ZooKeeper watches keep current
(updates are handed to the event loop), and writes run in a worker thread and are awaited.

The store is made of parts, each owning its znodes and what it caches of them (Kafka's
ZooKeeper-era KafkaZkClient split by concern): `session` (the kazoo client, the session's
state), `registry` (/brokers/ids, log dir events), `topic_store` (/brokers/topics and the
partition states, /config/topics), `controller` (/controller, /controller_epoch and the
controller's assignment writes), `states` (partition state reads and ISR writes), `configs`
(client quotas, dynamic broker and group configs), `users` (SCRAM), `features` (/feature),
`acl_store` (ACLs), `delegation_tokens` (the MetadataStore's token store) and `producer_ids`.
ZkMetadataStore itself is the MetadataStore the rest of the broker uses; what only a ZooKeeper
cluster does is asked of the part that owns it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable

from kazoo.exceptions import NodeExistsError

from samsa.protocol.uuids import random_kafka_uuid_string

from ...security.authorizer import AclBinding, AclBindingFilter, AclCache
from ...security.scram import ScramCredential
from ..features import FinalizedFeatures, default_levels
from ..metadata_store import (
    BrokerInfo,
    OfflineReplicas,
    PartitionState,
    QuotaEntity,
    TopicState,
)
from .acls import ZkAcls
from .brokers import LOG_DIR_EVENTS, ZkBrokerRegistry
from .client import ZkClientSettings
from .common import dumps as _dumps
from .configs import ZkConfigs
from .controller import ZkController
from .features import ZkFeatures
from .partition_states import ZkPartitionStates
from .producer_ids import ZkProducerIdBlocks
from .session import ZkSession
from .tokens import ZkDelegationTokens
from .topics import ZkTopics
from .users import ZkUsers


class ZkMetadataStore:
    def __init__(self, connect: str, broker: BrokerInfo, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None,
                 client: ZkClientSettings | None = None, *,
                 initial_levels: dict[str, int] | None = None,
                 session: ZkSession | None = None) -> None:
        self._initial_levels = initial_levels or {}
        self.cluster_id = ""
        self.session = session or ZkSession(connect, client or ZkClientSettings(),
                                            session_timeout_ms, connection_timeout_ms)
        self.registry = ZkBrokerRegistry(self.session, broker)
        self.topic_store = ZkTopics(self.session, self.registry)
        self.controller = ZkController(self.session, self.registry, self.topic_store)
        self.states = ZkPartitionStates(self.session, self.controller)
        self.configs = ZkConfigs(self.session, broker.broker_id)
        self.users = ZkUsers(self.session)
        self.features = ZkFeatures(self.session)
        self.acl_store = ZkAcls(self.session)
        self.delegation_tokens = ZkDelegationTokens(self.session)
        self.producer_ids = ZkProducerIdBlocks(self.session, broker.broker_id)

    # ---- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        self.session.loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._connect)

    def _connect(self) -> None:
        self.session.connect()
        zk = self.session.zk
        for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/config/users",
                     LOG_DIR_EVENTS):
            zk.ensure_path(path)
        self._create_cluster()
        self.cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
        self.registry.start()
        self.topic_store.start()
        self.controller.start()
        self.registry.watch_log_dirs()
        self.users.start()
        self.configs.start()
        self.acl_store.start()
        self.features.start()
        self.delegation_tokens.start()

    def _create_cluster(self) -> None:
        """(worker thread) /cluster/id and, for a new cluster, /feature with the default
        feature levels, in one transaction: a broker starting beside this one (another process
        of a node) that saw the id without /feature would take the cluster for one from
        before /feature and finalize no feature (no KIP-848 or share groups)."""
        levels = default_levels(self._initial_levels)
        doc = _dumps({"version": "1", "id": random_kafka_uuid_string()})
        zk = self.session.zk
        zk.ensure_path("/cluster")
        if self.features.create_with(zk.transaction(), "/cluster/id", doc, levels):
            return
        try:  # /cluster/id or /feature was there already
            zk.create("/cluster/id", doc)
            new_cluster = True
        except NodeExistsError:
            new_cluster = False
        # A new cluster finalizes the default feature levels; one from before /feature none.
        self.features.create(levels if new_cluster else {})

    async def refresh(self) -> None:
        """Re-read what a new session may have missed: every topic and partition state (the
        cache then reflects what happened while we were away, whatever the watches
        delivered), the controller, the registrations and the ACLs."""
        await self.topic_store.refresh()
        await self.controller.refresh()
        await self.registry.refresh()
        await self.acl_store.refresh()

    async def close(self) -> None:
        await self.session.close()

    def add_listener(self, fn: Callable[[str, str], None]) -> None:
        """fn(kind, name) on the event loop after the cache changed: kind is broker|topic."""
        self.session.add_listener(fn)

    # ---- brokers, topics, controller --------------------------------------------------------
    def brokers(self) -> list[BrokerInfo]:
        return self.registry.brokers()

    def offline_replicas(self) -> OfflineReplicas:
        return self.registry.offline_replicas()

    def leader_in_previous_life(self, state: PartitionState) -> bool:
        """The state was last written (its mzxid) before its leader's current registration
        (the broker epoch): a broker that restarted does not take that leadership up until the
        controller writes it again at the next leader epoch (ReplicaManager._previous_life),
        so clients told it would be fenced by the leader epoch they were told of. Kafka's
        controller handles that broker as failed first (its leaderships gone) and Metadata
        names no leader meanwhile. An unknown mzxid (-1) is this life's."""
        return 0 <= state.zxid < self.registry.epoch_of(state.leader)

    def controller_id(self) -> int:
        return self.controller.controller_id()

    def topics(self) -> dict[str, TopicState]:
        return self.topic_store.cache

    def topic(self, name: str) -> TopicState | None:
        return self.topic_store.cache.get(name)

    def topic_name_by_id(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_store.ids.name(topic_id)

    async def create_topic(self, topic: TopicState) -> None:
        await self.topic_store.create_topic(topic)

    async def delete_topic(self, name: str) -> None:
        await self.topic_store.delete_topic(name)

    async def update_topic(self, topic: TopicState) -> None:
        await self.topic_store.update_topic(topic)

    # ---- configs, quotas, users, features ---------------------------------------------------
    async def group_configs(self, group: str) -> dict[str, str]:
        return await self.configs.group_configs(group)

    async def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        await self.configs.set_group_configs(group, configs)

    async def configured_groups(self) -> list[str]:
        return await self.configs.configured_groups()

    async def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        return await self.configs.client_metrics_configs()

    async def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None:
        await self.configs.set_client_metrics_configs(name, configs)

    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        return self.configs.quotas.current

    def add_client_quota_listener(
        self, fn: Callable[[dict[QuotaEntity, dict[str, float]]], None]
    ) -> None:
        self.configs.quotas.add_listener(fn)

    async def alter_client_quotas(
        self, changes: list[tuple[QuotaEntity, dict[str, float | None]]]
    ) -> None:
        await self.configs.alter_client_quotas(changes)

    def broker_configs(self) -> dict[str, dict[str, str]]:
        return self.configs.broker_configs()

    def add_broker_config_listener(self, fn: Callable[[str, dict[str, str]], None]) -> None:
        self.configs.add_broker_config_listener(fn)

    async def read_broker_config(self, entity: str) -> dict[str, str]:
        return await self.configs.read_broker_config(entity)

    async def write_broker_config(self, entity: str, config: dict[str, str]) -> None:
        await self.configs.write_broker_config(entity, config)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.scram_credential(user, mechanism)

    def scram_users(self) -> dict[str, dict[str, str]]:
        return self.users.scram_users()

    async def alter_scram_credentials(
        self, changes: list[tuple[str, str, ScramCredential | None]]
    ) -> None:
        await self.users.alter_scram_credentials(changes)

    def finalized_features(self) -> FinalizedFeatures:
        return self.features.finalized_features()

    async def update_features(
        self, apply: Callable[[dict[str, int]], dict[str, int]]
    ) -> FinalizedFeatures:
        return await self.features.update_features(apply)

    # ---- ACLs -------------------------------------------------------------------------------
    def acls(self) -> AclCache:
        return self.acl_store.acls()

    async def create_acls(self, bindings: list[AclBinding]) -> list[str | None]:
        return await self.acl_store.create_acls(bindings)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        return await self.acl_store.delete_acls(filters)
