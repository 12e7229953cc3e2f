"""Deleting a log's oldest segments: retention.ms, retention.bytes and the log start offset
(Kafka's UnifiedLog.deleteOldSegments), in two parts.

Detaching takes leading segments out of the segment list (in memory: readers no longer find
them) and advances the log start offset; it runs where the log's appends run (the event loop).
Deleting their files (`delete_detached`) may run in a thread (the LogManager's retention, or
`run_in_background` for DeleteRecords), serialised with flush and truncation on the log's lock.
Only the leading non-active segments wholly below the high watermark are ever detached."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.storage.clock import milliseconds
from samsa.storage.log_io import LogIo, guarded
from samsa.storage.segment import LogSegment

if TYPE_CHECKING:
    from samsa.storage.log import Log


class LogRetention:
    def __init__(self, log: Log) -> None:
        self._log = log
        self.io: LogIo = log.io
        # Set by the LogManager: runs a function in a thread (file deletions).
        self.run_in_background: Callable[[Callable[[], None]], None] | None = None

    def detach_expired(self, now_ms: int | None = None) -> list[LogSegment]:
        """Retention, the in-memory part (event loop, no file I/O but for the odd stat):
        detach the segments that retention.ms / retention.bytes (delete policy) or the log
        start offset (any policy) expire. The caller passes them to `delete_detached`."""
        config = self._log.config
        now = milliseconds() if now_ms is None else now_ms
        doomed = self._detach(self._below_log_start())
        if not config.delete:
            return doomed
        if config.retention_ms >= 0:
            ms = config.retention_ms
            doomed += self._detach(
                self._deletable_prefix(lambda seg, _u: now - seg.largest_timestamp > ms))
        if config.retention_bytes >= 0:
            excess = self._log.size_in_bytes - config.retention_bytes

            def over(seg: LogSegment, _upper: int) -> bool:
                nonlocal excess
                if excess - seg.size < 0:
                    return False
                excess -= seg.size
                return True

            doomed += self._detach(self._deletable_prefix(over))
        return doomed

    def enforce(self, now_ms: int | None = None) -> int:
        """Retention in one call (both parts); returns the number of segments deleted."""
        doomed = self.detach_expired(now_ms)
        self.delete_detached(doomed)
        return len(doomed)

    def delete_below_log_start(self) -> int:
        """The segments wholly below the log start offset (just advanced by DeleteRecords or
        a follower following its leader): detached now, their files deleted in the background
        where the owner provides one; returns how many."""
        detached = self._detach(self._below_log_start())
        if detached and self.run_in_background is not None:
            self.run_in_background(lambda: self.delete_detached(detached))
        else:
            self.delete_detached(detached)
        return len(detached)

    @guarded("deleting segments of")
    def delete_detached(self, segs: list[LogSegment]) -> None:
        """Delete the files of detached segments and the producer snapshots below the log.
        Thread-safe (the retention thread): under the log's lock, so no flush is using them."""
        if not segs:
            return
        log = self._log
        with log.lock:
            # Only those still pending: a truncation meanwhile deleted the others, and their
            # names may be taken by new segments now.
            for seg in log.segs.take_detached(segs):
                seg.delete()
            log.producer_state.delete_snapshots_below(log.segs.segments[0].base_offset)

    def delete_all_detached_locked(self) -> None:
        """Truncation and close (under the log's lock) may create a segment at the base of one
        whose files are still to be deleted: delete those first, so neither file is taken for
        the other."""
        for seg in self._log.segs.take_detached():
            seg.delete()

    def _deletable_prefix(self, pred: Callable[[LogSegment, int], bool]) -> list[LogSegment]:
        """Leading non-active segments below the HW for which pred(seg, next base) holds."""
        out: list[LogSegment] = []
        segs = self._log.segs.segments
        hw = self._log.offsets.high_watermark
        for i, seg in enumerate(segs[:-1]):
            upper = segs[i + 1].base_offset
            if upper > hw or not pred(seg, upper):
                break
            out.append(seg)
        return out

    def _below_log_start(self) -> list[LogSegment]:
        offsets = self._log.offsets
        return self._deletable_prefix(lambda seg, upper: upper <= offsets.log_start_offset)

    def _detach(self, segs: list[LogSegment]) -> list[LogSegment]:
        """Take leading segments out of the log and advance the log start offset to the new
        first segment; `delete_detached` removes their files."""
        log = self._log
        if not segs or not log.segs.replace(segs, detach=True):
            return []
        log.offsets.advance_log_start_offset(log.segs.segments[0].base_offset)
        return segs


__all__ = ["LogRetention"]
