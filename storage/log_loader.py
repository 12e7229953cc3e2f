"""Opening a partition directory, as Kafka's LogLoader: everything `Log.open` does before the
log runs, and nothing after.

In order: delete the leftovers of interrupted work (`.cleaned`, `.deleted`, `.tmp` files) and
finish an interrupted swap of cleaned segments (`.swap`); delete index files whose `.log` is
gone; load the segments, recovering (re-validating and re-indexing) those from the one holding
the recovery point on, where a torn or corrupt tail is cut off together with every later
segment; trim the leader-epoch cache to the loaded offsets; and rebuild the producer state from
its newest usable snapshot plus a replay of the log after it (rebuilding the transaction
indexes of the recovered segments on the way).

The result is a `LoadedLog`: the segments and the offsets the log starts with. `Log.open`
installs them; the running log (`samsa.storage.log`) shares only `replay_producer_state`, which
its truncation uses too."""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from samsa.protocol.records import BatchHeader
from samsa.storage.leader_epoch import LeaderEpochCache
from samsa.storage.producer_append import BatchInfo
from samsa.storage.producer_state import ProducerStateManager
from samsa.storage.segment import LogSegment
from samsa.storage.txn_index import AbortedTxn

logger = logging.getLogger(__name__)

TEMP_SUFFIXES = (".cleaned", ".deleted", ".tmp")
SWAP_SUFFIX = ".swap"

# Creates the segment object of `<base>.log<suffix>` in the log's directory with the log's
# index settings (a `LogSegment` given the log's directory and config).
NewSegment = Callable[[int, str], LogSegment]



