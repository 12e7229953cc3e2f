"""A Produce's appends (Kafka's ReplicaManager.appendRecords): KIP-890's verification of
transactional batches with their transaction coordinator, the appends to the leaders' logs,
and with acks=all the wait for the ISR.

The partitions themselves are the replica manager's: an append asks it for the partition led
here, and its refusals are the answers (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
KAFKA_STORAGE_ERROR). The appender holds no state but the two checks the broker plugs in.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.records import first_batch_transactional, iter_batches
from samsa.storage.errors import KafkaStorageError, RecordValidationError, StorageError

from .. import metrics
from ..cluster.topic_admin import INTERNAL_TOPICS
from .partition import Partition, PartitionError

if TYPE_CHECKING:
    from samsa.storage.verification_state import VerificationState

    from ..txn.verification import ProduceVerification
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)


@dataclass(slots=True)
class AppendResult:
    """A partition's answer to a Produce append (Kafka's PartitionResponse): the error code and,
    when written, the batch's offsets. A batch refused for some of its records names them in
    `record_errors` (index in the batch, message; Kafka's RecordValidationException)."""

    error_code: int
    base_offset: int = -1
    log_append_time: int = -1  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int = -1
    last_offset: int = -1
    record_errors: list[tuple[int, str]] | None = None
    error_message: str | None = None


# A Produce's partition data: topic, partition, records.
ProduceEntry = tuple[str, int, bytes | None]
# A check of a Produce's entries before they are appended (the schema registry's validation):
# the ones it refuses, by (topic, partition), with their answer.
ProduceCheck = Callable[[Sequence[ProduceEntry]], Awaitable[dict[tuple[str, int], AppendResult]]]


class ProduceAppender:
    """Appends a Produce's records to the partitions led here, which the replica manager
    holds."""

    def __init__(self, replicas: ReplicaManager) -> None:
        self.replicas = replicas
        # KIP-890 for transactional appends (set by the broker; None: no verification).
        self.txn_verification: ProduceVerification | None = None
        # Checks of the records before the appends (set by the broker; None: none).
        self.produce_check: ProduceCheck | None = None

    async def append_records(
        self, acks: int, timeout_s: Callable[[], float], entries: Sequence[ProduceEntry],
        transactional_id: str | None = None, version: int = 0,
        before_append: Callable[[], Awaitable[None] | None] | None = None,
    ) -> list[AppendResult]:
        """Append each entry's records to its partition's leader log, an answer per entry in
        their order (Kafka's ReplicaManager.appendRecords). A transactional batch is first
        verified with its transaction coordinator (KIP-890, `txn_verification`);
        `before_append` then runs last before the appends, with nothing between it and them;
        acks=all answers once the ISR has each batch, or after `timeout_s()` seconds (asked only
        then: a Produce read by produce_wire makes its timeout's timedelta only when asked).
        `version`: the Produce request's, for the error codes it may carry."""
        # the coordinator's answers (NONE: verified) by partition, and the verification states
        # made for them, which their appends present
        verified: Mapping[tuple[str, int], int] = {}
        guards: Mapping[tuple[str, int], VerificationState] = {}
        verification = self.txn_verification
        if transactional_id and verification is not None and verification.wanted(version):
            verified, guards = await verification.before_append(
                transactional_id, self._leaders_of(entries), version)
        if before_append is not None:
            pending = before_append()
            if pending is not None:
                await pending
        results: list[AppendResult] = []
        woke_fetches = False
        waits: list[tuple[AppendResult, Partition, bytes | None]] = []
        for topic, index, records in entries:
            refused = verified.get((topic, index)) if verified else None
            if refused:  # the coordinator's KIP-890 answer (NONE: verified, appended)
                result = AppendResult(refused)
                log_refusal(topic, index, records, refused)
            else:
                result, partition = self.append_one(
                    acks, topic, index, records, transactional_id, version,
                    guards.get((topic, index)) if guards else None)
                if partition is not None:
                    woke_fetches |= partition.append_woke_fetches
                    if acks == -1 and partition.high_watermark <= result.last_offset:
                        waits.append((result, partition, records))
            results.append(result)
        if woke_fetches or waits:
            await after_appends(woke_fetches, waits, timeout_s)
        return results

    def verified_in_advance(self, topic: str, index: int, records: bytes | None,
                            version: int) -> bool:
        """Whether `append_records` would ask a transaction coordinator nothing before it
        appends this transactional entry (Produce's raw lane takes only such a request): no
        KIP-890 verification here, or the batch's transaction is open on the partition."""
        verification = self.txn_verification
        if verification is None:
            return True
        try:
            partition = self.replicas.leader_partition(topic, index)
        except PartitionError:
            return False  # append_records answers it
        return verification.settled(partition, records, version)

    def append_one(self, acks: int, topic: str, index: int, records: bytes | None,
                   transactional_id: str | None, version: int,
                   guard: VerificationState | None = None,
                   ) -> tuple[AppendResult, Partition | None]:
        """One entry of `append_records` appended, or refused (and logged as such): its
        answer, and its partition when appended (what `after_appends` may wait for). `guard`:
        the verification state made before its coordinator was asked (KIP-890)."""
        result, partition = self._append(acks, topic, index, records, transactional_id, version,
                                         guard)
        if partition is None:  # refused: nothing appended
            log_refusal(topic, index, records, result.error_code)
        return result, partition

    def _leaders_of(self, entries: Sequence[ProduceEntry]
                    ) -> list[tuple[Partition, bytes | None]]:
        """The entries whose partition is led here (the append answers the others)."""
        led = []
        for topic, index, records in entries:
            try:
                led.append((self.replicas.leader_partition(topic, index), records))
            except PartitionError:
                continue
        return led

    def _append(self, acks: int, topic: str, index: int, records: bytes | None,
                transactional_id: str | None, version: int,
                guard: VerificationState | None = None
                ) -> tuple[AppendResult, Partition | None]:
        """One entry of `append_records`: checked, verified with a local transaction
        coordinator, and appended to the leader's log; its answer, and its partition when
        appended."""
        if acks not in (-1, 0, 1):
            return AppendResult(ErrorCode.invalid_required_acks), None
        if topic in INTERNAL_TOPICS:
            return AppendResult(ErrorCode.invalid_topic_exception), None
        try:
            partition = self.replicas.leader_partition(topic, index)
            if acks == -1 and len(partition.isr) < partition.min_insync_replicas:
                return AppendResult(ErrorCode.not_enough_replicas), None
            # only a transactional batch is verified (at_append's answer for any other is
            # NONE): the flag's byte read here, not through at_append's calls, every append
            verify = False
            if (self.txn_verification is not None and records is not None
                    and first_batch_transactional(records)):
                code, guard = self.txn_verification.at_append(partition, records,
                                                              transactional_id, version, guard)
                if code != ErrorCode.none:
                    return AppendResult(code), None
                verify = self.txn_verification.required
            info = partition.append_as_leader(records or b"", verify=verify, guard=guard)
        except PartitionError as exc:
            return AppendResult(exc.error_code), None
        except RecordValidationError as exc:
            log.debug("produce to %s-%d rejected: %s", topic, index, exc)
            return AppendResult(exc.error_code, log_start_offset=partition.log_start_offset,
                                record_errors=exc.record_errors, error_message=str(exc)), None
        except (StorageError, KafkaError) as exc:
            # Per request and usually the client's doing (sequence, epoch, size): DEBUG; a
            # failing disk is the operator's business.
            level = logging.WARNING if isinstance(exc, KafkaStorageError) else logging.DEBUG
            log.log(level, "produce to %s-%d rejected: %s (%s)", topic, index,
                    type(exc).__name__, exc)
            code = int(getattr(exc, "error_code", ErrorCode.unknown_server_error))
            return AppendResult(code), None
        if not info.duplicate:
            metrics.produced(topic, len(records or b""), info.record_count)
        elif log.isEnabledFor(logging.DEBUG):
            log.debug("produce to %s-%d (%s): a duplicate of offsets %d-%d", topic, index,
                      _batch_ids(records), info.first_offset, info.last_offset)
        return AppendResult(ErrorCode.none, info.first_offset, info.log_append_time,
                            info.log_start_offset, info.last_offset), partition


async def after_appends(woke_fetches: bool,
                        waits: list[tuple[AppendResult, Partition, bytes | None]],
                        timeout_s: Callable[[], float]) -> None:
    """What a Produce waits for once its entries are appended, before its answer."""
    if woke_fetches:
        # Let the fetches this append woke (consumers', followers') answer first, as Kafka
        # completes delayed fetches in the appending thread: the rest of the request (its
        # response) waits one event-loop pass instead of the records' readers.
        await asyncio.sleep(0)
    if waits:
        await _await_replication(waits, max(0.0, timeout_s()))


async def _await_replication(waits: list[tuple[AppendResult, Partition, bytes | None]],
                             timeout_s: float) -> None:
    """acks=all: answer once the ISR has each partition's batch (Kafka's delayed produce)."""
    if len(waits) == 1:  # the usual case: awaited as it is, without a task and a gather
        result, partition, _ = waits[0]
        done = [await partition.wait_for_high_watermark(result.last_offset + 1, timeout_s)]
    else:
        done = await asyncio.gather(*(
            partition.wait_for_high_watermark(result.last_offset + 1, timeout_s)
            for result, partition, _ in waits))
    for (result, partition, records), ok in zip(waits, done, strict=True):
        if not ok:
            code = (ErrorCode.request_timed_out if partition.is_leader
                    else ErrorCode.not_leader_or_follower)
        elif len(partition.isr) < partition.effective_min_isr:
            # written, and replicated, but the ISR shrank since (Kafka's
            # checkEnoughReplicasReachOffset): the client retries it as possibly written
            code = ErrorCode.not_enough_replicas_after_append
        else:
            continue
        log_refusal(partition.topic, partition.index, records, code,
                    f"after appending at {result.base_offset}-{result.last_offset}, leader "
                    f"epoch {partition.leader_epoch}, ISR {partition.isr}")
        result.error_code, result.base_offset, result.log_append_time = code, -1, -1


def log_refusal(topic: str | None, index: int, records: bytes | None, code: int,
                why: str = "") -> None:
    """DEBUG: a partition's error answer with its batch's producer id, epoch and sequences,
    the chain an idempotent producer's epoch bump is followed by (nothing is made when DEBUG
    is off: the answers of a partition that lost its leader come by thousands)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    log.debug("produce to %s-%d (%s) answered %s%s", topic, index, _batch_ids(records),
              ErrorCode(code).name, f" {why}" if why else "")


def _batch_ids(records: bytes | None) -> str:
    try:
        _, h = next(iter_batches(records or b""))
    except Exception:  # none or malformed: the error answered says which
        return "no readable batch"
    return (f"producer {h.producer_id} epoch {h.producer_epoch} seq {h.base_sequence}"
            f"..{h.base_sequence + h.last_offset_delta}")
