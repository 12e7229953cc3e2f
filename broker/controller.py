"""The cluster controller: one broker, elected through ZooKeeper, moves leadership.

Election is Kafka's (create the ephemeral /controller and bump /controller_epoch in one
multi); every write the controller makes is conditional on the /controller_epoch version it
won with, so a controller that was frozen and replaced writes nothing. The controller watches
broker registrations; when a broker disappears it removes it from every ISR and moves the
leadership of its partitions to the first live replica in the ISR (leader epoch + 1), and
when a partition has no leader it elects one as soon as an ISR member is back. A replica in a
failed log directory (its broker announced it under /log_dir_event_notification) counts as
dead for its partition only, as Kafka's OfflineReplica state does. With
`unclean.leader.election.enable=false` (the default) a replica outside the ISR is never
elected. Brokers learn the new states from their ZooKeeper watches.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

log = logging.getLogger(__name__)


class Controller:
    def __init__(self, store: Any, broker_id: int, unclean_election: bool) -> None:
        self.store = store
        self.broker_id = broker_id
        self.unclean_election = unclean_election
        self.active = False
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.store.add_listener(self._on_store_event)
        self._changed.set()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.active:
            self.active = False
            try:
                await self.store.delete_controller()
            except Exception:
                log.exception("resigning as controller failed")

    def resign(self) -> None:
        """Our session (and so /controller) is gone: stop acting, try to be elected again."""
        if self.active:
            log.info("broker %d resigns as controller (session lost)", self.broker_id)
        self.active = False
        self._changed.set()

    def _on_store_event(self, kind: str, _name: str) -> None:
        if kind in ("broker", "controller", "topic", "log_dir"):
            self._changed.set()

    async def _run(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self._step()
            except Exception:
                log.exception("controller step failed")
                await asyncio.sleep(0.5)
                self._changed.set()

    async def _step(self) -> None:
        current = self.store.controller_id()
        # -1 while active is our own election not yet seen by the watch: keep going (a real
        # loss of /controller comes with a lost session, see resign; writes are fenced anyway).
        if self.active and current not in (-1, self.broker_id):
            log.info("broker %d is no longer the controller (now %d)", self.broker_id, current)
            self.active = False
        if current == -1 and not self.active:
            if await self.store.elect_controller():
                self.active = True
                log.info("broker %d elected controller (epoch %d)", self.broker_id,
                         self.store.controller_epoch)
        if self.active:
            await self._reconcile()

    async def _reconcile(self) -> None:
        """Elect leaders for partitions whose leader is gone; drop dead brokers from ISRs."""
        live_brokers = {b.broker_id for b in self.store.brokers()}
        offline = self.store.offline_replicas()
        updates: list[tuple[str, int, dict[str, Any], int]] = []
        for topic in list(self.store.topics().values()):
            for index, state in topic.partitions.items():
                live = live_brokers
                if offline:
                    live = {b for b in live if (topic.name, index) not in offline.get(b, ())}
                dead_in_isr = any(r not in live for r in state.isr)
                leader_gone = state.leader not in live
                if not dead_in_isr and not leader_gone:
                    continue
                try:
                    doc, version = await self.store.read_partition_state(topic.name, index)
                except NoNodeError:
                    continue
                new = self._next_state(doc, state.replicas, live)
                if new is not None:
                    updates.append((topic.name, index, new, version))
        for i in range(0, len(updates), 200):
            chunk = updates[i : i + 200]
            try:
                ok = await self.store.write_partition_states(chunk, as_controller=True)
            except BadVersionError:
                ok = False
            if not ok:
                log.info("controller write refused (stale epoch or concurrent change); retrying")
                await asyncio.sleep(0.2)
                self._changed.set()
                return
            for topic, index, doc, _ in chunk:
                log.info("%s-%d: leader %d epoch %d isr %s", topic, index, doc["leader"],
                         doc["leader_epoch"], doc["isr"])

    def _next_state(
        self, doc: dict[str, Any], replicas: list[int], live: set[int]
    ) -> dict[str, Any] | None:
        leader, isr = doc["leader"], list(doc["isr"])
        live_isr = [r for r in isr if r in live]
        if leader in live:
            if live_isr == isr:
                return None
            return {**doc, "isr": live_isr, "controller_epoch": self.store.controller_epoch}
        candidates = [r for r in replicas if r in live_isr]
        if not candidates and self.unclean_election:
            candidates = [r for r in replicas if r in live]
        if not candidates:
            if leader == -1:
                return None  # offline until an ISR member returns
            # Keep the last ISR (Kafka does) so that only one of those can lead again.
            new_leader, new_isr = -1, isr
        else:
            new_leader = candidates[0]
            new_isr = live_isr if new_leader in live_isr else [new_leader]
        return {
            **doc,
            "leader": new_leader,
            "leader_epoch": doc["leader_epoch"] + 1,
            "isr": new_isr,
            "controller_epoch": self.store.controller_epoch,
        }
