"""Cluster metadata: topics, partition assignments, topic configs, topic ids.

`MetadataStore` is the interface; `LocalMetadataStore` keeps it in one JSON file under the data
dir for the single-broker default (written atomically, fsynced), so `make run` needs nothing
external. The ZooKeeper store of the cluster issue implements the same interface.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from samsa.protocol.uuids import parse_kafka_uuid, random_kafka_uuid_string

from ..security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclCache,
    ResourcePattern,
    entries_from_json,
    entries_to_json,
    pascal,
)
from ..security.scram import MECHANISMS as SCRAM_MECHANISMS
from ..security.scram import ScramCredential
from ..security.tokens import LocalTokens, TokenStore
from .features import FinalizedFeatures, default_levels


@dataclass(slots=True)
class PartitionState:
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    # An ongoing reassignment (KIP-455): `replicas` is then target + original, these the
    # replicas being added (target - original) and removed (original - target).
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)
    # In a ZooKeeper cluster: the zxid of the state znode's last write (mzxid), -1 unknown. A
    # leadership in a state written before this broker's registration (its broker epoch, the
    # czxid) is its previous life's, never taken up (ReplicaManager._take_role).
    zxid: int = -1


def _partition_doc(s: PartitionState) -> dict[str, Any]:
    """`s` as the store file keeps it (dataclasses.asdict's keys, without its deep copy, which
    was most of a 10,000-partition CreateTopics)."""
    return {"replicas": s.replicas, "leader": s.leader, "leader_epoch": s.leader_epoch,
            "isr": s.isr, "adding": s.adding, "removing": s.removing, "zxid": s.zxid}


@dataclass(slots=True)
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """One of a broker's advertised listeners."""

    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str  # the inter-broker listener's address
    port: int
    rack: str | None = None
    endpoints: tuple[BrokerEndpoint, ...] = ()  # every advertised listener

    def endpoint(self, listener: str) -> BrokerEndpoint | None:
        """The broker's address on a listener (Kafka answers Metadata with the brokers'
        addresses on the listener the request came in on); None when it has no such
        listener. A broker that registered no endpoints has its one address."""
        for e in self.endpoints:
            if e.listener == listener:
                return e
        if not self.endpoints:
            return BrokerEndpoint(listener, self.host, self.port)
        return None


# A client quota entity as the protocol names it: its (entity type, name) components sorted by
# type, a None name being the default: (("user", "alice"),), (("client-id", None),),
# (("client-id", "app"), ("user", "alice")).
QuotaEntity = tuple[tuple[str, str | None], ...]
QUOTA_USER = "user"
QUOTA_CLIENT_ID = "client-id"
QUOTA_DEFAULT = "<default>"  # the default entity's name in ZooKeeper paths
# Kafka's user and client-id quota configs (QuotaConfig), with their ConfigDef types.
QUOTA_CONFIGS: dict[str, type] = {
    "producer_byte_rate": int,
    "consumer_byte_rate": int,
    "request_percentage": float,
    "controller_mutation_rate": float,
}


# Replicas in failed log directories: broker id -> its (topic, partition) replicas there.
OfflineReplicas = dict[int, set[tuple[str, int]]]


def quota_entity(components: dict[str, str | None]) -> QuotaEntity:
    return tuple(sorted(components.items()))


class ClientQuotas:
    """A store's client quotas and the listeners told of each change (the quota managers)."""

    def __init__(self) -> None:
        self.current: dict[QuotaEntity, dict[str, float]] = {}
        self._listeners: list[Callable[[dict[QuotaEntity, dict[str, float]]], None]] = []

    def add_listener(self, fn: Callable[[dict[QuotaEntity, dict[str, float]]], None]) -> None:
        """fn(quotas) now and after each change."""
        self._listeners.append(fn)
        fn(self.current)

    def notify(self) -> None:
        for fn in self._listeners:
            fn(self.current)


