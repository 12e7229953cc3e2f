"""The ZooKeeper metadata store's topics: /brokers/topics/<t> (assignment, topic id), its
partitions' state znodes and /config/topics/<t>, cached and kept current by watches.

Every update of the cache runs on the event loop. A watch may deliver a state older than one
already held (a write of ours is reflected at once; a refresh reads while leaders write), so
the cache keeps the newer: topic znodes by zkVersion, partition states by leader epoch, then
by the state znode's mzxid (see _set_topic, _set_state and _keep_newer_states).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from samsa.protocol.uuids import kafka_uuid_string, random_kafka_uuid

from ..metadata_store import (
    PartitionState,
    TopicIdIndex,
    TopicState,
    parse_topic_id,
)
from .brokers import ZkBrokerRegistry
from .common import dumps as _dumps
from .session import ZkSession

# The store's own logger, as before the store was split in parts (samsa.log.loggers).
log = logging.getLogger("samsa.broker.cluster.zk.store")

INTERNAL = frozenset({"__consumer_offsets", "__transaction_state"})


class ZkTopics:
    def __init__(self, session: ZkSession, registry: ZkBrokerRegistry) -> None:
        self._session = session
        self._zk = session.zk
        self._registry = registry  # this broker's id and epoch
        # The topics by name and by id: what the store's reads return (read only outside
        # this class).
        self.cache: dict[str, TopicState] = {}
        self.ids = TopicIdIndex()
        # zkVersion of each /brokers/topics/<t> the cache holds: a watch delivering an older
        # version (after a write of ours, reflected at once) is ignored.
        self._topic_versions: dict[str, int] = {}
        self._watched: set[str] = set()
        self._watched_states: set[tuple[str, int]] = set()

    def start(self) -> None:
        """(worker thread) Follow the topics (and each topic's partition states)."""
        self._zk.ChildrenWatch("/brokers/topics", self._on_topic_names)

    async def refresh(self) -> None:
        """Re-read every topic and partition state (after a new session): the cache then
        reflects what happened while we were away, whatever the watches delivered."""
        topics = await asyncio.to_thread(self.read_all_topics)
        for topic, version in topics:
            self._set_topic(topic, version)

    def read_all_topics(self) -> list[tuple[TopicState, int]]:
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
                    "topic_id": kafka_uuid_string(topic.topic_id),
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
            doc.update(version=3, topic_id=kafka_uuid_string(topic.topic_id))  # Kafka's format
            try:
                return int(self._zk.set(base, _dumps(doc), version=stat.version).version)
            except BadVersionError:
                continue

    # ---- watches (kazoo thread) -> cache (event loop) -----------------------------------
    def _on_topic_names(self, children: list[str]) -> None:
        for name in children:
            if name not in self._watched:
                self._watched.add(name)
                self._zk.DataWatch(f"/brokers/topics/{name}", self._topic_watcher(name))
        gone = self._watched - set(children)
        for name in gone:
            self._watched.discard(name)
            self._session.call(self._drop_topic, name)

    def _topic_watcher(self, name: str) -> Callable[[bytes | None, Any], bool]:
        def on_change(data: bytes | None, stat: Any) -> bool:
            if data is None:
                return name in self._watched
            # retried: kazoo's DataWatch does not call again for a version it has passed, so
            # a topic whose read lost the connection would stay unknown until it next changes
            topic = self._zk.retry(self._read_topic, name, data)
            if topic is not None:
                self._session.call(self._set_topic, topic,
                                   None if stat is None else stat.version)
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
                self._session.call(self._set_state, name, index, json.loads(data), stat.mzxid)
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
            topic_id = random_kafka_uuid()
            current.update(version=3, topic_id=kafka_uuid_string(topic_id))
            try:
                self._zk.set(path, _dumps(current), version=stat.version)
                log.info("topic %s had no topic id: assigned %s", name, kafka_uuid_string(topic_id))
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

    # ---- the cache (event loop) -------------------------------------------------------------
    def _set_topic(self, topic: TopicState, version: int | None = None) -> None:
        if version is not None:
            known = self._topic_versions.get(topic.name)
            current = self.cache.get(topic.name)
            if (known is not None and version < known and current is not None
                    and current.topic_id == topic.topic_id):
                return  # older than what we hold
            self._topic_versions[topic.name] = version
        held = self.cache.get(topic.name)
        if held is not None and held.topic_id == topic.topic_id:
            _keep_newer_states(held, topic)
        self.cache[topic.name] = topic
        self.ids.set(topic)
        self._session.emit("topic", topic.name)

    def reflect_partition_state(self, name: str, index: int, doc: dict[str, Any],
                                zxid: int | None = None) -> None:
        """A partition state this broker just wrote, in the cache at once (Kafka's controller
        updates its context as it writes, a leader its ISR and zkVersion); the watch brings the
        same later. Without its `zxid` (the state znode's mzxid), only that it was written in
        this broker's current life is known."""
        self._set_state(name, index, doc, self._registry.broker_epoch if zxid is None else zxid)

    def reflect_assignment(self, topic: str, index: int, replicas: list[int],
                           adding: list[int], removing: list[int], state: dict[str, Any],
                           version: int) -> None:
        """An assignment the controller just wrote (topic znode at zkVersion `version`, and the
        partition's state), in the cache at once: a List or the controller's next step must
        not see the assignment of a watch still on its way."""
        cached = self.cache.get(topic)
        if cached is not None and index in cached.partitions:
            p = cached.partitions[index]
            p.replicas, p.adding, p.removing = list(replicas), list(adding), list(removing)
            if state["leader_epoch"] >= p.leader_epoch:
                p.leader, p.leader_epoch = state["leader"], state["leader_epoch"]
                p.isr = list(state["isr"])
                p.zxid = max(p.zxid, self._registry.broker_epoch)  # written in our current life
            self._topic_versions[topic] = max(version, self._topic_versions.get(topic, -1))
            self._session.emit("topic", topic)

    def _set_state(self, name: str, index: int, doc: dict[str, Any], zxid: int) -> None:
        topic = self.cache.get(name)
        if topic is None or index not in topic.partitions:
            return
        state = topic.partitions[index]
        if doc.get("leader_epoch", 0) < state.leader_epoch:
            return  # never go back to an older leadership
        if (doc["leader"], doc["leader_epoch"], doc["isr"]) == (
                state.leader, state.leader_epoch, state.isr):
            # Nothing new (the watch's first reading, of what the topic read already held):
            # telling the listeners would re-apply the whole topic once per partition; unless
            # it is the leadership written again in its leader's current life (a previous
            # life's is not taken up, nor named in Metadata, until then).
            before, state.zxid = state.zxid, max(state.zxid, zxid)
            if not before < self._registry.epoch_of(state.leader) <= state.zxid:
                return
        state.leader = doc["leader"]
        state.leader_epoch = doc["leader_epoch"]
        state.isr = list(doc["isr"])
        state.zxid = max(state.zxid, zxid)
        self._session.emit_soon("topic", name)  # the cache holds it now; its listeners soon

    def _drop_topic(self, name: str) -> None:
        self._topic_versions.pop(name, None)
        self.ids.drop(name)
        if self.cache.pop(name, None) is not None:
            self._session.emit("topic", name)


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
