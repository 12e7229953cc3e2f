"""Leader-epoch cache (`LeaderEpochFileCache`) backed by `leader-epoch-checkpoint`:
sorted (epoch, start offset) entries, both strictly increasing.

A change rewrites the file at once but without fsync; `flush` (called when the log is flushed,
before its recovery point moves, and on close) makes it durable. As in Kafka since KAFKA-15046:
the fsync cost 2 of the 4 fsyncs of every partition created or led, and after a crash
recovery re-assigns the epochs of every batch past the recovery point anyway."""

from __future__ import annotations

import threading
from pathlib import Path

from samsa.storage.checkpoint import fsync_file, read_entries, write_entries

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
FILE_NAME = "leader-epoch-checkpoint"


class LeaderEpochCache:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._dirty = False  # entries changed since the file was last written
        self._write_lock = threading.Lock()
        self._unsynced = False  # the file was written since its last fsync
        try:
            self._entries: list[tuple[int, int]] = read_entries(
                self.path, lambda e: (int(e[0]), int(e[1])))
        except ValueError:
            self._entries = []  # rebuilt from the log by recovery
            self._dirty = True
        self._entries.sort()

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    def earliest_entry(self) -> tuple[int, int] | None:
        return self._entries[0] if self._entries else None

    def _flush(self) -> None:
        # The loop (a new epoch, the log start moving) and the flush thread both write the
        # file, through the same temporary name: one at a time.
        with self._write_lock:
            write_entries(self.path, (f"{e} {o}" for e, o in self._entries), fsync=False)
            self._dirty = False
            self._unsynced = True

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset` (no-op unless it is a new, higher
        epoch). Entries that would break monotonicity are dropped. Returns True if changed."""
        if epoch < 0 or start_offset < 0:
            return False
        if self._entries:
            last_epoch, last_start = self._entries[-1]
            if epoch == last_epoch and start_offset >= last_start:
                return False
        self._entries = [(e, o) for e, o in self._entries if e < epoch and o < start_offset]
        self._entries.append((epoch, start_offset))
        self._dirty = True
        if flush:
            self._flush()
        return True

    def maybe_assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> None:
        """A batch's epoch, as it is appended or recovered: a new entry if it differs from the
        latest one (a batch without an epoch, -1, starts none)."""
        if epoch >= 0 and epoch != self.latest_epoch:
            self.assign(epoch, start_offset, flush=flush)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the entry with the greatest start offset <= offset."""
        found = None
        for e, o in self._entries:
            if o > offset:
                break
            found = e
        return found

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's `endOffsetFor`: (epoch, end offset) or (-1, -1) if unknown."""
        if requested == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries[-1][0] == requested:
            return requested, log_end_offset
        higher = next(((e, o) for e, o in self._entries if e > requested), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for e, o in self._entries:
            if e <= requested:
                floor = (e, o)
        if floor is None:
            return requested, higher[1]
        return floor[0], higher[1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after end_offset (log truncated to end_offset)."""
        kept = [(e, o) for e, o in self._entries if o < end_offset]
        if kept != self._entries:
            self._entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below start_offset; the last of them now starts there."""
        below = [(e, o) for e, o in self._entries if o <= start_offset]
        if not below:
            return
        kept = [(below[-1][0], start_offset)]
        kept += [(e, o) for e, o in self._entries if o > start_offset]
        if kept != self._entries:
            self._entries = kept
            self._flush()

    def clear(self) -> None:
        self._entries = []
        self._flush()

    def flush(self) -> None:
        """Make the file durable: write it if the entries changed, fsync it if written since
        the last fsync."""
        if self._dirty:
            self._flush()
        if self._unsynced:
            fsync_file(self.path)
            self._unsynced = False
