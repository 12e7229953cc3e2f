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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from kazoo.client import KazooState
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError

from ...security.authorizer import (
    AclCache,
)
from ..features import FinalizedFeatures, default_levels
from ..metadata_store import (
    BrokerEndpoint,
    BrokerInfo,
    OfflineReplicas,
    PartitionState,
    QuotaEntity,
    TopicIdIndex,
    TopicState,
    new_cluster_id,
    parse_topic_id,
    uuid_to_kafka,
)
from .acls import ZkAclsMixin
from .client import ZkClientSettings
from .common import dumps as _dumps
from .configs import ZkConfigsMixin
from .controller import ZkControllerMixin
from .features import FEATURE, ZkFeaturesMixin
from .features import feature_doc as _feature_doc
from .users import ZkUsersMixin

log = logging.getLogger(__name__)

INTERNAL = frozenset({"__consumer_offsets", "__transaction_state"})
# Kafka's broker announces a failed log dir to the controller here. Kafka's controller then asks
# the broker (LeaderAndIsr) which replicas are offline; with no such round trip, ours carries
# them, and is ephemeral: the broker's replicas are offline until it restarts (or dies).
LOG_DIR_EVENTS = "/log_dir_event_notification"


class ZkMetadataStore(ZkControllerMixin, ZkConfigsMixin, ZkUsersMixin, ZkFeaturesMixin,
                      ZkAclsMixin):
    def __init__(self, connect: str, broker: BrokerInfo, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int | None = None,
                 client: ZkClientSettings | None = None, *,
                 initial_levels: dict[str, int] | None = None) -> None:
        self._hosts = connect
        self._initial_levels = initial_levels or {}
        # TLS and ACLs from the zookeeper.* properties (zk/client.py)
        self._client = client or ZkClientSettings()
        self._zk = self._client.client(connect, timeout=session_timeout_ms / 1000)
        self._session_timeout_s = session_timeout_ms / 1000
        self._own_sessions: set[int] = set()  # every session this process registered with
        # Kafka's zookeeper.connection.timeout.ms: unset means the session timeout.
        connect_ms = session_timeout_ms if connection_timeout_ms is None else connection_timeout_ms
        self._connect_timeout_s = connect_ms / 1000
        self._broker = broker
        self._loop: asyncio.AbstractEventLoop | None = None
        self.cluster_id = ""
        self.broker_epoch = -1
        self._brokers: dict[int, BrokerInfo] = {}
        self._broker_epochs: dict[int, int] = {}  # czxid of each registration (KIP-380)
        self._topics: dict[str, TopicState] = {}
        # zkVersion of each /brokers/topics/<t> the cache holds: a watch delivering an older
        # version (after a write of ours, reflected at once) is ignored.
        self._topic_versions: dict[str, int] = {}
        self._by_id = TopicIdIndex()
        self._watched: set[str] = set()
        self._users: dict[str, dict[str, str]] = {}  # /config/users/<user> "config"s (SCRAM)
        self._watched_users: set[str] = set()
        self._quotas: dict[QuotaEntity, dict[str, float]] = {}  # client quotas (below)
        self._quota_listeners: list[Callable[[dict[QuotaEntity, dict[str, float]]], None]] = []
        self._quota_notification_seen: int | None = None
        self._watched_states: set[tuple[str, int]] = set()
        self._listeners: list[Callable[[str, str], None]] = []
        self.session_lost = asyncio.Event()
        # Whether we hold a session and are registered in it: false from a session lost (or
        # given up, see _session_state) to the next registration. No leadership is taken up
        # meanwhile (ReplicaManager._previous_life).
        self.registered = False
        self._given_up: asyncio.TimerHandle | None = None  # see _session_state
        # Set with session_lost when ZooKeeper said the session expired (and with it
        # /controller): not when the store gave a silent connection up (the session may
        # live on, and a controller fenced by its epoch can wait for it).
        self.session_expired = False
        self._closing = False  # our own close ends the session: no loss to recover from
        self._controller_id = -1
        self.controller_epoch = -1  # ours, while we are the controller
        self._controller_epoch_version = -1  # zkVersion of /controller_epoch: the fencing token
        self._offline_here: set[tuple[str, int]] = set()  # our replicas in failed log dirs
        self._offline_replicas: dict[int, set[tuple[str, int]]] = {}  # every broker's
        self._acl_cache = AclCache()
        self._acl_changes_seen: dict[str, set[str]] = {}  # change path -> notifications read
        self._acl_change_ctimes: dict[str, int] = {}  # notification -> its ctime (to purge)
        self._features = FinalizedFeatures()  # /feature, kept current by a watch
        # Dynamic broker configs of this broker and the cluster default (entity -> config).
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._broker_config_listeners: list[Callable[[str, dict[str, str]], None]] = []

    # ---- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._connect)

    def _connect(self) -> None:
        try:
            _ensure_chroot(self._hosts, self._client, self._connect_timeout_s)
            self._zk.start(timeout=self._connect_timeout_s)
            # kazoo calls a session connected before its SASL login: the first request
            # waits for the login and fails if ZooKeeper refused it
            self._zk.exists("/")
        except (AuthFailedError, SessionClosedRequireSaslError, KazooTimeoutError) as exc:
            self._zk.stop()  # no more retries in the background
            # a refused login can also end start() at once, as a time-out
            if self._client.sasl_error or not isinstance(exc, KazooTimeoutError):
                # Kafka's ZooKeeperClientAuthFailedException
                raise ConnectionError(
                    f"Auth failed either before or while waiting for connection to ZooKeeper "
                    f"at {self._hosts}: {self._client.auth_failure(exc)}"
                ) from None
            why = self._client.last_error()
            raise ConnectionError(
                f"Timed out waiting for a connection to ZooKeeper at {self._hosts} within "
                f"{self._connect_timeout_s * 1000:.0f} ms (zookeeper.connection.timeout.ms)"
                + (f"; {why}" if why else "")
            ) from None
        self._zk.add_listener(self._on_state)
        for path in ("/brokers/ids", "/brokers/topics", "/config/topics", "/config/users",
                     LOG_DIR_EVENTS):
            self._zk.ensure_path(path)
        try:
            self._zk.create(
                "/cluster/id", _dumps({"version": "1", "id": new_cluster_id()}), makepath=True
            )
            new_cluster = True
        except NodeExistsError:
            new_cluster = False
        # A new cluster finalizes the default feature levels; one from before /feature none.
        try:
            self._zk.create(FEATURE, _feature_doc(default_levels(self._initial_levels)
                                                  if new_cluster else {}))
        except NodeExistsError:
            pass
        self.cluster_id = json.loads(self._zk.get("/cluster/id")[0])["id"]
        self._register()
        self._zk.ChildrenWatch("/brokers/ids", self._on_broker_ids)
        self._zk.ChildrenWatch("/brokers/topics", self._on_topic_names)
        self._zk.DataWatch("/controller", self._on_controller)
        self._zk.ChildrenWatch(LOG_DIR_EVENTS, self._on_log_dir_events)
        self._zk.ChildrenWatch("/config/users", self._on_user_names)
        # Dynamic broker configs are in place before the broker starts serving (Kafka's
        # DynamicBrokerConfig.initialize); the notifications keep them current.
        self._broker_configs = {e: self._read_broker_config(e) for e in self._config_entities()}
        self._start_client_quotas()
        self._start_acls()
        self._zk.DataWatch(FEATURE, self._on_features)

    def _register(self) -> None:
        b = self._broker
        doc = {
            "version": 5,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "endpoints": [f"{e.listener}://{e.host}:{e.port}" for e in b.endpoints]
            or [f"PLAINTEXT://{b.host}:{b.port}"],
        }
        if b.endpoints:
            doc["listener_security_protocol_map"] = {
                e.listener: e.security_protocol for e in b.endpoints
            }
        path = f"/brokers/ids/{b.broker_id}"
        client_id = self._zk.client_id
        if client_id is None:  # the session lost, its successor not made yet: try again
            raise ConnectionLoss("no ZooKeeper session yet")
        session = client_id[0]
        deadline = time.monotonic() + 2 * self._session_timeout_s
        waited_for: set[int] = set()
        while True:
            try:
                self._zk.create(path, _dumps(doc), ephemeral=True)
                break
            except NodeExistsError:
                pass
            try:
                _, stat = self._zk.get(path)
            except NoNodeError:
                continue  # went away while we looked: create again
            owner = stat.owner_session_id
            if owner == session:
                break  # ours already (a create retried after a connection loss)
            if owner in self._own_sessions:
                # A session of this process that expired, its znode left behind
                # (ZOOKEEPER-2985): Kafka's KAFKA-7165 deletes and re-creates it.
                log.info("Was not possible to create the ephemeral at %s, node already exists "
                         "and owner '0x%x' does not match current session '0x%x', trying to "
                         "delete and re-create it with the newest Zookeeper session", path,
                         owner, session)
                with contextlib.suppress(NoNodeError):
                    self._zk.delete(path, version=stat.version)
                continue
            # Another session's: most likely this broker's previous life, killed less than a
            # session timeout ago, whose session ZooKeeper has not yet expired. Wait for it
            # (never delete it: it may be a live broker configured with our id); if it is
            # still there after twice the session timeout, fail as Kafka does.
            if time.monotonic() > deadline:
                log.error("Error while creating ephemeral at %s, node already exists and owner "
                          "'0x%x' does not match current session '0x%x'", path, owner, session)
                raise NodeExistsError(f"{path} is held by session 0x{owner:x}: is another "
                                      f"broker running with node.id {b.broker_id}?")
            if owner not in waited_for:
                waited_for.add(owner)
                log.info("%s is still held by session 0x%x (a previous life of this broker?): "
                         "waiting for ZooKeeper to expire it", path, owner)
            time.sleep(0.1)
        self._own_sessions.add(session)
        self.broker_epoch = self._zk.exists(path).czxid
        self.registered = True
        log.info("Registered broker %d at path %s, czxid (broker epoch): %d", b.broker_id, path,
                 self.broker_epoch)
        self._write_log_dir_event()  # a new session: the old one's event went with it

    async def reregister(self, timeout_s: float = 30.0) -> None:
        """Register again once kazoo has its new session (LOST comes before CONNECTED)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await asyncio.to_thread(self._register)
                return
            except (SessionExpiredError, ConnectionLoss):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    async def refresh(self) -> None:
        """Re-read every topic and partition state (after a new session): the cache then
        reflects what happened while we were away, whatever the watches delivered."""
        topics = await asyncio.to_thread(self._read_all_topics)
        for topic, version in topics:
            self._set_topic(topic, version)
        controller = await asyncio.to_thread(self._read_controller)
        self._set_controller(controller)
        # (a session that expired while a watch read them left the registrations unread)
        brokers = await asyncio.to_thread(
            lambda: self._read_brokers(self._zk.get_children("/brokers/ids")))
        self._set_brokers(*brokers)
        self._set_all_acls(await asyncio.to_thread(self._read_all_acls))  # changes missed

    def _read_all_topics(self) -> list[tuple[TopicState, int]]:
        out = []
        for name in self._zk.get_children("/brokers/topics"):
            try:
                data, stat = self._zk.get(f"/brokers/topics/{name}")
                topic = self._read_topic(name, data)
            except NoNodeError:
                continue
            if topic is not None:
                out.append((topic, stat.version))
        return out

    def _read_controller(self) -> int:
        try:
            return int(json.loads(self._zk.get("/controller")[0]).get("brokerid", -1))
        except NoNodeError:
            return -1

    def claim_producer_id_block(self, size: int) -> int:
        """Blocking (one ZooKeeper round trip per block of ids)."""
        return self._allocate_block(size)

    async def close(self) -> None:
        self._closing = True
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        self._zk.stop()
        self._zk.close()

    def _on_state(self, state: str) -> None:
        if self._loop is not None and not self._closing:
            self._loop.call_soon_threadsafe(self._session_state, state)

    def _session_state(self, state: str) -> None:
        """(event loop) kazoo learns that a session expired only once it reaches ZooKeeper
        again (LOST): a broker cut off from ZooKeeper would go on leading, and accepting
        writes it cannot replicate, while the controller has moved its leaderships on. So a
        connection not back by the time ZooKeeper may have expired the session counts as a
        lost session: kazoo notices silence (SUSPENDED) after at most two thirds of the
        session timeout, ZooKeeper expires a session after a full one, and the controller
        moves the leaderships right after; a quarter (not the full third left) leaves room
        for a busy event loop."""
        if self._closing:
            return
        if state == KazooState.SUSPENDED:
            if self._given_up is None and self._loop is not None:
                self._given_up = self._loop.call_later(self._expiry_margin_s(),
                                                       self._give_up_session)
            return
        if self._given_up is not None:
            self._given_up.cancel()
            self._given_up = None
        if state == KazooState.LOST:
            self.session_expired = True
            self._lose_session()

    def _expiry_margin_s(self) -> float:
        """A quarter of zookeeper.session.timeout.ms (kazoo does not keep the timeout ZooKeeper
        granted; it is the one asked for while that lies within the server's bounds)."""
        return self._session_timeout_s / 4

    def _give_up_session(self) -> None:
        self._given_up = None
        if self.registered:
            log.warning("No connection to ZooKeeper for so long that the session may expire "
                        "before it is back: acting as if the session were lost")
        self._lose_session()

    def _lose_session(self) -> None:
        self.registered = False
        self.session_lost.set()

    def add_listener(self, fn: Callable[[str, str], None]) -> None:
        """fn(kind, name) on the event loop after the cache changed: kind is broker|topic."""
        self._listeners.append(fn)

    def _emit(self, kind: str, name: str) -> None:
        for fn in self._listeners:
            fn(kind, name)

    # ---- watches (kazoo thread) -> cache (event loop) -----------------------------------
    def _on_controller(self, data: bytes | None, _stat: Any) -> bool:
        controller = -1 if data is None else int(json.loads(data).get("brokerid", -1))
        self._call(self._set_controller, controller)
        return True

    def _set_controller(self, controller: int) -> None:
        self._controller_id = controller
        self._emit("controller", "")

    def _on_broker_ids(self, children: list[str]) -> None:
        # Called for every change of the children, even when the list reads the same: a
        # broker that re-registered (deleted and created again) shows a new czxid.
        self._call(self._set_brokers, *self._read_brokers(children))

    def _read_brokers(self, children: list[str]) -> tuple[dict[int, BrokerInfo], dict[int, int]]:
        """(kazoo thread) Each registration's endpoints and epoch. Reads retry a connection
        loss: kazoo's ChildrenWatch does not call again for a list it already passed, so an
        update dropped here would stay dropped until the list changes."""
        brokers, epochs = {}, {}
        for child in children:
            try:
                data, stat = self._zk.retry(self._zk.get, f"/brokers/ids/{child}")
            except NoNodeError:
                continue
            doc = json.loads(data)
            brokers[int(child)] = BrokerInfo(int(child), doc["host"], doc["port"], doc.get("rack"),
                                             _endpoints(doc))
            epochs[int(child)] = stat.czxid
        return brokers, epochs

    def _on_log_dir_events(self, children: list[str]) -> None:
        offline: dict[int, set[tuple[str, int]]] = {}
        for child in children:
            try:
                doc = json.loads(self._zk.retry(self._zk.get, f"{LOG_DIR_EVENTS}/{child}")[0])
                broker = int(doc["broker"])
                parts = {(str(t), int(p)) for t, p in doc.get("partitions", [])}
            except (NoNodeError, ValueError, KeyError, TypeError):
                continue
            offline.setdefault(broker, set()).update(parts)
        self._call(self._set_offline_replicas, offline)

    def _set_offline_replicas(self, offline: dict[int, set[tuple[str, int]]]) -> None:
        self._offline_replicas = offline
        self._emit("log_dir", "")

    def _set_brokers(self, brokers: dict[int, BrokerInfo], epochs: dict[int, int]) -> None:
        self._brokers = brokers
        self._broker_epochs = epochs
        self._emit("broker", "")

    def _on_topic_names(self, children: list[str]) -> None:
        for name in children:
            if name not in self._watched:
                self._watched.add(name)
                self._zk.DataWatch(f"/brokers/topics/{name}", self._topic_watcher(name))
        gone = self._watched - set(children)
        for name in gone:
            self._watched.discard(name)
            self._call(self._drop_topic, name)

    def _topic_watcher(self, name: str) -> Callable[[bytes | None, Any], bool]:
        def on_change(data: bytes | None, stat: Any) -> bool:
            if data is None:
                return name in self._watched
            # retried: kazoo's DataWatch does not call again for a version it has passed, so
            # a topic whose read lost the connection would stay unknown until it next changes
            topic = self._zk.retry(self._read_topic, name, data)
            if topic is not None:
                self._call(self._set_topic, topic, None if stat is None else stat.version)
                for p in topic.partitions:
                    if (name, p) in self._watched_states:
                        continue  # one watch per state znode, however often the topic changes
                    self._watched_states.add((name, p))
                    self._zk.DataWatch(
                        f"/brokers/topics/{name}/partitions/{p}/state", self._state_watcher(name, p)
                    )
            return True

        return on_change

    def _state_watcher(self, name: str, index: int) -> Callable[[bytes | None, Any], bool]:
        def on_change(data: bytes | None, stat: Any) -> bool:
            if data is not None:
                self._call(self._set_state, name, index, json.loads(data), stat.mzxid)
            if name in self._watched:
                return True
            self._watched_states.discard((name, index))
            return False

        return on_change

    def _read_topic(self, name: str, data: bytes) -> TopicState | None:
        doc = json.loads(data)
        try:
            config = json.loads(self._zk.get(f"/config/topics/{name}")[0]).get("config", {})
        except NoNodeError:
            config = {}
        partitions = {}
        adding = doc.get("adding_replicas") or {}
        removing = doc.get("removing_replicas") or {}
        states = self._read_states(name, [int(p) for p in doc["partitions"]])
        for p, replicas in doc["partitions"].items():
            state, zxid = states[int(p)]
            partitions[int(p)] = PartitionState(
                replicas=list(replicas),
                leader=state.get("leader", -1),
                leader_epoch=state.get("leader_epoch", 0),
                isr=list(state.get("isr", replicas)),
                adding=[int(r) for r in adding.get(p, ())],
                removing=[int(r) for r in removing.get(p, ())],
                zxid=zxid,
            )
        topic_id = self._topic_id(name, doc)
        if topic_id is None:
            return None
        return TopicState(name, topic_id, partitions, config, name in INTERNAL)

    def _topic_id(self, name: str, doc: dict[str, Any]) -> uuid.UUID | None:
        """The topic's id from its znode; a topic created without one (by Kafka before 2.8)
        gets one, written back as Kafka's controller does (conditional on the znode's version:
        the first writer's id wins)."""
        text = doc.get("topic_id")
        if isinstance(text, str):
            try:
                return parse_topic_id(text)
            except ValueError:
                log.error("topic %s: unreadable topic id %r in ZooKeeper: ignoring the topic",
                          name, text)
                return None
        path = f"/brokers/topics/{name}"
        while True:
            try:
                data, stat = self._zk.get(path)
            except NoNodeError:
                return None
            current = json.loads(data)
            if isinstance(current.get("topic_id"), str):
                return self._topic_id(name, current)  # another broker assigned it first
            topic_id = uuid.uuid4()
            current.update(version=3, topic_id=uuid_to_kafka(topic_id))
            try:
                self._zk.set(path, _dumps(current), version=stat.version)
                log.info("topic %s had no topic id: assigned %s", name, uuid_to_kafka(topic_id))
                return topic_id
            except BadVersionError:
                continue
            except NoNodeError:
                return None

    def _read_states(
        self, name: str, indexes: list[int]
    ) -> dict[int, tuple[dict[str, Any], int]]:
        """The state znodes of a topic's partitions and their mzxids, read pipelined (all
        requests sent, then the answers collected): one round trip per partition made reading
        a topic of thousands of partitions take seconds."""
        pending = [(i, self._zk.get_async(f"/brokers/topics/{name}/partitions/{i}/state"))
                   for i in indexes]
        out: dict[int, tuple[dict[str, Any], int]] = {}
        for i, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                out[i] = ({}, -1)
                continue
            out[i] = (json.loads(data), stat.mzxid)
        return out

    def _set_topic(self, topic: TopicState, version: int | None = None) -> None:
        if version is not None:
            known = self._topic_versions.get(topic.name)
            current = self._topics.get(topic.name)
            if (known is not None and version < known and current is not None
                    and current.topic_id == topic.topic_id):
                return  # older than what we hold
            self._topic_versions[topic.name] = version
        held = self._topics.get(topic.name)
        if held is not None and held.topic_id == topic.topic_id:
            _keep_newer_states(held, topic)
        self._topics[topic.name] = topic
        self._by_id.set(topic)
        self._emit("topic", topic.name)

    def reflect_partition_state(self, name: str, index: int, doc: dict[str, Any],
                                zxid: int | None = None) -> None:
        """A partition state this broker just wrote, in the cache at once (Kafka's controller
        updates its context as it writes, a leader its ISR and zkVersion); the watch brings the
        same later. Without its `zxid` (the state znode's mzxid), only that it was written in
        this broker's current life is known."""
        self._set_state(name, index, doc, self.broker_epoch if zxid is None else zxid)

    def _set_state(self, name: str, index: int, doc: dict[str, Any], zxid: int) -> None:
        topic = self._topics.get(name)
        if topic is None or index not in topic.partitions:
            return
        state = topic.partitions[index]
        if doc.get("leader_epoch", 0) < state.leader_epoch:
            return  # never go back to an older leadership
        if (doc["leader"], doc["leader_epoch"], doc["isr"]) == (
                state.leader, state.leader_epoch, state.isr):
            # Nothing new (the watch's first reading, of what the topic read already held):
            # telling the listeners would re-apply the whole topic once per partition; unless
            # it is our leadership written again in our current life (a previous life's is
            # not taken up until then).
            before, state.zxid = state.zxid, max(state.zxid, zxid)
            if not (state.leader == self._broker.broker_id
                    and before < self.broker_epoch <= state.zxid):
                return
        state.leader = doc["leader"]
        state.leader_epoch = doc["leader_epoch"]
        state.isr = list(doc["isr"])
        state.zxid = max(state.zxid, zxid)
        self._emit("topic", name)

    def _drop_topic(self, name: str) -> None:
        self._topic_versions.pop(name, None)
        self._by_id.drop(name)
        if self._topics.pop(name, None) is not None:
            self._emit("topic", name)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(fn, *args)

    # ---- reads (cache) --------------------------------------------------------------------
    def controller_id(self) -> int:
        return self._controller_id

    def broker_epochs(self) -> dict[int, int]:
        """Each registered broker's epoch (the czxid of its /brokers/ids znode)."""
        return self._broker_epochs

    def brokers(self) -> list[BrokerInfo]:
        return sorted(self._brokers.values(), key=lambda b: b.broker_id)

    def topics(self) -> dict[str, TopicState]:
        return self._topics

    def offline_replicas(self) -> OfflineReplicas:
        """{broker id: its (topic, partition) replicas in failed log dirs}."""
        return self._offline_replicas

    def topic(self, name: str) -> TopicState | None:
        return self._topics.get(name)

    def topic_name_by_id(self, topic_id: uuid.UUID) -> str | None:
        return self._by_id.name(topic_id)

    # ---- writes -----------------------------------------------------------------------------
    async def create_topic(self, topic: TopicState) -> None:
        await asyncio.to_thread(self._create_topic, topic)
        self._topic_versions.pop(topic.name, None)  # a new znode: its versions start again
        self._set_topic(topic, 0)

    def _create_topic(self, topic: TopicState) -> None:
        tx = self._zk.transaction()
        tx.create(f"/config/topics/{topic.name}", _dumps({"version": 1, "config": topic.configs}))
        tx.create(
            f"/brokers/topics/{topic.name}",
            _dumps(
                {
                    "version": 3,  # Kafka's TopicZNode since 2.8: with the topic id
                    "topic_id": uuid_to_kafka(topic.topic_id),
                    "partitions": {str(p): s.replicas for p, s in topic.partitions.items()},
                    "adding_replicas": {},
                    "removing_replicas": {},
                }
            ),
        )
        tx.create(f"/brokers/topics/{topic.name}/partitions")
        for p, s in topic.partitions.items():
            tx.create(f"/brokers/topics/{topic.name}/partitions/{p}")
            tx.create(f"/brokers/topics/{topic.name}/partitions/{p}/state", _state_doc(s))
        results = tx.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise failed[0]

    async def delete_topic(self, name: str) -> None:
        await asyncio.to_thread(self._delete_topic, name)
        self._drop_topic(name)

    def _delete_topic(self, name: str) -> None:
        self._zk.delete(f"/brokers/topics/{name}", recursive=True)
        try:
            self._zk.delete(f"/config/topics/{name}")
        except NoNodeError:
            pass

    async def update_topic(self, topic: TopicState) -> None:
        version = await asyncio.to_thread(self._update_topic, topic)
        self._set_topic(topic, version)

    def _update_topic(self, topic: TopicState) -> int:
        base = f"/brokers/topics/{topic.name}"
        self._zk.set(
            f"/config/topics/{topic.name}", _dumps({"version": 1, "config": topic.configs})
        )
        exists = [(p, s, self._zk.exists_async(f"{base}/partitions/{p}/state"))
                  for p, s in topic.partitions.items()]  # pipelined, not a round trip each
        for p, s, found in exists:
            if not found.get():
                self._zk.create(f"{base}/partitions/{p}/state", _state_doc(s), makepath=True)
        while True:
            data, stat = self._zk.get(base)
            doc = json.loads(data)
            # New partitions only: the existing ones' assignments are the controller's (a
            # reassignment may have changed them since our cache was filled).
            for p, s in topic.partitions.items():
                doc["partitions"].setdefault(str(p), s.replicas)
            doc.update(version=3, topic_id=uuid_to_kafka(topic.topic_id))  # Kafka's format
            try:
                return int(self._zk.set(base, _dumps(doc), version=stat.version).version)
            except BadVersionError:
                continue

    # Group configs are read where they are used (DescribeConfigs, alter), not cached.
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

    async def allocate_producer_id_block(self, size: int) -> int:
        """Claim the next block of producer ids by compare-and-set; returns its first id."""
        return await asyncio.to_thread(self._allocate_block, size)

    def _allocate_block(self, size: int) -> int:
        path = "/latest_producer_id_block"
        self._zk.ensure_path(path)
        while True:
            data, stat = self._zk.get(path)
            start = int(json.loads(data)["block_end"]) + 1 if data else 0
            doc = {
                "version": 1,
                "broker": self._broker.broker_id,
                "block_start": str(start),
                "block_end": str(start + size - 1),
            }
            try:
                self._zk.set(path, _dumps(doc), version=stat.version)
                return start
            except BadVersionError:
                continue


    async def report_offline_replicas(self, partitions: set[tuple[str, int]]) -> None:
        """Announce our replicas in failed log dirs (all of them, each time) to the controller."""
        self._offline_here = set(partitions)
        await asyncio.to_thread(self._write_log_dir_event)

    def _write_log_dir_event(self) -> None:
        if not self._offline_here:
            return
        doc = {"version": 1, "broker": self._broker.broker_id, "event": 1,
               "partitions": [[t, p] for t, p in sorted(self._offline_here)]}
        self._zk.create(f"{LOG_DIR_EVENTS}/log_dir_event_", _dumps(doc), ephemeral=True,
                        sequence=True, makepath=True)


def _keep_newer_states(held: TopicState, read: TopicState) -> None:
    """A topic read may be older than a partition state the cache already holds: the refresh
    after a new session reads every topic while the leaders write their ISR changes, and a
    change the state watch delivered before the read was applied would be undone, with no
    later event to bring it back (a broker cut off one way kept an old ISR for minutes after
    it registered again). Keep a held state whose leader epoch, then state znode mzxid, is
    newer than the one read."""
    for index, state in read.partitions.items():
        mine = held.partitions.get(index)
        if mine is not None and (mine.leader_epoch, mine.zxid) > (state.leader_epoch, state.zxid):
            state.leader, state.leader_epoch = mine.leader, mine.leader_epoch
            state.isr, state.zxid = list(mine.isr), mine.zxid


def _group_config_path(group: str) -> str:
    return f"/config/groups/{quote(group, safe='')}"


def _ensure_chroot(connect: str, client: ZkClientSettings, timeout: float) -> None:
    """Create the chroot (`host:port/samsa`) first, as Kafka's zookeeper.connect allows."""
    hosts, _, chroot = connect.partition("/")
    if not chroot:
        return
    bare = client.client(hosts)
    try:
        bare.start(timeout=timeout)
    except KazooTimeoutError:
        bare.stop()
        raise
    try:
        bare.ensure_path("/" + chroot)
    finally:
        bare.stop()
        bare.close()


def _state_doc(s: PartitionState) -> bytes:
    return _dumps(
        {
            "version": 1,
            "controller_epoch": 0,
            "leader": s.leader,
            "leader_epoch": s.leader_epoch,
            "isr": s.isr,
        }
    )


def _endpoints(doc: dict[str, Any]) -> tuple[BrokerEndpoint, ...]:
    """A broker znode's "endpoints" (["NAME://HOST:PORT", ...]) with their protocols from
    "listener_security_protocol_map" (Kafka's BrokerInfo JSON, version 4+)."""
    protocols = doc.get("listener_security_protocol_map") or {}
    out = []
    for text in doc.get("endpoints") or ():
        name, sep, address = str(text).partition("://")
        host, _, port = address.rpartition(":")
        if not sep or not port.isdigit():
            continue
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        out.append(BrokerEndpoint(name, host, int(port), str(protocols.get(name, name))))
    return tuple(out)
