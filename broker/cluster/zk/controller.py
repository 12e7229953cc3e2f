"""The ZooKeeper metadata store's controller side: election, partition state and assignment
writes fenced by /controller_epoch."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..metadata_store import BrokerInfo, TopicState
from .common import dumps as _dumps


class ZkControllerMixin:
    """ZkMetadataStore's controller methods (ZkMetadataStore owns the state they use)."""

    _zk: KazooClient
    _broker: BrokerInfo
    _topics: dict[str, TopicState]
    _topic_versions: dict[str, int]
    _controller_epoch_version: int
    controller_epoch: int
    broker_epoch: int

    if TYPE_CHECKING:
        def _set_controller(self, controller: int) -> None: ...

        def _emit(self, kind: str, name: str) -> None: ...

    async def elect_controller(self) -> bool:
        """Kafka's election (KAFKA-6082): one multi creates /controller and bumps
        /controller_epoch; True if this broker won."""
        won = await asyncio.to_thread(self._elect)
        if won:
            self._set_controller(self._broker.broker_id)  # before the watch says so
        return won

    def _elect(self) -> bool:
        me = self._broker.broker_id
        try:
            self._zk.create("/controller_epoch", b"0")
        except NodeExistsError:
            pass
        data, stat = self._zk.get("/controller_epoch")
        epoch = int(data or b"0")
        tx = self._zk.transaction()
        tx.create("/controller", _dumps({"version": 1, "brokerid": me,
                                         "timestamp": str(int(time.time() * 1000))}),
                  ephemeral=True)
        tx.set_data("/controller_epoch", str(epoch + 1).encode(), version=stat.version)
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            return False
        self.controller_epoch = epoch + 1
        self._controller_epoch_version = results[1].version
        return True

    async def read_partition_state(self, topic: str, index: int) -> tuple[dict[str, Any], int]:
        return await asyncio.to_thread(self._read_state_versioned, topic, index)

    def _read_state_versioned(self, topic: str, index: int) -> tuple[dict[str, Any], int]:
        data, stat = self._zk.get(f"/brokers/topics/{topic}/partitions/{index}/state")
        return json.loads(data), stat.version

    async def partition_state_zxids(
        self, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[dict[str, Any], int]]:
        """Each partition's state and the zxid of its last write (mzxid), read in one go:
        a state written before a broker's registration (czxid) comes from that broker's
        previous life."""
        return await asyncio.to_thread(self._read_state_zxids, partitions)

    def _read_state_zxids(
        self, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[dict[str, Any], int]]:
        out = {}
        for topic, index in partitions:
            try:
                data, stat = self._zk.get(f"/brokers/topics/{topic}/partitions/{index}/state")
            except NoNodeError:
                continue
            out[(topic, index)] = (json.loads(data), stat.mzxid)
        return out

    async def write_partition_states(
        self, updates: list[tuple[str, int, dict[str, Any], int]], as_controller: bool
    ) -> bool:
        """Write partition states, each conditional on the zkVersion it was read at; as the
        controller also conditional on /controller_epoch (a stale controller writes nothing)."""
        return await asyncio.to_thread(self._write_states, updates, as_controller)

    async def write_leader_isr(self, topic: str, index: int, doc: dict[str, Any],
                               version: int) -> int | None:
        """A leader's own ISR change, conditional on the zkVersion it was read at: the state
        znode's mzxid once written, None if refused."""
        return await asyncio.to_thread(self._write_leader_isr, topic, index, doc, version)

    def _write_leader_isr(self, topic: str, index: int, doc: dict[str, Any],
                          version: int) -> int | None:
        try:
            stat = self._zk.set(f"/brokers/topics/{topic}/partitions/{index}/state",
                                _dumps(doc), version=version)
        except (BadVersionError, NoNodeError):
            return None
        return int(stat.mzxid)

    def _write_states(
        self, updates: list[tuple[str, int, dict[str, Any], int]], as_controller: bool
    ) -> bool:
        tx = self._zk.transaction()
        if as_controller:
            tx.check("/controller_epoch", self._controller_epoch_version)
        for topic, index, doc, version in updates:
            tx.set_data(f"/brokers/topics/{topic}/partitions/{index}/state", _dumps(doc),
                        version=version)
        results = tx.commit()
        return not any(isinstance(r, Exception) for r in results)

    async def write_assignment(
        self, topic: str, index: int, replicas: list[int], adding: list[int],
        removing: list[int], state: dict[str, Any], state_version: int,
    ) -> bool:
        """As the controller: set one partition's assignment in the topic znode (replicas and
        Kafka's adding_replicas/removing_replicas, the durable record of a reassignment) and
        its state, in one multi conditional on /controller_epoch and the state's zkVersion."""
        version = await asyncio.to_thread(self._write_assignment, topic, index, replicas,
                                          adding, removing, state, state_version)
        if version is None:
            return False
        # Reflected at once (Kafka's controller updates its context as it writes): a List
        # or the next step must not see the assignment of a watch still on its way.
        cached = self._topics.get(topic)
        if cached is not None and index in cached.partitions:
            p = cached.partitions[index]
            p.replicas, p.adding, p.removing = list(replicas), list(adding), list(removing)
            if state["leader_epoch"] >= p.leader_epoch:
                p.leader, p.leader_epoch = state["leader"], state["leader_epoch"]
                p.isr = list(state["isr"])
                p.zxid = max(p.zxid, self.broker_epoch)  # written in our current life
            self._topic_versions[topic] = max(version, self._topic_versions.get(topic, -1))
            self._emit("topic", topic)
        return True

    def _write_assignment(
        self, topic: str, index: int, replicas: list[int], adding: list[int],
        removing: list[int], state: dict[str, Any], state_version: int,
    ) -> int | None:
        path = f"/brokers/topics/{topic}"
        data, stat = self._zk.get(path)
        doc = json.loads(data)
        key = str(index)
        doc["partitions"][key] = list(replicas)
        for field_name, value in (("adding_replicas", adding), ("removing_replicas", removing)):
            entries = dict(doc.get(field_name) or {})
            if value:
                entries[key] = list(value)
            else:
                entries.pop(key, None)
            doc[field_name] = entries
        doc["version"] = max(int(doc.get("version", 1)), 2)  # adding/removing came with v2
        tx = self._zk.transaction()
        tx.check("/controller_epoch", self._controller_epoch_version)
        tx.set_data(path, _dumps(doc), version=stat.version)
        tx.set_data(f"{path}/partitions/{index}/state", _dumps(state), version=state_version)
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            return None
        return int(results[1].version)

    async def delete_controller(self) -> None:
        """Resign (clean shutdown): let another broker take over at once."""
        def delete() -> None:
            try:
                data, _ = self._zk.get("/controller")
                if int(json.loads(data).get("brokerid", -1)) == self._broker.broker_id:
                    self._zk.delete("/controller")
            except NoNodeError:
                pass
        await asyncio.to_thread(delete)
