"""`LogSegments`: the segment list of one log (Kafka's LogSegments), copy-on-write.

A reader takes one `view` (segments, their base offsets), never mutated: every change builds
a new pair and replaces it whole under a lock, so a roll on the event loop and a swap of
cleaned segments in a thread never see, or make, a half-changed list; readers take no lock.

Segments taken out of the list for deletion ("detached": retention, DeleteRecords, cleaned
segments swapped out) stay known here until their files are deleted (`take_detached`), because
a truncation may create a segment whose files have the name of one still to be deleted."""

from __future__ import annotations

import threading
from bisect import bisect_right

from samsa.storage.segment import LogSegment

View = tuple[list[LogSegment], list[int]]  # (segments, their base offsets), both sorted


class LogSegments:
    def __init__(self) -> None:
        self.view: View = ([], [])  # replaced, never mutated; written only under _lock
        self._lock = threading.Lock()
        self._detached: list[LogSegment] = []  # out of the list, files not yet deleted

    @property
    def segments(self) -> list[LogSegment]:
        """The current list (do not mutate it)."""
        return self.view[0]

    def contains(self, seg: LogSegment) -> bool:
        return any(s is seg for s in self.view[0])

    # -- changes (each replaces the view in one step) ------------------------------------------

    def install(self, segments: list[LogSegment]) -> None:
        """The loaded segments (sorted), when the log opens."""
        with self._lock:
            self.view = (list(segments), [s.base_offset for s in segments])

    def add(self, seg: LogSegment) -> None:
        with self._lock:
            segs, bases = self.view
            i = bisect_right(bases, seg.base_offset)
            self.view = ([*segs[:i], seg, *segs[i:]], [*bases[:i], seg.base_offset, *bases[i:]])

    def replace(self, old: list[LogSegment], new: LogSegment | None = None, *,
                detach: bool = False) -> bool:
        """Remove `old` and add `new` in one change; False (and nothing changed) unless every
        segment of `old` is still in the list. With detach, `old` is remembered until
        `take_detached` hands it out for deleting its files."""
        with self._lock:
            segs, _ = self.view
            gone = {id(s) for s in old}
            kept = [s for s in segs if id(s) not in gone]
            if len(kept) != len(segs) - len(gone):
                return False
            if new is not None:
                kept.append(new)
                kept.sort(key=lambda s: s.base_offset)
            self.view = (kept, [s.base_offset for s in kept])
            if detach:
                self._detached = [*self._detached, *old]
            return True

    def remove(self, seg: LogSegment) -> None:
        self.replace([seg])

    # -- detached segments -----------------------------------------------------------------------

    def take_detached(self, segs: list[LogSegment] | None = None) -> list[LogSegment]:
        """Those of `segs` (None: all) still waiting for their files to be deleted; they are
        forgotten here, so the caller deletes them (once: another caller gets none of them)."""
        with self._lock:
            if segs is None:
                doomed, self._detached = self._detached, []
                return doomed
            asked = {id(s) for s in segs}
            doomed = [s for s in self._detached if id(s) in asked]
            self._detached = [s for s in self._detached if id(s) not in asked]
            return doomed


__all__ = ["LogSegments", "View"]
