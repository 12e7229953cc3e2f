"""`Log`: one partition directory `<topic>-<partition>` laid out like Kafka's UnifiedLog/LocalLog.

Synchronous; owned by exactly one Partition, whose appends and reads run on the event loop
without a lock. The LogManager's threads touch a log only through the methods that say so:
flush, the file work of retention, and compaction's cleaning and swap. They serialise among
themselves (and with truncation and close) on `_lock`. The segment list is copy-on-write
(`samsa.storage.log_segments`), so a roll on the loop and a swap of cleaned segments in a thread
never see, or make, a half-changed list. File descriptors come from `samsa.storage.fdcache`.

Opening a directory (cleaning up, recovery, rebuilding the producer state and the epoch cache)
is `samsa.storage.log_loader`'s; `Log.open` installs what it loaded.

Offsets, each with one writer that keeps its invariants: the high watermark
(`update_high_watermark`: log start <= HW <= log end), the log start offset
(`_update_log_start_offset`; `_maybe_increment_log_start_offset` for an advance, which also
trims the epoch cache and the producer state) and the recovery point
(`_update_recovery_point`: log start <= recovery point <= log end)."""

from __future__ import annotations

import functools
import shutil
import threading
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar, cast

from samsa.protocol.compression import records_limit
from samsa.protocol.records import (
    _I32,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_LOW,
    HEADER_SIZE,
    LOG_OVERHEAD,
    STAMPED_PREFIX_SIZE,
    BatchHeader,
    Buf,
    inflated_ahead,
    iter_batches,
    release_inflated,
    set_log_append_time,
    stamped_parts,
    stamped_prefix,
    validate_batch,
)
from samsa.storage import cleaner
from samsa.storage.checkpoint import fsync_file
from samsa.storage.config import LONG_MAX, LogConfig
from samsa.storage.errors import (
    CorruptRecord,
    InvalidRecord,
    KafkaStorageError,
    MessageTooLarge,
    OffsetOutOfRange,
    RecordListTooLarge,
)
from samsa.storage.file_region import FileRegion
from samsa.storage.leader_epoch import FILE_NAME as EPOCH_FILE
from samsa.storage.leader_epoch import LeaderEpochCache
from samsa.storage.log_dir_failure import LogDirFailureChannel, dir_key
from samsa.storage.log_loader import SWAP_SUFFIX, LoadedLog, LogLoader, replay_producer_state
from samsa.storage.log_segments import LogSegments
from samsa.storage.producer_state import (
    NO_PRODUCER_ID,
    AppendPlan,
    BatchInfo,
    ProducerStateManager,
)
from samsa.storage.record_validation import has_record_rules, validate_records
from samsa.storage.segment import LogSegment
from samsa.storage.txn_index import AbortedTxn


def _now_ms() -> int:
    return int(time.time() * 1000)


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


P = ParamSpec("P")
R = TypeVar("R")


def _io(what: str) -> Callable[[Callable[Concatenate[Log, P], R]],
                               Callable[Concatenate[Log, P], R]]:
    """Kafka's maybeHandleIOException: an `OSError` inside takes the log's directory offline
    (reported to the failure channel) and fails the caller with KAFKA_STORAGE_ERROR; a log
    whose directory is offline does no I/O at all (a failed append may have left its file
    longer than the segment says, so nothing may be appended after it)."""

    def decorate(fn: Callable[Concatenate[Log, P], R]) -> Callable[Concatenate[Log, P], R]:
        @functools.wraps(fn)
        def guarded(self: Log, /, *args: P.args, **kwargs: P.kwargs) -> R:
            if self.offline:
                raise KafkaStorageError(f"{self.dir.name}: log directory {self.parent_dir} is "
                                        "offline")
            try:
                return fn(self, *args, **kwargs)
            except OSError as exc:
                raise self._io_failed(what, exc) from exc

        return guarded

    return decorate


