"""The transaction coordinator (Kafka's TransactionCoordinator + TransactionStateManager, TV1).

State per transactional id lives in `self._txns` and, durably, in `__transaction_state`
(partition = Java-hash of the id). Every state change is written to that log before it is
applied in memory. The coordinator epoch stamped into markers is the leader epoch of the
id's `__transaction_state` partition.

All methods run on the event loop. Appends are synchronous, so a request handler never
interleaves with another one between its checks and its write; the only asynchronous part is
sending markers after PrepareCommit/PrepareAbort and writing CompleteCommit/CompleteAbort.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from broker import metrics
from broker.markers import write_txn_markers
from broker.replica_manager import PartitionError
from coordinator.internal_log import InternalTopic, ReplayedRecord, partition_for
from storage.errors import StorageError

from .log import CorruptTxnLogRecord, decode_key, decode_value, encode_key, encode_value
from .metadata import (
    COMPLETED,
    PREPARED,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    TxnTransit,
    epoch_exhausted,
)

log = logging.getLogger(__name__)

# Kafka error codes
NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
CONCURRENT_TRANSACTIONS = 51
TRANSACTION_COORDINATOR_FENCED = 52
KAFKA_STORAGE_ERROR = 56
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105
TRANSACTION_ABORTABLE = 120

_RETRIABLE_MARKER_ERRORS = frozenset(
    {
        UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        REQUEST_TIMED_OUT,
        KAFKA_STORAGE_ERROR,
        COORDINATOR_LOAD_IN_PROGRESS,
    }
)
_ABANDON_MARKER_ERRORS = frozenset({INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED})
_MARKER_RETRY_S = 0.1

OFFSETS_TOPIC = "__consumer_offsets"


def _now() -> int:
    return int(time.time() * 1000)


class CoordinatorError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class InitResult:
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(self, broker: Any, topic: InternalTopic, config: Any) -> None:
        self.broker = broker
        self.topic = topic
        self.max_timeout_ms: int = config["transaction.max.timeout.ms"]
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
        self._loading: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._stopping = False

    # ================================================================ lifecycle
    async def start(self) -> None:
        """Load every hosted `__transaction_state` partition (in the background) and start the
        timeout/expiration scans. Requests for a partition still loading get
        COORDINATOR_LOAD_IN_PROGRESS."""
        if self.broker.store.topic(self.topic.name) is not None:
            self._loading = set(range(self.topic.num_partitions))
            self._spawn(self._load_all())
        self._loops.append(
            asyncio.create_task(
                self._scan_loop(self.abort_interval_ms, self.abort_timed_out_transactions)
            )
        )
        self._loops.append(
            asyncio.create_task(
                self._scan_loop(self.expire_interval_ms, self.remove_expired_transactional_ids)
            )
        )

    async def stop(self) -> None:
        self._stopping = True
        tasks = list(self._loops) + list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction coordinator task failed", exc_info=task.exception())

    async def _scan_loop(self, interval_ms: int, scan: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                scan()
            except Exception:
                log.exception("transaction coordinator scan failed")

    async def _load_all(self) -> None:
        started = time.monotonic()
        loaded = 0
        for p in sorted(self._loading):
            try:
                loaded += self._load_partition(p)
            except PartitionError:
                pass  # not hosted/led here: not ours to coordinate
            except Exception:
                log.exception("loading %s-%d failed", self.topic.name, p)
            self._loading.discard(p)
            await asyncio.sleep(0)
        log.info(
            "loaded %d transactional ids from %s in %.0f ms",
            loaded,
            self.topic.name,
            (time.monotonic() - started) * 1000,
        )

    def on_leadership(self, p: int, is_leader: bool) -> None:
        """This broker became (or stopped being) the leader of `__transaction_state`-p: load
        its transactions and finish those left prepared, or forget them."""
        if is_leader:
            if p in self._loading:
                return
            self._loading.add(p)
            self._spawn(self._load_one(p))
            return
        self._loading.discard(p)
        gone = [t for t in self._txns if self._partition_of(t) == p]
        for txn_id in gone:
            del self._txns[txn_id]
        if gone:
            log.info("%s-%d moved away: unloaded %d transactional ids", self.topic.name, p,
                     len(gone))

    async def _load_one(self, p: int) -> None:
        started = time.monotonic()
        try:
            loaded = self._load_partition(p)
            log.info("loaded %d transactional ids from %s-%d in %.0f ms", loaded,
                     self.topic.name, p, (time.monotonic() - started) * 1000)
        except PartitionError:
            pass
        finally:
            self._loading.discard(p)

    def _load_partition(self, p: int) -> int:
        found: dict[str, TxnMetadata] = {}
        for entry in self.topic.replay(p):
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
        epoch = self._coordinator_epoch(p)
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
                self._spawn(self._send_markers_and_complete(md, epoch))
        return len(found)

    # ================================================================ plumbing
    def _coordinator_epoch(self, p: int) -> int:
        return self.broker.replicas.leader_partition(self.topic.name, p).leader_epoch

    def _partition_of(self, txn_id: str) -> int:
        return partition_for(txn_id, self.topic.num_partitions)

    partition_of = _partition_of

    def _check_coordinator(self, txn_id: str) -> int:
        """The coordinator epoch for `txn_id`'s partition; raises CoordinatorError if this
        broker cannot coordinate it right now."""
        if self.broker.store.topic(self.topic.name) is None:
            # Created by FindCoordinator (and InitProducerId) before any request gets here.
            raise CoordinatorError(COORDINATOR_NOT_AVAILABLE)
        p = self._partition_of(txn_id)
        if p in self._loading:
            raise CoordinatorError(COORDINATOR_LOAD_IN_PROGRESS)
        try:
            return self._coordinator_epoch(p)
        except PartitionError as exc:
            code = (
                COORDINATOR_NOT_AVAILABLE
                if exc.error_code == UNKNOWN_TOPIC_OR_PARTITION
                else NOT_COORDINATOR
            )
            raise CoordinatorError(code) from None

    def _write(self, md: TxnMetadata, transit: TxnTransit | None) -> None:
        """Write the transition (None = tombstone) to the log, then apply it. On failure the
        pending transition is dropped and CoordinatorError carries Kafka's mapped error."""
        now = _now()
        value = None if transit is None else encode_value(transit.log_value())
        try:
            self.topic.append(
                self._partition_of(md.transactional_id),
                [(encode_key(md.transactional_id), value)],
                timestamp_ms=now,
            )
        except (PartitionError, StorageError) as exc:
            md.abort_transition()
            code = int(getattr(exc, "error_code", UNKNOWN_SERVER_ERROR))
            log.warning(
                "writing transaction state of %s failed with error %d", md.transactional_id, code
            )
            if code in (
                UNKNOWN_TOPIC_OR_PARTITION,
                NOT_ENOUGH_REPLICAS,
                NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                REQUEST_TIMED_OUT,
            ):
                raise CoordinatorError(COORDINATOR_NOT_AVAILABLE) from None
            if code in (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR):
                raise CoordinatorError(NOT_COORDINATOR) from None
            raise CoordinatorError(UNKNOWN_SERVER_ERROR) from None
        if transit is None:
            md.state = TxnState.DEAD
            md.pending_state = None
            self._txns.pop(md.transactional_id, None)
        else:
            md.complete_transition(transit)

    # ================================================================ InitProducerId
    def init_producer_id(
        self, txn_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitResult:
        if txn_id == "":
            return InitResult(INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return InitResult(INVALID_TRANSACTION_TIMEOUT)
        try:
            epoch = self._check_coordinator(txn_id)
            return self._init_producer_id(txn_id, timeout_ms, expected, epoch)
        except CoordinatorError as exc:
            return InitResult(exc.error_code)

    def _init_producer_id(
        self, txn_id: str, timeout_ms: int, expected: tuple[int, int] | None, coordinator_epoch: int
    ) -> InitResult:
        md = self._txns.get(txn_id)
        now = _now()
        if md is None:
            md = TxnMetadata(
                txn_id,
                self.broker.producer_ids.next_id(),
                timeout_ms=timeout_ms,
                last_update_ms=now,
            )
            self._txns[txn_id] = md
        if expected is not None:
            pid, epoch = expected
            valid = (
                md.producer_epoch == -1
                or pid == md.producer_id
                or (pid == md.last_producer_id and epoch_exhausted(epoch))
            )
            if not valid:
                return InitResult(PRODUCER_FENCED)
        if md.pending:
            return InitResult(CONCURRENT_TRANSACTIONS)
        if md.state in PREPARED:
            return InitResult(CONCURRENT_TRANSACTIONS)
        if md.state is TxnState.ONGOING:
            # Fence the current producer and abort its transaction; the client retries.
            md.prepare_fence_epoch()
            code = self._end_transaction(
                md, md.producer_id, md.producer_epoch, False, coordinator_epoch, from_client=False
            )
            return InitResult(code if code != NONE else CONCURRENT_TRANSACTIONS)
        if md.state not in COMPLETED:
            return InitResult(UNKNOWN_SERVER_ERROR)
        if epoch_exhausted(md.producer_epoch) and (
            expected is None or expected[1] == md.producer_epoch
        ):
            transit: TxnTransit | int = md.prepare_producer_id_rotation(
                self.broker.producer_ids.next_id(), timeout_ms, now, expected is not None
            )
        else:
            transit = md.prepare_increment_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
        if isinstance(transit, int):
            return InitResult(transit)
        self._write(md, transit)
        log.debug("InitProducerId %s: pid %d epoch %d", txn_id, md.producer_id, md.producer_epoch)
        return InitResult(NONE, md.producer_id, md.producer_epoch)

    # ================================================================ AddPartitions/Offsets
    def add_partitions(
        self,
        txn_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> int:
        if not txn_id:
            return INVALID_REQUEST
        try:
            self._check_coordinator(txn_id)
        except CoordinatorError as exc:
            return exc.error_code
        md = self._txns.get(txn_id)
        added = set(partitions)
        if md is None or md.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return PRODUCER_FENCED
        if md.pending or md.state in PREPARED:
            return CONCURRENT_TRANSACTIONS
        if md.state is TxnState.ONGOING and added <= md.partitions:
            return NONE
        if md.state not in COMPLETED and md.state is not TxnState.ONGOING:
            return INVALID_TXN_STATE
        try:
            self._write(md, md.prepare_add_partitions(added, _now()))
        except CoordinatorError as exc:
            return exc.error_code
        return NONE

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        return OFFSETS_TOPIC, partition_for(group_id, self.offsets_partitions)

    # ================================================================ EndTxn
    def end_transaction(
        self, txn_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> int:
        if not txn_id:
            return INVALID_REQUEST
        try:
            epoch = self._check_coordinator(txn_id)
        except CoordinatorError as exc:
            return exc.error_code
        md = self._txns.get(txn_id)
        if md is None:
            return INVALID_PRODUCER_ID_MAPPING
        return self._end_transaction(
            md, producer_id, producer_epoch, commit, epoch, from_client=True
        )

    def _end_transaction(
        self,
        md: TxnMetadata,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        *,
        from_client: bool,
    ) -> int:
        if md.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if (
            from_client and producer_epoch != md.producer_epoch
        ) or producer_epoch < md.producer_epoch:
            return PRODUCER_FENCED
        fencing = md.pending_state is TxnState.PREPARE_EPOCH_FENCE
        if md.pending and not fencing:
            return CONCURRENT_TRANSACTIONS
        state = md.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            if fencing:
                if target is not TxnState.PREPARE_ABORT:
                    md.pending_state = None
                    md.producer_epoch -= 1
                    return INVALID_TXN_STATE
                md.pending_state = None
                md.last_producer_epoch = -1
            try:
                transit = md.prepare_abort_or_commit(target, _now())
                self._write(md, transit)
            except CoordinatorError as exc:
                if fencing:
                    md.producer_epoch -= 1  # the fence did not happen
                return exc.error_code
            log.debug(  # per transaction: not INFO
                "%s %s (pid %d epoch %d, %d partitions)",
                target.name,
                md.transactional_id,
                md.producer_id,
                md.producer_epoch,
                len(md.partitions),
            )
            self._spawn(self._send_markers_and_complete(md, coordinator_epoch))
            return NONE
        if fencing:  # only reachable when not Ongoing: undo
            md.pending_state = None
            md.producer_epoch -= 1
        if state is TxnState.COMPLETE_COMMIT:
            return NONE if commit else INVALID_TXN_STATE
        if state is TxnState.COMPLETE_ABORT:
            return INVALID_TXN_STATE if commit else NONE
        if state is TxnState.PREPARE_COMMIT:
            return CONCURRENT_TRANSACTIONS if commit else INVALID_TXN_STATE
        if state is TxnState.PREPARE_ABORT:
            return INVALID_TXN_STATE if commit else CONCURRENT_TRANSACTIONS
        return INVALID_TXN_STATE

    async def _send_markers_and_complete(self, md: TxnMetadata, coordinator_epoch: int) -> None:
        """Write the markers of a prepared transaction to all its partitions, then write
        CompleteCommit/CompleteAbort."""
        if md.state not in PREPARED or md.pending:
            return
        commit = md.state is TxnState.PREPARE_COMMIT
        pid, epoch = md.producer_id, md.producer_epoch
        try:
            transit = md.prepare_complete(_now())
        except IllegalTransition:
            log.exception("cannot complete %s", md.transactional_id)
            return
        remaining = set(md.partitions)
        while remaining:
            if self._stopping:
                md.abort_transition()
                return
            results = await write_txn_markers(
                self.broker, pid, epoch, commit, coordinator_epoch, sorted(remaining)
            )
            for tp, code in results.items():
                if code == NONE:
                    remaining.discard(tp)
                elif code == UNKNOWN_TOPIC_OR_PARTITION and self.broker.store.topic(tp[0]) is None:
                    log.info("dropping marker for deleted partition %s-%d", *tp)
                    remaining.discard(tp)
                elif code in _ABANDON_MARKER_ERRORS:
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
                elif code not in _RETRIABLE_MARKER_ERRORS:
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
                self._write(md, transit)
                break
            except CoordinatorError as exc:
                if exc.error_code == NOT_COORDINATOR or self._stopping:
                    return
                await asyncio.sleep(_MARKER_RETRY_S)
                md.pending_state = transit.state
        log.debug("%s %s (pid %d epoch %d)", md.state.name, md.transactional_id, pid, epoch)
        metrics.transaction_completed(md.state is TxnState.COMPLETE_COMMIT, md.last_update_ms)

    # ================================================================ produce verification
    def is_local(self, txn_id: str) -> bool:
        """Is this broker the coordinator of `txn_id` (leader of its partition)?"""
        hosted = self.broker.replicas.get(self.topic.name, self._partition_of(txn_id))
        return hosted is not None and hosted.is_leader

    def verify_partition(
        self, txn_id: str | None, producer_id: int, producer_epoch: int, topic: str, partition: int
    ) -> int:
        """KIP-890 part 1: is (topic, partition) in the ongoing transaction of this producer?"""
        if not txn_id:
            return 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if self._partition_of(txn_id) in self._loading:
            return NOT_ENOUGH_REPLICAS
        md = self._txns.get(txn_id)
        if md is None or md.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != producer_epoch:
            return INVALID_PRODUCER_EPOCH
        if md.state in PREPARED or (md.pending and md.state is not TxnState.ONGOING):
            return CONCURRENT_TRANSACTIONS
        if md.state is TxnState.ONGOING and (topic, partition) in md.partitions:
            return NONE
        return TRANSACTION_ABORTABLE

    # ================================================================ timeouts, expiration
    def abort_timed_out_transactions(self) -> None:
        now = _now()
        for md in list(self._txns.values()):
            if md.state is not TxnState.ONGOING or md.pending:
                continue
            if md.start_ms + md.timeout_ms >= now:
                continue
            p = self._partition_of(md.transactional_id)
            if p in self._loading:
                continue
            try:
                coordinator_epoch = self._coordinator_epoch(p)
            except PartitionError:
                continue
            log.info(
                "aborting timed-out transaction of %s (pid %d epoch %d, started %d ms ago)",
                md.transactional_id,
                md.producer_id,
                md.producer_epoch,
                now - md.start_ms,
            )
            md.prepare_fence_epoch()
            code = self._end_transaction(
                md, md.producer_id, md.producer_epoch, False, coordinator_epoch, from_client=False
            )
            metrics.transaction_timed_out(code == NONE)
            if code != NONE:
                log.warning(
                    "aborting timed-out transaction of %s failed: %d", md.transactional_id, code
                )

    def remove_expired_transactional_ids(self) -> None:
        now = _now()
        for md in list(self._txns.values()):
            if md.state not in COMPLETED or md.pending:
                continue
            if md.last_update_ms > now - self.expiration_ms:
                continue
            if self._partition_of(md.transactional_id) in self._loading:
                continue
            try:
                md.prepare_dead()
                self._write(md, None)
                log.info("transactional id %s expired", md.transactional_id)
            except (CoordinatorError, IllegalTransition):
                md.abort_transition()

    # ================================================================ describe / list
    def describe(self, txn_id: str) -> tuple[int, TxnMetadata | None]:
        if not txn_id:
            return INVALID_REQUEST, None
        try:
            self._check_coordinator(txn_id)
        except CoordinatorError as exc:
            return exc.error_code, None
        md = self._txns.get(txn_id)
        if md is None or md.state is TxnState.DEAD:
            return TRANSACTIONAL_ID_NOT_FOUND, None
        return NONE, md

    def list_transactions(
        self, states: set[TxnState], producer_ids: set[int], duration_ms: int
    ) -> tuple[int, list[TxnMetadata]]:
        if self._loading:
            return COORDINATOR_LOAD_IN_PROGRESS, []
        now = _now()
        out = []
        for md in self._txns.values():
            if md.state is TxnState.DEAD:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            if states and md.state not in states:
                continue
            if duration_ms >= 0 and (md.start_ms < 0 or now - md.start_ms <= duration_ms):
                continue
            out.append(md)
        return NONE, out
