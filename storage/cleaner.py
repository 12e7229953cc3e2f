"""Log compaction (cleanup.policy=compact): keep the newest record per key.

Simplified relative to Kafka's LogCleaner: the key map covers the whole cleanable range (not
just the dirty part), tombstones are dropped once their batch's max timestamp is older than
delete.retention.ms, and transactional/control batches are copied untouched.

Threads: `cleanable_segments` reads the producer state and runs on the event loop; the work,
`clean_segments`, runs in a thread: it only reads segments that no longer change (below the
active one) and writes new files, and the swap into the log is one step under the log's lock
(`swap_in_cleaned`). It gives up, leaving the log as it was, if the log was truncated,
deleted or closed, or lost a segment it was cleaning, meanwhile (`CleanAborted`)."""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from samsa.protocol.records import (
    LOG_APPEND_TIME,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    iter_batches,
    set_log_append_time,
)
from samsa.storage.log_io import guarded
from samsa.storage.log_loader import SWAP_SUFFIX
from samsa.storage.segment import INT32_MAX, LogSegment

if TYPE_CHECKING:
    from samsa.storage.log import Log

CLEANED_SUFFIX = ".cleaned"


class CleanAborted(Exception):
    """The log changed under the cleaner (truncated, deleted, closed, segments removed)."""


@dataclass(slots=True)
class CleanResult:
    start_offset: int
    end_offset: int  # first uncleanable offset
    bytes_before: int
    bytes_after: int
    records_removed: int
    # Swapped out of the log (files still to delete) and in (still named '.swap'): the
    # caller finishes with log.retention.delete_detached(replaced), then finish_swaps(swapped_in).
    replaced: list[LogSegment] = field(default_factory=list)
    swapped_in: list[LogSegment] = field(default_factory=list)
    thread: str = ""  # where the cleaning ran (the event loop must not be it)
    duration_ms: float = 0.0


def first_uncleanable_offset(log: Log, now_ms: int) -> int:
    """Never clean the active segment, at/after the LSO, or segments younger than
    min.compaction.lag.ms; the result is a segment base offset."""
    segs = log.segments
    limit = min(log.last_stable_offset, segs[-1].base_offset)
    lag = log.config.min_compaction_lag_ms
    for i, seg in enumerate(segs):
        upper = segs[i + 1].base_offset if i + 1 < len(segs) else seg.next_offset
        if upper > limit or (lag > 0 and seg.largest_timestamp > now_ms - lag):
            return seg.base_offset
    return limit


def cleanable_segments(log: Log, now_ms: int) -> list[LogSegment]:
    end = first_uncleanable_offset(log, now_ms)
    segs = log.segments
    out = []
    for i, seg in enumerate(segs[:-1]):
        if segs[i + 1].base_offset <= end:
            out.append(seg)
    return out


def dirty_ratio(log: Log, first_dirty_offset: int, now_ms: int) -> float:
    segs = cleanable_segments(log, now_ms)
    total = sum(s.size for s in segs)
    if not total:
        return 0.0
    dirty = sum(s.size for s in segs if s.base_offset >= first_dirty_offset)
    return dirty / total


def _is_kept_as_is(h: BatchHeader) -> bool:
    # Hook: Kafka removes aborted transactional records and, after delete.retention.ms,
    # markers of completed transactions. Until that is implemented they are kept intact.
    return h.is_control or h.is_transactional


def build_offset_map(segments: list[LogSegment]) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for seg in segments:
        for _pos, h, data in seg.batches():
            if _is_kept_as_is(h):
                continue
            for r in decode_records(data, 0, h):
                if r.key is not None:
                    latest[r.key] = r.offset
    return latest


