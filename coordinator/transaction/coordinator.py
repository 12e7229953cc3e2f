"""The transaction coordinator (Kafka's TransactionCoordinator + TransactionStateManager).

Transactions v1, and v2 (KIP-890 part 2) for clients that send EndTxn v5: the epoch is bumped
at every PrepareCommit/PrepareAbort (a new producer id once it is exhausted), the markers carry
the bumped epoch, and the client's transaction version is written with the state (log value
v1), so a retry with the epoch before the bump is recognised by this coordinator or the next.

State per transactional id lives in `self._txns` and, durably, in `__transaction_state`
(partition = Java-hash of the id). The coordinator epoch stamped into markers is the leader
epoch of the id's `__transaction_state` partition.

Every transition is prepared (`pending_state` set: other requests for the id answer
CONCURRENT_TRANSACTIONS), appended with acks=all, and applied only once the ISR has it at the
same coordinator epoch (Kafka's `appendTransactionToLog`); a failed or timed-out append leaves
the state as it was. So markers go out only for a PrepareCommit/PrepareAbort that a new
coordinator would load, and a transaction ends all-committed or all-aborted whoever dies.

All methods run on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from samsa.config.schema import BrokerConfig
from samsa.coordinator.internal_log import InternalTopic, ReplayedRecord, partition_for
from samsa.coordinator.ports import ProducerIdSource, TxnMarker, TxnMarkerSender, TxnMetrics
from samsa.coordinator.runtime import Loaded, Loads, Tasks, WriteFailed, replay, write
from samsa.protocol.errors import ErrorCode, KafkaError

from . import transitions
from .log import CorruptTxnLogRecord, decode_key, decode_value
from .metadata import (
    PREPARED,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    TxnTransit,
)
from .transitions import Marker

log = logging.getLogger(__name__)

_MARKER_RETRY_S = 0.1
# How long an add to a transaction whose previous one is still writing its markers (the
# client's next transaction right after its commit) waits for them before it is answered
# CONCURRENT_TRANSACTIONS: below the 20 ms that librdkafka and the Java producer wait before
# they retry that answer. With the markers remote (another broker or process) the client's
# next add nearly always came first and paid those 20 ms.
CONCURRENT_WAIT_S = 0.015


OFFSETS_TOPIC = "__consumer_offsets"


# A Produce verified in-process asks this of each of its partitions, and Java's string hash
# is a Python loop over the id: its answers are kept for the ids last asked of.
_partition_for = functools.lru_cache(maxsize=4096)(partition_for)


def _now() -> int:
    return int(time.time() * 1000)


class CoordinatorError(KafkaError):
    """A request the coordinator answers with `error_code` (the code is the message too)."""

    def __init__(self, error_code: ErrorCode) -> None:
        super().__init__(error_code.name, error_code)


@dataclass(frozen=True, slots=True)
class InitResult:
    """InitProducerId's answer, and EndTxn's (v5 carries the producer id and epoch)."""

    error_code: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(
        self,
        topic: InternalTopic,
        config: BrokerConfig,
        *,
        markers: TxnMarkerSender,
        producer_ids: ProducerIdSource,
        metrics: TxnMetrics,
        transaction_version: Callable[[], int] = lambda: 0,
    ) -> None:
        self.topic = topic
        # The cluster's finalized transaction.version: >= 1 writes log values in version 1.
        self.transaction_version = transaction_version
        self.markers = markers
        self.producer_ids = producer_ids
        self.metrics = metrics
        self.max_timeout_ms: int = config["transaction.max.timeout.ms"]
        self.two_phase_commit_enabled: bool = config["transaction.two.phase.commit.enable"]
        self.expiration_ms: int = config["transactional.id.expiration.ms"]
        self.abort_interval_ms: int = config[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ]
        self.expire_interval_ms: int = config[
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ]
        self.offsets_partitions: int = config["offsets.topic.num.partitions"]
        self.verification_enabled: bool = config["transaction.partition.verification.enable"]
        self._txns: dict[str, TxnMetadata] = {}
        # Set once a prepared transaction's markers and Complete record are written (or
        # given up): what an add arriving meanwhile waits for (`_await_completion`).
        self._completions: dict[str, asyncio.Future[None]] = {}
        self._tasks = Tasks("transaction coordinator")
        self._stopping = False
        # A failed load is retried and never served: with part of the state missing,
        # InitProducerId would hand out a fresh producer id without fencing the old one and
        # prepared transactions would never be finished.
        self._loading = Loads(topic, self._tasks, self._read_partition, self._install,
                              stopping=lambda: self._stopping, serving="transactional ids")

    # ================================================================ lifecycle
    async def start(self) -> None:
        """Load every hosted `__transaction_state` partition (in the background) and start the
        timeout/expiration scans. Requests for a partition still loading get
        COORDINATOR_LOAD_IN_PROGRESS."""
        if self.topic.exists():
            for p in range(self.topic.num_partitions):
                if self.topic.is_led_here(p):
                    self._loading.start(p)
        self._tasks.every(self.abort_interval_ms / 1000, self.abort_timed_out_transactions,
                          "aborting timed-out transactions")
        self._tasks.every(self.expire_interval_ms / 1000, self.remove_expired_transactional_ids,
                          "removing expired transactional ids")

    async def stop(self) -> None:
        self._stopping = True
        await self._tasks.cancel_all()

    # ================================================================ loading
    def on_leadership(self, p: int, is_leader: bool) -> None:
        """This broker became (or stopped being) the leader of `__transaction_state`-p: load
        its transactions and finish those left prepared, or forget them."""
        if is_leader:
            self._loading.start(p)
            return
        self._loading.cancel(p)
        gone = [t for t in self._txns if self._partition_of(t) == p]
        for txn_id in gone:
            del self._txns[txn_id]
        if gone:
            log.info("%s-%d moved away: unloaded %d transactional ids", self.topic.name, p,
                     len(gone))


    async def _read_partition(self, p: int) -> dict[str, TxnMetadata]:
        """Replay partition p (yielding to the event loop every few hundred records)."""
        found: dict[str, TxnMetadata] = {}
        async for entry in replay(self.topic, p):
            if not isinstance(entry, ReplayedRecord) or entry.key is None:
                continue
            try:
                txn_id = decode_key(entry.key)
                if txn_id is None:
                    continue
                if entry.value is None:
                    found.pop(txn_id, None)
                else:
                    found[txn_id] = TxnMetadata.from_log(txn_id, decode_value(entry.value))
            except (CorruptTxnLogRecord, ValueError, UnicodeDecodeError) as exc:
                log.warning(
                    "skipping unreadable record at %s-%d offset %d: %s",
                    self.topic.name,
                    p,
                    entry.offset,
                    exc,
                )
        return found

    def _install(self, p: int, loaded: Loaded[dict[str, TxnMetadata]]) -> None:
        """Partition p is read: its transactional ids are served, and the transactions left
        prepared are finished."""
        found, epoch = loaded.state, loaded.epoch
        for txn_id, md in found.items():
            self._txns[txn_id] = md
            if md.state in PREPARED:
                log.info(
                    "completing %s of %s (pid %d epoch %d) after load",
                    md.state.name,
                    txn_id,
                    md.producer_id,
                    md.producer_epoch,
                )
                self._tasks.spawn(self._send_markers_and_complete(md, epoch))
        log.info(
            "loaded %d transactional ids from %s-%d in %.0f ms%s",
            len(found), self.topic.name, p, loaded.took_ms(),
            f" after {loaded.attempts} attempts" if loaded.attempts > 1 else "",
        )

    # ================================================================ plumbing
    def _coordinator_epoch(self, p: int) -> int:
        """The leader epoch of `__transaction_state`-p; raises KafkaError if this broker does
        not lead it."""
        return self.topic.leader_epoch(p)

    def _serving_epoch(self, txn_id: str) -> int | None:
        """The coordinator epoch of `txn_id` if its partition is led and loaded here; None
        otherwise (the expiry loops leave its transactions alone)."""
        p = self._partition_of(txn_id)
        if p in self._loading:
            return None
        try:
            return self._coordinator_epoch(p)
        except KafkaError:
            return None

    def _leads(self, p: int) -> bool:
        try:
            self._coordinator_epoch(p)
        except KafkaError:
            return False
        return True

    def _partition_of(self, txn_id: str) -> int:
        return _partition_for(txn_id, self.topic.num_partitions)

    partition_of = _partition_of

    def _check_coordinator(self, txn_id: str) -> int:
        """The coordinator epoch for `txn_id`'s partition; raises CoordinatorError if this
        broker cannot coordinate it right now."""
        if not self.topic.exists():
            # Created by FindCoordinator (and InitProducerId) before any request gets here.
            raise CoordinatorError(ErrorCode.coordinator_not_available)
        p = self._partition_of(txn_id)
        if p in self._loading:
            raise CoordinatorError(ErrorCode.coordinator_load_in_progress)
        try:
            return self._coordinator_epoch(p)
        except KafkaError as exc:
            code = (
                ErrorCode.coordinator_not_available
                if exc.error_code == ErrorCode.unknown_topic_or_partition
                else ErrorCode.not_coordinator
            )
            raise CoordinatorError(code) from None

    def _next_producer_id(self) -> int:
        """A fresh producer id; the allocator may not have one ready (a block being claimed),
        which it says with an error code (COORDINATOR_LOAD_IN_PROGRESS: clients retry)."""
        try:
            return self.producer_ids.next_id()
        except KafkaError as exc:
            raise CoordinatorError(exc.error_code) from None

    async def _write(
        self, md: TxnMetadata, transit: TxnTransit | None, coordinator_epoch: int
    ) -> None:
        """Write the prepared transition (None = tombstone) with acks=all and apply it once the
        ISR has it, at `coordinator_epoch`. On failure the pending transition is dropped (the
        state stays as it was) and CoordinatorError carries Kafka's answer for it."""
        txn_id = md.transactional_id
        what = (f"the transaction state of {txn_id} "
                f"({'tombstone' if transit is None else transit.state.name})")
        try:
            await write(self.topic, self._partition_of(txn_id),
                        [transitions.record(txn_id, transit, self.transaction_version())],
                        leader_epoch=coordinator_epoch, timestamp_ms=_now(), what=what)
        except WriteFailed as exc:
            if self._txns.get(txn_id) is md:
                md.abort_transition()
            raise CoordinatorError(exc.error_code) from None
        if self._txns.get(txn_id) is not md:
            # Unloaded (and maybe loaded again from the log) while the write was in flight:
            # the partition's new owner acts on what the log says.
            raise CoordinatorError(ErrorCode.not_coordinator)
        if transit is None:
            md.state = TxnState.DEAD
            md.pending_state = None
            self._txns.pop(txn_id, None)
        else:
            md.complete_transition(transit)

    # ================================================================ InitProducerId
    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, expected: tuple[int, int] | None,
        *, enable_2pc: bool = False, keep_prepared: bool = False,
    ) -> InitResult:
        """`enable_2pc`/`keep_prepared`: InitProducerId v6's Enable2Pc and KeepPreparedTxn."""
        if txn_id == "":
            return InitResult(ErrorCode.invalid_request)
        code = transitions.init_request_error(
            timeout_ms, self.max_timeout_ms, enable_2pc=enable_2pc, keep_prepared=keep_prepared,
            two_phase_enabled=self.two_phase_commit_enabled)
        if code != ErrorCode.none:
            return InitResult(code)
        timeout_ms = transitions.resolved_timeout(timeout_ms, enable_2pc)
        try:
            epoch = self._check_coordinator(txn_id)
            return await self._init_producer_id(txn_id, timeout_ms, expected, epoch)
        except CoordinatorError as exc:
            return InitResult(exc.error_code)

    async def _init_producer_id(
        self, txn_id: str, timeout_ms: int, expected: tuple[int, int] | None, coordinator_epoch: int
    ) -> InitResult:
        md = self._txns.get(txn_id)
        now = _now()
        if md is None:
            md = TxnMetadata(
                txn_id,
                self._next_producer_id(),
                timeout_ms=timeout_ms,
                last_update_ms=now,
            )
            self._txns[txn_id] = md
        step = transitions.init_producer_id(md, timeout_ms, expected, now,
                                            self._next_producer_id)
        if step.abort_ongoing:
            # Fence the current producer and abort its transaction; the client retries.
            md.prepare_fence_epoch()
            code = await self._end_transaction(
                md, md.producer_id, md.producer_epoch, False, coordinator_epoch, from_client=False
            )
            return InitResult(code if code != ErrorCode.none else step.error)
        if step.transit is None:
            return InitResult(step.error)
        await self._write(md, step.transit, coordinator_epoch)
        log.debug("InitProducerId %s: pid %d epoch %d", txn_id, md.producer_id, md.producer_epoch)
        return InitResult(ErrorCode.none, md.producer_id, md.producer_epoch)

    # ================================================================ AddPartitions/Offsets
    async def add_partitions(
        self,
        txn_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
        client_version: int = 0,
    ) -> ErrorCode:
        """AddPartitionsToTxn/AddOffsetsToTxn; `client_version` 2 for the partitions a TV2
        client's Produce v12 or TxnOffsetCommit v5 adds (through the partition's leader or the
        group coordinator)."""
        if not txn_id:
            return ErrorCode.invalid_request
        try:
            coordinator_epoch = self._check_coordinator(txn_id)
        except CoordinatorError as exc:
            return exc.error_code
        md = self._txns.get(txn_id)
        added = set(partitions)
        step = transitions.add_partitions(md, producer_id, producer_epoch, added, _now(),
                                          client_version)
        if (md is not None and step.error == ErrorCode.concurrent_transactions
                and md.state in PREPARED and await self._await_completion(md)):
            # Answered as if it came now: the id's partition may have moved away (or been
            # loaded again) meanwhile.
            try:
                coordinator_epoch = self._check_coordinator(txn_id)
            except CoordinatorError as exc:
                return exc.error_code
            md = self._txns.get(txn_id)
            step = transitions.add_partitions(md, producer_id, producer_epoch, added, _now(),
                                              client_version)
        if md is None or step.transit is None:
            return step.error
        try:
            await self._write(md, step.transit, coordinator_epoch)
        except CoordinatorError as exc:
            return exc.error_code
        return ErrorCode.none

    def verify_partitions(
        self, txn_id: str, producer_id: int, producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn v4+ with VerifyOnly (transitions.verify_partitions)."""
        parts = list(partitions)
        if not txn_id:
            return dict.fromkeys(parts, ErrorCode.invalid_request)
        try:
            self._check_coordinator(txn_id)
        except CoordinatorError as exc:
            return dict.fromkeys(parts, exc.error_code)
        return transitions.verify_partitions(self._txns.get(txn_id), producer_id,
                                             producer_epoch, parts)

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        return OFFSETS_TOPIC, partition_for(group_id, self.offsets_partitions)

    # ================================================================ EndTxn
    async def end_transaction(
        self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool,
        client_version: int = 0,
    ) -> InitResult:
        """EndTxn. `client_version` 2 is EndTxn v5 (transactions v2): the epoch is bumped at
        Prepare and the answer carries the producer id and epoch to use next."""
        if not txn_id:
            return InitResult(ErrorCode.invalid_request)
        try:
            epoch = self._check_coordinator(txn_id)
        except CoordinatorError as exc:
            return InitResult(exc.error_code)
        md = self._txns.get(txn_id)
        if md is None:
            return InitResult(ErrorCode.invalid_producer_id_mapping)
        code = await self._end_transaction(
            md, producer_id, producer_epoch, commit, epoch, from_client=True,
            client_version=client_version,
        )
        if code != ErrorCode.none:
            return InitResult(code)
        if md.next_producer_id >= 0:  # exhausted epoch: the producer continues as a new id
            return InitResult(code, md.next_producer_id, 0)
        return InitResult(code, md.producer_id, md.producer_epoch)

    async def _end_transaction(
        self,
        md: TxnMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        from_client: bool,
        client_version: int = 0,
    ) -> ErrorCode:
        step = transitions.end_transaction(
            md, producer_id, producer_epoch, commit, _now(), self._next_producer_id,
            from_client=from_client, client_version=client_version)
        if step.transit is None:
            return step.error
        try:
            await self._write(md, step.transit, coordinator_epoch)
        except CoordinatorError as exc:
            if step.fenced and self._txns.get(md.transactional_id) is md:
                md.producer_epoch -= 1  # the fence did not happen
            return exc.error_code
        log.debug(  # per transaction: not INFO
            "%s %s (pid %d epoch %d, %d partitions)",
            step.transit.state.name,
            md.transactional_id,
            md.producer_id,
            md.producer_epoch,
            len(md.partitions),
        )
        if step.send_markers:
            # The Prepare record is replicated: a new coordinator would finish it the same way.
            self._tasks.spawn(self._send_markers_and_complete(md, coordinator_epoch))
        return ErrorCode.none

    def _owns(self, md: TxnMetadata, coordinator_epoch: int) -> bool:
        """Is `md` still this broker's, at the coordinator epoch it was loaded or written at?"""
        if self._stopping or self._txns.get(md.transactional_id) is not md:
            return False
        try:
            return self._coordinator_epoch(self._partition_of(md.transactional_id)) == (
                coordinator_epoch
            )
        except KafkaError:
            return False

    async def _await_completion(self, md: TxnMetadata) -> bool:
        """Wait, at most CONCURRENT_WAIT_S, until the prepared transaction `md` is completed
        (or its markers given up); True if that happened in time."""
        waiter = self._completions.get(md.transactional_id)
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
            self._completions[md.transactional_id] = waiter
        try:
            await asyncio.wait_for(asyncio.shield(waiter), CONCURRENT_WAIT_S)
        except TimeoutError:
            return False
        return True

    def _completed(self, txn_id: str) -> None:
        waiter = self._completions.pop(txn_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _send_markers_and_complete(self, md: TxnMetadata, coordinator_epoch: int) -> None:
        """Write the markers of a prepared (and replicated) transaction to all its partitions,
        then write CompleteCommit/CompleteAbort. Stops when the id is no longer coordinated
        here at `coordinator_epoch`: the new coordinator loads the Prepare record and
        finishes the transaction itself."""
        if md.state not in PREPARED or md.pending:
            return
        try:
            await self._write_markers_and_complete(md, coordinator_epoch)
        finally:
            self._completed(md.transactional_id)

    async def _write_markers_and_complete(self, md: TxnMetadata, coordinator_epoch: int
                                          ) -> None:
        commit = md.state is TxnState.PREPARE_COMMIT
        pid, epoch = md.producer_id, md.producer_epoch
        try:
            transit = md.prepare_complete(_now())
        except IllegalTransition:
            log.exception("cannot complete %s", md.transactional_id)
            return
        remaining = set(md.partitions)
        while remaining:
            if not self._owns(md, coordinator_epoch):
                md.abort_transition()
                return
            marker = TxnMarker(pid, epoch, commit, coordinator_epoch,
                               md.client_transaction_version)
            results = await self.markers.write_markers(marker, sorted(remaining))
            for tp, code in results.items():
                outcome = transitions.marker_outcome(
                    code, functools.partial(self._topic_deleted, tp[0]))
                if outcome is Marker.WRITTEN:
                    remaining.discard(tp)
                elif outcome is Marker.DELETED:
                    log.info("dropping marker for deleted partition %s-%d", *tp)
                    remaining.discard(tp)
                elif outcome is Marker.ABANDON:
                    log.error(
                        "abandoning markers of %s (pid %d epoch %d): %s-%d answered %d",
                        md.transactional_id,
                        pid,
                        epoch,
                        tp[0],
                        tp[1],
                        code,
                    )
                    md.abort_transition()
                    return
                elif outcome is Marker.FAILED:
                    log.error(
                        "marker of %s to %s-%d failed with error %d; treating the "
                        "partition as done",
                        md.transactional_id,
                        tp[0],
                        tp[1],
                        code,
                    )
                    remaining.discard(tp)
            if remaining:
                await asyncio.sleep(_MARKER_RETRY_S)
        while True:
            try:
                await self._write(md, transit, coordinator_epoch)
                break
            except CoordinatorError as exc:
                if exc.error_code == ErrorCode.not_coordinator or not self._owns(
                    md, coordinator_epoch
                ):
                    return
                await asyncio.sleep(_MARKER_RETRY_S)
                if not self._owns(md, coordinator_epoch) or md.pending:
                    return
                md.pending_state = transit.state
        log.debug("%s %s (pid %d epoch %d)", md.state.name, md.transactional_id, pid, epoch)
        self.metrics.transaction_completed(md.state is TxnState.COMPLETE_COMMIT, md.last_update_ms)

    def _topic_deleted(self, topic: str) -> bool:
        return self.topic.host.topic_partitions(topic) is None

    # ================================================================ produce verification
    def is_local(self, txn_id: str) -> bool:
        """Is this broker the coordinator of `txn_id` (leader of its partition)?"""
        return self.topic.is_led_here(self._partition_of(txn_id))

    def verify_partition(
        self, txn_id: str | None, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """KIP-890 part 1: is (topic, partition) in the ongoing transaction of this producer?"""
        if not txn_id:
            return ErrorCode.transactional_id_authorization_failed
        if self._partition_of(txn_id) in self._loading:
            return ErrorCode.not_enough_replicas
        return transitions.verify_partition(self._txns.get(txn_id), producer_id, producer_epoch,
                                            (topic, partition))

    # ================================================================ timeouts, expiration
    async def abort_timed_out_transactions(self) -> None:
        now = _now()
        for md in list(self._txns.values()):
            if not transitions.timed_out(md, now):
                continue
            coordinator_epoch = self._serving_epoch(md.transactional_id)
            if coordinator_epoch is None:
                continue
            log.info(
                "aborting timed-out transaction of %s (pid %d epoch %d, started %d ms ago)",
                md.transactional_id,
                md.producer_id,
                md.producer_epoch,
                now - md.start_ms,
            )
            md.prepare_fence_epoch()  # pending from here: no other transition interleaves
            self._tasks.spawn(self._abort_timed_out(md, coordinator_epoch))

    async def _abort_timed_out(self, md: TxnMetadata, coordinator_epoch: int) -> None:
        code = await self._end_transaction(
            md, md.producer_id, md.producer_epoch, False, coordinator_epoch, from_client=False
        )
        self.metrics.transaction_timed_out(code == ErrorCode.none)
        if code != ErrorCode.none:
            log.warning(
                "aborting timed-out transaction of %s failed: %d", md.transactional_id, code
            )

    async def remove_expired_transactional_ids(self) -> None:
        now = _now()
        for md in list(self._txns.values()):
            if not transitions.expired(md, now, self.expiration_ms):
                continue
            coordinator_epoch = self._serving_epoch(md.transactional_id)
            if coordinator_epoch is None:
                continue
            try:
                md.prepare_dead()
            except IllegalTransition:
                continue
            self._tasks.spawn(self._expire(md, coordinator_epoch))

    async def _expire(self, md: TxnMetadata, coordinator_epoch: int) -> None:
        try:
            await self._write(md, None, coordinator_epoch)
            log.info("transactional id %s expired", md.transactional_id)
        except CoordinatorError:
            pass  # _write logged it and left the id as it was

    # ================================================================ describe / list
    def loaded_transactions(self) -> list[TxnMetadata]:
        """The state of every transactional id coordinated (and loaded) here."""
        return list(self._txns.values())

    def describe(self, txn_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if not txn_id:
            return ErrorCode.invalid_request, None
        try:
            self._check_coordinator(txn_id)
        except CoordinatorError as exc:
            return exc.error_code, None
        md = self._txns.get(txn_id)
        if md is None or md.state is TxnState.DEAD:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, md

    def list_transactions(
        self, states: set[TxnState], producer_ids: set[int], duration_ms: int
    ) -> tuple[ErrorCode, list[TxnMetadata]]:
        if self._loading:
            return ErrorCode.coordinator_load_in_progress, []
        now = _now()
        return ErrorCode.none, [md for md in self._txns.values()
                                if transitions.listed(md, states, producer_ids, duration_ms, now)]
