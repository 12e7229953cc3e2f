"""The replica fetchers (broker/replication/replica_fetcher.py) against a leader that takes
fetches and never answers, as a follower sees a leader cut off from the network: a fetcher left
without partitions is shut down with its connection (Kafka's shutdownIdleFetcherThreads), so
that following the broker again starts on a new connection at once. Kept, it waited out the
dead connection's fetch (30 s) while that leader took the follower out of its ISR, below
min.insync.replicas (issue 45)."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, cast

import pytest

from samsa.broker.cluster.metadata_store import BrokerInfo, MetadataStore
from samsa.broker.replication.partition import Partition
from samsa.broker.replication.replica_fetcher import ReplicaFetcherManager
from samsa.config.loader import load_config
from samsa.storage.config import LogConfig
from samsa.storage.log import Log

ME, LEADER = 1, 2


class SilentLeader:
    """A listener that reads requests and answers none; counts connections and requests."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def serve(self, reader: asyncio.StreamReader, _writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                await reader.readexactly(size)
                self.requests += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])


class Brokers:
    """The one part of the metadata store a fetcher's connection reads."""

    def __init__(self, port: int) -> None:
        self.port = port

    def brokers(self) -> list[BrokerInfo]:
        return [BrokerInfo(LEADER, "127.0.0.1", self.port)]


async def _until(predicate: Callable[[], bool], timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


@pytest.fixture
async def leader() -> AsyncIterator[SilentLeader]:
    silent = SilentLeader()
    silent.server = await asyncio.start_server(silent.serve, "127.0.0.1", 0)
    try:
        yield silent
    finally:
        silent.server.close()


async def test_following_a_broker_again_does_not_wait_for_a_dead_fetch(
        leader: SilentLeader, tmp_path: Path) -> None:
    config: Any = load_config(None, {"broker.id": str(ME), "log.dirs": str(tmp_path)})
    manager = ReplicaFetcherManager(ME, cast(MetadataStore, Brokers(leader.port)), config)
    log = Log.open(tmp_path / "t-0", LogConfig.from_properties({}), recover=False)
    partition = Partition("t", 0, uuid.uuid4(), log, 3, [LEADER, ME], ME, leader_id=LEADER)
    try:
        manager.add(partition)
        await _until(lambda: leader.requests == 1, timeout=10)  # never answered
        # This broker leads the partition for a while (the leader was cut off), then the
        # leader is back and leads it again: fetching starts over on a new connection, well
        # within the 30 s the unanswered fetch would take to time out.
        manager.remove(partition)
        partition.make_follower(LEADER, 5, [LEADER, ME], [LEADER, ME])
        manager.add(partition)
        await _until(lambda: (leader.connections, leader.requests) == (2, 2), timeout=10)
    finally:
        await manager.stop()
        log.close()