@dataclass(slots=True)
class LoadedLog:
    """What loading found: the segments (sorted, never empty) and the log's starting state."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int  # the log end: whatever recovery scanned is flushed
    recovered_segments: int  # segments scanned by recovery
    recovery_truncated_bytes: int  # bytes recovery cut off (torn or corrupt tail)

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset


class LogLoader:
    """Loads one partition directory (once: `load`)."""

    def __init__(
        self,
        dir: Path,
        new_segment: NewSegment,
        producer_state: ProducerStateManager,
        leader_epoch_cache: LeaderEpochCache,
    ) -> None:
        self.dir = dir
        self._new_segment = new_segment
        self.producer_state = producer_state
        self.leader_epoch_cache = leader_epoch_cache

    def load(
        self,
        *,
        recover: bool,
        recovery_point: int,
        log_start_offset: int | None,
        now_ms: int | None,
    ) -> LoadedLog:
        """With recover (an unclean shutdown), the segments from the one holding
        `recovery_point` on are scanned and cut at the first invalid batch. `log_start_offset`
        is the checkpointed one (None: the first segment's base)."""
        names = self._file_names()
        if any(n.endswith((*TEMP_SUFFIXES, SWAP_SUFFIX)) for n in names):
            self._remove_temp_files(names)
            self._complete_swaps()
            names = self._file_names()
        return self._load_segments(names, recover, recovery_point, log_start_offset, now_ms)

    # -- leftovers of interrupted work ------------------------------------------------------------

    def _file_names(self) -> list[str]:
        # os.listdir, not Path.glob: start-up lists every partition dir (10,000s of them).
        return os.listdir(self.dir)

    def _remove_temp_files(self, names: list[str]) -> None:
        for name in names:
            if name.endswith(TEMP_SUFFIXES):
                f = self.dir / name
                if f.is_file():
                    f.unlink(missing_ok=True)

    def _complete_swaps(self) -> None:
        """A `.swap` segment is a finished cleaner output whose swap-in was interrupted:
        finish it (replace every segment it covers), as Kafka's LogLoader does."""
        if not any(name.endswith(SWAP_SUFFIX) for name in self._file_names()):
            return
        for swap in sorted(self.dir.glob(f"*.log{SWAP_SUFFIX}")):
            base = int(swap.name.split(".", 1)[0])
            seg = self._new_segment(base, SWAP_SUFFIX)
            seg.rebuild_indexes()
            end = seg.next_offset
            seg.close()
            for log_file in self.dir.glob("*.log"):
                b = int(log_file.name.split(".", 1)[0])
                if base <= b < end:
                    old = self._new_segment(b, "")
                    old.delete()
            seg = self._new_segment(base, SWAP_SUFFIX)
            seg.change_suffix("")
            seg.close()
        for f in self.dir.glob(f"*{SWAP_SUFFIX}"):
            f.unlink(missing_ok=True)  # index swap files whose log was already swapped in

    def _segment_files(self, names: list[str]) -> list[int]:
        bases = set()
        for name in names:
            if name.endswith(".log") and name[:-4].isdigit():
                bases.add(int(name[:-4]))
        # Orphaned index files (their .log is gone) are useless.
        for name in names:
            stem, _, ext = name.partition(".")
            if (ext in ("index", "timeindex", "txnindex") and stem.isdigit()
                    and int(stem) not in bases):
                (self.dir / name).unlink(missing_ok=True)
        return sorted(bases)

    # -- segments and recovery --------------------------------------------------------------------

    def _load_segments(self, names: list[str], recover: bool, recovery_point: int,
                       log_start_offset: int | None, now_ms: int | None) -> LoadedLog:
        bases = self._segment_files(names)
        recovery_base: int | None = None
        if recover and bases:
            i = bisect_right(bases, recovery_point) - 1
            recovery_base = bases[max(i, 0)]
        segments: list[LogSegment] = []
        recovered_segments = 0
        recovery_truncated_bytes = 0
        for n, base in enumerate(bases):
            seg = self._new_segment(base, "")
            if recovery_base is None or base < recovery_base:
                seg.load()
                segments.append(seg)
                continue
            truncated = seg.recover(on_batch=self._on_recovered_batch)
            recovered_segments += 1
            segments.append(seg)
            if truncated:
                # Everything after the first invalid batch is gone, later segments included.
                later_bytes = 0
                for later in bases[n + 1:]:
                    doomed = self._new_segment(later, "")
                    later_bytes += doomed.size
                    doomed.delete()
                recovery_truncated_bytes = truncated + later_bytes
                logger.warning(
                    "%s: recovery truncated %d bytes (segment %d cut at offset %d, %d later "
                    "segments deleted)", self.dir.name, recovery_truncated_bytes, base,
                    seg.next_offset, len(bases) - n - 1)
                break
        if not segments:
            segments.append(self._new_segment(log_start_offset or 0, ""))
        first_base = segments[0].base_offset
        loaded = LoadedLog(
            segments=segments,
            log_start_offset=max(log_start_offset or first_base, first_base),
            recovery_point=segments[-1].next_offset,
            recovered_segments=recovered_segments,
            recovery_truncated_bytes=recovery_truncated_bytes,
        )
        leo = loaded.log_end_offset
        self.leader_epoch_cache.truncate_from_end(leo)
        self.leader_epoch_cache.truncate_from_start(loaded.log_start_offset)
        if recovery_base is not None:
            for seg in segments:
                if seg.base_offset >= recovery_base:
                    seg.flush()
            self.leader_epoch_cache.flush()
        self._load_producer_state(loaded, recovery_base, now_ms)
        return loaded

    def _on_recovered_batch(self, pos: int, h: BatchHeader, data: memoryview) -> None:
        self.leader_epoch_cache.maybe_assign(h.partition_leader_epoch, h.base_offset, flush=False)

    # -- producer state ---------------------------------------------------------------------------

    def _load_producer_state(self, loaded: LoadedLog, rebuild_txn_from: int | None,
                             now_ms: int | None) -> None:
        psm = self.producer_state
        segments, start, leo = loaded.segments, loaded.log_start_offset, loaded.log_end_offset
        if rebuild_txn_from is not None:
            # Forget snapshots taken after the first recovered segment: they may describe data
            # that recovery just truncated, and the txn indexes are rebuilt from there.
            psm.truncate(start, rebuild_txn_from)
            for seg in segments:
                if seg.base_offset >= rebuild_txn_from:
                    seg.txn_index.reset()
        replay_from = max(psm.load(start, leo, now_ms), start)
        if replay_from < leo:
            replay_producer_state(psm, segments, replay_from, leo, rebuild_txn_from)
            psm.update_map_end_offset(leo)
            psm.take_snapshot(leo)
        elif psm.map_end_offset < leo:
            psm.update_map_end_offset(leo)
        psm.remove_stray_snapshots([s.base_offset for s in segments])


def replay_producer_state(psm: ProducerStateManager, segments: list[LogSegment], start: int,
                          end: int, rebuild_txn_from: int | None) -> None:
    """Feed the batches of `segments` (sorted) in [start, end) to the producer state (origin
    "replication"); with `rebuild_txn_from`, transactions aborted at or after it are appended
    to their segment's transaction index again. Loading and follower truncation use it."""
    bases = [s.base_offset for s in segments]
    for seg in segments[max(bisect_right(bases, start) - 1, 0):]:
        found = seg.translate_offset(start)
        if found is None:
            continue
        for _pos, h, data in seg.batches(found[0]):
            if h.base_offset >= end:
                return
            if h.last_offset < start or h.producer_id < 0:
                continue
            plan = psm.prepare_append([BatchInfo.of_batch(h, data, 0)], "replication")
            for txn in psm.apply(plan):
                if (txn.is_aborted and rebuild_txn_from is not None
                        and txn.last_offset >= rebuild_txn_from):
                    seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset,
                                                    txn.last_offset,
                                                    psm.last_stable_offset(txn)))


__all__ = [
    "SWAP_SUFFIX",
    "TEMP_SUFFIXES",
    "LoadedLog",
    "LogLoader",
    "NewSegment",
    "replay_producer_state",
]
