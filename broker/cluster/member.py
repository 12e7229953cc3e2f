"""What a broker of a ZooKeeper cluster does beside serving its partitions: follows and
throttles replicas, writes its leaders' ISR changes and shrinks the lagging ones, registers
again after a lost session and, when it stops, asks the controller for a controlled shutdown.
Kafka keeps these in KafkaServer (controlledShutdown, the session expiry listener), its ISR
manager and ReplicaManager (the ISR shrink task). A node's processes without ZooKeeper
(cluster/shared/) do the same over their shared metadata file."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from samsa.protocol.controlled_shutdown import API_KEY as CONTROLLED_SHUTDOWN_KEY
from samsa.protocol.errors import ErrorCode

from .. import metrics
from ..network.interbroker import BrokerConnection, BrokerUnavailable
from ..replication.partition import Partition
from ..replication.replica_fetcher import ReplicaFetcherManager
from ..replication.replica_manager import ReplicaManager
from ..replication.replication_quota import FOLLOWER as FOLLOWER_THROTTLED
from ..replication.replication_quota import LEADER as LEADER_THROTTLED
from ..replication.replication_quota import ReplicationQuota
from .controller import Controller
from .topic_admin import TopicAdmin
from .zk.store import ZkMetadataStore

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3  # the last Kafka defined (v2+ carry the broker epoch)
CONTROLLED_SHUTDOWN_CLIENT_ID = "samsa-controlled-shutdown"
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0  # Kafka's controller.socket.timeout.ms default


class ClusterMember:
    """This broker's duties towards its cluster, over the ZooKeeper store `zk`; it makes the
    controller elector (`controller`)."""

    def __init__(self, config: Any, zk: ZkMetadataStore, replicas: ReplicaManager,
                 topics: TopicAdmin) -> None:
        self.config = config
        self.broker_id: int = config.broker_id
        self.zk = zk
        self.replicas = replicas
        self.topics = topics
        self._wire_replicas(config)
        self.controller = Controller(
            zk,
            self.broker_id,
            self._unclean_election,
            auto_rebalance=config["auto.leader.rebalance.enable"],
            imbalance_check_interval_s=config["leader.imbalance.check.interval.seconds"],
            imbalance_per_broker_percentage=config["leader.imbalance.per.broker.percentage"],
        )

    def _wire_replicas(self, config: Any) -> None:
        """Replica fetchers and throttles, ISR writes and the broker epochs."""
        zk, replicas = self.zk, self.replicas
        fetchers = replicas.fetchers = ReplicaFetcherManager(self.broker_id, zk, config)
        replicas.leader_quota = self._replication_quota(
            LEADER_THROTTLED, config["leader.replication.throttled.rate"])
        fetchers.quota = self._replication_quota(
            FOLLOWER_THROTTLED, config["follower.replication.throttled.rate"])
        replicas.isr_writer = self.write_isr
        replicas.broker_epoch = lambda: int(zk.registry.broker_epoch)
        replicas.registered = lambda: zk.session.registered
        replicas.registered_epochs = zk.registry.broker_epochs
        fetchers.broker_epoch = replicas.broker_epoch

    def _replication_quota(self, key: str, rate: int) -> ReplicationQuota:
        def topic_config(name: str) -> dict[str, str] | None:
            topic = self.zk.topic(name)
            return None if topic is None else topic.configs

        return ReplicationQuota(
            self.broker_id, topic_config, key, rate,
            self.config["replication.quota.window.num"],
            self.config["replication.quota.window.size.seconds"])

    def _unclean_election(self, name: str) -> bool:
        """The topic's unclean.leader.election.enable (the broker's value by default)."""
        topic = self.zk.topic(name)
        props = self.topics.effective_properties(topic) if topic is not None else {}
        return bool(props.get("unclean.leader.election.enable",
                              self.config["unclean.leader.election.enable"]))

    # ---- start and stop --------------------------------------------------------------------
    def start(self) -> list[asyncio.Task[None]]:
        """The controller elector, and the background tasks for the broker to cancel."""
        self.controller.start()
        return [asyncio.create_task(self._isr_shrink_loop()),
                asyncio.create_task(self._session_watch())]

    async def leave(self) -> None:
        """Before the broker stops serving: a controlled shutdown, if enabled."""
        if not self.config["controlled.shutdown.enable"]:
            return
        try:
            if await self.controlled_shutdown() and self.replicas.fetchers is not None:
                # Kafka's controller then stops the replicas this broker follows
                # (StopReplica): it is out of their ISRs and must not rejoin them.
                await self.replicas.fetchers.stop()
        except Exception:  # a plain shutdown still moves leaderships, later
            log.exception("controlled shutdown failed")

    async def stop(self) -> None:
        await self.controller.stop()
        if self.replicas.fetchers is not None:
            await self.replicas.fetchers.stop()
        await self.zk.close()  # the controller moves what is left at once

    # ---- ISR ---------------------------------------------------------------------------------
    async def write_isr(self, partition: Partition, isr: list[int]) -> bool:
        """The leader's own ISR change: conditional on the partition state it leads at."""
        try:
            zk = self.zk
            doc, version = await zk.states.read_partition_state(partition.topic, partition.index)
            if doc["leader"] != self.broker_id or doc["leader_epoch"] != partition.leader_epoch:
                return False
            if set(doc["isr"]) != set(partition.followers.change_from):
                # made from an ISR the controller has changed since (partition epoch fencing):
                # the watch brings the stored one, and the change is made again from it
                log.info("ISR change of %s-%d to %s refused: made from %s, stored is %s",
                         partition.topic, partition.index, isr, partition.followers.change_from,
                         doc["isr"])
                return False
            written = {**doc, "isr": isr}
            zxid = await zk.states.write_leader_isr(partition.topic, partition.index, written,
                                                    version)
        except Exception as exc:
            log.info("ISR change of %s-%d failed: %r", partition.topic, partition.index, exc)
            return False
        ok = zxid is not None
        if zxid is not None:
            # In the cache at once: until the watch brings it, any change of the topic (another
            # partition's) applied the cached ISR to this leader again, undoing its own change
            # (an ISR shrunk below min.insync.replicas came back, then went again: produce
            # refused, accepted, refused, and a client's pipelined batches out of order).
            zk.topic_store.reflect_partition_state(partition.topic, partition.index, written, zxid)
            # Against the ISR this write replaced: by now the store's watch may already have
            # set partition.isr to the new ISR, and a change counted against that is none.
            log.info("%s-%d: ISR %s -> %s", partition.topic, partition.index, doc["isr"], isr)
            metrics.isr_changed(doc["isr"], isr)
        return ok

    async def _isr_shrink_loop(self) -> None:
        lag_ms = self.config["replica.lag.time.max.ms"]
        while True:
            await asyncio.sleep(max(lag_ms / 2000, 0.1))
            try:
                self.replicas.shrink_lagging_isrs(lag_ms)
            except Exception:
                log.exception("ISR shrink check failed")

    # ---- the ZooKeeper session -------------------------------------------------------------
    async def _session_watch(self) -> None:
        """A lost ZooKeeper session took our registration, and with it every role: resign
        them (leaderships, controller), register again (new broker epoch), then take up what
        ZooKeeper's current partition states give us."""
        zk = self.zk
        session = zk.session
        while True:
            await session.session_lost.wait()
            session.session_lost.clear()
            expired, session.session_expired = session.session_expired, False
            log.warning("ZooKeeper session %s: resigning every %s and registering again",
                        "lost" if expired else "given up (no connection for too long)",
                        "role" if expired else "leadership")
            resigned = 0
            try:
                resigned = self.replicas.resign_all()
                # A session only given up (see ZkSession._session_state) may come back
                # with /controller still ours: the controller, fenced by its epoch, stays.
                if expired:
                    self.controller.resign()
            except Exception:  # whatever failed, the broker must still register again
                log.exception("resigning the roles of the lost session failed")
            try:
                await zk.registry.reregister()
                log.info("registered again in ZooKeeper (broker epoch %d); resigned %d "
                         "leaderships", zk.registry.broker_epoch, resigned)
                await zk.refresh()
            except Exception:
                log.exception("re-registration failed")
                session.session_lost.set()
                await asyncio.sleep(1)

    # ---- controlled shutdown ---------------------------------------------------------------
    async def controlled_shutdown(self) -> bool:
        """Kafka's KafkaServer.controlledShutdown: ask the controller (ControlledShutdown v3,
        with this broker's epoch) to move the leadership of every partition led here to
        another in-sync replica and to take this broker out of the ISRs, so that clients move
        over before our ZooKeeper session ends. Retried (`controlled.shutdown.max.retries`,
        `controlled.shutdown.retry.backoff.ms`, finding the controller again each time) while
        the controller is unreachable or answers an error or partitions still led here; then,
        as Kafka, the broker shuts down anyway and the controller moves what is left once our
        registration is gone. True if it succeeded."""
        retries = self.config["controlled.shutdown.max.retries"]
        backoff_s = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        log.info("Starting controlled shutdown")
        for attempt in range(1, retries + 1):
            try:
                error, remaining = await self._request_controlled_shutdown()
            except (BrokerUnavailable, OSError, TimeoutError) as exc:
                log.warning("Error during controlled shutdown, possibly because leader "
                            "movement took longer than the configured socket timeout: %s", exc)
            else:
                if error == ErrorCode.none and not remaining:
                    log.info("Controlled shutdown request returned successfully")
                    return True
                if error == ErrorCode.none:
                    log.info("Remaining partitions to move: %s", ",".join(
                        f"{t}-{p}" for t, p in remaining[:20]))
                else:
                    log.info("Controlled shutdown request returned with error %s", error.name)
            if attempt < retries:
                log.info("Retrying controlled shutdown after the previous attempt failed "
                         "(%d of %d)", attempt, retries)
                await asyncio.sleep(backoff_s)
        log.warning("Proceeding to do an unclean shutdown as all the controlled shutdown "
                    "attempts failed")
        return False

    async def _request_controlled_shutdown(self) -> tuple[ErrorCode, list[tuple[str, int]]]:
        controller_id = self.zk.controller_id()
        epoch = self.zk.registry.broker_epoch
        if controller_id == -1:
            raise BrokerUnavailable("no controller is elected")
        if controller_id == self.broker_id:
            # This broker is the controller: no need to go through its own socket.
            return await self.controller.controlled_shutdown(self.broker_id, epoch)
        conn = BrokerConnection(self.zk, controller_id, CONTROLLED_SHUTDOWN_CLIENT_ID,
                                timeout_s=CONTROLLED_SHUTDOWN_TIMEOUT_S)
        try:
            response = await conn.request(CONTROLLED_SHUTDOWN_KEY, CONTROLLED_SHUTDOWN_VERSION,
                                          {"broker_id": self.broker_id, "broker_epoch": epoch})
        finally:
            conn.close()
        remaining = [(str(r.topic_name), int(r.partition_index))
                     for r in response.remaining_partitions]
        return ErrorCode(response.error_code), remaining