class MetadataStore(Protocol):
    cluster_id: str

    def brokers(self) -> list[BrokerInfo]: ...
    def topics(self) -> dict[str, TopicState]: ...
    def topic(self, name: str) -> TopicState | None: ...
    def topic_name_by_id(self, topic_id: uuid.UUID) -> str | None: ...
    def controller_id(self) -> int: ...
    # Every broker's replicas in failed log dirs as the cluster announced them (ZooKeeper's
    # /log_dir_event_notification); none without one (this broker's own: ReplicaManager).
    def offline_replicas(self) -> OfflineReplicas: ...
    # Whether the state names its leader in a life before that broker's current registration
    # (it restarted; the controller has not elected it again yet): not a leader to name.
    def leader_in_previous_life(self, state: PartitionState) -> bool: ...
    def add_listener(self, fn: Callable[[str, str], None]) -> None: ...
    async def create_topic(self, topic: TopicState) -> None: ...
    async def delete_topic(self, name: str) -> None: ...
    async def update_topic(self, topic: TopicState) -> None: ...
    # A group's config overrides (Kafka 4's group configs; empty when it has none).
    async def group_configs(self, group: str) -> dict[str, str]: ...
    async def set_group_configs(self, group: str, configs: dict[str, str]) -> None: ...
    async def configured_groups(self) -> list[str]: ...  # the groups that have overrides
    # KIP-714 client metrics subscriptions (CLIENT_METRICS config resources): name -> configs.
    async def client_metrics_configs(self) -> dict[str, dict[str, str]]: ...
    async def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None: ...
    # SCRAM credentials (ZooKeeper's /config/users/<user>)
    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...
    def scram_users(self) -> dict[str, dict[str, str]]: ...
    async def alter_scram_credentials(
        self, changes: list[tuple[str, str, ScramCredential | None]]
    ) -> None: ...
    # Delegation tokens (ZooKeeper's /delegation_token/tokens/<id>; broker/security/tokens.py)
    @property
    def delegation_tokens(self) -> TokenStore: ...
    # The cluster's finalized feature levels (broker/cluster/features.py), and changing them:
    # `apply` maps the current levels to the new ones (or raises, changing nothing).
    def finalized_features(self) -> FinalizedFeatures: ...
    async def update_features(
        self, apply: Callable[[dict[str, int]], dict[str, int]]
    ) -> FinalizedFeatures: ...

    # ---- client quotas (ZooKeeper's /config/users/<user>[/clients/<client-id>] and
    # /config/clients/<client-id>; <default> names the default) -------------------------------
    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]: ...
    def add_client_quota_listener(
        self, fn: Callable[[dict[QuotaEntity, dict[str, float]]], None]
    ) -> None: ...
    async def alter_client_quotas(
        self, changes: list[tuple[QuotaEntity, dict[str, float | None]]]
    ) -> None: ...

    # ---- dynamic broker configs (ZooKeeper's /config/brokers/<id>, and <default> for the
    # cluster-wide defaults; config/dynamic.py) ------------------------------------------------
    # This broker's and the default entity's stored configs, kept current.
    def broker_configs(self) -> dict[str, dict[str, str]]: ...
    # Called with (entity, its whole config) when this broker's or the default's changes.
    def add_broker_config_listener(self, fn: Callable[[str, dict[str, str]], None]) -> None: ...
    async def read_broker_config(self, entity: str) -> dict[str, str]: ...
    # Replace an entity's stored config (and tell every broker).
    async def write_broker_config(self, entity: str, config: dict[str, str]) -> None: ...

    # ---- ACLs (broker/security/authorizer.py) -------------------------------------------
    # Every broker's view of the cluster's ACLs (kept current from ZooKeeper in a cluster).
    def acls(self) -> AclCache: ...
    # Add the ACLs: per binding None, or why it was refused (INVALID_REQUEST).
    async def create_acls(self, bindings: list[AclBinding]) -> list[str | None]: ...
    # Remove the ACLs each filter matches; per filter the bindings removed.
    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]: ...
    # ---- end of ACLs ----------------------------------------------------------------------


