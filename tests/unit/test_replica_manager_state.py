"""The replica manager (broker/replication/replica_manager.py) in-process: built as broker/app.py
builds it, on real log directories (`LogDirs`) and the real single-broker metadata store, it turns
the partition states of the metadata into led and followed partitions, answers Kafka's errors for
partitions it does not lead, removes a deleted topic's logs, and takes the partitions of a failed
log directory offline.

Two things are stand-ins, both for work that leaves the process in a cluster:
`FollowedPartitions` for the replica fetchers (connections to the leaders), and
`RecordingIsrWriter` for the conditional ZooKeeper write of an ISR change. A partition state
change arrives the way the ZooKeeper store delivers it: the store is updated, then the
replica manager's `on_metadata_change` listener is called."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from samsa.broker.cluster.metadata_store import (
    BrokerInfo,
    LocalMetadataStore,
    PartitionState,
    TopicState,
)
from samsa.broker.replication.partition import Partition
from samsa.broker.replication.replica_manager import ReplicaManager
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch
from samsa.storage.config import LogConfig
from samsa.storage.log_dir_failure import dir_key
from samsa.storage.log_dirs import LogDirs

ME, OTHER, THIRD = 1, 2, 3


class FollowedPartitions:
    """Stand-in for the ReplicaFetcherManager (which fetches over the network from each
    leader): which partitions this broker would be fetching, and from which leader."""

    def __init__(self) -> None:
        self.following: dict[tuple[str, int], int] = {}

    def add(self, partition: Partition) -> None:
        self.following[(partition.topic, partition.index)] = partition.leader_id

    def remove(self, partition: Partition) -> None:
        self.following.pop((partition.topic, partition.index), None)


class RecordingIsrWriter:
    """Stand-in for the ZooKeeper write of an ISR change: accepts every change."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, int, list[int]]] = []

    async def __call__(self, partition: Partition, isr: list[int]) -> bool:
        self.requests.append((partition.topic, partition.index, list(isr)))
        return True


@dataclass
class Node:
    """One broker's replica manager and what it was given."""

    replicas: ReplicaManager
    store: LocalMetadataStore
    dirs: LogDirs
    log_dirs: list[Path]
    fetchers: FollowedPartitions | None
    leadership: list[tuple[str, int, bool]] = field(default_factory=list)
    offline_reports: list[set[tuple[str, int]]] = field(default_factory=list)

    def lead_error(self, topic: str, index: int) -> int | None:
        """The error code `leader_partition` answers with (None: this broker leads it)."""
        try:
            self.replicas.leader_partition(topic, index)
        except Exception as exc:  # the replica manager's partition error, whatever its class
            return int(exc.error_code)  # type: ignore[attr-defined]
        return None

    async def set_state(self, topic: str, index: int, **changes: object) -> None:
        """A partition state change as the controller writes it and the store reports it."""
        t = self.store.topic(topic)
        assert t is not None
        state = t.partitions[index]
        for name, value in changes.items():
            setattr(state, name, value)
        await self.store.update_topic(t)
        self.replicas.on_metadata_change("topic", topic)


def _config(topic: TopicState) -> LogConfig:
    return LogConfig.from_properties(topic.configs)


def _node(tmp_path: Path, *, cluster: bool, dirs: int = 1) -> Node:
    log_dirs = [tmp_path / f"logs{i}" for i in range(dirs)]
    log_dirs_obj = LogDirs(log_dirs, LogConfig.from_properties({}))
    meta = tmp_path / "meta"
    meta.mkdir()
    store = LocalMetadataStore(meta, BrokerInfo(ME, "localhost", 9092))
    log_dirs_obj.startup(lambda _name: LogConfig.from_properties({}))
    rm = ReplicaManager(ME, log_dirs_obj, store, _config)
    rm.min_isr = lambda t: int(t.configs.get("min.insync.replicas", 1))
    fetchers = None
    if cluster:
        fetchers = FollowedPartitions()
        rm.fetchers = fetchers
        rm.isr_writer = RecordingIsrWriter()
    node = Node(rm, store, log_dirs_obj, log_dirs, fetchers)
    rm.leadership_listeners.append(
        lambda p, leads: node.leadership.append((p.topic, p.index, leads)))
    rm.offline_listener = lambda: node.offline_reports.append(set(rm.offline))
    return node


