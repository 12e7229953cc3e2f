"""Log compaction (cleanup.policy=compact): keep the newest record per key.

Simplified relative to Kafka's LogCleaner: the key map covers the whole cleanable range (not
just the dirty part), tombstones are dropped once their batch's max timestamp is older than
delete.retention.ms, and transactional/control batches are copied untouched."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocol.records import (
    LOG_APPEND_TIME,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    iter_batches,
    set_log_append_time,
)
from storage.segment import INT32_MAX, LogSegment

if TYPE_CHECKING:
    from storage.log import Log

CLEANED_SUFFIX = ".cleaned"


@dataclass(slots=True)
class CleanResult:
    start_offset: int
    end_offset: int  # first uncleanable offset
    bytes_before: int
    bytes_after: int
    records_removed: int


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


def clean_log(log: Log, now_ms: int) -> CleanResult | None:
    segments = cleanable_segments(log, now_ms)
    if not segments:
        return None
    latest = build_offset_map(segments)
    horizon = now_ms - log.config.delete_retention_ms
    before = sum(s.size for s in segments)
    after = 0
    removed_total = 0
    for group in _group(segments, log.config.segment_bytes):
        cleaned = log._new_segment(group[0].base_offset, CLEANED_SUFFIX)
        try:
            for seg in group:
                for _pos, h, data in seg.batches():
                    kept, removed = _filter_batch(h, data, latest, horizon)
                    removed_total += removed
                    if kept is not None:
                        cleaned.append(kept, list(iter_batches(kept)))
                for txn in seg.txn_index.all_entries():
                    cleaned.txn_index.append(txn)
            cleaned.on_become_inactive()
        except BaseException:
            cleaned.delete()
            raise
        after += cleaned.size
        log.replace_segments(group, cleaned)
    return CleanResult(segments[0].base_offset, segments[-1].next_offset, before, after,
                       removed_total)
