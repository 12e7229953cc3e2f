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

kazoo runs its own threads: reads are served from a cache that ZooKeeper watches keep current
(updates are handed to the event loop), and writes run in a worker thread and are awaited.

The store is made of parts, each owning its znodes and what it caches of them (Kafka's
ZooKeeper-era KafkaZkClient split by concern): `session` (the kazoo client, the session's
state), `registry` (/brokers/ids, log dir events), `topic_store` (/brokers/topics and the
partition states, /config/topics), `controller` (/controller, /controller_epoch and the
controller's assignment writes), `states` (partition state reads and ISR writes) and
`producer_ids`. ZkMetadataStore itself is the MetadataStore the rest of the broker uses; what
only a ZooKeeper cluster does is asked of the part that owns it. Client quotas, dynamic broker
configs, users, features and ACLs are still its mixins.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from kazoo.exceptions import NodeExistsError, NoNodeError

from ...security.authorizer import AclCache
from ..features import FinalizedFeatures, default_levels
from ..metadata_store import (
    BrokerInfo,
    OfflineReplicas,
    QuotaEntity,
    TopicState,
    new_cluster_id,
)
from .acls import ZkAclsMixin
from .brokers import LOG_DIR_EVENTS, ZkBrokerRegistry
from .client import ZkClientSettings
from .common import dumps as _dumps
from .configs import ZkConfigsMixin
from .controller import ZkController
from .features import FEATURE, ZkFeaturesMixin
from .features import feature_doc as _feature_doc
from .partition_states import ZkPartitionStates
from .producer_ids import ZkProducerIdBlocks
from .session import ZkSession
from .topics import ZkTopics
from .users import ZkUsersMixin


class ZkMetadataStore(ZkConfigsMixin, ZkUsersMixin, ZkFeaturesMixin, ZkAclsMixin):
    def __init__(self, connect: str, broker: BrokerInfo, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None,
                 client: ZkClientSettings | None = None, *,
                 initial_levels: dict[str, int] | None = None) -> None:
        self._initial_levels = initial_levels or {}
        self.cluster_id = ""
        self.session = ZkSession(connect, client or ZkClientSettings(), session_timeout_ms,
                                 connection_timeout_ms)
        self.registry = ZkBrokerRegistry(self.session, broker)
        self.topic_store = ZkTopics(self.session, self.registry)
        self.controller = ZkController(self.session, self.registry, self.topic_store)
        self.states = ZkPartitionStates(self.session, self.controller)
        self.producer_ids = ZkProducerIdBlocks(self.session, broker.broker_id)
        # What the mixins use (as they were before the store was split in parts).
        self._zk = self.session.zk
        self._broker = broker
        self._users: dict[str, dict[str, str]] = {}  # /config/users/<user> "config"s (SCRAM)
        self._watched_users: set[str] = set()
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}  # client quotas
        self._quota_listeners: list[Callable[[dict[QuotaEntity, dict[str, float]]], None]] = []
        self._quota_notification_seen: int | None = None
        self._acl_cache = AclCache()
        self._acl_changes_seen: dict[str, set[str]] = {}  # change path -> notifications read
        self._acl_change_ctimes: dict[str, int] = {}  # notification -> its ctime (to purge)
        self._features = FinalizedFeatures()  # /feature, kept current by a watch
        # Dynamic broker configs of this broker and the cluster default (entity -> config).
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._broker_config_listeners: list[Callable[[str, dict[str, str]], None]] = []

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
        try:
            zk.create("/cluster/id", _dumps({"version": "1", "id": new_cluster_id()}),
                      makepath=True)
            new_cluster = True
        except NodeExistsError:
            new_cluster = False
        # A new cluster finalizes the default feature levels; one from before /feature none.
        try:
            zk.create(FEATURE, _feature_doc(default_levels(self._initial_levels)
                                            if new_cluster else {}))
        except NodeExistsError:
            pass
        self.cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
        self.registry.start()
        self.topic_store.start()
        self.controller.start()
        self.registry.watch_log_dirs()
        zk.ChildrenWatch("/config/users", self._on_user_names)
        # Dynamic broker configs are in place before the broker starts serving (Kafka's
        # DynamicBrokerConfig.initialize); the notifications keep them current.
        self._broker_configs = {e: self._read_broker_config(e) for e in self._config_entities()}
        self._start_client_quotas()
        self._start_acls()
        zk.DataWatch(FEATURE, self._on_features)

    async def refresh(self) -> None:
        """Re-read what a new session may have missed: every topic and partition state (the
        cache then reflects what happened while we were away, whatever the watches
        delivered), the controller, the registrations and the ACLs."""
        await self.topic_store.refresh()
        await self.controller.refresh()
        await self.registry.refresh()
        self._set_all_acls(await asyncio.to_thread(self._read_all_acls))  # changes missed

    async def close(self) -> None:
        await self.session.close()

    def add_listener(self, fn: Callable[[str, str], None]) -> None:
        """fn(kind, name) on the event loop after the cache changed: kind is broker|topic."""
        self.session.add_listener(fn)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        self.session.call(fn, *args)

    # ---- brokers, topics, controller --------------------------------------------------------
    def brokers(self) -> list[BrokerInfo]:
        return self.registry.brokers()

    def offline_replicas(self) -> OfflineReplicas:
        return self.registry.offline_replicas()

    def controller_id(self) -> int:
        return self.controller.controller_id()

    def topics(self) -> dict[str, TopicState]:
        return self.topic_store.topics()

    def topic(self, name: str) -> TopicState | None:
        return self.topic_store.topic(name)

    def topic_name_by_id(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_store.topic_name_by_id(topic_id)

    async def create_topic(self, topic: TopicState) -> None:
        await self.topic_store.create_topic(topic)

    async def delete_topic(self, name: str) -> None:
        await self.topic_store.delete_topic(name)

    async def update_topic(self, topic: TopicState) -> None:
        await self.topic_store.update_topic(topic)

    # ---- group configs: read where they are used (DescribeConfigs, alter), not cached ----
    async def group_configs(self, group: str) -> dict[str, str]:
        return await asyncio.to_thread(self._read_group_configs, group)

    def _read_group_configs(self, group: str) -> dict[str, str]:
        try:
            data = self._zk.get(_group_config_path(group))[0]
        except NoNodeError:
            return {}
        return dict(json.loads(data).get("config", {}))

    async def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        await asyncio.to_thread(self._write_group_configs, group, configs)

    def _write_group_configs(self, group: str, configs: dict[str, str]) -> None:
        path = _group_config_path(group)
        if not configs:
            try:
                self._zk.delete(path)
            except NoNodeError:
                pass
            return
        doc = _dumps({"version": 1, "config": configs})
        try:
            self._zk.set(path, doc)
        except NoNodeError:
            try:
                self._zk.create(path, doc, makepath=True)
            except NodeExistsError:  # created meanwhile by another broker: last write wins
                self._zk.set(path, doc)


def _group_config_path(group: str) -> str:
    return f"/config/groups/{quote(group, safe='')}"