@dataclass(slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int
    record_count: int
    duplicate: bool = False
    max_timestamp: int = -1


@dataclass(slots=True)
class FetchDataInfo:
    # what was read from the segment, or with zero_copy a FileRegion of it (not read)
    records: bytes | memoryview | FileRegion
    first_batch_offset: int  # base offset of the first returned batch (fetch offset if none)
    next_offset: int = -1  # offset just after the returned data (upper bound for aborted txns)


class Log:
    def __init__(self, dir: Path, config: LogConfig, producer_id_expiration_ms: int) -> None:
        self.dir = Path(dir)
        self.topic, self.partition = parse_topic_partition(self.dir.name)
        self.config = config
        self.producer_state = ProducerStateManager(self.dir, producer_id_expiration_ms)
        self.leader_epoch_cache = LeaderEpochCache(self.dir / EPOCH_FILE)
        self._sync_on_flush: list[Path] = []  # files written without fsync, synced by flush
        self._segs = LogSegments()
        # Set by the LogManager: runs a function in a thread (file deletions).
        self.run_in_background: Callable[[Callable[[], None]], None] | None = None
        # Bumped by truncation, deletion and close: a compaction planned before discards its
        # output (the offset map may name records that are gone).
        self.generation = 0
        self._log_start_offset = 0
        self._high_watermark = 0
        self._recovery_point = 0
        self.recovered_segments = 0  # segments scanned by recovery when opened
        self.recovery_truncated_bytes = 0  # bytes recovery cut off (torn or corrupt tail)
        self._unflushed_messages = 0
        self._last_flush_ms = _now_ms()
        self._lock = threading.RLock()
        self._closed = False
        # Set by the LogManager: where I/O errors are reported (None: they only raise).
        self.failure_channel: LogDirFailureChannel | None = None
        self.parent_dir = dir_key(self.dir.parent)
        self._failed = False
        self._deleted = False
        self._rules_of: LogConfig | None = None  # _has_record_rules' config and answer
        self._rules = True

    # =========================================================================================
    # opening and recovery

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
        dir = Path(dir)
        dir.mkdir(parents=True, exist_ok=True)
        log = cls(dir, config, producer_id_expiration_ms)
        loader = LogLoader(log.dir, log._new_segment, log.producer_state, log.leader_epoch_cache)
        loaded = loader.load(recover=recover, recovery_point=recovery_point,
                             log_start_offset=log_start_offset, now_ms=now_ms)
        log._start(loaded, high_watermark)
        return log

    def _start(self, loaded: LoadedLog, high_watermark: int | None) -> None:
        """Install what the loader found (before anyone else sees the log). The HW is the
        checkpointed one (None: the log end), kept within [log start, log end]."""
        self._segs.install(loaded.segments)
        self.recovered_segments = loaded.recovered_segments
        self.recovery_truncated_bytes = loaded.recovery_truncated_bytes
        self._update_recovery_point(loaded.recovery_point)
        self._update_log_start_offset(loaded.log_start_offset)
        leo = self.log_end_offset
        hw = leo if high_watermark is None else high_watermark
        self.update_high_watermark(max(self._log_start_offset, min(hw, leo)))

    def _new_segment(self, base: int, suffix: str = "") -> LogSegment:
        c = self.config
        return LogSegment(self.dir, base, index_interval_bytes=c.index_interval_bytes,
                          max_index_size=c.segment_index_bytes, roll_jitter_ms=c.segment_jitter_ms,
                          suffix=suffix)

    # =========================================================================================
    # the segment list, state and offsets

    @property
    def _segments(self) -> list[LogSegment]:
        return self._segs.view[0]

    @property
    def is_deleted(self) -> bool:
        return self._deleted

    def has_segment(self, seg: LogSegment) -> bool:
        return self._segs.contains(seg)

    @property
    def offline(self) -> bool:
        channel = self.failure_channel
        return self._failed or (channel is not None and self.parent_dir in channel.offline)

    def _io_failed(self, what: str, exc: OSError) -> KafkaStorageError:
        self._failed = True
        msg = (f"Error while {what} {self.topic}-{self.partition} in dir {self.parent_dir}")
        if self.failure_channel is not None:
            self.failure_channel.maybe_add_offline_log_dir(self.parent_dir, msg, exc)
        return KafkaStorageError(f"{msg}: {exc}")

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    @property
    def last_stable_offset(self) -> int:
        fuo = self.producer_state.first_unstable_offset()
        return self.high_watermark if fuo is None else min(fuo, self.high_watermark)

    # -- the offsets, one writer each ---------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def recovery_point(self) -> int:
        """Offsets below it are on disk (flushed); recovery after a crash starts at the
        segment holding it."""
        return self._recovery_point

    def update_high_watermark(self, offset: int) -> int:
        """The one writer of the HW; returns the value set. It is kept within [log start,
        log end] (never beyond the log end, even when the log start is: a checkpointed start
        above what recovery kept). The producer state learns every value (it forgets the
        unreplicated appends below it); the LSO is derived from both, so nothing else changes
        here. Waking fetches and produces waiting on the HW is the Partition's business."""
        hw = min(max(offset, self._log_start_offset), self.log_end_offset)
        self._high_watermark = hw
        self.producer_state.on_high_watermark(hw)
        return hw

    def _update_log_start_offset(self, offset: int) -> None:
        """The one writer of the log start offset. Callers keep it at or below the HW when
        moving it up (retention and DeleteRecords never pass the HW) and lower it only with
        a truncation below it; an advance goes through `_maybe_increment_log_start_offset`."""
        self._log_start_offset = offset

    def _maybe_increment_log_start_offset(self, offset: int) -> None:
        """Advance the log start offset (DeleteRecords, retention): the epoch cache and the
        producer state forget what lies below it, and the recovery point is not left below
        it (nothing below the log start needs recovering)."""
        if offset <= self._log_start_offset:
            return
        self._update_log_start_offset(offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.on_log_start_offset_incremented(offset)
        self._update_recovery_point(max(self._recovery_point, offset))

    def _update_recovery_point(self, offset: int) -> None:
        """The one writer of the recovery point: the log end after loading; up with a flush
        (to at most the log end) or an advance of the log start (to at most the HW); down with
        a truncation (to the new log end)."""
        self._recovery_point = offset

    @staticmethod
    def _floor_segment_index(bases: list[int], offset: int) -> int:
        return max(bisect_right(bases, offset) - 1, 0)

    # =========================================================================================
    # append

    def _analyze(
        self, buf: Buf, client: bool, now_ms: int | None = None
    ) -> list[tuple[int, BatchHeader]]:
        if not buf:
            raise InvalidRecord("empty record set")
        try:
            batches = list(iter_batches(buf))
        except CorruptRecord:
            raise
        consumed = batches[-1][0] + batches[-1][1].size if batches else 0
        if consumed != len(buf):
            raise CorruptRecord("record set ends with a partial batch")
        limit = records_limit(self.config.max_message_bytes)
        one_from_client = client and len(batches) == 1
        for pos, h in batches:
            if h.size > self.config.max_message_bytes:
                raise MessageTooLarge(
                    f"batch of {h.size} bytes exceeds max.message.bytes "
                    f"{self.config.max_message_bytes}")
            if one_from_client:
                self._validate_client_batch(buf, pos, h, limit, now_ms)
            else:  # a client's batches are refused below without their records inflated
                validate_batch(buf, pos, h)
        if client and len(batches) > 1:  # LogValidator: one v2 batch per partition and request
            raise InvalidRecord("Compressed outer record has more than one batch")
        if len(buf) > self.config.segment_bytes:
            raise RecordListTooLarge(
                f"record set of {len(buf)} bytes exceeds segment.bytes {self.config.segment_bytes}")
        return batches

    def _validate_client_batch(self, buf: Buf, pos: int, h: BatchHeader, limit: int,
                               now_ms: int | None) -> None:
        """LogValidator's checks of a producer's batch; a compressed one may have been
        inflated and checked ahead of the append, off the event loop (inflated_ahead)."""
        if not h.compression:  # nothing inflated ahead; the record rules only if any apply
            validate_batch(buf, pos, h, client=True, limit=limit)
            if h.attributes & ATTR_TIMESTAMP_TYPE or self._has_record_rules():
                validate_records(buf, pos, h, self.config, f"{self.topic}-{self.partition}",
                                 _now_ms() if now_ms is None else now_ms)
            return
        partition = f"{self.topic}-{self.partition}"
        ahead = inflated_ahead(partition, buf, pos, h) if h.compression else None
        try:
            validate_batch(buf, pos, h, client=True, limit=limit, inflated=ahead)
            if ahead is not None and ahead.rules_checked:
                if ahead.rules_error is not None:
                    raise ahead.rules_error.with_traceback(None)
                return
            validate_records(buf, pos, h, self.config, partition,
                             _now_ms() if now_ms is None else now_ms,
                             None if ahead is None else ahead.records)
        finally:
            if ahead is not None:
                release_inflated(partition, h)

    def _has_record_rules(self) -> bool:
        """Whether this log's config gives `validate_records` anything to check in a batch
        with CreateTime timestamps (worked out once per config: it is asked every append)."""
        config = self.config
        if self._rules_of is not config:
            self._rules_of, self._rules = config, has_record_rules(config)
        return self._rules

    @_io("appending records to")
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         origin: str = "client", now_ms: int | None = None,
                         transaction_version: int = 0) -> AppendInfo:
        """`transaction_version`: of the markers appended (2: KIP-890's epoch rule)."""
        now = _now_ms() if now_ms is None else now_ms
        if origin == "client":
            fast = self._append_client_batch(records, leader_epoch, now)
            if fast is not None:
                return fast
        log_append = self.config.log_append_time
        # Offsets and epochs are written with the batches (stamped_parts; the CRC covers
        # neither); a LogAppendTime is set in a copy, as the CRC covers it.
        buf = bytearray(records) if log_append else records
        batches = self._analyze(buf, client=origin == "client", now_ms=now)
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
        plan = psm.prepare_append(infos, origin, transaction_version)
        count, max_timestamp = self._write(stamped_parts(buf, batches), len(buf), batches, plan,
                                           now)
        return AppendInfo(
            first_offset=batches[0][1].base_offset, last_offset=batches[-1][1].last_offset,
            log_append_time=now if log_append else -1, log_start_offset=self.log_start_offset,
            record_count=count, max_timestamp=max_timestamp,
        )

    def _append_client_batch(self, buf: Buf, leader_epoch: int, now: int) -> AppendInfo | None:
        """A producer's usual append, collapsed (issue 47: at thousands of one-batch requests
        a second the general path's lists, loops, plans and property calls were most of an
        append's CPU): one batch, CreateTime, within the size limits, neither transactional
        nor a control batch, and either without a producer id or its producer's next batch.
        The checks, the bytes written and the answer are the general path's; None, with
        nothing checked or changed, for anything else, which the general path then takes."""
        size = len(buf)
        config = self.config
        if (size < HEADER_SIZE or _I32.unpack_from(buf, 8)[0] != size - LOG_OVERHEAD
                or size > config.max_message_bytes or size > config.segment_bytes
                or buf[ATTRIBUTES_LOW] & (ATTR_TRANSACTIONAL | ATTR_CONTROL)
                or config.message_timestamp_type != "CreateTime"):
            return None
        h = BatchHeader.parse(buf, 0)
        psm = self.producer_state
        entry = None
        if h.producer_id != NO_PRODUCER_ID:
            entry = psm.next_batch_entry(h.producer_id, h.producer_epoch, h.base_sequence)
            if entry is None:  # new, duplicate, fenced, out of sequence: the general path's
                return None
        self._validate_client_batch(buf, 0, h, records_limit(config.max_message_bytes), now)
        seg = self._segs.view[0][-1]
        base = seg.next_offset
        last = base + h.last_offset_delta
        max_timestamp = h.max_timestamp
        h.base_offset, h.partition_leader_epoch = base, leader_epoch
        seg = self._maybe_roll(size, max_timestamp, base, last, now)
        seg.append_batch(stamped_prefix(h), memoryview(buf)[STAMPED_PREFIX_SIZE:], h)
        self.leader_epoch_cache.maybe_assign(leader_epoch, base)
        psm.append_next_batch(entry, h.last_sequence, base, last, max_timestamp)
        self._count_unflushed(h.records_count, now)
        return AppendInfo(base, last, -1, self._log_start_offset, h.records_count,
                          max_timestamp=max_timestamp)

    @_io("appending records to")
    def append_as_follower(self, records: bytes | bytearray | memoryview,
                           now_ms: int | None = None) -> AppendInfo:
        """Append batches keeping their offsets and leader epochs (replication)."""
        now = _now_ms() if now_ms is None else now_ms
        buf = records  # written as they are: nothing is stamped
        batches = self._analyze(buf, client=False)
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
        psm = self.producer_state
        for txn in psm.apply(plan):
            if txn.is_aborted:
                seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset,
                                                txn.last_offset, psm.last_stable_offset(txn)))
        self._count_unflushed(count, now)
        return count, max_timestamp

    def _count_unflushed(self, count: int, now: int) -> None:
        """flush.messages and flush.ms: flush when either is reached (both off by default)."""
        self._unflushed_messages += count
        flush_ms = self.config.flush_ms
        if (self._unflushed_messages >= self.config.flush_messages
                or (flush_ms < LONG_MAX and now - self._last_flush_ms >= flush_ms)):
            self.flush()

    @_io("assigning a leader epoch in")
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

    @_io("rolling a segment of")
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
        seg = self._new_segment(new_base)
        self._segs.add(seg)
        self.producer_state.update_map_end_offset(
            max(self.producer_state.map_end_offset, new_base))
        # No fsync here (the event loop): the flush that moves the recovery point to new_base
        # (the LogManager's flush on roll, a thread) syncs the snapshot first, as Kafka's roll
        # leaves it to its scheduled flushUptoOffsetExclusive.
        self.producer_state.take_snapshot(new_base, sync=False)
        return seg

    # =========================================================================================
    # read

    @_io("reading")
    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True, zero_copy: bool = False) -> FetchDataInfo:
        leo = self.log_end_offset
        if fetch_offset < self.log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRange(
                f"offset {fetch_offset} is out of range [{self.log_start_offset}, {leo}] for "
                f"{self.topic}-{self.partition}")
        limit = leo if max_offset is None else min(max_offset, leo)
        if fetch_offset >= limit:
            return FetchDataInfo(b"", fetch_offset, fetch_offset)
        segments, bases = self._segs.view
        for seg in segments[self._floor_segment_index(bases, fetch_offset):]:
            r = seg.read(fetch_offset, max_bytes, limit, min_one_message, zero_copy)
            if r is not None:
                return FetchDataInfo(*r)
        return FetchDataInfo(b"", fetch_offset, fetch_offset)

    @_io("reading the transaction index of")
    def collect_aborted_transactions(self, fetch_offset: int,
                                     upper_bound_offset: int) -> list[AbortedTxn]:
        out: list[AbortedTxn] = []
        segments, bases = self._segs.view
        for seg in segments[self._floor_segment_index(bases, fetch_offset):]:
            found, complete = seg.txn_index.collect_aborted(fetch_offset, upper_bound_offset)
            out.extend(found)
            if complete:
                break
        return out

    @_io("searching by timestamp in")
    def fetch_offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with ts >= timestamp."""
        for seg in list(self._segments):
            if seg.largest_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    off, ts = found
                    return off, ts, self._epoch_for(off)
        return None

    @_io("searching by timestamp in")
    def max_timestamp_and_offset(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with the largest timestamp."""
        segs = [s for s in self._segments if s.max_timestamp_so_far >= 0]
        if not segs:
            return None
        seg = max(segs, key=lambda s: s.max_timestamp_so_far)
        found = seg.find_offset_by_timestamp(seg.max_timestamp_so_far, self.log_start_offset)
        if found is None:
            return None
        off, ts = found
        return off, ts, self._epoch_for(off)

    def _epoch_for(self, offset: int) -> int:
        e = self.leader_epoch_cache.epoch_for_offset(offset)
        return -1 if e is None else e

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # =========================================================================================
    # deletion, truncation

    @_io("deleting records of")
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset; returns the new log start offset."""
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRange(
                f"cannot delete records before {offset}: high watermark is {self.high_watermark}")
        if offset > self.log_start_offset:
            self._maybe_increment_log_start_offset(offset)
            self._delete_segments(self._breached_log_start())
        return self.log_start_offset

    def _deletable_prefix(self, pred: Callable[[LogSegment, int], bool]) -> list[LogSegment]:
        """Leading non-active segments below the HW for which pred(seg) holds."""
        out: list[LogSegment] = []
        segs = self._segments
        for i, seg in enumerate(segs[:-1]):
            upper = segs[i + 1].base_offset
            if upper > self.high_watermark or not pred(seg, upper):
                break
            out.append(seg)
        return out

    def _breached_log_start(self) -> list[LogSegment]:
        return self._deletable_prefix(lambda seg, upper: upper <= self.log_start_offset)

    def _detach_segments(self, segs: list[LogSegment]) -> list[LogSegment]:
        """Take leading segments out of the log (in memory only: readers no longer find
        them) and advance the log start offset; `delete_detached` removes their files."""
        if not segs or not self._segs.replace(segs, detach=True):
            return []
        self._maybe_increment_log_start_offset(self._segments[0].base_offset)
        return segs

    @_io("deleting segments of")
    def delete_detached(self, segs: list[LogSegment]) -> None:
        """Delete the files of detached segments and the producer snapshots below the log.
        Thread-safe (the retention thread): under `_lock`, so no flush is using them."""
        if not segs:
            return
        with self._lock:
            # Only those still pending: a truncation meanwhile deleted the others, and their
            # names may be taken by new segments now.
            for seg in self._segs.take_detached(segs):
                seg.delete()
            self.producer_state.delete_snapshots_below(self._segments[0].base_offset)

    def _delete_all_detached_locked(self) -> None:
        """Truncation (under `_lock`) may create a segment at the base of one whose files are
        still to be deleted: delete those first, so neither file is taken for the other."""
        for seg in self._segs.take_detached():
            seg.delete()

    def _delete_segments(self, segs: list[LogSegment]) -> int:
        """Detach now, delete the files in the background where the owner provides one
        (DeleteRecords, a follower following its leader's log start: both on the loop)."""
        detached = self._detach_segments(segs)
        if detached and self.run_in_background is not None:
            self.run_in_background(lambda: self.delete_detached(detached))
        else:
            self.delete_detached(detached)
        return len(detached)

    def detach_expired_segments(self, now_ms: int | None = None) -> list[LogSegment]:
        """Retention, the in-memory part (event loop, no file I/O but for the odd stat):
        detach the segments that retention.ms / retention.bytes (delete policy) or the log
        start offset (any policy) expire. The caller passes them to `delete_detached`."""
        now = _now_ms() if now_ms is None else now_ms
        doomed = self._detach_segments(self._breached_log_start())
        if not self.config.delete:
            return doomed
        if self.config.retention_ms >= 0:
            ms = self.config.retention_ms
            doomed += self._detach_segments(
                self._deletable_prefix(lambda seg, _u: now - seg.largest_timestamp > ms))
        if self.config.retention_bytes >= 0:
            excess = self.size_in_bytes - self.config.retention_bytes

            def over(seg: LogSegment, _upper: int) -> bool:
                nonlocal excess
                if excess - seg.size < 0:
                    return False
                excess -= seg.size
                return True

            doomed += self._detach_segments(self._deletable_prefix(over))
        return doomed

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Retention in one call (both parts); returns the number of segments deleted."""
        doomed = self.detach_expired_segments(now_ms)
        self.delete_detached(doomed)
        return len(doomed)

    @_io("truncating")
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after `offset` (follower truncation). True if anything
        was removed."""
        if offset < 0:
            raise ValueError("cannot truncate to a negative offset")
        if offset >= self.log_end_offset:
            # Nothing to cut, but an epoch this broker started as leader and wrote nothing in
            # may end the cache; the new leader never had it, so it goes (as in Kafka's
            # truncateTo), or every fetch diverges again at this offset.
            with self._lock:
                self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        with self._lock:
            self.generation += 1
            self._delete_all_detached_locked()
            if self._segments[0].base_offset > offset:
                self.truncate_fully_and_start_at(offset)
                return True
            for seg in [s for s in self._segments if s.base_offset > offset]:
                self._segs.remove(seg)
                seg.delete()
            self.active_segment.truncate_to(offset)
            leo = self.log_end_offset
            self.leader_epoch_cache.truncate_from_end(leo)
            self._update_recovery_point(min(self._recovery_point, leo))
            if self._log_start_offset > leo:
                self._update_log_start_offset(leo)
            self.update_high_watermark(min(self._high_watermark, leo))
            psm = self.producer_state
            psm.truncate(self.log_start_offset, leo)
            replay_from = max(psm.load(self.log_start_offset, leo), self.log_start_offset)
            if replay_from < leo:
                replay_producer_state(psm, self._segments, replay_from, leo, None)
            psm.update_map_end_offset(leo)
        return True

    @_io("truncating")
    def truncate_fully_and_start_at(self, offset: int) -> None:
        with self._lock:
            self.generation += 1
            self._delete_all_detached_locked()
            old = self._segments
            for seg in old:  # first: the new segment may take the name of one of them
                seg.delete()
            self._segs.replace(old, self._new_segment(offset))
            self._update_log_start_offset(offset)
            self._update_recovery_point(offset)
            self.update_high_watermark(offset)
            self.leader_epoch_cache.clear()
            self.producer_state.truncate_fully_and_start_at(offset)

    # =========================================================================================
    # compaction

    @_io("compacting")
    def compact(self, now_ms: int | None = None) -> cleaner.CleanResult | None:
        """Clean the non-active segments below the LSO (cleanup.policy contains compact), all
        steps in this thread. The LogManager runs the same steps split between the event
        loop and a thread (`samsa.storage.cleaner`)."""
        if not self.config.compact:
            return None
        now = _now_ms() if now_ms is None else now_ms
        segments = cleaner.cleanable_segments(self, now)
        if not segments:
            return None
        result = cleaner.clean_segments(self, segments, self.generation, now)
        if result is not None:
            self.delete_detached(result.replaced)
            self.finish_swaps(result.swapped_in)
        return result

    def swap_in_cleaned(self, old: list[LogSegment], new: LogSegment, generation: int) -> bool:
        """Swap cleaned output in for `old` (a thread; `new.suffix` is '.cleaned', its data
        fsynced): rename it to '.swap', then replace `old` by it in the segment list in one
        step. False, and nothing done, if the log was truncated, closed or lost one of `old`
        meanwhile. The old files stay until `delete_detached` (readers on the loop may be
        in them right now) and the '.swap' names until `finish_swaps`; a crash in between
        is finished by `Log.open` (`LogLoader._complete_swaps`): either the old or the new data."""
        with self._lock:
            if self._closed or generation != self.generation:
                return False
            if not all(self.has_segment(s) for s in old):
                return False
            new.change_suffix(SWAP_SUFFIX)
            if not self._segs.replace(old, new, detach=True):  # pragma: no cover - checked above
                new.change_suffix(cleaner.CLEANED_SUFFIX)
                return False
            return True

    def finish_swaps(self, swapped: list[LogSegment]) -> None:
        """Give swapped-in segments their final names, once the segments they replaced are
        deleted. On the event loop (readers there open files by name: a rename must not
        happen in the middle of one); a few renames per segment."""
        for seg in swapped:
            if seg.suffix == SWAP_SUFFIX and self.has_segment(seg) and not self._closed:
                seg.change_suffix("")

    # =========================================================================================
    # flush, snapshots, close

    @_io("flushing")
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets in [recovery point, up_to) and advance it."""
        with self._lock:
            if self._closed:
                return
            target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
            if target <= self.recovery_point and up_to is not None:
                return
            segs = list(self._segments)  # roll may append concurrently
            for i, seg in enumerate(segs):
                upper = segs[i + 1].base_offset if i + 1 < len(segs) else LONG_MAX
                if upper > self.recovery_point and seg.base_offset < target:
                    seg.flush()
            self.leader_epoch_cache.flush()
            self.producer_state.flush_snapshots(target)
            while self._sync_on_flush:
                fsync_file(self._sync_on_flush.pop())
            self._update_recovery_point(max(self._recovery_point, target))
            self._unflushed_messages = 0
            self._last_flush_ms = _now_ms()

    def sync_on_flush(self, path: Path) -> None:
        """`path` (in this log's directory) was written without fsync: the next flush does it."""
        self._sync_on_flush.append(path)

    @property
    def unflushed_ms(self) -> int:
        return _now_ms() - self._last_flush_ms

    @_io("writing a producer snapshot of")
    def take_producer_snapshot(self) -> None:
        leo = self.log_end_offset
        psm = self.producer_state
        psm.update_map_end_offset(max(psm.map_end_offset, leo))
        psm.take_snapshot(leo)

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        self.producer_state.remove_expired(_now_ms() if now_ms is None else now_ms)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self.generation += 1
            self._delete_all_detached_locked()  # a retention or swap cut short by shutdown
            self.active_segment.on_become_inactive()
            self.flush()
            self.take_producer_snapshot()
            for seg in self._segments:
                seg.close()
            self._closed = True

    def release_files(self) -> None:
        """Close every open fd of this log's segments; they reopen on their next use."""
        with self._lock:
            for seg in self._segments:
                seg.close()

    @property
    def open_files(self) -> int:
        return sum(seg.open_files for seg in self._segments)

    def close_handlers(self) -> None:
        """The directory failed: close every fd, write nothing more (Kafka's closeHandlers)."""
        self._failed = True
        with self._lock:
            for seg in self._segments:
                seg.close_handlers()
            self._closed = True

    def close_without_flush(self) -> None:
        """Release file descriptors only (tests simulating a crash)."""
        with self._lock:
            for seg in self._segments:
                seg.close()
            self._closed = True

    def delete(self) -> None:
        with self._lock:
            self.generation += 1
            for seg in self._segments:
                seg.close()
            self._closed = self._deleted = True
            shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={len(self._segments)})")


__all__ = ["FUTURE_DIR_SUFFIX", "AppendInfo", "FetchDataInfo", "Log", "future_dir_name",
           "parse_topic_partition"]
