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
elected automatically (per topic, as Kafka's topic config of that name; the broker's value is
the default); a replica outside the ISR is elected only when no ISR member is alive.

Leader elections asked for by an admin client (ElectLeaders, broker/handlers/elections.py)
run here too, as in Kafka's ZooKeeper-era controller: PREFERRED moves the leadership to the
first replica of the assignment when it is alive and in the ISR (same ISR, leader epoch + 1);
UNCLEAN elects a leader for a partition whose leader is gone, out of the ISR if no ISR member
is alive. With `auto.leader.rebalance.enable` the controller checks every
`leader.imbalance.check.interval.seconds` (first 5 s after it is elected, as Kafka) and, for
each broker whose share of partitions it prefers but does not lead exceeds
`leader.imbalance.per.broker.percentage`, runs a preferred election for those partitions
(Kafka's checkAndTriggerAutoLeaderRebalance). Partition reassignments
(AlterPartitionReassignments, broker/handlers/reassignments.py) run here as well, as Kafka's
ZooKeeper-era controller ran them (see "partition reassignment" below). Elections,
reassignments and the reconciliation run one at a time, and each of their writes is fenced
as above.
Brokers learn the new states from their ZooKeeper watches. Which leader and ISR a partition
gets is decided in leader_election.py, from the state read and the brokers alive.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NoNodeError

from samsa.protocol.errors import ErrorCode

from .leader_election import (
    PREFERRED,
    UNCLEAN,
    assignment_state,
    completed_reassignment_state,
    elected_state,
    invalid_target,
    next_state,
    shutdown_state,
)

if TYPE_CHECKING:
    from .metadata_store import MetadataStore, PartitionState
    from .zk.store import ZkMetadataStore

log = logging.getLogger(__name__)

FIRST_REBALANCE_DELAY_S = 5.0  # Kafka schedules the first check 5 s after a controller failover
WRITE_CHUNK = 200  # partition states written in one multi
WRITE_ATTEMPTS = 5  # an election write refused by a concurrent ISR change is recomputed

TopicPartition = tuple[str, int]
# A partition's new state and the zkVersion of the state it was made from.
StateUpdate = tuple[str, int, dict[str, Any], int]
# (error, message, the elected leader or -1) per partition
ElectionResult = tuple[ErrorCode, str | None, int]
# (error, message) per partition of an AlterPartitionReassignments
ReassignmentResult = tuple[ErrorCode, str | None]
# An election's answer for a partition that does not exist
NO_SUCH_PARTITION: ElectionResult = (ErrorCode.unknown_topic_or_partition,
                                     "The partition does not exist.", -1)


def partition_state(store: MetadataStore, topic: str, index: int) -> PartitionState | None:
    """A partition's state as `store` holds it; None if there is no such partition."""
    state = store.topic(topic)
    return None if state is None or index not in state.partitions else state.partitions[index]


class Controller:
    def __init__(
        self,
        store: ZkMetadataStore,
        broker_id: int,
        unclean_election: Callable[[str], bool],
        *,
        auto_rebalance: bool = False,
        imbalance_check_interval_s: float = 300.0,
        imbalance_per_broker_percentage: int = 10,
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.unclean_election = unclean_election  # topic -> unclean.leader.election.enable
        self.auto_rebalance = auto_rebalance
        self.imbalance_check_interval_s = imbalance_check_interval_s
        self.imbalance_per_broker_percentage = imbalance_per_broker_percentage
        self.active = False
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rebalancer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one reconciliation or election at a time
        # Kafka's liveBrokerIdAndEpochs: the broker epoch (registration czxid) of each live
        # broker as the controller last handled it; a higher one in ZooKeeper is a broker that
        # restarted (KIP-380), handled as a failure and a start-up.
        self._epochs: dict[int, int] = {}
        # Kafka's shuttingDownBrokerIds: brokers in a controlled shutdown (id -> broker epoch);
        # never elected leader, until they are gone or registered again.
        self.shutting_down: dict[int, int] = {}
        # Once elected, look for leaderships and ISR places of previous lives the former
        # controller may have missed (a broker that restarted around the failover).
        self._scan_previous_lives = False

    def start(self) -> None:
        self.store.add_listener(self._on_store_event)
        self._changed.set()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        for task in (self._task, self._rebalancer):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if self.active:
            self.active = False
            try:
                await self.store.controller.resign()
            except Exception:
                log.exception("resigning as controller failed")

    def resign(self) -> None:
        """Our session (and so /controller) is gone: stop acting, try to be elected again."""
        if self.active:
            log.info("broker %d resigns as controller (session lost)", self.broker_id)
        self._set_active(False)
        self._changed.set()

    def _set_active(self, active: bool) -> None:
        if active and not self.active:
            # Kafka's initializeControllerContext: the live brokers and their epochs as
            # registered now; a restart from here on shows as a higher epoch.
            self._epochs = dict(self.store.registry.broker_epochs())
            self.shutting_down = {}
            self._scan_previous_lives = True
        self.active = active
        if active and self.auto_rebalance and self._rebalancer is None:
            self._rebalancer = asyncio.get_running_loop().create_task(self._auto_rebalance())
        elif not active and self._rebalancer is not None:
            self._rebalancer.cancel()
            self._rebalancer = None

    def reconsider(self) -> None:
        """Look at every partition again (Kafka's enableDefaultUncleanLeaderElection, when
        the broker default unclean.leader.election.enable becomes true): leaderless ones may
        now get an out-of-sync leader."""
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
            self._set_active(False)
        if current == -1 and not self.active:
            if await self.store.controller.elect():
                self._set_active(True)
                log.info("broker %d elected controller (epoch %d)", self.broker_id,
                         self.store.controller.epoch)
        if self.active:
            async with self._lock:
                await self._reconcile()

    def _live(
        self, excluded: Iterable[int] = (), shutting_down: bool = False
    ) -> Callable[[str, int], set[int]]:
        """topic, partition -> the brokers alive for that replica (registered, and not with the
        partition in a failed log directory); `excluded` brokers count as dead, and so do
        brokers in a controlled shutdown unless `shutting_down` (Kafka's isReplicaOnline)."""
        live_brokers = {b.broker_id for b in self.store.brokers()} - set(excluded)
        if not shutting_down:
            live_brokers -= set(self.shutting_down)
        offline = self.store.offline_replicas()

        def live(topic: str, index: int) -> set[int]:
            if not offline:
                return live_brokers
            return {b for b in live_brokers if (topic, index) not in offline.get(b, ())}

        return live

    async def _reconcile(self) -> None:
        """Elect leaders for partitions whose leader is gone; drop dead brokers from ISRs.

        A broker registered with a higher epoch than the one last handled restarted since
        (KIP-380; quicker than its old session expired, so its id never left /brokers/ids):
        it is handled as a failure (its leaderships move to another ISR member, and it leaves
        every ISR) and a start-up: a partition with no other live ISR member gets it back as
        leader in the same write, at a new leader epoch (Kafka's controller goes through
        offline to online, one epoch more), and it rejoins ISRs by catching up as any
        follower does. Until a state naming it leader is written again after its new
        registration, the broker does not take up that leadership (ReplicaManager)."""
        current = dict(self.store.registry.broker_epochs())
        bounced = {b for b, epoch in current.items()
                   if b in self._epochs and epoch > self._epochs[b]}
        if bounced:
            log.info("brokers %s registered again with a new broker epoch (%s): handling "
                     "them as failed, then started", sorted(bounced),
                     ", ".join(f"{b}: {self._epochs[b]} -> {current[b]}" for b in sorted(bounced)))
        for b, epoch in list(self.shutting_down.items()):
            if current.get(b) != epoch:
                del self.shutting_down[b]  # gone, or a new life: its shutdown is over
        live_for = self._live(bounced, shutting_down=True)
        registered_for = self._live(shutting_down=True)
        previous_lives = await self._previous_lives(current) if self._scan_previous_lives else {}
        updates: list[StateUpdate] = []
        for topic in list(self.store.topics().values()):
            for index, state in topic.partitions.items():
                previous = previous_lives.get((topic.name, index), set())
                live = live_for(topic.name, index) - previous
                # brokers of a previous life registered again: failed, then started
                restarted = (bounced | previous) & registered_for(topic.name, index)
                dead_in_isr = any(r not in live for r in state.isr)
                leader_gone = state.leader not in live
                if not dead_in_isr and not leader_gone:
                    continue
                try:
                    doc, version = await self.store.states.read_partition_state(topic.name, index)
                except NoNodeError:
                    continue
                new = next_state(doc, state.replicas, live, self.unclean_election(topic.name),
                                 self.store.controller.epoch, live - set(self.shutting_down),
                                 restarted)
                if new is not None:
                    updates.append((topic.name, index, new, version))
        async for chunk, ok in self._write_states(updates):
            if not ok:
                log.info("controller write refused (stale epoch or concurrent change); retrying")
                await asyncio.sleep(0.2)
                self._changed.set()
                return
            for name, index, doc, _ in chunk:
                log.info("%s-%d: leader %d epoch %d isr %s", name, index, doc["leader"],
                         doc["leader_epoch"], doc["isr"])
        self._epochs = current
        self._scan_previous_lives = False
        if bounced or previous_lives:
            self._changed.set()  # now as started: partitions left offline may elect them
        await self._complete_reassignments()

    async def _write_states(
        self, updates: list[StateUpdate]
    ) -> AsyncIterator[tuple[list[StateUpdate], bool]]:
        """Write partition states as the controller, WRITE_CHUNK to a multi (each all or
        nothing, fenced by the controller epoch and each state's zkVersion): each chunk, and
        whether it was written, as it is done."""
        for i in range(0, len(updates), WRITE_CHUNK):
            chunk = updates[i : i + WRITE_CHUNK]
            try:
                ok = await self.store.states.write_partition_states(chunk, as_controller=True)
            except BadVersionError:
                ok = False
            yield chunk, ok

    async def _previous_lives(self, epochs: dict[int, int]) -> dict[TopicPartition, set[int]]:
        """The brokers each partition's state names (leader, ISR) in a life before their
        current registration: the state was last written before the broker registered again
        (its mzxid below the broker epoch), so no controller has handled that broker's restart
        for it. Kafka's new controller learns the same from the broker epochs it reads."""
        wanted = [(t.name, p) for t in list(self.store.topics().values()) for p in t.partitions]
        found: dict[TopicPartition, set[int]] = {}
        for tp, (doc, zxid) in (await self.store.states.partition_state_zxids(wanted)).items():
            stale = {b for b in {doc["leader"], *doc["isr"]} if epochs.get(b, -1) > zxid}
            if stale:
                found[tp] = stale
        if found:
            log.info("partition states naming brokers in a previous life (before their current "
                     "broker epoch): %s", ", ".join(f"{t}-{p}: {sorted(b)}"
                                                    for (t, p), b in sorted(found.items())[:20]))
        return found

    # ---- controlled shutdown (ControlledShutdown, broker/handlers/controlled_shutdown.py) ------
    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """Kafka's KafkaController.doControlledShutdown: mark the broker as shutting down (it
        is elected nowhere from now on), move the leadership of every partition it leads with
        more than one replica to a live ISR member not shutting down (leader epoch + 1, the
        ISR without it), take it out of the ISR of the partitions it follows, and answer the
        partitions it still leads. Every write is fenced by the controller epoch."""
        async with self._lock:
            if not self.active:
                return ErrorCode.not_controller, []
            registered = self.store.registry.broker_epochs().get(broker_id)
            if registered is None:
                log.info("controlled shutdown of broker %d refused: not registered", broker_id)
                return ErrorCode.broker_not_available, []
            if broker_epoch != -1 and broker_epoch < registered:
                log.info("controlled shutdown of broker %d refused: its broker epoch %d is "
                         "older than the registered %d", broker_id, broker_epoch, registered)
                return ErrorCode.stale_broker_epoch, []
            # (a newer epoch than registered: our watch has not yet brought its registration)
            epoch = max(registered, broker_epoch)
            self.shutting_down[broker_id] = epoch
            log.info("Shutting down broker %d (broker epoch %d)", broker_id, epoch)
            for attempt in range(WRITE_ATTEMPTS):
                if not await self._shutdown_moves(broker_id):
                    break
                if not self.active:
                    return ErrorCode.not_controller, []
                log.info("controlled shutdown write refused (stale epoch or concurrent "
                         "change); retrying")
                await asyncio.sleep(0.1 * (attempt + 1))
            remaining = [(t.name, p) for t in list(self.store.topics().values())
                         for p, st in sorted(t.partitions.items())
                         if st.leader == broker_id and len(st.replicas) > 1]
            log.info("controlled shutdown of broker %d: %d partition(s) still led there",
                     broker_id, len(remaining))
            return ErrorCode.none, remaining

    async def _shutdown_moves(self, broker_id: int) -> bool:
        """One pass of a controlled shutdown's writes; True if some were refused."""
        live_for = self._live()  # without the shutting-down brokers
        updates: list[StateUpdate] = []
        for topic in list(self.store.topics().values()):
            for index, state in topic.partitions.items():
                if broker_id not in state.isr and state.leader != broker_id:
                    continue
                if len(state.replicas) <= 1:
                    continue  # Kafka leaves a single replica's leadership where it is
                try:
                    doc, version = await self.store.states.read_partition_state(topic.name, index)
                except NoNodeError:
                    continue
                new = shutdown_state(doc, broker_id, state.replicas,
                                     live_for(topic.name, index), set(self.shutting_down),
                                     self.store.controller.epoch)
                if new is not None:  # (a leadership left where it is is reported as remaining)
                    updates.append((topic.name, index, new, version))
        refused = False
        async for chunk, ok in self._write_states(updates):
            if not ok:
                refused = True
                continue
            for topic_name, index, doc, _ in chunk:
                self.store.topic_store.reflect_partition_state(topic_name, index, doc)
                log.info("%s-%d: leader %d epoch %d isr %s (controlled shutdown of %d)",
                         topic_name, index, doc["leader"], doc["leader_epoch"], doc["isr"],
                         broker_id)
        return refused

    # ---- elections asked for (ElectLeaders) and the auto rebalancer ---------------------------
    async def elect_leaders(
        self, election_type: int, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, ElectionResult]:
        """Kafka's processReplicaLeaderElection for an admin request: every partition asked
        for (None: all) with its result; NOT_CONTROLLER for all unless we are the controller."""
        async with self._lock:
            if partitions is None:
                partitions = [(t.name, p) for t in list(self.store.topics().values())
                              for p in sorted(t.partitions)]
            wanted = list(dict.fromkeys(partitions))
            if not self.active:
                return {tp: (ErrorCode.not_controller, None, -1) for tp in wanted}
            return await self._elect(election_type, wanted, "admin request")

    async def _elect(
        self, election_type: int, wanted: list[TopicPartition], trigger: str
    ) -> dict[TopicPartition, ElectionResult]:
        kind = "PREFERRED" if election_type == PREFERRED else "UNCLEAN"
        log.info("leader election (%s) of %d partition(s) by %s", kind, len(wanted), trigger)
        results: dict[TopicPartition, ElectionResult] = {}
        pending = wanted
        for attempt in range(WRITE_ATTEMPTS):
            live_for = self._live()
            updates: list[StateUpdate] = []
            for topic, index in pending:
                cached = partition_state(self.store, topic, index)
                if cached is None:
                    results[(topic, index)] = NO_SUCH_PARTITION
                    continue
                replicas = cached.replicas
                live = live_for(topic, index)
                if (election_type == PREFERRED and cached.leader == replicas[0]) or (
                    election_type == UNCLEAN and cached.leader in live
                ):
                    # as Kafka's controller decides from its context: no read for the many
                    # partitions of an all-partitions request that need nothing
                    results[(topic, index)] = (ErrorCode.election_not_needed, None, -1)
                    continue
                try:
                    doc, version = await self.store.states.read_partition_state(topic, index)
                except NoNodeError:
                    results[(topic, index)] = NO_SUCH_PARTITION
                    continue
                if (election_type == PREFERRED and doc["leader"] == replicas[0]) or (
                    election_type == UNCLEAN and doc["leader"] in live
                ):
                    results[(topic, index)] = (ErrorCode.election_not_needed, None, -1)
                    continue
                new = elected_state(election_type, doc, replicas, live,
                                    self.store.controller.epoch)
                if new is None:
                    error = (ErrorCode.preferred_leader_not_available if election_type == PREFERRED
                             else ErrorCode.eligible_leaders_not_available)
                    strategy = ("PreferredReplicaPartitionLeaderElectionStrategy"
                                if election_type == PREFERRED
                                else "OfflinePartitionLeaderElectionStrategy(true)")
                    results[(topic, index)] = (
                        error, f"Failed to elect leader for partition {topic}-{index} under "
                        f"strategy {strategy}", -1)
                    continue
                updates.append((topic, index, new, version))
            refused: list[TopicPartition] = []
            async for chunk, ok in self._write_states(updates):
                if not ok:
                    refused.extend((t, p) for t, p, _, _ in chunk)
                    continue
                for topic, index, doc, _ in chunk:
                    results[(topic, index)] = (ErrorCode.none, None, doc["leader"])
                    log.info("%s-%d: leader %d epoch %d isr %s (%s election)", topic, index,
                             doc["leader"], doc["leader_epoch"], doc["isr"], kind)
            if not refused:
                break
            pending = refused
            if not self.active or attempt == WRITE_ATTEMPTS - 1:
                for tp in refused:
                    results[tp] = (ErrorCode.not_controller if not self.active
                                   else ErrorCode.request_timed_out, None, -1)
                break
            log.info("election write refused (stale epoch or concurrent change); retrying")
            await asyncio.sleep(0.1)
        return {tp: results[tp] for tp in wanted}

    # ---- partition reassignment (AlterPartitionReassignments, KIP-455) -----------------------
    # Kafka's ZooKeeper-era onPartitionReassignment, with ORS the original replicas, TRS the
    # target: the topic znode gets RS = TRS + (ORS - TRS), adding = TRS - ORS and
    # removing = ORS - TRS, with the leader epoch bumped in the same multi (the leader learns
    # the new replica set, the adding replicas start following: brokers act on what ZooKeeper
    # holds). Once every TRS member is in the ISR, one more multi completes it: RS = TRS, no
    # adding/removing, the ISR without the removed replicas, the leader moved into TRS if it is
    # not there, leader epoch + 1. The removed replicas see themselves unassigned, stop and
    # delete their logs. As both steps are single writes, a new controller resumes a
    # reassignment from the topic znode alone.
    async def alter_reassignments(
        self, reassignments: dict[TopicPartition, list[int] | None], allow_rf_change: bool = True
    ) -> dict[TopicPartition, ReassignmentResult] | None:
        """Start (a target list) or cancel (None) reassignments; None unless we are the
        controller."""
        async with self._lock:
            if not self.active:
                return None
            live = {b.broker_id for b in self.store.brokers()}
            results: dict[TopicPartition, ReassignmentResult] = {}
            for tp, target in reassignments.items():
                results[tp] = await self._reassign(tp, target, live, allow_rf_change)
            return results

    async def _reassign(
        self, tp: TopicPartition, target: list[int] | None, live: set[int], allow_rf_change: bool
    ) -> ReassignmentResult:
        topic = self.store.topic(tp[0])
        if topic is None or tp[1] not in topic.partitions:
            return ErrorCode.unknown_topic_or_partition, "The partition does not exist."
        state = topic.partitions[tp[1]]
        original = [r for r in state.replicas if r not in state.adding]
        reassigning = bool(state.adding or state.removing)
        if target is None:
            if not reassigning:
                return (ErrorCode.no_reassignment_in_progress,
                        "No partition reassignment is in progress for this partition.")
            target = original
        else:
            error = invalid_target(target, original, live)
            if error is not None:
                return ErrorCode.invalid_replica_assignment, error
            if not allow_rf_change:
                heading = [r for r in state.replicas if r not in state.removing]
                if len(heading) != len(target):
                    return (ErrorCode.invalid_replication_factor,
                            f"The replication factor is changed from {len(heading)} to "
                            f"{len(target)}")
        replicas = list(dict.fromkeys([*target, *original]))
        adding = [r for r in replicas if r not in original]
        removing = [r for r in original if r not in target]
        for _ in range(WRITE_ATTEMPTS):
            try:
                doc, version = await self.store.states.read_partition_state(*tp)
            except NoNodeError:
                return ErrorCode.unknown_topic_or_partition, "The partition does not exist."
            new = assignment_state(doc, replicas, self._live()(*tp), self.store.controller.epoch)
            try:
                ok = await self.store.controller.write_assignment(
                    tp[0], tp[1], replicas, adding, removing, new, version)
            except (BadVersionError, NoNodeError):
                ok = False
            if ok:
                log.info("%s-%d: reassignment to %s: replicas %s adding %s removing %s, leader "
                         "%d epoch %d isr %s", tp[0], tp[1], target, replicas, adding, removing,
                         new["leader"], new["leader_epoch"], new["isr"])
                await self._complete_reassignments([tp])
                return ErrorCode.none, None
            if not self.active:
                return ErrorCode.not_controller, None
            await asyncio.sleep(0.1)
        return ErrorCode.request_timed_out, "The partition state kept changing."

    async def _complete_reassignments(self, wanted: Iterable[TopicPartition] | None = None) -> None:
        """Kafka's phase B for every reassigning partition whose target replicas are all in
        the ISR (call with the lock held)."""
        if wanted is None:
            wanted = [(t.name, p) for t in list(self.store.topics().values())
                      for p, s in t.partitions.items() if s.adding or s.removing]
        live_for = self._live()
        for tp in wanted:
            topic = self.store.topic(tp[0])
            if topic is None or tp[1] not in topic.partitions:
                continue
            state = topic.partitions[tp[1]]
            if not (state.adding or state.removing):
                continue
            target = [r for r in state.replicas if r not in state.removing]
            removed = list(state.removing)
            if not set(target) <= set(state.isr):
                continue
            try:
                doc, version = await self.store.states.read_partition_state(*tp)
            except NoNodeError:
                continue
            if not set(target) <= set(doc["isr"]):
                continue
            new = completed_reassignment_state(doc, target, live_for(*tp),
                                               self.store.controller.epoch)
            if new is None:
                continue  # completes once a target replica in the ISR is back
            try:
                ok = await self.store.controller.write_assignment(tp[0], tp[1], target, [], [],
                                                                  new, version)
            except (BadVersionError, NoNodeError):
                ok = False
            if not ok:
                self._changed.set()  # the next step looks again
                continue
            log.info("%s-%d: reassignment complete: replicas %s, leader %d epoch %d isr %s "
                     "(removed %s)", tp[0], tp[1], target, new["leader"], new["leader_epoch"],
                     new["isr"], removed)

    def list_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]] | None:
        """(replicas, adding, removing) of the ongoing reassignments among `partitions` (None:
        all); None unless we are the controller."""
        if not self.active:
            return None
        out: dict[TopicPartition, tuple[list[int], list[int], list[int]]] = {}
        if partitions is None:
            partitions = [(t.name, p) for t in list(self.store.topics().values())
                          for p in sorted(t.partitions)]
        for name, index in partitions:
            topic = self.store.topic(name)
            if topic is None or index not in topic.partitions:
                continue
            s = topic.partitions[index]
            if s.adding or s.removing:
                out[(name, index)] = (list(s.replicas), list(s.adding), list(s.removing))
        return out

    async def _auto_rebalance(self) -> None:
        delay = FIRST_REBALANCE_DELAY_S
        while self.active:
            await asyncio.sleep(delay)
            delay = self.imbalance_check_interval_s
            if not self.active:
                return
            try:
                async with self._lock:
                    if self.active:
                        await self.check_and_rebalance()
            except Exception:
                log.exception("automatic preferred replica leader election failed")

    async def check_and_rebalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance (call with the lock held)."""
        live_for = self._live()
        # preferred broker -> its partitions, and those of them it does not lead
        preferred_of: dict[int, int] = {}
        not_led: dict[int, list[tuple[TopicPartition, bool]]] = {}
        for topic in list(self.store.topics().values()):
            for index, state in topic.partitions.items():
                if not state.replicas:
                    continue
                preferred = state.replicas[0]
                preferred_of[preferred] = preferred_of.get(preferred, 0) + 1
                if state.leader != preferred:
                    movable = preferred in live_for(topic.name, index) and preferred in state.isr
                    not_led.setdefault(preferred, []).append(((topic.name, index), movable))
        for broker, entries in sorted(not_led.items()):
            ratio = len(entries) / preferred_of[broker]
            if ratio <= self.imbalance_per_broker_percentage / 100:
                continue
            candidates = [tp for tp, movable in entries if movable]
            if candidates:
                log.info("leader imbalance of broker %d is %.2f: moving %d partition(s) back",
                         broker, ratio, len(candidates))
                await self._elect(PREFERRED, candidates, "auto rebalance")
