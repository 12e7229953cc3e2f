"""The ZooKeeper metadata store's broker registry: this broker's registration in /brokers/ids
(its broker epoch), every broker's registration and epoch, and the failed log dirs each has
announced in /log_dir_event_notification."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError, SessionExpiredError

from ..metadata_store import BrokerEndpoint, BrokerInfo, OfflineReplicas
from .common import dumps as _dumps
from .session import ZkSession

# The store's own logger, as before the store was split in parts (samsa.log.loggers).
log = logging.getLogger("samsa.broker.cluster.zk.store")

# Kafka's broker announces a failed log dir to the controller here. Kafka's controller then asks
# the broker (LeaderAndIsr) which replicas are offline; with no such round trip, ours carries
# them, and is ephemeral: the broker's replicas are offline until it restarts (or dies).
LOG_DIR_EVENTS = "/log_dir_event_notification"


class ZkBrokerRegistry:
    def __init__(self, session: ZkSession, broker: BrokerInfo) -> None:
        self._session = session
        self._zk = session.zk
        self.broker = broker
        self.broker_epoch = -1
        self._own_sessions: set[int] = set()  # every session this process registered with
        self._brokers: dict[int, BrokerInfo] = {}
        self._broker_epochs: dict[int, int] = {}  # czxid of each registration (KIP-380)
        self._offline_here: set[tuple[str, int]] = set()  # our replicas in failed log dirs
        self._offline_replicas: dict[int, set[tuple[str, int]]] = {}  # every broker's

    def start(self) -> None:
        """(worker thread) Register, then follow every broker's registration."""
        self.register()
        self._zk.ChildrenWatch("/brokers/ids", self._on_broker_ids)

    def watch_log_dirs(self) -> None:
        """(worker thread) Follow the failed log dirs the brokers announce."""
        self._zk.ChildrenWatch(LOG_DIR_EVENTS, self._on_log_dir_events)

    # ---- reads (cache) --------------------------------------------------------------------
    def brokers(self) -> list[BrokerInfo]:
        return sorted(self._brokers.values(), key=lambda b: b.broker_id)

    def broker_epochs(self) -> dict[int, int]:
        """Each registered broker's epoch (the czxid of its /brokers/ids znode)."""
        return self._broker_epochs

    def epoch_of(self, broker_id: int) -> int:
        """A broker's epoch: ours as we registered (before the watch brings it), another's as
        last read; -1 for a broker not registered."""
        if broker_id == self.broker.broker_id:
            return self.broker_epoch
        return self._broker_epochs.get(broker_id, -1)

    def offline_replicas(self) -> OfflineReplicas:
        """{broker id: its (topic, partition) replicas in failed log dirs}."""
        return self._offline_replicas

    # ---- this broker's registration -------------------------------------------------------
    def register(self) -> None:
        b = self.broker
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
        deadline = time.monotonic() + 2 * self._session.timeout_s
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
        self._session.registered = True
        log.info("Registered broker %d at path %s, czxid (broker epoch): %d", b.broker_id, path,
                 self.broker_epoch)
        self._write_log_dir_event()  # a new session: the old one's event went with it

    async def reregister(self, timeout_s: float = 30.0) -> None:
        """Register again once kazoo has its new session (LOST comes before CONNECTED)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await asyncio.to_thread(self.register)
                return
            except (SessionExpiredError, ConnectionLoss):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)

    # ---- every broker's registration ------------------------------------------------------
    async def refresh(self) -> None:
        """Read every registration again (a session that expired while a watch read them
        left them unread)."""
        brokers = await asyncio.to_thread(
            lambda: self._read_brokers(self._zk.get_children("/brokers/ids")))
        self._set_brokers(*brokers)

    def _on_broker_ids(self, children: list[str]) -> None:
        # Called for every change of the children, even when the list reads the same: a
        # broker that re-registered (deleted and created again) shows a new czxid.
        self._session.call(self._set_brokers, *self._read_brokers(children))

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

    def _set_brokers(self, brokers: dict[int, BrokerInfo], epochs: dict[int, int]) -> None:
        self._brokers = brokers
        self._broker_epochs = epochs
        self._session.emit("broker", "")

    # ---- failed log dirs ------------------------------------------------------------------
    async def report_offline_replicas(self, partitions: set[tuple[str, int]]) -> None:
        """Announce our replicas in failed log dirs (all of them, each time) to the controller."""
        self._offline_here = set(partitions)
        await asyncio.to_thread(self._write_log_dir_event)

    def _write_log_dir_event(self) -> None:
        if not self._offline_here:
            return
        doc = {"version": 1, "broker": self.broker.broker_id, "event": 1,
               "partitions": [[t, p] for t, p in sorted(self._offline_here)]}
        self._zk.create(f"{LOG_DIR_EVENTS}/log_dir_event_", _dumps(doc), ephemeral=True,
                        sequence=True, makepath=True)

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
        self._session.call(self._set_offline_replicas, offline)

    def _set_offline_replicas(self, offline: dict[int, set[tuple[str, int]]]) -> None:
        self._offline_replicas = offline
        self._session.emit("log_dir", "")


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
