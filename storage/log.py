"""`Log`: one partition directory `<topic>-<partition>` laid out like Kafka's UnifiedLog/LocalLog.

Synchronous; owned by exactly one Partition, whose appends and reads run on the event loop
without a lock. The LogManager's threads touch a log only through the methods that say so:
flush, the file work of retention, and compaction's cleaning and swap. They serialise among
themselves (and with truncation and close) on `lock`. The segment list is copy-on-write
(`samsa.storage.log_segments`), so a roll on the loop and a swap of cleaned segments in a thread
never see, or make, a half-changed list. File descriptors come from `samsa.storage.fdcache`.

The `Log` is the facade and the one writer of its state; each responsibility is a part with
the state it owns, in a module of its own (Kafka's storage module has the same split):

- opening (cleaning up, recovery, rebuilding the producer state and the epoch cache):
  `samsa.storage.log_loader`; `Log.open` installs what it loaded;
- the appends' checks (LogValidator): `samsa.storage.log_validation`;
- reads and offset/timestamp lookups: `samsa.storage.log_reads`;
- the high watermark, log start offset and recovery point, one writer each:
  `samsa.storage.log_offsets`;
- retention and the deletion of detached segments: `samsa.storage.log_retention`;
- compaction and the swap of cleaned segments: `samsa.storage.cleaner`;
- when a flush is due and the files it syncs: `samsa.storage.log_flush`;
- I/O errors (the directory goes offline): `samsa.storage.log_io`."""

from __future__ import annotations

import functools
import shutil
import threading
import uuid
from pathlib import Path
from typing import NamedTuple, cast

from samsa.config.forward import Forward
from samsa.protocol.records import (
    _I32,
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_LOW,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    STAMPED_PREFIX_SIZE,
    BatchHeader,
    Buf,
    set_log_append_time,
    stamped_parts,
    stamped_prefix,
    validate_batch,
)
from samsa.storage import log_reads
from samsa.storage.clock import milliseconds
from samsa.storage.config import LONG_MAX, LogConfig
from samsa.storage.errors import InvalidRecord, InvalidTxnState, OffsetOutOfRange
from samsa.storage.leader_epoch import FILE_NAME as EPOCH_FILE
from samsa.storage.leader_epoch import LeaderEpochCache
from samsa.storage.log_dir_failure import dir_key
from samsa.storage.log_flush import FlushTracker
from samsa.storage.log_io import LogIo, guarded
from samsa.storage.log_loader import LogLoader, replay_producer_state
from samsa.storage.log_offsets import LogOffsets
from samsa.storage.log_reads import FetchDataInfo
from samsa.storage.log_retention import LogRetention
from samsa.storage.log_segments import LogSegments
from samsa.storage.log_validation import BatchValidator
from samsa.storage.producer_append import AppendPlan, BatchInfo, CompletedTxn, control_record
from samsa.storage.producer_entry import NO_PRODUCER_ID
from samsa.storage.producer_state import ProducerStateManager
from samsa.storage.segment import LogSegment
from samsa.storage.txn_index import AbortedTxn
from samsa.storage.verification_state import VerificationState

FUTURE_DIR_SUFFIX = "-future"


