"""The ZooKeeper metadata store's partition state writes: a leader's ISR changes and the
controller's leader and ISR changes, each conditional on the zkVersion the state was read at
(and the controller's also on /controller_epoch), with the reads that give those versions."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from .common import dumps as _dumps
from .controller import ZkController
from .session import ZkSession


class ZkPartitionStates:
    def __init__(self, session: ZkSession, controller: ZkController) -> None:
        self._zk = session.zk
        self._controller = controller  # the fencing token of a write as the controller

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

    def _write_states(
        self, updates: list[tuple[str, int, dict[str, Any], int]], as_controller: bool
    ) -> bool:
        tx = self._zk.transaction()
        if as_controller:
            tx.check("/controller_epoch", self._controller.epoch_version)
        for topic, index, doc, version in updates:
            tx.set_data(f"/brokers/topics/{topic}/partitions/{index}/state", _dumps(doc),
                        version=version)
        results = tx.commit()
        return not any(isinstance(r, Exception) for r in results)

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
