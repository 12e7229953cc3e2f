"""The partition leader's side of KIP-890 (Kafka's AddPartitionsToTxnManager and the
verification in ReplicaManager.appendRecords): before the first transactional append of a
producer to a partition, the leader asks the transaction coordinator whether the partition is
in the producer's ongoing transaction. A coordinator on another broker is asked with
AddPartitionsToTxn v5 with VerifyOnly (for Produce v12, transactions v2, without it: the
partitions are added to the transaction). As Kafka's leader, this one keeps one request in
flight per coordinator broker; what arrives meanwhile waits in that coordinator's queue, at
most one entry per transactional id, and goes in the next request, all of them together
(`VerificationQueue`). A local coordinator is asked in-process, at the append.
ProduceVerification is what the replica manager's append runs.

The coordinator is found as FindCoordinator finds it: the leader of the transactional id's
`__transaction_state` partition in the metadata store.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from samsa.coordinator.internal_log import partition_for
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_LOW,
    HEADER_SIZE,
    LOG_OVERHEAD,
)
from samsa.storage.clock import milliseconds

from .. import metrics
from ..network.interbroker import BrokerConnection, BrokerUnavailable

if TYPE_CHECKING:
    from samsa.coordinator.transaction import TransactionCoordinator
    from samsa.storage.verification_state import VerificationState

    from ..cluster.metadata_store import MetadataStore
    from ..replication.partition import Partition

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN = 24
TXN_TOPIC = "__transaction_state"

# Kafka's request.timeout.ms default, which also bounds add.partitions.to.txn.retry.backoff.max.ms
# (Samsa has no broker-side request timeout property).
KAFKA_REQUEST_TIMEOUT_MS = 30_000

# Coordinator answers that only mean "not now" (Kafka's ReplicaManager turns them into
# NOT_ENOUGH_REPLICAS, which every client retries).
_RETRIABLE = frozenset({
    ErrorCode.concurrent_transactions,
    ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
})


def produce_error(code: int, produce_version: int) -> int:
    """A coordinator's verification answer as the Produce response of `produce_version`
    carries it (Kafka's AddPartitionsToTxnManager and ReplicaManager). Transactions v2
    (Produce v12+) gets CONCURRENT_TRANSACTIONS as it is: a client of that version knows it."""
    if not code:  # NONE, nearly every answer: none of the enum's members looked up
        return code
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code == ErrorCode.concurrent_transactions and produce_version >= 12:
        return code
    if code in _RETRIABLE or code == ErrorCode.not_enough_replicas:
        return ErrorCode.not_enough_replicas
    if code == ErrorCode.transaction_abortable and produce_version < 11:
        return ErrorCode.invalid_txn_state
    return code


Answers = dict[tuple[str, int], int]  # Kafka's error code by (topic, partition)


@dataclass(eq=False)
class Asked:
    """A transactional id's partitions to ask its coordinator about (one transaction of an
    AddPartitionsToTxn v5 request), and the future its asker waits on."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[tuple[str, int]]
    verify_only: bool
    answer: asyncio.Future[Answers] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())

    def settle(self, answers: Answers) -> None:
        if not self.answer.done():  # its asker may have gone (its connection closed)
            self.answer.set_result(answers)

    def settle_all(self, code: int) -> None:
        self.settle(dict.fromkeys(self.partitions, code))

    def body(self) -> dict[str, Any]:
        topics: dict[str, list[int]] = {}
        for t, p in self.partitions:
            topics.setdefault(t, []).append(p)
        return {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "verify_only": self.verify_only,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


class VerificationQueue:
    """What waits for one coordinator broker while a request to it is in flight, at most one
    entry per transactional id (Kafka's AddPartitionsToTxnManager.addTxnData). A second entry
    for a waiting id settles one of the two at once, without asking the coordinator:
    - a lower epoch than the waiting one's is fenced: INVALID_PRODUCER_EPOCH for it;
    - a higher epoch fences the waiting one: INVALID_PRODUCER_EPOCH for that;
    - the same epoch is most likely the client's retry: the waiting one is answered
      NETWORK_EXCEPTION (which its client retries), and the new one waits in its place."""

    def __init__(self) -> None:
        self.waiting: dict[str, Asked] = {}
        self.in_flight = False

    def add(self, asked: Asked) -> bool:
        """Queue `asked` (settling the entry it displaces); False if it was refused instead."""
        earlier = self.waiting.get(asked.transactional_id)
        if earlier is not None:
            if asked.producer_epoch < earlier.producer_epoch:
                asked.settle_all(ErrorCode.invalid_producer_epoch)
                return False
            earlier.settle_all(ErrorCode.invalid_producer_epoch
                               if earlier.producer_epoch < asked.producer_epoch
                               else ErrorCode.network_exception)
        self.waiting[asked.transactional_id] = asked
        return True

    def take(self) -> list[Asked]:
        """Everything waiting, for the next request; the queue is empty after."""
        batch = list(self.waiting.values())
        self.waiting = {}
        return batch


class TxnPartitionVerifier:
    """Sends the verification requests, over one connection per coordinator broker with one
    request in flight on it, the rest waiting in that coordinator's `VerificationQueue`."""

    def __init__(self, store: MetadataStore, broker_id: int, txn_partitions: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self.txn_partitions = txn_partitions
        self._connections: dict[int, BrokerConnection] = {}
        self._queues: dict[int, VerificationQueue] = {}
        self._senders: set[asyncio.Task[None]] = set()
        self._closed = False

    def coordinator_of(self, transactional_id: str) -> int:
        """The broker id leading the id's __transaction_state partition, or -1."""
        topic = self.store.topic(TXN_TOPIC)
        if topic is None:
            return -1
        state = topic.partitions.get(partition_for(transactional_id, self.txn_partitions))
        return -1 if state is None else state.leader

    def queue(self, coordinator: int) -> VerificationQueue:
        """The queue of verifications for `coordinator` (made on first use)."""
        queue = self._queues.get(coordinator)
        if queue is None:
            queue = self._queues[coordinator] = VerificationQueue()
        return queue

    async def verify(
        self,
        coordinator: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
        verify_only: bool = True,
    ) -> Answers:
        """The coordinator's answer per partition (Kafka's codes, not yet mapped for Produce).
        Without `verify_only` the coordinator adds the partitions to the transaction (a TV2
        client's Produce v12 or TxnOffsetCommit v5: the client sends no AddPartitionsToTxn)."""
        if coordinator < 0:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        started = time.monotonic()
        asked = Asked(transactional_id, producer_id, producer_epoch, partitions, verify_only)
        answers = await self._answer(coordinator, asked)
        metrics.transaction_verified(started, answers.values())
        return answers

    async def _answer(self, coordinator: int, asked: Asked) -> Answers:
        queue = self.queue(coordinator)
        if not queue.add(asked):
            return asked.answer.result()  # refused at once
        if queue.in_flight:
            return await asked.answer
        # Nothing in flight: this asker sends its own request, with no task in between (a
        # loop pass each way); what comes in meanwhile waits, and a task sends it after.
        queue.in_flight = True
        try:
            await self._send(coordinator, queue.take())
        finally:
            self._after_sending(coordinator, queue)
        return asked.answer.result()

    def _after_sending(self, coordinator: int, queue: VerificationQueue) -> None:
        if queue.waiting and not self._closed:
            task = asyncio.create_task(self._send_waiting(coordinator, queue))
            self._senders.add(task)
            task.add_done_callback(self._senders.discard)
        else:
            queue.in_flight = False

    async def _send_waiting(self, coordinator: int, queue: VerificationQueue) -> None:
        """Ask `coordinator` about what waits in its queue, one request at a time, until
        nothing waits."""
        try:
            while queue.waiting and not self._closed:
                await self._send(coordinator, queue.take())
        finally:
            queue.in_flight = False

    async def _send(self, coordinator: int, batch: list[Asked]) -> None:
        """One request for `batch`, each of whose askers is answered."""
        try:
            answers = await self._ask(coordinator, batch)
        except asyncio.CancelledError:  # the asker's connection closed, or the broker stops
            for asked in batch:
                asked.settle_all(ErrorCode.network_exception)
            raise
        except Exception:
            log.exception("verifying %d transactions with coordinator %d failed", len(batch),
                          coordinator)
            answers = _all_answered(batch, ErrorCode.unknown_server_error)
        for asked in batch:
            asked.settle(answers[asked.transactional_id])

    async def _ask(self, coordinator: int, batch: list[Asked]) -> dict[str, Answers]:
        """One AddPartitionsToTxn v5 for every transaction in `batch`: the answers by
        transactional id."""
        conn = self._connections.get(coordinator)
        if conn is None:
            conn = self._connections[coordinator] = BrokerConnection(
                self.store, coordinator, f"broker-{self.broker_id}-txn-verification", 10.0)
        try:
            r = await conn.request(ADD_PARTITIONS_TO_TXN, 5,
                                   {"transactions": [asked.body() for asked in batch]})
        except BrokerUnavailable as exc:
            log.info("verifying %s with coordinator %d failed: %s",
                     ", ".join(asked.transactional_id for asked in batch), coordinator, exc)
            return _all_answered(batch, ErrorCode.network_exception)
        if r.error_code != ErrorCode.none:
            return _all_answered(batch, ErrorCode.invalid_txn_state
                                 if r.error_code == ErrorCode.cluster_authorization_failed
                                 else r.error_code)
        out = _all_answered(batch, ErrorCode.unknown_server_error)
        for result in r.results_by_transaction:
            answers = out.get(result.transactional_id)
            if answers is None:
                continue
            for t in result.topic_results:
                for p in t.results_by_partition:
                    answers[(t.name, p.partition_index)] = int(p.partition_error_code)
        return out

    def close(self) -> None:
        self._closed = True
        for task in self._senders:
            task.cancel()
        for queue in self._queues.values():
            for asked in queue.take():
                asked.settle_all(ErrorCode.network_exception)
        self._queues.clear()
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()


def _all_answered(batch: list[Asked], code: int) -> dict[str, Answers]:
    return {asked.transactional_id: dict.fromkeys(asked.partitions, code) for asked in batch}


_I32 = struct.Struct(">i")
_PRODUCER = struct.Struct(">qh")  # a batch header's producer id and epoch
# after baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta
# and the two timestamps: 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8
_PRODUCER_AT = 43
_BASE_SEQUENCE_AT = _PRODUCER_AT + _PRODUCER.size


def _start_verification(partition: Partition, records: bytes | None, producer: tuple[int, int],
                        supports_epoch_bump: bool) -> VerificationState:
    """The producer's verification state on `partition`, made (or kept) as its leader starts
    asking the coordinator about the batch: what the append must present (KIP-890).
    `records`: a batch `needs_verification` read the producer of."""
    assert records is not None
    (sequence,) = _I32.unpack_from(records, _BASE_SEQUENCE_AT)
    return partition.log.producer_state.verifications.start(
        producer[0], sequence, producer[1], supports_epoch_bump, milliseconds())


def _transactional_producer(records: bytes) -> tuple[int, int] | None:
    """(producer id, epoch) of the first batch if it is a whole transactional data batch of
    a producer, from its header's bytes (asked of every partition of a transactional Produce:
    no header object); None for anything else, a malformed batch too, which the log's
    validation then answers (as iter_batches reads it)."""
    size = len(records)
    if size < HEADER_SIZE:
        return None
    attributes = records[ATTRIBUTES_LOW]
    if not attributes & ATTR_TRANSACTIONAL or attributes & ATTR_CONTROL:
        return None
    (length,) = _I32.unpack_from(records, 8)
    if length < HEADER_SIZE - LOG_OVERHEAD or LOG_OVERHEAD + length > size:
        return None
    producer = _PRODUCER.unpack_from(records, _PRODUCER_AT)
    return producer if producer[0] >= 0 else None


def needs_verification(
    coord: TransactionCoordinator, partition: Partition, records: bytes | None,
    always: bool = False,
) -> tuple[int, int] | None:
    """(producer id, epoch) of a transactional batch whose producer has no transaction open on
    the partition at that epoch yet, else None. `always`: whatever
    transaction.partition.verification.enable says (Produce v12 adds the partition)."""
    if not records or not (always or coord.verification_enabled):
        return None
    producer = _transactional_producer(records)
    if producer is None:
        return None
    producer_id, producer_epoch = producer
    if partition.log.producer_state.txn_open_at(producer_id, producer_epoch):
        return None  # already verified: the transaction is open on this partition
    return producer


class ProduceVerification:
    """KIP-890 on the Produce path, as the replica manager's append runs it: before the
    appends (`before_append`) the coordinator on another broker is asked, and for Produce v12
    every partition the transaction lacks is added; at each append (`at_append`) a local
    coordinator is asked in-process."""

    def __init__(self, coordinator: TransactionCoordinator, remote: TxnPartitionVerifier | None,
                 broker_id: int, config: Mapping[str, Any]) -> None:
        self.coordinator = coordinator
        self.remote = remote
        self.broker_id = broker_id
        self.config = config

    def wanted(self, version: int) -> bool:
        """Whether a transactional Produce of `version` is verified before its appends."""
        return version >= 12 or self.coordinator.verification_enabled

    def settled(self, partition: Partition, records: bytes | None, version: int) -> bool:
        """Whether `before_append` has nothing to ask about this batch for a Produce of
        `version`: its transaction is open on the partition already (every batch of a
        transaction after the first to a partition), or it is not transactional."""
        return (not self.wanted(version)
                or needs_verification(self.coordinator, partition, records,
                                      always=version >= 12) is None)

    @property
    def required(self) -> bool:
        """transaction.partition.verification.enable: a transactional batch that opens a
        transaction on a partition is appended only with the verification state its leader
        made before asking the coordinator (the log's check, Kafka's)."""
        return self.coordinator.verification_enabled

    async def before_append(
        self, transactional_id: str, partitions: Sequence[tuple[Partition, bytes | None]],
        version: int,
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], VerificationState]]:
        """The answers, as the Produce response of `version` carries them, by (topic,
        partition), for the partitions that go no further; and the verification states made
        for those asked about, which their appends present.

        An add the coordinator answers CONCURRENT_TRANSACTIONS (it is still writing the markers
        of the producer's previous transaction) is retried every
        add.partitions.to.txn.retry.backoff.ms for up to
        add.partitions.to.txn.retry.backoff.max.ms (Kafka's ReplicaManager.handleProduceAppend):
        a client would wait its own retry.backoff.ms (100 ms) before sending the Produce again.
        Verification (v11 and older) is not retried."""
        add = version >= 12
        guards: dict[tuple[str, int], VerificationState] = {}
        if not add:
            return await self._add_or_verify(transactional_id, partitions, version, guards), guards
        backoff_s = self.config["add.partitions.to.txn.retry.backoff.ms"] / 1000
        bound_s = min(self.config["add.partitions.to.txn.retry.backoff.max.ms"],
                      KAFKA_REQUEST_TIMEOUT_MS) / 1000
        started = time.monotonic()
        while True:
            out = await self._add_or_verify(transactional_id, partitions, version, guards)
            if (ErrorCode.concurrent_transactions not in out.values()
                    or time.monotonic() - started >= bound_s):
                return out, guards
            await asyncio.sleep(backoff_s)

    async def _add_or_verify(
        self, transactional_id: str, partitions: Sequence[tuple[Partition, bytes | None]],
        version: int, guards: dict[tuple[str, int], VerificationState],
    ) -> dict[tuple[str, int], int]:
        """One round of `before_append`: ask the coordinator about the partitions whose
        producer has no transaction open on them yet, each with the verification state made
        (into `guards`) before it is asked."""
        add = version >= 12
        coord, remote = self.coordinator, self.remote
        local = coord.is_local(transactional_id)
        coordinator = self.broker_id if local or remote is None else remote.coordinator_of(
            transactional_id)
        if not add and (remote is None or coordinator < 0 or coordinator == self.broker_id):
            return {}  # asked in-process at the append (with no coordinator known, refused)
        wanted: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
        for partition, records in partitions:
            producer = needs_verification(coord, partition, records, always=add)
            if producer is not None:
                tp = (partition.topic, partition.index)
                wanted[producer].append(tp)
                guards[tp] = _start_verification(partition, records, producer, add)
        out: dict[tuple[str, int], int] = {}
        for (pid, epoch), parts in wanted.items():
            answers: Answers
            if local or coordinator == self.broker_id:
                started = time.monotonic()
                added = await coord.add_partitions(transactional_id, pid, epoch, parts, 2)
                answers = dict.fromkeys(parts, int(added))
                metrics.transaction_verified(started, answers.values())
            elif remote is None:
                answers = dict.fromkeys(parts, ErrorCode.coordinator_not_available)
            else:
                answers = await remote.verify(coordinator, transactional_id, pid, epoch, parts,
                                              verify_only=not add)
            for tp, code in answers.items():
                if code != ErrorCode.none or not add:
                    out[tp] = produce_error(code, version)
        return out

    def at_append(self, partition: Partition, records: bytes | None,
                  transactional_id: str | None, version: int,
                  guard: VerificationState | None = None,
                  ) -> tuple[int, VerificationState | None]:
        """KIP-890 part 1 (transaction.partition.verification.enable): before the first
        transactional append of a producer to a partition, the partition must be in its
        ongoing transaction. NONE or the error code for the Produce response of `version`,
        and the verification state the append presents: `guard` where `before_append` asked a
        coordinator on another broker, else one made here for the coordinator asked now, in
        process. With no coordinator known the batch is refused with a retriable code, as
        Kafka's verification answers (it was appended unverified before)."""
        coord = self.coordinator
        producer = needs_verification(coord, partition, records)
        if producer is None or guard is not None:
            return ErrorCode.none, guard
        guard = _start_verification(partition, records, producer, version >= 12)
        if transactional_id and not coord.is_local(transactional_id):
            return produce_error(ErrorCode.coordinator_not_available, version), guard
        started = time.monotonic()
        code = coord.verify_partition(
            transactional_id, producer[0], producer[1], partition.topic, partition.index
        )
        metrics.transaction_verified(started, (code,))
        return produce_error(code, version), guard