def parse_topic_id(text: str) -> uuid.UUID:
    """A topic id as Kafka writes it (Uuid.toString: 22 characters of URL-safe base64), or in
    the hex form earlier Samsa versions wrote to ZooKeeper. ValueError if it is neither."""
    if len(text) == 22:
        return parse_kafka_uuid(text)
    return uuid.UUID(text)


class TopicIdIndex:
    """Topic id -> name of the topics a store holds (Kafka's MetadataCache.topicIdsToNames):
    Fetch v13+ and the other by-id requests look names up without scanning every topic."""

    def __init__(self) -> None:
        self._names: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}

    def set(self, topic: TopicState) -> None:
        old = self._ids.get(topic.name)
        if old is not None and old != topic.topic_id:
            self._names.pop(old, None)
        self._ids[topic.name] = topic.topic_id
        self._names[topic.topic_id] = topic.name

    def drop(self, name: str) -> None:
        old = self._ids.pop(name, None)
        if old is not None:
            self._names.pop(old, None)

    def name(self, topic_id: uuid.UUID) -> str | None:
        return self._names.get(topic_id)


class LocalMetadataStore:
    FILE = "samsa-metadata.json"

    def __init__(self, data_dir: Path, broker: BrokerInfo, *,
                 initial_levels: dict[str, int] | None = None) -> None:
        self._path = data_dir / self.FILE
        self._broker = broker
        self._topics: dict[str, TopicState] = {}
        self._group_configs: dict[str, dict[str, str]] = {}
        self._client_metrics: dict[str, dict[str, str]] = {}
        # SCRAM credentials: user -> mechanism -> Kafka's credential string (ZooKeeper's
        # /config/users/<user> "config" in a cluster).
        self._users: dict[str, dict[str, str]] = {}
        # Delegation tokens, in the file as Kafka 3.x's znodes: "delegation_tokens": [json].
        self.delegation_tokens = LocalTokens(self._save)
        self._by_id = TopicIdIndex()
        self._listeners: list[Callable[[str, str], None]] = []
        self._quotas = ClientQuotas()
        self._acl_cache = AclCache()
        # Dynamic broker configs: entity (this broker's id, or <default>) -> config.
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._broker_config_listeners: list[Callable[[str, dict[str, str]], None]] = []
        self.cluster_id = random_kafka_uuid_string()
        # A new cluster finalizes the default levels; a file from before features has none.
        self._features = FinalizedFeatures(0, default_levels(initial_levels))
        if self._path.exists():
            self._load()
        else:
            self._save()

    def brokers(self) -> list[BrokerInfo]:
        return [self._broker]

    def topics(self) -> dict[str, TopicState]:
        return self._topics

    def topic(self, name: str) -> TopicState | None:
        return self._topics.get(name)

    def topic_name_by_id(self, topic_id: uuid.UUID) -> str | None:
        return self._by_id.name(topic_id)

    def controller_id(self) -> int:
        return self._broker.broker_id

    def offline_replicas(self) -> OfflineReplicas:
        """None announced: the one broker's own are its ReplicaManager's."""
        return {}

    def leader_in_previous_life(self, state: PartitionState) -> bool:
        """Never: the one broker has no registration to outlive."""
        return False

    def add_listener(self, fn: Callable[[str, str], None]) -> None:
        """fn(kind, name) after a change (here only this broker changes anything: "topic")."""
        self._listeners.append(fn)

    def _emit(self, kind: str, name: str) -> None:
        for fn in self._listeners:
            fn(kind, name)

    async def create_topic(self, topic: TopicState) -> None:
        self._topics[topic.name] = topic
        self._by_id.set(topic)
        self._save()
        self._emit("topic", topic.name)

    async def delete_topic(self, name: str) -> None:
        self._topics.pop(name, None)
        self._by_id.drop(name)
        self._save()
        self._emit("topic", name)

    async def update_topic(self, topic: TopicState) -> None:
        self._topics[topic.name] = topic
        self._by_id.set(topic)
        self._save()
        self._emit("topic", topic.name)

    async def group_configs(self, group: str) -> dict[str, str]:
        return dict(self._group_configs.get(group, {}))

    async def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        _put_configs(self._group_configs, group, configs)
        self._save()

    async def configured_groups(self) -> list[str]:
        return list(self._group_configs)

    async def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        return {name: dict(c) for name, c in self._client_metrics.items()}

    async def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None:
        _put_configs(self._client_metrics, name, configs)
        self._save()

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        return ScramCredential.from_config(text) if text else None

    def scram_users(self) -> dict[str, dict[str, str]]:
        return {u: {k: v for k, v in m.items() if k in SCRAM_MECHANISMS}
                for u, m in self._users.items()}

    async def alter_scram_credentials(
        self, changes: list[tuple[str, str, ScramCredential | None]]
    ) -> None:
        """(user, mechanism, credential or None to delete), all at once."""
        for user, mechanism, credential in changes:
            mechs = self._users.setdefault(user, {})
            if credential is None:
                mechs.pop(mechanism, None)
            else:
                mechs[mechanism] = credential.to_config()
            if not mechs:
                del self._users[user]
        self._save()

    def finalized_features(self) -> FinalizedFeatures:
        return self._features

    async def update_features(
        self, apply: Callable[[dict[str, int]], dict[str, int]]
    ) -> FinalizedFeatures:
        levels = apply(dict(self._features.levels))
        self._features = FinalizedFeatures(self._features.epoch + 1, levels)
        self._save()
        return self._features

    def _load(self) -> None:
        doc = json.loads(self._path.read_text())
        self.cluster_id = doc["cluster_id"]
        self._users = {str(u): dict(m) for u, m in doc.get("users", {}).items()}
        self.delegation_tokens.load(doc.get("delegation_tokens", []))
        for t in doc["topics"]:
            self._topics[t["name"]] = TopicState(
                name=t["name"],
                topic_id=uuid.UUID(t["topic_id"]),
                partitions={int(p): PartitionState(**s) for p, s in t["partitions"].items()},
                configs=t.get("configs", {}),
                internal=t.get("internal", False),
            )
            self._by_id.set(self._topics[t["name"]])
        self._group_configs = {g: dict(c) for g, c in doc.get("group_configs", {}).items()}
        self._client_metrics = {n: dict(c) for n, c in doc.get("client_metrics", {}).items()}
        self._broker_configs = {str(e): {str(k): str(v) for k, v in c.items()}
                                for e, c in doc.get("broker_configs", {}).items()}
        self._load_client_quotas(doc)
        self._load_acls(doc.get("acls", []))
        features = doc.get("features", {})
        self._features = FinalizedFeatures(
            int(features.get("epoch", 0)),
            {str(k): int(v) for k, v in features.get("levels", {}).items() if int(v) > 0},
        )

    def _save(self) -> None:
        doc = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "partitions": {str(p): _partition_doc(s) for p, s in t.partitions.items()},
                    "configs": t.configs,
                    "internal": t.internal,
                }
                for t in self._topics.values()
            ],
            "group_configs": self._group_configs,
            "client_metrics": self._client_metrics,
            "broker_configs": self._broker_configs,
            "users": self._users,
            "delegation_tokens": self.delegation_tokens.doc(),
            **self._client_quotas_doc(),
            "acls": self._acls_doc(),
            "features": {"epoch": self._features.epoch, "levels": self._features.levels},
        }
        tmp = self._path.with_suffix(".tmp")
        # The whole store is written on every change: json.dumps is C's encoder, json.dump to
        # a file the pure-Python one (5x slower at 10,000 partitions).
        text = json.dumps(doc)
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        dir_fd = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # ---- dynamic broker configs ---------------------------------------------------------------
    # In the file: "broker_configs": {"<default>": {...}, "<id>": {...}}.
    def broker_configs(self) -> dict[str, dict[str, str]]:
        return {e: dict(c) for e, c in self._broker_configs.items()}

    def add_broker_config_listener(self, fn: Callable[[str, dict[str, str]], None]) -> None:
        self._broker_config_listeners.append(fn)

    async def read_broker_config(self, entity: str) -> dict[str, str]:
        return dict(self._broker_configs.get(entity, {}))

    async def write_broker_config(self, entity: str, config: dict[str, str]) -> None:
        _put_configs(self._broker_configs, entity, config)
        self._save()
        for fn in self._broker_config_listeners:
            fn(entity, dict(config))

    # ---- client quotas ----------------------------------------------------------------------
    # In the file: "client_quotas": [{"entity": [[type, name or null for the default], ...],
    # "config": {key: value}}, ...].
    def client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        return self._quotas.current

    def add_client_quota_listener(
        self, fn: Callable[[dict[QuotaEntity, dict[str, float]]], None]
    ) -> None:
        self._quotas.add_listener(fn)

    async def alter_client_quotas(
        self, changes: list[tuple[QuotaEntity, dict[str, float | None]]]
    ) -> None:
        """Per entity: key -> new value, or None to remove the key."""
        quotas = {e: dict(c) for e, c in self._quotas.current.items()}
        for entity, ops in changes:
            config = quotas.setdefault(entity, {})
            for key, value in ops.items():
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = float(value)
            if not config:
                del quotas[entity]
        self._quotas.current = quotas
        self._save()
        self._quotas.notify()

    def _load_client_quotas(self, doc: dict[str, Any]) -> None:
        for item in doc.get("client_quotas", []):
            entity = quota_entity({str(t): None if n is None else str(n)
                                   for t, n in item["entity"]})
            self._quotas.current[entity] = {str(k): float(v)
                                            for k, v in item["config"].items()}

    def _client_quotas_doc(self) -> dict[str, Any]:
        return {"client_quotas": [
            {"entity": [[t, n] for t, n in entity],
             "config": config}
            for entity, config in self._quotas.current.items()
        ]}

    # ---- ACLs ---------------------------------------------------------------------------------
    # In the file: "acls": [{"resource_type": "Topic", "pattern_type": "PREFIXED", "name": ...,
    # "acls": Kafka's {"version":1,"acls":[...]}}].
    def acls(self) -> AclCache:
        return self._acl_cache

    async def create_acls(self, bindings: list[AclBinding]) -> list[str | None]:
        for b in bindings:
            self._acl_cache.set(b.pattern, self._acl_cache.get(b.pattern) | {b.entry})
        self._save()
        return [None] * len(bindings)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        out: list[list[AclBinding]] = [[] for _ in filters]
        gone: set[AclBinding] = set()
        for b in list(self._acl_cache.bindings()):
            for i, f in enumerate(filters):
                if f.matches(b):
                    out[i].append(b)
                    gone.add(b)
        for b in gone:
            self._acl_cache.set(b.pattern, self._acl_cache.get(b.pattern) - {b.entry})
        if gone:
            self._save()
        return out

    def _load_acls(self, docs: list[dict[str, object]]) -> None:
        for d in docs:
            pattern = ResourcePattern.named(str(d["resource_type"]), str(d["name"]),
                                            str(d["pattern_type"]))
            self._acl_cache.set(pattern, entries_from_json(d["acls"]))

    def _acls_doc(self) -> list[dict[str, object]]:
        return [{"resource_type": pascal(p.resource_type.name),
                 "pattern_type": p.pattern_type.name, "name": p.name,
                 "acls": entries_to_json(self._acl_cache.get(p))}
                for p in self._acl_cache.patterns()]
    # ---- end of ACLs --------------------------------------------------------------------------


def _put_configs(table: dict[str, dict[str, str]], key: str, configs: dict[str, str]) -> None:
    """A copy of `configs` kept under `key`; none (empty) removes the entry."""
    if configs:
        table[key] = dict(configs)
    else:
        table.pop(key, None)
