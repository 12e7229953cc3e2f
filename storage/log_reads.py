"""Reads and lookups over a log's segments (Kafka's LocalLog.read and UnifiedLog's offset
and timestamp lookups): pure functions of one view of the segment list, which is never
mutated (`samsa.storage.log_segments`), so they take no lock. The `Log` checks the offsets
asked for and guards the I/O."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from samsa.storage.file_region import FileRegion
from samsa.storage.leader_epoch import LeaderEpochCache
from samsa.storage.log_segments import View
from samsa.storage.segment import LogSegment
from samsa.storage.txn_index import AbortedTxn


@dataclass(slots=True)
class FetchDataInfo:
    # what was read from the segment, or with zero_copy a FileRegion of it (not read)
    records: bytes | memoryview | FileRegion
    first_batch_offset: int  # base offset of the first returned batch (fetch offset if none)
    next_offset: int = -1  # offset just after the returned data (upper bound for aborted txns)


def _from(view: View, offset: int) -> list[LogSegment]:
    """The segments from the one holding `offset` on."""
    segments, bases = view
    return segments[max(bisect_right(bases, offset) - 1, 0):]


def read(view: View, fetch_offset: int, max_bytes: int, limit: int, min_one_message: bool,
         zero_copy: bool) -> FetchDataInfo:
    """Batches from `fetch_offset` (in range) up to the offset `limit`."""
    if fetch_offset >= limit:
        return FetchDataInfo(b"", fetch_offset, fetch_offset)
    for seg in _from(view, fetch_offset):
        r = seg.read(fetch_offset, max_bytes, limit, min_one_message, zero_copy)
        if r is not None:
            return FetchDataInfo(*r)
    return FetchDataInfo(b"", fetch_offset, fetch_offset)


def aborted_transactions(view: View, fetch_offset: int,
                         upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [fetch_offset, upper_bound_offset)."""
    out: list[AbortedTxn] = []
    for seg in _from(view, fetch_offset):
        found, complete = seg.txn_index.collect_aborted(fetch_offset, upper_bound_offset)
        out.extend(found)
        if complete:
            break
    return out


def offset_for_timestamp(segments: list[LogSegment], epochs: LeaderEpochCache, timestamp: int,
                         log_start_offset: int) -> tuple[int, int, int] | None:
    """(offset, timestamp, leader epoch) of the first record with ts >= timestamp."""
    for seg in segments:
        if seg.largest_timestamp >= timestamp:
            found = seg.find_offset_by_timestamp(timestamp, log_start_offset)
            if found is not None:
                return _with_epoch(found, epochs)
    return None


def max_timestamp_and_offset(segments: list[LogSegment], epochs: LeaderEpochCache,
                             log_start_offset: int) -> tuple[int, int, int] | None:
    """(offset, timestamp, leader epoch) of the first record with the largest timestamp."""
    segs = [s for s in segments if s.max_timestamp_so_far >= 0]
    if not segs:
        return None
    seg = max(segs, key=lambda s: s.max_timestamp_so_far)
    found = seg.find_offset_by_timestamp(seg.max_timestamp_so_far, log_start_offset)
    return None if found is None else _with_epoch(found, epochs)


def _with_epoch(found: tuple[int, int], epochs: LeaderEpochCache) -> tuple[int, int, int]:
    offset, ts = found
    epoch = epochs.epoch_for_offset(offset)
    return offset, ts, -1 if epoch is None else epoch


__all__ = ["FetchDataInfo", "aborted_transactions", "max_timestamp_and_offset",
           "offset_for_timestamp", "read"]