@pytest.fixture
async def single(tmp_path: Path) -> AsyncIterator[Node]:
    node = _node(tmp_path, cluster=False)
    yield node
    node.dirs.shutdown()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Node]:
    node = _node(tmp_path, cluster=True)
    yield node
    node.dirs.shutdown()


@pytest.fixture
async def two_dirs(tmp_path: Path) -> AsyncIterator[Node]:
    node = _node(tmp_path, cluster=False, dirs=2)
    yield node
    node.dirs.shutdown()


async def _create(node: Node, name: str, states: dict[int, PartitionState],
                  configs: dict[str, str] | None = None) -> TopicState:
    topic = TopicState(name, uuid.uuid4(), states, dict(configs or {}))
    await node.store.create_topic(topic)
    node.replicas.materialize(topic)
    return topic


def _solo(n: int) -> dict[int, PartitionState]:
    return {i: PartitionState(replicas=[ME], leader=ME, isr=[ME]) for i in range(n)}


def _records() -> bytes:
    return build_batch([(None, b"v", [], 1_700_000_000_000)])


# ---- single broker -------------------------------------------------------------------------


async def test_a_new_topic_is_led_here_with_a_log_per_partition(single: Node) -> None:
    await _create(single, "t", _solo(2), {"min.insync.replicas": "2", "retention.ms": "1234"})
    for i in range(2):
        p = single.replicas.leader_partition("t", i)
        assert p.is_leader and (p.topic, p.index) == ("t", i)
        assert single.dirs.get_log("t", i) is p.log
        assert p.log.config.retention_ms == 1234
        assert p.min_insync_replicas == 2  # acks=all needs this many in the ISR
    assert single.leadership == [("t", 0, True), ("t", 1, True)]
    assert {(p.topic, p.index) for p in single.replicas.partitions()} == {("t", 0), ("t", 1)}
    assert single.replicas.get("t", 0) is single.replicas.leader_partition("t", 0)


async def test_leader_partition_answers_kafkas_errors(single: Node) -> None:
    await _create(single, "t", _solo(1))
    await _create(single, "elsewhere", {0: PartitionState(replicas=[OTHER], leader=OTHER)})
    assert single.lead_error("t", 0) is None
    assert single.lead_error("nope", 0) == ErrorCode.unknown_topic_or_partition
    assert single.lead_error("t", 1) == ErrorCode.unknown_topic_or_partition
    # In the metadata but not hosted here: the client must refresh its metadata.
    assert single.lead_error("elsewhere", 0) == ErrorCode.not_leader_or_follower
    assert single.replicas.get("elsewhere", 0) is None
    assert single.dirs.get_log("elsewhere", 0) is None


async def test_load_all_opens_what_the_metadata_assigns_here(single: Node, tmp_path: Path) -> None:
    await _create(single, "t", _solo(2))
    single.replicas.get("t", 1).append_as_leader(_records())  # type: ignore[union-attr]
    single.dirs.shutdown()
    # A restart: the same directories and metadata, a new replica manager.
    dirs = LogDirs(single.log_dirs, LogConfig.from_properties({}))
    dirs.startup(lambda _name: LogConfig.from_properties({}))
    store = LocalMetadataStore(tmp_path / "meta", BrokerInfo(ME, "localhost", 9092))
    rm = ReplicaManager(ME, dirs, store, _config)
    rm.load_all()
    try:
        assert rm.leader_partition("t", 1).log.log_end_offset == 1
        assert rm.leader_partition("t", 0).log.log_end_offset == 0
    finally:
        dirs.shutdown()


