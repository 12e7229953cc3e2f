"""When a log is due a flush, and what its flush must fsync besides the segments.

`FlushTracker` belongs to one `Log`: it counts the messages appended since the last flush
(flush.messages), the time since it (flush.ms, and the LogManager's scheduler), and remembers
the files written in the log's directory without an fsync (partition.metadata), which the next
flush syncs. The flush itself (segments, epoch cache, producer snapshots, the recovery point)
is the `Log`'s."""

from __future__ import annotations

from pathlib import Path

from samsa.storage.checkpoint import fsync_file
from samsa.storage.clock import milliseconds
from samsa.storage.config import LONG_MAX, LogConfig


class FlushTracker:
    def __init__(self) -> None:
        self._unsynced: list[Path] = []  # files written without fsync, synced by the flush
        self._unflushed_messages = 0
        self._last_flush_ms = milliseconds()

    def count(self, messages: int, now: int, config: LogConfig) -> bool:
        """`messages` were appended at `now`: whether flush.messages or flush.ms is reached
        (both off by default)."""
        self._unflushed_messages += messages
        flush_ms = config.flush_ms
        return (self._unflushed_messages >= config.flush_messages
                or (flush_ms < LONG_MAX and now - self._last_flush_ms >= flush_ms))

    def sync_on_flush(self, path: Path) -> None:
        """`path` (in the log's directory) was written without fsync: the next flush does it."""
        self._unsynced.append(path)

    @property
    def unflushed_ms(self) -> int:
        return milliseconds() - self._last_flush_ms

    def flushed(self) -> None:
        """The log flushed: fsync the files waiting for it, and count from zero again."""
        while self._unsynced:
            fsync_file(self._unsynced.pop())
        self._unflushed_messages = 0
        self._last_flush_ms = milliseconds()


__all__ = ["FlushTracker"]