def future_dir_name(topic: str, partition: int) -> str:
    """A replica being moved to another log directory: `<topic>-<partition>.<uuid>-future`
    (Kafka's UnifiedLog.logFutureDirName)."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """`<topic>-<partition>`, or a future replica's `<topic>-<partition>.<uuid>-future`;
    topics may contain '-', so split at the last one."""
    if dir_name.endswith(FUTURE_DIR_SUFFIX):
        base, dot, uid = dir_name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
        if dot and len(uid) == 32 and all(c in "0123456789abcdef" for c in uid):
            dir_name = base
    topic, sep, part = dir_name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"not a partition directory name: {dir_name!r}")
    return topic, int(part)


class AppendInfo(NamedTuple):
    """What an append did (Kafka's LogAppendInfo), as the partition and Produce answer it."""

    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    record_count: int
    duplicate: bool = False  # a retried batch already in the log: its offsets, nothing written
    max_timestamp: int = -1


class Log:
    def __init__(self, dir: Path, config: LogConfig, producer_id_expiration_ms: int) -> None:
        self.dir = Path(dir)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        name = f"{self.topic}-{self.partition}"
        self.config = config
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms)
        self.leader_epoch_cache = LeaderEpochCache(self.dir / EPOCH_FILE)
        self.segs = LogSegments()
        self.parent_dir = dir_key(self.dir.parent)
        self.io = LogIo(self.dir.name, name, self.parent_dir)
        self.offsets = LogOffsets(self.producer_state, self.leader_epoch_cache)
        self.flushes = FlushTracker()
        self._validator = BatchValidator(name)
        # Bumped by truncation, deletion and close: a compaction planned before discards its
        # output (the offset map may name records that are gone).
        self.generation = 0
        self.recovered_segments = 0  # segments scanned by recovery when opened
        self.recovery_truncated_bytes = 0  # bytes recovery cut off (torn or corrupt tail)
        self.lock = threading.RLock()  # the threads' work on this log (see the module doc)
        self.closed = False
        self._deleted = False
        self.retention = LogRetention(self)

    # =========================================================================================
    # opening

    @classmethod
    def open(
        cls,
        dir: Path,
        config: LogConfig,
        *,
        recover: bool,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        producer_id_expiration_ms: int = 86_400_000,
        high_watermark: int | None = None,
        now_ms: int | None = None,
    ) -> Log:
        """Load the directory (`LogLoader`) and install what it found, before anyone else sees
        the log. The HW is the checkpointed one (None: the log end), kept within [log start,
        log end]."""
        dir = Path(dir)
        dir.mkdir(parents=True, exist_ok=True)
        log = cls(dir, config, producer_id_expiration_ms)
        loader = LogLoader(log.dir, functools.partial(LogSegment, log.dir, config=config),
                           log.producer_state, log.leader_epoch_cache)
        loaded = loader.load(recover=recover, recovery_point=recovery_point,
                             log_start_offset=log_start_offset, now_ms=now_ms)
        log.segs.install(loaded.segments)
        log.recovered_segments = loaded.recovered_segments
        log.recovery_truncated_bytes = loaded.recovery_truncated_bytes
        log.offsets.set_recovery_point(loaded.recovery_point)
        log.offsets.set_log_start_offset(loaded.log_start_offset)
        leo = log.log_end_offset
        hw = leo if high_watermark is None else high_watermark
        log.update_high_watermark(max(loaded.log_start_offset, min(hw, leo)))
        return log

    # =========================================================================================
    # the segment list, state and offsets

    @property
    def is_deleted(self) -> bool:
        return self._deleted

    offline = Forward[bool]("io.offline")

    @property
    def active_segment(self) -> LogSegment:
        return self.segs.view[0][-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self.segs.view[0])

    @property
    def log_end_offset(self) -> int:
        return self.segs.view[0][-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segs.view[0])

    @property
    def num_segments(self) -> int:
        return len(self.segs.view[0])

    latest_epoch = Forward[int | None]("leader_epoch_cache.latest_epoch")

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction, at least the log start (records
        of an open transaction before it were deleted: Kafka's
        maybeIncrementFirstUnstableOffset), at most the high watermark."""
        fuo = self.producer_state.first_unstable_offset()
        offsets = self.offsets
        hw = offsets.high_watermark
        return hw if fuo is None else min(max(fuo, offsets.log_start_offset), hw)

    high_watermark = Forward[int]("offsets.high_watermark")
    log_start_offset = Forward[int]("offsets.log_start_offset")
    recovery_point = Forward[int](
        "offsets.recovery_point",
        "Offsets below it are on disk (flushed); recovery after a crash starts at the segment "
        "holding it.")

    def update_high_watermark(self, offset: int) -> int:
        """The one writer of the HW (`LogOffsets.update_high_watermark`); returns the value
        set, within [log start, log end]. Waking fetches and produces waiting on the HW is the
        Partition's business."""
        return self.offsets.update_high_watermark(offset, self.log_end_offset)

    # =========================================================================================
    # append

    @guarded("appending records to")
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         origin: str = "client", now_ms: int | None = None,
                         transaction_version: int = 0, verify: bool = False,
                         guard: VerificationState | None = None) -> AppendInfo:
        """`transaction_version`: of the markers appended (2: KIP-890's epoch rule).
        `verify` (KIP-890, a client's append or a coordinator's transactional offsets): a
        transactional batch must continue a transaction open here at its epoch, or present as
        `guard` its producer's verification state, the one its leader made before asking the
        coordinator; else InvalidTxnState (the transaction ended meanwhile, or was never
        verified)."""
        now = milliseconds() if now_ms is None else now_ms
        if origin == "client":
            fast = self._append_client_batch(records, leader_epoch, now, verify, guard)
            if fast is not None:
                return fast
        elif origin == "coordinator":
            fast = self._append_coordinator_batch(records, leader_epoch, now,
                                                  transaction_version)
            if fast is not None:
                return fast
        log_append = self.config.log_append_time
        # Offsets and epochs are written with the batches (stamped_parts; the CRC covers
        # neither); a LogAppendTime is set in a copy, as the CRC covers it.
        buf = bytearray(records) if log_append else records
        batches = self._validator.analyze(self.config, buf, client=origin == "client",
                                          now_ms=now)
        psm = self.producer_state
        next_offset = self.log_end_offset
        infos: list[BatchInfo] = []
        for pos, h in batches:
            h.base_offset, h.partition_leader_epoch = next_offset, leader_epoch
            if log_append:
                set_log_append_time(cast(bytearray, buf), pos, now)
                h.max_timestamp = now
                h.attributes |= 0x08
            next_offset = h.next_offset
            infos.append(BatchInfo.of_batch(h, buf, pos))
        if origin == "client":
            for info in infos:
                dup = psm.find_duplicate(info)
                if dup is not None:
                    first, last, ts = dup
                    return AppendInfo(first, last, ts if log_append else -1,
                                      self.log_start_offset,
                                      last - first + 1, duplicate=True)
        if verify:  # a client's batch, or a coordinator's on a client's behalf (TxnOffsetCommit)
            self._check_verified(infos, guard)
        plan = psm.prepare_append(infos, origin, transaction_version)
        count, max_timestamp = self._write(stamped_parts(buf, batches), len(buf), batches, plan,
                                           now)
        return AppendInfo(
            first_offset=batches[0][1].base_offset, last_offset=batches[-1][1].last_offset,
            log_append_time=now if log_append else -1, log_start_offset=self.log_start_offset,
            record_count=count, max_timestamp=max_timestamp,
        )

    def _check_verified(self, infos: list[BatchInfo], guard: VerificationState | None) -> None:
        """KIP-890 at the append (Kafka's analyzeAndValidateProducerState): a transactional
        batch continues its producer's open transaction or presents the verification state
        its leader made before asking the coordinator, which a marker written meanwhile
        ended: without it, the batch would open a transaction no coordinator knows of."""
        psm = self.producer_state
        for b in infos:
            if (b.is_transactional and not b.is_control and b.producer_id != NO_PRODUCER_ID
                    and not psm.txn_open_at(b.producer_id, b.producer_epoch)
                    and (guard is None or psm.verifications.get(b.producer_id) is not guard)):
                raise InvalidTxnState(
                    f"Record was not part of an ongoing transaction (producer {b.producer_id},"
                    f" epoch {b.producer_epoch}: its verification "
                    f"{'was not made' if guard is None else 'ended before the append'})")

    def _append_client_batch(self, buf: Buf, leader_epoch: int, now: int,
                             verify: bool = False, guard: VerificationState | None = None
                             ) -> AppendInfo | None:
        """A producer's usual append, collapsed (issue 47: at thousands of one-batch requests
        a second the general path's lists, loops, plans and property calls were most of an
        append's CPU): one batch, CreateTime, within the size limits, not a control batch, and
        either without a producer id or its producer's next batch (`next_batch_entry`: a
        transaction's first or later batch too). The checks, the bytes written, the producer
        state and the answer are the general path's; None, with nothing checked or changed,
        for anything else, which the general path then takes."""
        size = len(buf)
        config = self.config
        if (size < HEADER_SIZE or _I32.unpack_from(buf, 8)[0] != size - LOG_OVERHEAD
                or size > config.max_message_bytes or size > config.segment_bytes
                or buf[ATTRIBUTES_LOW] & ATTR_CONTROL
                or config.message_timestamp_type != "CreateTime"):
            return None
        h = BatchHeader.parse(buf, 0)
        entry = None
        if h.producer_id != NO_PRODUCER_ID:
            entry = self.producer_state.next_batch_entry(h)
            if entry is None:  # new, duplicate, fenced, out of sequence: the general path's
                return None
            if (verify and entry.txn_first_offset is None and h.attributes & ATTR_TRANSACTIONAL
                    and (guard is None
                         or self.producer_state.verifications.get(h.producer_id) is not guard)):
                return None  # a transaction's first batch, unverified: the general path's
        # (a transactional batch without a producer id is refused here, as analyze refuses it)
        self._validator.validate_client_batch(config, buf, 0, h, now)
        h.base_offset, h.partition_leader_epoch = self.segs.view[0][-1].next_offset, leader_epoch
        self._write_batch(buf, h, now)
        self.producer_state.append_next_batch(entry, h)
        return self._appended(h, now)

    def _append_coordinator_batch(self, buf: Buf, leader_epoch: int, now: int,
                                  transaction_version: int) -> AppendInfo | None:
        """A coordinator's one-batch append, collapsed as a producer's: a transaction marker
        (a transaction over many partitions appends one to each: issue 47) or a batch of
        records without a producer id (the coordinators' own state; a transaction writes
        three), CreateTime, within the size limits. The checks (analyze's and the producer
        state's), the bytes written and the answer are the general path's; None, with nothing
        checked or changed, for anything else."""
        size = len(buf)
        config = self.config
        if (size < HEADER_SIZE or _I32.unpack_from(buf, 8)[0] != size - LOG_OVERHEAD
                or size > config.max_message_bytes or size > config.segment_bytes
                or config.log_append_time):
            return None
        h = BatchHeader.parse(buf, 0)
        control = h.attributes & ATTR_CONTROL
        if not control and h.producer_id != NO_PRODUCER_ID:
            return None
        validate_batch(buf, 0, h)  # analyze's check of a batch that is not a client's
        h.base_offset, h.partition_leader_epoch = self.segs.view[0][-1].next_offset, leader_epoch
        psm = self.producer_state
        if not control:
            self._write_batch(buf, h, now)
            psm.append_next_batch(None, h)
            return self._appended(h, now)
        # A COMMIT/ABORT marker its producer's state takes as it stands (nearly every one) is
        # recorded without a plan; any other control batch is checked by prepare_append.
        ctype, coordinator_epoch = control_record(buf, 0, h)
        entry = psm.marker_entry(h.producer_id, h.producer_epoch, coordinator_epoch,
                                 transaction_version
                                 ) if ctype in (CONTROL_COMMIT, CONTROL_ABORT) else None
        if entry is None:
            plan = psm.prepare_append([BatchInfo.of_batch(h, buf, 0)], "coordinator",
                                      transaction_version)
            self._apply_producer_state(self._write_batch(buf, h, now), plan)
            return self._appended(h, now)
        seg = self._write_batch(buf, h, now)
        txn = psm.append_marker(entry, h, ctype == CONTROL_COMMIT, coordinator_epoch)
        if txn is not None:
            self._index_completed(seg, txn)
        return self._appended(h, now)

    def _write_batch(self, buf: Buf, h: BatchHeader, now: int) -> LogSegment:
        """The one-batch appends' write of a checked batch, `h` stamped with its offset and
        leader epoch: the segment written (after a roll if due). Its producer state is the
        caller's to record, before `_appended`."""
        base = h.base_offset
        seg = self._maybe_roll(len(buf), h.max_timestamp, base, base + h.last_offset_delta, now)
        seg.append_batch(stamped_prefix(h), memoryview(buf)[STAMPED_PREFIX_SIZE:], h)
        self.leader_epoch_cache.maybe_assign(h.partition_leader_epoch, base)
        return seg

    def _appended(self, h: BatchHeader, now: int) -> AppendInfo:
        """The one-batch appends' end, once the batch `h` and its producer state are in: a
        flush if due (flush.messages, flush.ms), and the answer."""
        if self.flushes.count(h.records_count, now, self.config):
            self.flush()
        base = h.base_offset
        return AppendInfo(base, base + h.last_offset_delta, -1, self.offsets.log_start_offset,
                          h.records_count, False, h.max_timestamp)  # positional: cheaper

    @guarded("appending records to")
    def append_as_follower(self, records: bytes | bytearray | memoryview,
                           now_ms: int | None = None) -> AppendInfo:
        """Append batches keeping their offsets and leader epochs (replication)."""
        now = milliseconds() if now_ms is None else now_ms
        buf = records  # written as they are: nothing is stamped
        batches = self._validator.analyze(self.config, buf, client=False)
        leo = self.log_end_offset
        for _pos, h in batches:
            if h.base_offset < leo:
                raise InvalidRecord(
                    f"out of order offsets: batch at {h.base_offset} is below the log end {leo}")
            leo = h.next_offset
        infos = [BatchInfo.of_batch(h, buf, pos) for pos, h in batches]
        plan = self.producer_state.prepare_append(infos, "replication")
        count, max_timestamp = self._write([buf], len(buf), batches, plan, now)
        return AppendInfo(
            first_offset=batches[0][1].base_offset, last_offset=batches[-1][1].last_offset,
            log_append_time=-1, log_start_offset=self.log_start_offset,
            record_count=count, max_timestamp=max_timestamp,
        )

    def _write(self, parts: list[Buf], size: int, batches: list[tuple[int, BatchHeader]],
               plan: AppendPlan, now: int) -> tuple[int, int]:
        """Write validated batches (`parts` in order, `size` bytes together) and commit their
        producer-state plan: (records written, their max timestamp)."""
        first, last = batches[0][1], batches[-1][1]
        count, max_timestamp = 0, first.max_timestamp
        for _pos, h in batches:  # one loop, not a generator per total: this runs per append
            count += h.records_count
            if h.max_timestamp > max_timestamp:
                max_timestamp = h.max_timestamp
        seg = self._maybe_roll(size, max_timestamp, first.base_offset, last.last_offset, now)
        seg.append(parts, batches)
        for _pos, h in batches:
            self.leader_epoch_cache.maybe_assign(h.partition_leader_epoch, h.base_offset)
        self._apply_producer_state(seg, plan)
        if self.flushes.count(count, now, self.config):  # flush.messages, flush.ms
            self.flush()
        return count, max_timestamp

    def _apply_producer_state(self, seg: LogSegment, plan: AppendPlan) -> None:
        """Commit a written append's producer-state plan; each transaction it aborted goes
        to the segment's transaction index."""
        for txn in self.producer_state.apply(plan):
            self._index_completed(seg, txn)

    def _index_completed(self, seg: LogSegment, txn: CompletedTxn) -> None:
        """A transaction an append completed: if aborted, into the segment's transaction
        index, with the LSO the producer state computed as the append completed it."""
        if txn.is_aborted:
            seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                            self.producer_state.last_stable_offset(txn)))

    @guarded("assigning a leader epoch in")
    def assign_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """A new leader epoch starts at `start_offset` (the leader-epoch-checkpoint is written)."""
        self.leader_epoch_cache.assign(epoch, start_offset)

    def _maybe_roll(self, size: int, max_ts: int, first_offset: int, max_offset: int,
                    now: int) -> LogSegment:
        seg = self.active_segment
        if seg.should_roll(messages_size=size, max_timestamp=max_ts, max_offset=max_offset,
                           now_ms=now, segment_bytes=self.config.segment_bytes,
                           segment_ms=self.config.segment_ms):
            # An offset overflow (follower) starts the new segment at the batch itself.
            return self.roll(first_offset if first_offset > self.log_end_offset else None)
        return seg

    @guarded("rolling a segment of")
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end; the old one becomes read-only. Its
        fsync is left to the LogManager (Kafka flushes rolled segments asynchronously)."""
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == new_base:
            if active.size == 0:
                return active  # nothing to roll away from
            raise RuntimeError(f"segment at {new_base} already exists")
        active.on_become_inactive()
        seg = LogSegment(self.dir, new_base, config=self.config)
        self.segs.add(seg)
        self.producer_state.update_map_end_offset(
            max(self.producer_state.map_end_offset, new_base))
        # No fsync here (the event loop): the flush that moves the recovery point to new_base
        # (the LogManager's flush on roll, a thread) syncs the snapshot first, as Kafka's roll
        # leaves it to its scheduled flushUptoOffsetExclusive.
        self.producer_state.take_snapshot(new_base, sync=False)
        return seg

    # =========================================================================================
    # reads and lookups (`samsa.storage.log_reads`)

    @guarded("reading")
    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True, zero_copy: bool = False) -> FetchDataInfo:
        leo = self.log_end_offset
        start = self.log_start_offset
        if fetch_offset < start or fetch_offset > leo:
            raise OffsetOutOfRange(
                f"offset {fetch_offset} is out of range [{start}, {leo}] for "
                f"{self.topic}-{self.partition}")
        limit = leo if max_offset is None else min(max_offset, leo)
        return log_reads.read(self.segs.view, fetch_offset, max_bytes, limit, min_one_message,
                              zero_copy)

    @guarded("reading the transaction index of")
    def collect_aborted_transactions(self, fetch_offset: int,
                                     upper_bound_offset: int) -> list[AbortedTxn]:
        return log_reads.aborted_transactions(self.segs.view, fetch_offset, upper_bound_offset)

    @guarded("searching by timestamp in")
    def fetch_offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with ts >= timestamp."""
        return log_reads.offset_for_timestamp(self.segs.segments, self.leader_epoch_cache,
                                              timestamp, self.log_start_offset)

    @guarded("searching by timestamp in")
    def max_timestamp_and_offset(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with the largest timestamp."""
        return log_reads.max_timestamp_and_offset(self.segs.segments, self.leader_epoch_cache,
                                                  self.log_start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # =========================================================================================
    # deletion (retention is `self.retention`'s), truncation

    @guarded("deleting records of")
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset; returns the new log start offset."""
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRange(
                f"cannot delete records before {offset}: high watermark is {self.high_watermark}")
        if offset > self.log_start_offset:
            self.offsets.advance_log_start_offset(offset)
            self.retention.delete_below_log_start()
        return self.log_start_offset

    @guarded("truncating")
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after `offset` (follower truncation). True if anything
        was removed."""
        if offset < 0:
            raise ValueError("cannot truncate to a negative offset")
        if offset >= self.log_end_offset:
            # Nothing to cut, but an epoch this broker started as leader and wrote nothing in
            # may end the cache; the new leader never had it, so it goes (as in Kafka's
            # truncateTo), or every fetch diverges again at this offset.
            with self.lock:
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        with self.lock:
            self.generation += 1
            self.retention.delete_all_detached_locked()
            if self.segs.segments[0].base_offset > offset:
                self.truncate_fully_and_start_at(offset)
                return True
            for seg in [s for s in self.segs.segments if s.base_offset > offset]:
                self.segs.remove(seg)
                seg.delete()
            self.active_segment.truncate_to(offset)
            leo = self.log_end_offset
            offsets = self.offsets
            self.leader_epoch_cache.truncate_from_end(leo)
            offsets.set_recovery_point(min(offsets.recovery_point, leo))
            if offsets.log_start_offset > leo:
                offsets.set_log_start_offset(leo)
            self.update_high_watermark(min(offsets.high_watermark, leo))
            psm = self.producer_state
            psm.truncate(self.log_start_offset, leo)
            replay_from = max(psm.load(self.log_start_offset, leo), self.log_start_offset)
            if replay_from < leo:
                replay_producer_state(psm, self.segs.segments, replay_from, leo, None)
            psm.update_map_end_offset(leo)
        return True

    @guarded("truncating")
    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self.lock:
            self.generation += 1
            self.retention.delete_all_detached_locked()
            old = self.segs.segments
            for seg in old:  # first: the new segment may take the name of one of them
                seg.delete()
            self.segs.replace(old, LogSegment(self.dir, offset, config=self.config))
            self.offsets.set_log_start_offset(offset)
            self.offsets.set_recovery_point(offset)
            self.update_high_watermark(offset)
            self.leader_epoch_cache.clear()
            self.producer_state.truncate_fully_and_start_at(offset)

    # =========================================================================================
    # flush, close

    @guarded("flushing")
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets in [recovery point, up_to) and advance it."""
        with self.lock:
            if self.closed:
                return
            target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
            recovery_point = self.offsets.recovery_point
            if target <= recovery_point and up_to is not None:
                return
            segs = list(self.segs.segments)  # roll may append concurrently
            for i, seg in enumerate(segs):
                upper = segs[i + 1].base_offset if i + 1 < len(segs) else LONG_MAX
                if upper > recovery_point and seg.base_offset < target:
                    seg.flush()
            self.leader_epoch_cache.flush()
            self.producer_state.flush_snapshots(target)
            self.flushes.flushed()
            self.offsets.set_recovery_point(max(self.offsets.recovery_point, target))

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.generation += 1
            self.retention.delete_all_detached_locked()  # a retention or swap cut short
            self.active_segment.on_become_inactive()
            self.flush()
            with self.io.guard("writing a producer snapshot of"):
                leo = self.log_end_offset
                psm = self.producer_state
                psm.update_map_end_offset(max(psm.map_end_offset, leo))
                psm.take_snapshot(leo)
            self.close_without_flush()

    def release_files(self) -> None:
        """Close every open fd of this log's segments; they reopen on their next use."""
        with self.lock:
            for seg in self.segs.segments:
                seg.close()

    def close_without_flush(self) -> None:
        """Release file descriptors only (tests simulating a crash; the end of `close`)."""
        with self.lock:
            self.release_files()
            self.closed = True

    @property
    def open_files(self) -> int:
        return sum(seg.open_files for seg in self.segs.segments)

    def close_handlers(self) -> None:
        """The directory failed: close every fd, write nothing more (Kafka's closeHandlers)."""
        self.io.failed = True
        with self.lock:
            for seg in self.segs.segments:
                seg.close_handlers()
            self.closed = True

    def delete(self) -> None:
        with self.lock:
            self.generation += 1
            for seg in self.segs.segments:
                seg.close()
            self.closed = self._deleted = True
            shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={self.num_segments})")


__all__ = ["FUTURE_DIR_SUFFIX", "AppendInfo", "FetchDataInfo", "Log", "future_dir_name",
           "parse_topic_partition"]