def _group(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    for seg in segments:
        g = groups[-1] if groups else None
        if (g is not None and sum(s.size for s in g) + seg.size <= max_bytes
                and seg.next_offset - 1 - g[0].base_offset <= INT32_MAX):
            g.append(seg)
        else:
            groups.append([seg])
    return groups


def _filter_batch(h: BatchHeader, data: memoryview, latest: dict[bytes, int],
                  tombstone_horizon: int) -> tuple[bytes | None, int]:
    """(bytes to keep or None, records removed) for one batch."""
    if _is_kept_as_is(h):
        return bytes(data), 0
    records = decode_records(data, 0, h)
    keep: list[Record] = []
    for r in records:
        if r.key is not None and latest.get(r.key, r.offset) != r.offset:
            continue  # superseded by a newer value
        if r.key is not None and r.value is None and h.max_timestamp < tombstone_horizon:
            continue  # tombstone past delete.retention.ms
        keep.append(r)
    removed = len(records) - len(keep)
    if not removed:
        return bytes(data), 0
    if not keep:
        return None, removed
    rebuilt = build_batch(
        [(r.key, r.value, r.headers, r.timestamp) for r in keep],
        h.base_offset,
        partition_leader_epoch=h.partition_leader_epoch,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        compression=h.compression,
        timestamp_type=h.timestamp_type,
        offset_deltas=[r.offset - h.base_offset for r in keep],
    )
    if h.timestamp_type == LOG_APPEND_TIME:
        buf = bytearray(rebuilt)
        set_log_append_time(buf, 0, h.max_timestamp)
        rebuilt = bytes(buf)
    return rebuilt, removed


def _check(log: Log, generation: int, segments: list[LogSegment]) -> None:
    if log.generation != generation or not all(log.segs.contains(s) for s in segments):
        raise CleanAborted(f"{log.dir.name} changed while being cleaned")


def clean_segments(log: Log, segments: list[LogSegment], generation: int,
                   now_ms: int) -> CleanResult | None:
    """Compact `segments` (from `cleanable_segments`, at log generation `generation`) and swap
    the output in group by group. Thread-safe against the event loop (see the module doc).
    None if the log changed meanwhile; what was already swapped in stays (it is complete)."""
    started = time.perf_counter()
    result = CleanResult(segments[0].base_offset, segments[-1].next_offset,
                         sum(s.size for s in segments), 0, 0,
                         thread=threading.current_thread().name)
    try:
        _check(log, generation, segments)
        latest = build_offset_map(segments)
        horizon = now_ms - log.config.delete_retention_ms
        for group in _group(segments, log.config.segment_bytes):
            _check(log, generation, group)
            cleaned = LogSegment(log.dir, group[0].base_offset, CLEANED_SUFFIX, log.config)
            try:
                removed_total = 0
                for seg in group:
                    for _pos, h, data in seg.batches():
                        if log.generation != generation:  # truncated, closed: stop soon
                            raise CleanAborted(f"{log.dir.name} changed while being cleaned")
                        kept, removed = _filter_batch(h, data, latest, horizon)
                        removed_total += removed
                        if kept is not None:
                            cleaned.append([kept], list(iter_batches(kept)))
                    for txn in seg.txn_index.all_entries():
                        cleaned.txn_index.append(txn)
                cleaned.on_become_inactive()
                cleaned.flush()
                if not swap_in_cleaned(log, group, cleaned, generation):
                    raise CleanAborted(f"{log.dir.name} changed while being cleaned")
            except BaseException:
                cleaned.delete()
                raise
            result.records_removed += removed_total
            result.bytes_after += cleaned.size
            result.replaced += group
            result.swapped_in.append(cleaned)
    except (CleanAborted, OSError) as exc:
        if isinstance(exc, OSError):
            try:
                _check(log, generation, segments)
            except CleanAborted:
                pass  # a file vanished because the log changed: not a disk problem
            else:
                raise
        if log.is_deleted:
            shutil.rmtree(log.dir, ignore_errors=True)  # in case we wrote into a removed dir
        if not result.swapped_in:
            return None
        # Report what was swapped in, so that the caller finishes it.
        done = len(result.replaced)
        if done < len(segments):
            result.end_offset = segments[done].base_offset
    result.duration_ms = (time.perf_counter() - started) * 1000
    return result


def swap_in_cleaned(log: Log, old: list[LogSegment], new: LogSegment, generation: int) -> bool:
    """Swap cleaned output in for `old` (a thread; `new.suffix` is '.cleaned', its data
    fsynced): rename it to '.swap', then replace `old` by it in the segment list in one
    step. False, and nothing done, if the log was truncated, closed or lost one of `old`
    meanwhile. The old files stay until `delete_detached` (readers on the loop may be
    in them right now) and the '.swap' names until `finish_swaps`; a crash in between
    is finished by `Log.open` (`LogLoader._complete_swaps`): either the old or the new data."""
    with log.lock:
        if log.closed or generation != log.generation:
            return False
        if not all(log.segs.contains(s) for s in old):
            return False
        new.change_suffix(SWAP_SUFFIX)
        if not log.segs.replace(old, new, detach=True):  # pragma: no cover - checked above
            new.change_suffix(CLEANED_SUFFIX)
            return False
        return True


def finish_swaps(log: Log, swapped: list[LogSegment]) -> None:
    """Give swapped-in segments their final names, once the segments they replaced are
    deleted. On the event loop (readers there open files by name: a rename must not
    happen in the middle of one); a few renames per segment."""
    for seg in swapped:
        if seg.suffix == SWAP_SUFFIX and log.segs.contains(seg) and not log.closed:
            seg.change_suffix("")


@guarded("compacting")
def compact(log: Log, now_ms: int | None = None) -> CleanResult | None:
    """Clean the non-active segments below the LSO of `log` (cleanup.policy contains compact),
    all steps in this thread. The LogManager runs the same steps split between the event
    loop and a thread."""
    if not log.config.compact:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    segments = cleanable_segments(log, now)
    if not segments:
        return None
    result = clean_segments(log, segments, log.generation, now)
    if result is not None:
        log.retention.delete_detached(result.replaced)
        finish_swaps(log, result.swapped_in)
    return result