async def test_remove_topic_deletes_its_logs_and_wakes_its_waiters(single: Node) -> None:
    await _create(single, "t", _solo(2))
    await _create(single, "kept", _solo(1))
    p0 = single.replicas.leader_partition("t", 0)
    log_dir = p0.log.dir
    assert log_dir.exists()
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    p0.add_waiter(fut)

    await single.store.delete_topic("t")
    single.replicas.remove_topic("t")
    assert fut.done()  # a parked fetch answers now, not at its timeout
    assert not p0.is_leader
    assert single.replicas.get("t", 0) is None and single.dirs.get_log("t", 0) is None
    assert single.lead_error("t", 0) == ErrorCode.unknown_topic_or_partition
    assert ("t", 0, False) in single.leadership and ("t", 1, False) in single.leadership
    assert single.lead_error("kept", 0) is None
    await asyncio.sleep(0)
    assert not log_dir.exists()


async def test_wait_for_data_wakes_on_an_append_or_times_out(single: Node) -> None:
    await _create(single, "t", _solo(2))
    p0, p1 = single.replicas.leader_partition("t", 0), single.replicas.leader_partition("t", 1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await single.replicas.wait_for_data([p0, p1], 0.05)
    assert 0.04 <= loop.time() - started < 1
    waiting = asyncio.create_task(single.replicas.wait_for_data([p0, p1], 10))
    await asyncio.sleep(0)
    p1.append_as_leader(_records())
    await asyncio.wait_for(waiting, 1)


async def test_reconfigure_applies_topic_configs_to_open_partitions(single: Node) -> None:
    topic = await _create(single, "t", _solo(1))
    p = single.replicas.leader_partition("t", 0)
    topic.configs.update({"retention.ms": "999", "min.insync.replicas": "2"})
    single.replicas.reconfigure(topic)
    assert p.log.config.retention_ms == 999 and p.min_insync_replicas == 2


# ---- leadership changes (cluster) ------------------------------------------------------------


async def test_a_follower_fetches_from_its_leader_and_does_not_lead(cluster: Node) -> None:
    await _create(cluster, "t", {0: PartitionState([OTHER, ME], OTHER, 3, [OTHER, ME])})
    p = cluster.replicas.get("t", 0)
    assert p is not None and not p.is_leader
    assert (p.leader_id, p.leader_epoch, p.isr) == (OTHER, 3, [OTHER, ME])
    assert cluster.fetchers is not None and cluster.fetchers.following == {("t", 0): OTHER}
    assert cluster.lead_error("t", 0) == ErrorCode.not_leader_or_follower
    assert cluster.leadership == []


async def test_becoming_leader_and_follower_again(cluster: Node) -> None:
    assert cluster.fetchers is not None
    await _create(cluster, "t", {0: PartitionState([OTHER, ME], OTHER, 0, [OTHER, ME])})
    p = cluster.replicas.get("t", 0)
    assert p is not None

    await cluster.set_state("t", 0, leader=ME, leader_epoch=1, isr=[ME, OTHER])
    assert cluster.replicas.leader_partition("t", 0) is p
    assert (p.leader_epoch, p.isr, p.log.latest_epoch) == (1, [ME, OTHER], 1)
    assert cluster.fetchers.following == {}  # a leader fetches from no one
    assert cluster.leadership == [("t", 0, True)]
    assert p.isr_writer is cluster.replicas.isr_writer

    p.append_as_leader(_records())
    await cluster.set_state("t", 0, leader=OTHER, leader_epoch=2, isr=[OTHER])
    assert not p.is_leader and (p.leader_id, p.leader_epoch) == (OTHER, 2)
    assert cluster.fetchers.following == {("t", 0): OTHER}
    assert cluster.leadership == [("t", 0, True), ("t", 0, False)]
    assert cluster.lead_error("t", 0) == ErrorCode.not_leader_or_follower

    # A leader lost with no successor: not fetched from anyone.
    await cluster.set_state("t", 0, leader=-1, leader_epoch=3, isr=[OTHER])
    assert cluster.fetchers.following == {}


async def test_a_partition_led_from_creation_tells_the_listeners(cluster: Node) -> None:
    await _create(cluster, "t", {0: PartitionState([ME, OTHER], ME, 0, [ME, OTHER])})
    p = cluster.replicas.leader_partition("t", 0)
    assert p.log.latest_epoch == 0 and cluster.leadership == [("t", 0, True)]
    assert cluster.fetchers is not None and cluster.fetchers.following == {}


async def test_older_partition_states_are_ignored(cluster: Node) -> None:
    await _create(cluster, "t", {0: PartitionState([ME, OTHER], ME, 5, [ME, OTHER])})
    p = cluster.replicas.leader_partition("t", 0)
    await cluster.set_state("t", 0, leader=OTHER, leader_epoch=4, isr=[OTHER])
    assert p.is_leader and p.leader_epoch == 5 and cluster.leadership == [("t", 0, True)]


async def test_an_isr_change_at_the_same_epoch_updates_the_leader(cluster: Node) -> None:
    await _create(cluster, "t",
                  {0: PartitionState([ME, OTHER, THIRD], ME, 1, [ME, OTHER, THIRD])})
    p = cluster.replicas.leader_partition("t", 0)
    p.append_as_leader(_records())
    p.record_follower_fetch(OTHER, 1)
    assert p.log.high_watermark == 0  # THIRD holds it back
    await cluster.set_state("t", 0, isr=[ME, OTHER])  # e.g. the controller removed THIRD
    assert p.isr == [ME, OTHER] and p.leader_epoch == 1
    assert p.log.high_watermark == 1
    assert cluster.leadership == [("t", 0, True)]  # no new leadership


async def test_an_isr_change_at_the_same_epoch_updates_a_follower(cluster: Node) -> None:
    await _create(cluster, "t", {0: PartitionState([OTHER, ME], OTHER, 1, [OTHER, ME])})
    await cluster.set_state("t", 0, isr=[OTHER])
    p = cluster.replicas.get("t", 0)
    assert p is not None and p.isr == [OTHER] and p.leader_epoch == 1
    assert cluster.fetchers is not None and cluster.fetchers.following == {("t", 0): OTHER}


async def test_resign_all_gives_up_every_leadership(cluster: Node) -> None:
    await _create(cluster, "t", {0: PartitionState([ME, OTHER], ME, 0, [ME, OTHER]),
                                 1: PartitionState([OTHER, ME], OTHER, 0, [OTHER, ME])})
    assert cluster.replicas.resign_all() == 1
    assert cluster.lead_error("t", 0) == ErrorCode.not_leader_or_follower
    assert cluster.leadership == [("t", 0, True), ("t", 0, False)]


async def test_lagging_followers_are_shrunk_through_the_isr_writer(cluster: Node) -> None:
    await _create(cluster, "t", {0: PartitionState([ME, OTHER], ME, 0, [ME, OTHER])})
    p = cluster.replicas.leader_partition("t", 0)
    p.append_as_leader(_records())
    await asyncio.sleep(0.03)
    cluster.replicas.shrink_lagging_isrs(lag_ms=10)
    for _ in range(5):
        await asyncio.sleep(0)
    writer = cluster.replicas.isr_writer
    assert isinstance(writer, RecordingIsrWriter)
    assert writer.requests == [("t", 0, [ME])] and p.isr == [ME]


async def test_a_deleted_topic_reported_by_the_store_is_removed(cluster: Node) -> None:
    await _create(cluster, "t", {0: PartitionState([OTHER, ME], OTHER, 0, [OTHER, ME])})
    await cluster.store.delete_topic("t")
    cluster.replicas.on_metadata_change("topic", "t")
    assert cluster.replicas.get("t", 0) is None and cluster.dirs.get_log("t", 0) is None
    assert cluster.fetchers is not None and cluster.fetchers.following == {}
    assert cluster.lead_error("t", 0) == ErrorCode.unknown_topic_or_partition


# ---- a failed log directory ------------------------------------------------------------------


def _fail(node: Node, path: Path) -> list[tuple[str, int]]:
    """An I/O error in `path`, reported and handled as cluster/log_dir_failure.py wires it."""
    handled: list[list[tuple[str, int]]] = []
    node.dirs.failure_channel.listener = (
        lambda key: handled.append(node.replicas.handle_log_dir_failure(key)))
    node.dirs.failure_channel.maybe_add_offline_log_dir(path, "test failure", OSError(5, "EIO"))
    assert len(handled) == 1
    return handled[0]


async def test_a_failed_log_dir_takes_its_partitions_offline(two_dirs: Node) -> None:
    node = two_dirs
    await _create(node, "t", _solo(4))
    failed = node.log_dirs[1]
    on_failed = sorted(("t", i) for i in range(4) if node.dirs.dir_of("t", i) == dir_key(failed))
    on_live = sorted(("t", i) for i in range(4) if ("t", i) not in on_failed)
    assert on_failed and on_live
    parked = node.replicas.leader_partition(*on_failed[0])
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    parked.add_waiter(fut)
    node.leadership.clear()

    assert _fail(node, failed) == on_failed
    assert fut.done() and not parked.is_leader
    for tp in on_failed:
        assert node.lead_error(*tp) == ErrorCode.kafka_storage_error
        assert node.replicas.get(*tp) is None
    for tp in on_live:
        assert node.lead_error(*tp) is None
    assert node.replicas.offline == set(on_failed)
    assert node.offline_reports == [set(on_failed)]  # the controller is told once
    assert sorted((t, i) for t, i, leads in node.leadership if not leads) == on_failed

    # Reported again (another I/O error there) or for a directory that is not ours: nothing.
    assert node.replicas.handle_log_dir_failure(dir_key(failed)) == []
    assert node.replicas.handle_log_dir_failure("/not/a/log/dir") == []
    assert node.offline_reports == [set(on_failed)]


async def test_an_offline_partition_is_not_recreated_on_a_live_dir(two_dirs: Node) -> None:
    node = two_dirs
    topic = await _create(node, "t", _solo(4))
    failed = node.log_dirs[1]
    on_failed = _fail(node, failed)
    # The same metadata again (another broker changed something): still offline, no new
    # empty log on the live directory.
    node.replicas.materialize(topic)
    for tp in on_failed:
        assert node.dirs.get_log(*tp) is None
        assert node.lead_error(*tp) == ErrorCode.kafka_storage_error
    # A new partition of the topic is created on the live directory.
    topic.partitions[4] = PartitionState(replicas=[ME], leader=ME, isr=[ME])
    await node.store.update_topic(topic)
    node.replicas.materialize(topic)
    assert node.dirs.dir_of("t", 4) == dir_key(node.log_dirs[0])
    assert node.lead_error("t", 4) is None


async def test_after_a_failure_a_restart_loads_missing_logs_as_offline(two_dirs: Node) -> None:
    # load_all at start-up: a partition whose log is not found while a directory is offline
    # may have its data there, so it is offline rather than created empty (Kafka's isNew).
    node = two_dirs
    await _create(node, "t", _solo(4))
    on_failed = _fail(node, node.log_dirs[1])
    rm = ReplicaManager(ME, node.dirs, node.store, _config)
    reports: list[int] = []
    rm.offline_listener = lambda: reports.append(len(rm.offline))
    rm.load_all()
    assert rm.offline == set(on_failed) and reports == [len(on_failed)]
    for tp in on_failed:
        with pytest.raises(Exception) as raised:
            rm.leader_partition(*tp)
        assert raised.value.error_code == ErrorCode.kafka_storage_error  # type: ignore[attr-defined]


async def test_removing_a_topic_forgets_its_offline_partitions(two_dirs: Node) -> None:
    node = two_dirs
    await _create(node, "t", _solo(4))
    _fail(node, node.log_dirs[1])
    await node.store.delete_topic("t")
    node.replicas.remove_topic("t")
    assert node.replicas.offline == set()
    assert node.lead_error("t", 0) == ErrorCode.unknown_topic_or_partition



async def test_a_leadership_on_a_failed_disk_is_not_taken(cluster: Node) -> None:
    # The window between an I/O error and its handler (cluster/log_dir_failure.py runs it on the
    # loop, later): the new epoch cannot be written to the leader-epoch checkpoint, so the
    # partition stays as it was instead of leading on a log that cannot be appended to.
    await _create(cluster, "t", {0: PartitionState([OTHER, ME], OTHER, 0, [OTHER, ME])})
    p = cluster.replicas.get("t", 0)
    assert p is not None
    reported: list[str] = []
    cluster.dirs.failure_channel.listener = reported.append
    cluster.dirs.failure_channel.maybe_add_offline_log_dir(cluster.log_dirs[0], "test failure",
                                                           OSError(5, "EIO"))
    await cluster.set_state("t", 0, leader=ME, leader_epoch=1, isr=[ME, OTHER])
    assert not p.is_leader and (p.leader_id, p.leader_epoch) == (OTHER, 0)
    assert cluster.leadership == []
    assert cluster.lead_error("t", 0) == ErrorCode.not_leader_or_follower

    assert cluster.replicas.handle_log_dir_failure(reported[0]) == [("t", 0)]
    assert cluster.lead_error("t", 0) == ErrorCode.kafka_storage_error


async def test_a_failing_leadership_listener_does_not_stop_the_others(single: Node) -> None:
    def broken(_p: Partition, _leads: bool) -> None:
        raise RuntimeError("listener bug")

    single.replicas.leadership_listeners.insert(0, broken)
    await _create(single, "t", _solo(2))
    assert single.leadership == [("t", 0, True), ("t", 1, True)]
    assert single.lead_error("t", 1) is None


# ---- a lost ZooKeeper session (issue 45) ---------------------------------------------------


async def test_no_leadership_is_taken_up_between_a_lost_session_and_registering_again(
        cluster: Node) -> None:
    """A broker cut off from ZooKeeper resigns its leaderships when its session is lost; until
    it has registered again, a topic event re-applying the states it cached (which still name
    it leader at the epoch the controller has since moved on from) must not make it leader
    again: it would serve that old leader epoch alongside the new leader (and answer
    OUT_OF_ORDER_SEQUENCE_NUMBER to producers whose batches the new leader took). Registered
    again in the same session (ZooKeeper only away for a moment), the states it holds are
    current and it leads again."""
    session = {"registered": True}
    cluster.replicas.registered = lambda: session["registered"]
    cluster.replicas.broker_epoch = lambda: 100
    await _create(cluster, "t", {0: PartitionState([ME, OTHER], ME, 4, [ME, OTHER], zxid=150),
                                 1: PartitionState([OTHER, ME], OTHER, 2, [OTHER, ME],
                                                   zxid=150)})
    assert cluster.lead_error("t", 0) is None
    session["registered"] = False  # the session is lost
    assert cluster.replicas.resign_all() == 1
    await cluster.set_state("t", 1, isr=[OTHER])  # any event of the topic meanwhile
    assert cluster.lead_error("t", 0) == ErrorCode.not_leader_or_follower
    p = cluster.replicas.get("t", 0)
    assert p is not None and p.leader_epoch == 4 and not p.is_leader
    session["registered"] = True  # the same session back: the cached states are current
    cluster.replicas.on_metadata_change("topic", "t")
    assert cluster.lead_error("t", 0) is None


async def test_only_a_registered_replica_in_its_current_life_joins_an_isr(
        cluster: Node) -> None:
    """The replica manager gives each partition it makes the check of who may join its ISR:
    a replica registered, with the broker epoch its fetch carries (-1: not carried)."""
    epochs = {ME: 100}
    cluster.replicas.registered_epochs = lambda: epochs
    await _create(cluster, "t", {0: PartitionState([ME, OTHER], ME, 0, [ME])})
    p = cluster.replicas.leader_partition("t", 0)
    writer = cluster.replicas.isr_writer
    assert isinstance(writer, RecordingIsrWriter)
    p.record_follower_fetch(OTHER, 0, 7)  # not registered
    await asyncio.sleep(0)
    assert writer.requests == []
    epochs[OTHER] = 8
    p.record_follower_fetch(OTHER, 0, 7)  # a previous life's fetch
    await asyncio.sleep(0)
    assert writer.requests == []
    p.record_follower_fetch(OTHER, 0, 8)
    for _ in range(3):
        await asyncio.sleep(0)
    assert writer.requests == [("t", 0, [ME, OTHER])] and p.isr == [ME, OTHER]
