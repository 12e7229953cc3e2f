"""The ZooKeeper metadata store's controller seat: /controller (who is the controller), the
election that bumps /controller_epoch, and the controller's assignment writes, fenced by the
zkVersion of /controller_epoch (a stale controller writes nothing)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from .brokers import ZkBrokerRegistry
from .common import dumps as _dumps
from .session import ZkSession
from .topics import ZkTopics


class ZkController:
    def __init__(self, session: ZkSession, registry: ZkBrokerRegistry,
                 topics: ZkTopics) -> None:
        self._session = session
        self._zk = session.zk
        self._broker_id = registry.broker.broker_id
        self._topics = topics  # the cache an assignment written is reflected in
        self._controller_id = -1
        self.epoch = -1  # ours, while we are the controller
        self.epoch_version = -1  # zkVersion of /controller_epoch: the fencing token

    def start(self) -> None:
        """(worker thread) Follow /controller."""
        self._zk.DataWatch("/controller", self._on_controller)

    def controller_id(self) -> int:
        return self._controller_id

    async def refresh(self) -> None:
        self._set_controller(await asyncio.to_thread(self._read_controller))

    def _read_controller(self) -> int:
        try:
            return int(json.loads(self._zk.get("/controller")[0]).get("brokerid", -1))
        except NoNodeError:
            return -1

    def _on_controller(self, data: bytes | None, _stat: Any) -> bool:
        controller = -1 if data is None else int(json.loads(data).get("brokerid", -1))
        self._session.call(self._set_controller, controller)
        return True

    def _set_controller(self, controller: int) -> None:
        self._controller_id = controller
        self._session.emit("controller", "")

    # ---- election -------------------------------------------------------------------------
    async def elect(self) -> bool:
        """Kafka's election (KAFKA-6082): one multi creates /controller and bumps
        /controller_epoch; True if this broker won."""
        won = await asyncio.to_thread(self._elect)
        if won:
            self._set_controller(self._broker_id)  # before the watch says so
        return won

    def _elect(self) -> bool:
        me = self._broker_id
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
        self.epoch = epoch + 1
        self.epoch_version = results[1].version
        return True

    async def resign(self) -> None:
        """Delete /controller if it is ours (clean shutdown): another broker takes over at
        once."""
        def delete() -> None:
            try:
                data, _ = self._zk.get("/controller")
                if int(json.loads(data).get("brokerid", -1)) == self._broker_id:
                    self._zk.delete("/controller")
            except NoNodeError:
                pass
        await asyncio.to_thread(delete)

    # ---- assignments ----------------------------------------------------------------------
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
        # Reflected at once (Kafka's controller updates its context as it writes).
        self._topics.reflect_assignment(topic, index, replicas, adding, removing, state, version)
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
        tx.check("/controller_epoch", self.epoch_version)
        tx.set_data(path, _dumps(doc), version=stat.version)
        tx.set_data(f"{path}/partitions/{index}/state", _dumps(state), version=state_version)
        results = tx.commit()
        if any(isinstance(r, Exception) for r in results):
            return None
        return int(results[1].version)
