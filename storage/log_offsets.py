"""The three offsets of a log that are not the log end, each with one writer keeping its
invariants (Kafka's UnifiedLog/LocalLog fields and their update methods):

- the high watermark (`update_high_watermark`: log start <= HW <= log end);
- the log start offset (`set_log_start_offset`; `advance_log_start_offset` for an advance,
  which also trims the epoch cache and the producer state);
- the recovery point (`set_recovery_point`: log start <= recovery point <= log end).

Their callers are the `Log` and its parts (retention, truncation, flush); readers outside the
storage layer read them through the `Log`."""

from __future__ import annotations

from samsa.storage.leader_epoch import LeaderEpochCache
from samsa.storage.producer_state import ProducerStateManager


class LogOffsets:
    """The offsets are plain attributes, read on every fetch and produce (a property each was
    a function call more there); only the methods below write them."""

    __slots__ = ("_leader_epoch_cache", "_producer_state", "high_watermark", "log_start_offset",
                 "recovery_point")

    def __init__(self, producer_state: ProducerStateManager,
                 leader_epoch_cache: LeaderEpochCache) -> None:
        self._producer_state = producer_state
        self._leader_epoch_cache = leader_epoch_cache
        self.log_start_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0  # offsets below it are flushed

    def update_high_watermark(self, offset: int, log_end_offset: int) -> int:
        """The one writer of the HW; returns the value set. It is kept within [log start,
        log end] (never beyond the log end, even when the log start is: a checkpointed start
        above what recovery kept). The producer state learns every value (it forgets the
        unreplicated appends below it); the LSO is derived from both, so nothing else changes
        here."""
        hw = min(max(offset, self.log_start_offset), log_end_offset)
        self.high_watermark = hw
        self._producer_state.on_high_watermark(hw)
        return hw

    def set_log_start_offset(self, offset: int) -> None:
        """The one writer of the log start offset. Callers keep it at or below the HW when
        moving it up (retention and DeleteRecords never pass the HW) and lower it only with
        a truncation below it; an advance goes through `advance_log_start_offset`."""
        self.log_start_offset = offset

    def advance_log_start_offset(self, offset: int) -> None:
        """Advance the log start offset (DeleteRecords, retention): the epoch cache and the
        producer state forget what lies below it, and the recovery point is not left below
        it (nothing below the log start needs recovering)."""
        if offset <= self.log_start_offset:
            return
        self.set_log_start_offset(offset)
        self._leader_epoch_cache.truncate_from_start(offset)
        self._producer_state.on_log_start_offset_incremented(offset)
        self.set_recovery_point(max(self.recovery_point, offset))

    def set_recovery_point(self, offset: int) -> None:
        """The one writer of the recovery point: the log end after loading; up with a flush
        (to at most the log end) or an advance of the log start (to at most the HW); down with
        a truncation (to the new log end)."""
        self.recovery_point = offset


__all__ = ["LogOffsets"]
