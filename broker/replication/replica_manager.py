"""Which partitions this broker hosts, and the long-poll wait for fetches.

The replica manager turns metadata (topic → partition → replicas, leader epoch) into
`Partition` objects backed by logs from the `LogManager`, and is the one place a handler asks
for a partition (answering Kafka's UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER, and
KAFKA_STORAGE_ERROR for a partition whose log directory has failed: such a partition is offline
here, neither led nor followed, until the broker restarts).

A Produce's records are appended through produce_appends.py (Kafka's appendRecords), which
asks this class for the partitions led here.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode
from samsa.storage.config import LogConfig
from samsa.storage.errors import KafkaStorageError
from samsa.storage.log import Log
from samsa.storage.log_dirs import LogDirs
from samsa.storage.log_manager import (
    PARTITION_METADATA,
    read_partition_metadata,
    write_partition_metadata,
)

from ..cluster.metadata_store import MetadataStore, TopicState
from .partition import Partition, PartitionError
from .replication_quota import ReplicationQuota

if TYPE_CHECKING:

    from .log_dir_mover import LogDirMover
    from .replica_fetcher import ReplicaFetcherManager

log = logging.getLogger(__name__)

# The longest the event loop spends creating pending logs before it lets requests in.
PENDING_SLICE_S = 0.005


class ReplicaManager:
    def __init__(
        self, broker_id: int, log_manager: LogDirs, store: MetadataStore, topic_config
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.store = store
        self._topic_config = topic_config  # (TopicState) -> LogConfig
        self._partitions: dict[tuple[str, int], Partition] = {}
        # Partitions assigned here whose log is (or may be) in a failed log directory.
        self.offline: set[tuple[str, int]] = set()
        # fn() when `offline` grew (the broker tells the controller).
        self.offline_listener: Callable[[], None] | None = None
        # Set by the broker in a cluster: followers fetch, ISR changes are written to ZooKeeper.
        self.fetchers: ReplicaFetcherManager | None = None
        self.isr_writer: Callable[[Partition, list[int]], Awaitable[bool]] | None = None
        # In a cluster: this broker's epoch (its registration's czxid, KIP-380), -1 none.
        self.broker_epoch: Callable[[], int] = lambda: -1
        # In a cluster: whether this broker holds its ZooKeeper session and is registered in
        # it. From a lost session to the next registration no leadership is taken up: the
        # states it has cached are a previous life's, which the controller has moved on from.
        self.registered: Callable[[], bool] = lambda: True
        # In a cluster: each registered broker's epoch, for who may join an ISR (None: all).
        self.registered_epochs: Callable[[], Mapping[int, int]] | None = None
        # Partitions whose state names us leader in a previous life -> that leader epoch
        self._waiting: dict[tuple[str, int], int] = {}
        self.min_isr: Callable[[TopicState], int] = lambda _topic: 1
        # Each topic's overrides as its partitions were last reconfigured with: a partition
        # state change re-sends the whole topic, and only a change of these (another broker's
        # AlterConfigs) needs its partitions reconfigured again.
        self._applied_configs: dict[str, dict[str, str]] = {}
        # The leader side of replication throttles (a cluster; replication_quota.py).
        self.leader_quota: ReplicationQuota | None = None
        # fn(partition, is_leader) when this broker gains or loses a partition's leadership
        self.leadership_listeners: list[Callable[[Partition, bool], None]] = []
        self._handled_dirs: set[str] = set()
        # Partitions of topics just created whose log is still to be created (materialize
        # with defer): (topic, index) -> topic id, in creation order.
        self._pending: dict[tuple[str, int], uuid.UUID] = {}
        self._pending_configs: dict[str, tuple[TopicState, _TopicConfig]] = {}
        self._pending_task: asyncio.Task[None] | None = None
        self._stopped = False  # shutting down: nothing more created in the background
        # Moves replicas between this broker's log directories (AlterReplicaLogDirs).
        self.log_dir_mover: LogDirMover | None = None

    def load_all(self) -> None:
        # At start-up every assigned partition may have data: with a log dir offline, one
        # whose log is missing is offline too rather than created empty elsewhere.
        for topic in self.store.topics().values():
            self.materialize(topic, is_new=False)

    def materialize(self, topic: TopicState, *, is_new: bool = True, defer: bool = False
                    ) -> None:
        """Open (or create) the logs of every partition of `topic` hosted here, and apply the
        leadership the metadata gives them. With `defer` (a topic just created), the logs that
        do not exist yet are created after this returns, in the background on the event loop,
        as Kafka's broker creates them after the controller committed the topic: the metadata
        already shows the partitions led; a request for one of them creates its log at once
        (`get`), so no client sees the difference, only the time a CreateTopics of
        thousands of partitions takes (a directory and files per partition)."""
        config = _TopicConfig(self, topic)
        went_offline = False
        defer = defer and not topic.internal and self._loop_running()
        for index, state in topic.partitions.items():
            key = (topic.name, index)
            if (defer and key not in self._partitions and self.broker_id in state.replicas
                    and key not in self.offline
                    and self.log_manager.get_log(topic.name, index) is None):
                self._pending[key] = topic.topic_id
                continue
            self._pending.pop(key, None)
            went_offline |= self._materialize_one(topic, index, state, config, is_new)
        if self._pending:
            self._start_pending_creation()
        if went_offline and self.offline_listener is not None:
            self.offline_listener()

    def _materialize_one(self, topic: TopicState, index: int, state: Any,
                         config: _TopicConfig, is_new: bool) -> bool:
        """One partition of `materialize`; True if its log went offline."""
        if self.broker_id not in state.replicas:
            self._drop_unassigned(topic.name, index, is_new)
            return False
        if (topic.name, index) in self.offline:
            return False
        partition = self._partitions.get((topic.name, index))
        if partition is not None and partition.topic_id != topic.topic_id:
            # The topic was deleted and created again under its name while we were not
            # looking (a watch coalesced both): the old replica is another topic's.
            log.info("%s-%d: topic id changed from %s to %s: deleting the old replica",
                     topic.name, index, partition.topic_id, topic.topic_id)
            self._remove_partition((topic.name, index))
            partition = None
        if partition is not None:
            self._apply_state(partition, state)
            return False
        plog = self.log_manager.get_log(topic.name, index)
        if plog is not None and not self._owned_by(plog, topic):
            self.log_manager.delete_log(topic.name, index)
            plog = None
        if plog is None:
            try:
                plog = self.log_manager.create_log(topic.name, index, config.log,
                                                   topic.topic_id, is_new=is_new)
            except KafkaStorageError as exc:
                log.error("%s-%d is offline here: %s", topic.name, index, exc)
                self.offline.add((topic.name, index))
                return True
        partition = Partition(
            topic.name,
            index,
            topic.topic_id,
            plog,
            state.leader_epoch,
            state.replicas,
            self.broker_id,
            leader_id=state.leader,
            isr=state.isr or state.replicas,
        )
        partition.isr_writer = self.isr_writer
        if self.registered_epochs is not None:
            partition.replica_eligible = self._replica_eligible
        # an existing log takes the topic's current config (Partition is the one writer)
        partition.reconfigure(config.log, config.min_isr)
        self._partitions[(topic.name, index)] = partition
        if self.fetchers is not None:  # a cluster: take up the role for real
            partition.leader_id = -1
            self._apply_state(partition, state)
        elif partition.is_leader:
            self._notify_leadership(partition, True)
        return False

    # -- partitions whose log is still to be created (materialize(defer=True)) ---------------
    @staticmethod
    def _loop_running() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def _start_pending_creation(self) -> None:
        if self._stopped:
            return
        if self._pending_task is None or self._pending_task.done():
            self._pending_task = asyncio.get_running_loop().create_task(
                self._create_pending())

    async def _create_pending(self) -> None:
        """Create the pending partitions' logs a slice at a time, letting requests in between
        (a slice is bounded in time: each log is a directory and files, and their cost is the
        file system's)."""
        while self._pending:
            deadline = time.monotonic() + PENDING_SLICE_S
            went_offline = False
            while self._pending and time.monotonic() < deadline:
                key = next(iter(self._pending))
                try:
                    went_offline |= self._create_one_pending(key)
                except Exception:  # that one stays without a log; the others go on
                    log.exception("%s-%d: creating its log failed", *key)
            if went_offline and self.offline_listener is not None:
                self.offline_listener()
            await asyncio.sleep(0)

    async def stop_creating(self) -> None:
        """Shutdown: no more logs created in the background (those still pending are created
        at the next start-up, which materializes every partition the metadata assigns)."""
        task, self._pending_task = self._pending_task, None
        self._stopped = True
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _create_one_pending(self, key: tuple[str, int]) -> bool:
        topic_id = self._pending.pop(key, None)
        topic = self.store.topic(key[0])
        if topic is None or topic.topic_id != topic_id or key[1] not in topic.partitions:
            return False  # deleted (or deleted and created again: that one has its own entry)
        config = self._pending_configs.get(key[0])
        if config is None or config[0] is not topic:
            config = (topic, _TopicConfig(self, topic))
            self._pending_configs[key[0]] = config
        if not self._pending:
            self._pending_configs.clear()
        return self._materialize_one(topic, key[1], topic.partitions[key[1]], config[1], True)

    def _create_now(self, key: tuple[str, int]) -> Partition | None:
        """A request wants a partition whose log is still pending: create it now."""
        if self._stopped:
            return None
        if self._create_one_pending(key) and self.offline_listener is not None:
            self.offline_listener()
        return self._partitions.get(key)

    def _create_all_pending(self) -> None:
        if self._stopped:
            return
        went_offline = False
        while self._pending:
            went_offline |= self._create_one_pending(next(iter(self._pending)))
        if went_offline and self.offline_listener is not None:
            self.offline_listener()

    def _drop_unassigned(self, topic: str, index: int, is_new: bool) -> None:
        """A replica no longer assigned here (a reassignment moved it away) stops and its log
        is deleted, as Kafka's StopReplica with delete=true; at start-up (`is_new` false) a
        copy left on disk by a move completed while this broker was down goes too."""
        key = (topic, index)
        self._pending.pop(key, None)
        if key in self._partitions:
            log.info("%s-%d: no longer assigned to broker %d: stopping the replica and "
                     "deleting its log", topic, index, self.broker_id)
            self._remove_partition(key)
        elif not is_new and key not in self.offline and (
                self.log_manager.get_log(topic, index) is not None):
            log.info("%s-%d: not assigned to broker %d: deleting the log left on disk", topic,
                     index, self.broker_id)
            self.log_manager.delete_log(topic, index)

    def handle_log_dir_failure(self, dir_key: str) -> list[tuple[str, int]]:
        """Stop serving every partition of the failed log directory (Kafka's
        ReplicaManager.handleLogDirFailure): no fetcher, no leadership, KAFKA_STORAGE_ERROR to
        requests. Returns the partitions that went offline."""
        if dir_key not in self.log_manager.dirs or dir_key in self._handled_dirs:
            return []
        self._handled_dirs.add(dir_key)
        log.warning("Stopping serving replicas in dir %s because the log directory has failed.",
                    dir_key)
        gone = [key for key, p in self._partitions.items() if p.log_dir == dir_key]
        for key in gone:
            partition = self._partitions.pop(key)
            if self.fetchers is not None:
                self.fetchers.remove(partition)
            was_leader = partition.is_leader
            partition.make_follower(-1, partition.leader_epoch, partition.isr,
                                    partition.replicas)  # wakes acks=all waits and long polls
            if was_leader:
                self._notify_leadership(partition, False)
        tps = sorted(set(gone) | set(self.log_manager.handle_dir_failure(dir_key)))
        self.offline.update(tps)
        if tps and self.offline_listener is not None:
            self.offline_listener()
        return tps

    def on_metadata_change(self, kind: str, name: str) -> None:
        """Store listener: a topic's assignment or partition state changed (or it is gone)."""
        if kind != "topic":
            return
        topic = self.store.topic(name)
        if topic is None:
            if any(key[0] == name for key in (*self._partitions, *self.offline, *self._pending)):
                self.remove_topic(name)
            return
        self.materialize(topic, defer=True)
        if self._applied_configs.get(name) != topic.configs:
            self.reconfigure(topic)  # topic configs changed by another broker reach us here

    def _apply_state(self, partition: Partition, state: Any) -> None:
        try:
            self._take_role(partition, state)
        except KafkaStorageError as exc:  # its dir's failure handler takes it offline next
            log.error("%s-%d: %s", partition.topic, partition.index, exc)

    def _replica_eligible(self, replica_id: int, broker_epoch: int) -> bool:
        """May `replica_id`, whose fetch carried `broker_epoch` (-1: none), join an ISR: it
        is registered, in that life (Kafka's isReplicaIsrEligible, KIP-903)."""
        assert self.registered_epochs is not None
        registered = self.registered_epochs().get(replica_id)
        return registered is not None and broker_epoch in (-1, registered)

    def _previous_life(self, state: Any) -> bool:
        """A state naming this broker leader, written before its current registration: that
        leadership is a previous life's (a broker restarted within its session timeout, or
        after its session expired). As Kafka's broker waits for the controller's LeaderAndIsr
        carrying its new broker epoch, it waits for the controller to write the state again
        (a new leader epoch), answering NOT_LEADER_OR_FOLLOWER meanwhile. Without a session
        (lost, or not yet registered again) every leadership it has cached is one."""
        if state.leader != self.broker_id:
            return False
        return not self.registered() or 0 <= state.zxid < self.broker_epoch()

    def _take_role(self, partition: Partition, state: Any) -> None:
        leader, epoch = state.leader, state.leader_epoch
        if epoch < partition.leader_epoch:
            return  # older news
        key = (partition.topic, partition.index)
        if self._previous_life(state):
            if self._waiting.get(key) != epoch:
                self._waiting[key] = epoch
                log.info("%s-%d: the state naming this broker leader at epoch %d was written "
                         "before its registration (broker epoch %d%s): waiting for the "
                         "controller to write it again", partition.topic, partition.index,
                         epoch, self.broker_epoch(),
                         "" if self.registered() else ", its session lost")
            leader = -1  # as a follower with no leader to fetch from
        else:
            self._waiting.pop(key, None)
        if leader == self.broker_id:
            if not partition.is_leader or epoch > partition.leader_epoch:
                if self.fetchers is not None:
                    self.fetchers.remove(partition)
                partition.make_leader(epoch, state.isr, state.replicas)
                log.info("%s-%d: leader at epoch %d, isr %s", partition.topic, partition.index,
                         epoch, state.isr)
                self._notify_leadership(partition, True)
            else:
                if state.replicas != partition.replicas:
                    partition.update_replicas(state.replicas)
                if state.isr != partition.isr:
                    partition.update_isr(state.isr)
            return
        changed = partition.is_leader or epoch > partition.leader_epoch
        changed = changed or leader != partition.leader_id
        if not changed:
            partition.isr = list(state.isr)
            partition.replicas = list(state.replicas)
            return
        was_leader = partition.is_leader
        partition.make_follower(leader, epoch, state.isr, state.replicas)
        if was_leader:
            self._notify_leadership(partition, False)
        if self.fetchers is not None:
            if leader >= 0:
                self.fetchers.add(partition)
            else:
                self.fetchers.remove(partition)
        log.info("%s-%d: follower of %d at epoch %d", partition.topic, partition.index, leader,
                 epoch)

    def _notify_leadership(self, partition: Partition, is_leader: bool) -> None:
        for fn in self.leadership_listeners:
            try:
                fn(partition, is_leader)
            except Exception:
                log.exception("leadership listener failed for %s-%d", partition.topic,
                              partition.index)

    def resign_all(self) -> int:
        """Stop leading everything (our ZooKeeper session is gone); returns how many."""
        resigned = 0
        for partition in self._partitions.values():
            if partition.is_leader:
                partition.make_follower(-1, partition.leader_epoch, partition.isr,
                                        partition.replicas)
                self._notify_leadership(partition, False)
                resigned += 1
        return resigned

    def shrink_lagging_isrs(self, lag_ms: int) -> None:
        for partition in self._partitions.values():
            partition.shrink_isr_if_lagging(lag_ms)

    def reconfigure(self, topic: TopicState) -> None:
        """The topic's config (its overrides or the broker's defaults) may have changed: every
        partition hosted here takes it, min.insync.replicas included."""
        self._applied_configs[topic.name] = dict(topic.configs)
        config, min_isr = self._topic_config(topic), self.min_isr(topic)
        for index in topic.partitions:
            partition = self._partitions.get((topic.name, index))
            if partition is not None:
                partition.reconfigure(config, min_isr)

    def remove_topic(self, name: str) -> None:
        self._applied_configs.pop(name, None)
        self.offline = {key for key in self.offline if key[0] != name}
        for key in [k for k in self._pending if k[0] == name]:
            del self._pending[key]
        for key in [k for k in self._partitions if k[0] == name]:
            self._remove_partition(key)

    def _remove_partition(self, key: tuple[str, int]) -> None:
        partition = self._partitions.pop(key)
        self._waiting.pop(key, None)
        if self.fetchers is not None:
            self.fetchers.remove(partition)
        if partition.is_leader:
            partition.leader_id = -1
            self._notify_leadership(partition, False)
        partition.notify_waiters()
        self.log_manager.delete_log(*key)

    @staticmethod
    def _owned_by(plog: Log, topic: TopicState) -> bool:
        """Whether the log on disk is a replica of `topic`, by the topic id in its
        partition.metadata (Kafka's Partition.checkOrSetTopicId): a log of an earlier topic of
        the same name (deleted while this broker was down) is not, and is deleted; a log
        without the file (written before topic ids) gets it."""
        try:
            on_disk = read_partition_metadata(plog.dir)
        except (OSError, ValueError) as exc:
            log.warning("%s-%d: unreadable %s (%s): rewriting it", plog.topic, plog.partition,
                        PARTITION_METADATA, exc)
            on_disk = None
        if on_disk is None:
            try:
                write_partition_metadata(plog.dir, topic.topic_id)
            except OSError as exc:  # the log's own I/O reports a failing directory
                log.error("%s-%d: cannot write %s: %s", plog.topic, plog.partition,
                          PARTITION_METADATA, exc)
            return True
        if on_disk == topic.topic_id:
            return True
        log.warning("%s-%d: the log on disk belongs to topic id %s, not to the topic's id %s "
                    "(the topic was deleted and created again): deleting it", plog.topic,
                    plog.partition, on_disk, topic.topic_id)
        return False

    def partitions(self) -> Iterable[Partition]:
        """Every partition hosted here (the pending ones' logs are created first)."""
        if self._pending:
            self._create_all_pending()
        return self._partitions.values()

    def get(self, topic: str, index: int) -> Partition | None:
        partition = self._partitions.get((topic, index))
        if partition is None and self._pending:
            key = (topic, index)
            if key in self._pending:
                return self._create_now(key)
        return partition

    def hosted_partition(self, topic: str, index: int) -> Partition:
        """This broker's replica of the partition, led or followed (Kafka's
        getPartitionOrException): KAFKA_STORAGE_ERROR for one offline here,
        NOT_LEADER_OR_FOLLOWER for a partition of the cluster not hosted here (the client
        asks Metadata again), else UNKNOWN_TOPIC_OR_PARTITION."""
        partition = self.get(topic, index)
        if partition is None:
            if (topic, index) in self.offline:
                raise PartitionError(ErrorCode.kafka_storage_error)
            t = self.store.topic(topic)
            if t is not None and index in t.partitions:
                raise PartitionError(ErrorCode.not_leader_or_follower)
            raise PartitionError(ErrorCode.unknown_topic_or_partition)
        return partition

    def leader_partition(self, topic: str, index: int, current_leader_epoch: int = -1
                         ) -> Partition:
        """The partition led here; the caller's `current_leader_epoch` (-1: none) is checked
        before the leadership (Partition.check_local)."""
        partition = self.hosted_partition(topic, index)
        partition.check_local(current_leader_epoch)
        return partition

    def current_leader(self, topic: str, index: int) -> tuple[int, int]:
        """(leader, leader epoch) as this broker knows them, for the leader hints of KIP-951
        (Kafka's KafkaApis.getCurrentLeader): its replica's view, else the metadata's;
        (-1, -1) for a partition it does not know. A leadership of its leader's previous life
        is named as Metadata names it, no leader at that epoch: that broker restarted, and
        leads again only once the controller writes the leadership at the next epoch."""
        t = self.store.topic(topic)
        state = t.partitions.get(index) if t is not None else None
        hosted = self._partitions.get((topic, index))
        if hosted is not None:
            leader, epoch = hosted.leader_id, hosted.leader_epoch
        elif state is not None:
            leader, epoch = state.leader, state.leader_epoch
        else:
            return -1, -1
        if (leader >= 0 and state is not None and (state.leader, state.leader_epoch) == (
                leader, epoch) and self.store.leader_in_previous_life(state)):
            leader = -1
        return leader, epoch

    async def wait_for_data(self, partitions: list[Partition], timeout_s: float,
                            follower: bool = False) -> list[Partition]:
        """Sleep until any of `partitions` gets new data, or the timeout; the partitions that
        woke it (none: the time-out). A `follower`'s fetch (which reads up to the log end) is
        woken by appends, not by the high watermark's advances, which only consumers'
        fetches can use.

        One future and one timer (not asyncio.wait_for around a shield, which add a future,
        callbacks and event-loop passes): each follower parks here once per produce."""
        if timeout_s <= 0:
            return []
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        for p in partitions:
            p.add_waiter(fut, follower)
        timer = loop.call_later(timeout_s, _wake, fut)
        woken: list[Partition] = []
        try:
            await fut
        finally:
            timer.cancel()
            for p in partitions:
                if not p.discard_waiter(fut, follower):
                    woken.append(p)
        return woken


class _TopicConfig:
    """A topic's log config and min.insync.replicas, looked up once for all its partitions
    and only if one is created (each lookup merges the broker's defaults with the overrides:
    a partition state change re-sends the whole topic, and most create nothing)."""

    def __init__(self, replicas: ReplicaManager, topic: TopicState) -> None:
        self._replicas, self._topic = replicas, topic

    @functools.cached_property
    def log(self) -> LogConfig:
        return self._replicas._topic_config(self._topic)

    @functools.cached_property
    def min_isr(self) -> int:
        return self._replicas.min_isr(self._topic)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
