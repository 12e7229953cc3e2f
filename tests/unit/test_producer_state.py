from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.storage.errors import (
    InvalidProducerEpoch,
    InvalidRecord,
    InvalidTxnState,
    OutOfOrderSequence,
    TransactionCoordinatorFenced,
)
from samsa.storage.producer_append import BatchInfo, CompletedTxn
from samsa.storage.producer_entry import BatchMetadata, ProducerEntry, ProducerStateEntry
from samsa.storage.producer_snapshot import SNAPSHOT_ENTRY_SIZE, decode_snapshot, encode_snapshot
from samsa.storage.producer_state import ProducerStateManager

NOW = 1_700_000_000_000


class Log:
    """A tiny stand-in for storage/log.py: assigns offsets and drives the manager."""

    def __init__(self, psm: ProducerStateManager, next_offset: int = 0) -> None:
        self.psm = psm
        self.next_offset = next_offset
        self.batches: list[BatchInfo] = []

    def data(
        self, pid: int, epoch: int, seq: int, n: int = 1, txn: bool = False,
        origin: str = "client", ts: int = NOW,
    ) -> tuple[BatchInfo, list[CompletedTxn]]:
        last_seq = seq + n - 1 if seq >= 0 else -1
        b = BatchInfo(pid, epoch, seq, last_seq, self.next_offset, self.next_offset + n - 1,
                      ts, txn, False)
        return b, self._append(b, origin)

    def marker(
        self, pid: int, epoch: int, commit: bool, coord_epoch: int = 0,
        origin: str = "coordinator",
    ) -> tuple[BatchInfo, list[CompletedTxn]]:
        b = BatchInfo(pid, epoch, -1, -1, self.next_offset, self.next_offset, NOW, True, True,
                      control_commit=commit, coordinator_epoch=coord_epoch)
        return b, self._append(b, origin)

    def _append(self, b: BatchInfo, origin: str) -> list[CompletedTxn]:
        plan = self.psm.prepare_append([b], origin)
        done = self.psm.apply(plan)
        self.next_offset = b.last_offset + 1
        self.batches.append(b)
        return done


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path)


def test_duplicate_returns_original_offsets(psm: ProducerStateManager) -> None:
    log = Log(psm)
    first, _ = log.data(7, 0, 0, n=3, ts=NOW + 1)
    log.data(7, 0, 3, n=2)
    retry = BatchInfo(7, 0, 0, 2, 100, 102, NOW + 5, False, False)
    assert psm.find_duplicate(retry) == (first.first_offset, first.last_offset, NOW + 1)
    # Same range at another epoch, or a different range, is not a duplicate.
    assert psm.find_duplicate(BatchInfo(7, 1, 0, 2, 100, 102, NOW, False, False)) is None
    assert psm.find_duplicate(BatchInfo(7, 0, 0, 1, 100, 101, NOW, False, False)) is None
    assert psm.find_duplicate(BatchInfo(-1, -1, -1, -1, 0, 0, NOW, False, False)) is None


def test_only_last_five_batches_are_retained(psm: ProducerStateManager) -> None:
    log = Log(psm)
    for i in range(6):
        log.data(1, 0, i)
    assert psm.find_duplicate(BatchInfo(1, 0, 0, 0, 50, 50, NOW, False, False)) is None
    assert psm.find_duplicate(BatchInfo(1, 0, 1, 1, 50, 50, NOW, False, False)) == (1, 1, NOW)


def test_out_of_order_sequence(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 0, 0, n=5)
    with pytest.raises(OutOfOrderSequence):
        psm.prepare_append([BatchInfo(1, 0, 6, 6, 5, 5, NOW, False, False)], "client")
    with pytest.raises(OutOfOrderSequence):
        psm.prepare_append([BatchInfo(1, 0, 4, 4, 5, 5, NOW, False, False)], "client")
    # Replication does not check sequences.
    psm.prepare_append([BatchInfo(1, 0, 9, 9, 5, 5, NOW, False, False)], "replication")
    log.data(1, 0, 5)


def test_multiple_batches_in_one_append_are_checked_in_order(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 0, 0)
    ok = [BatchInfo(1, 0, 1, 1, 1, 1, NOW, False, False),
          BatchInfo(1, 0, 2, 3, 2, 3, NOW, False, False)]
    psm.prepare_append(ok, "client")
    bad = [ok[0], BatchInfo(1, 0, 3, 3, 2, 2, NOW, False, False)]
    with pytest.raises(OutOfOrderSequence):
        psm.prepare_append(bad, "client")


def test_sequence_wraps_at_int32_max(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 0, 2**31 - 1)
    log.data(1, 0, 0)


def test_unknown_producer_accepts_any_sequence(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 3, 42)
    assert psm.active_producers()[0].last_sequence == 42


def test_epoch_bump_requires_sequence_zero(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 0, 0, n=3)
    with pytest.raises(OutOfOrderSequence):
        psm.prepare_append([BatchInfo(1, 1, 3, 3, 3, 3, NOW, False, False)], "client")
    log.data(1, 1, 0)
    # The bump cleared the retained batches of the old epoch.
    assert psm.find_duplicate(BatchInfo(1, 0, 0, 2, 9, 11, NOW, False, False)) is None
    assert psm.active_producers()[0].producer_epoch == 1


def test_lower_epoch_is_fenced(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 5, 0)
    with pytest.raises(InvalidProducerEpoch):
        psm.prepare_append([BatchInfo(1, 4, 1, 1, 1, 1, NOW, False, False)], "client")
    # Replication only logs.
    psm.prepare_append([BatchInfo(1, 4, 1, 1, 1, 1, NOW, False, False)], "replication")


def test_prepare_mutates_nothing(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 0, 0)
    before = psm.active_producers()
    psm.prepare_append([BatchInfo(1, 1, 0, 0, 1, 1, NOW, True, False)], "client")
    assert psm.active_producers() == before
    assert psm.first_unstable_offset() is None


def test_prepare_of_next_batch_mutates_nothing(psm: ProducerStateManager) -> None:
    # The next batch of a known producer is planned without a copy of its entry.
    log = Log(psm)
    log.data(1, 0, 0)
    before = psm.active_producers()
    plan = psm.prepare_append([BatchInfo(1, 0, 1, 1, 1, 1, NOW + 9, False, False)], "client")
    assert psm.active_producers() == before
    assert psm.find_duplicate(BatchInfo(1, 0, 1, 1, 1, 1, NOW, False, False)) is None
    psm.apply(plan)
    assert psm.last_entry(1) == ProducerEntry(1, 0, 1, NOW + 9, -1, -1, 1)


def test_stale_plan_is_rejected(psm: ProducerStateManager) -> None:
    log = Log(psm)
    plan = psm.prepare_append([BatchInfo(1, 0, 0, 0, 0, 0, NOW, False, False)], "client")
    log.data(2, 0, 0)
    with pytest.raises(RuntimeError):
        psm.apply(plan)


def test_non_transactional_write_during_open_txn(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 0, 0, txn=True)
    with pytest.raises(InvalidTxnState):
        psm.prepare_append([BatchInfo(1, 0, 1, 1, 1, 1, NOW, False, False)], "client")


def test_marker_completes_transaction(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 0, 0, n=2, txn=True)
    log.data(1, 0, 2, txn=True)
    assert psm.active_producers()[0].current_txn_start_offset == 0
    _, done = log.marker(1, 0, commit=False, coord_epoch=3)
    assert done == [CompletedTxn(1, 0, 3, is_aborted=True)]
    entry = psm.active_producers()[0]
    assert entry.current_txn_start_offset == -1
    assert entry.coordinator_epoch == 3
    # A marker with no open transaction completes nothing; the next txn starts fresh.
    _, done = log.marker(1, 0, commit=True, coord_epoch=3)
    assert done == []
    log.data(1, 0, 3, txn=True)
    _, done = log.marker(1, 0, commit=True, coord_epoch=3)
    assert done == [CompletedTxn(1, 5, 6, is_aborted=False)]
    # Non-transactional writes are fine again after the marker.
    log.data(1, 0, 4)


def test_marker_fencing(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 2, 0, txn=True)
    log.marker(1, 2, commit=True, coord_epoch=5)
    stale_epoch = BatchInfo(1, 1, -1, -1, 9, 9, NOW, True, True, True, 5)
    with pytest.raises(InvalidProducerEpoch):
        psm.prepare_append([stale_epoch], "coordinator")
    stale_coord = BatchInfo(1, 2, -1, -1, 9, 9, NOW, True, True, True, 4)
    with pytest.raises(TransactionCoordinatorFenced):
        psm.prepare_append([stale_coord], "coordinator")
    psm.prepare_append([stale_coord], "replication")
    with pytest.raises(InvalidRecord):
        psm.prepare_append([stale_coord], "client")


def test_marker_with_bumped_epoch_clears_batches(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 0, 0, txn=True)
    log.marker(1, 1, commit=False)
    assert psm.find_duplicate(BatchInfo(1, 0, 0, 0, 9, 9, NOW, True, False)) is None
    log.data(1, 1, 0, txn=True)


def test_unstable_offsets_with_interleaved_producers(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(9, 0, 0)  # offset 0: plain idempotent
    log.data(1, 0, 0, txn=True)  # offset 1: txn A opens
    log.data(2, 0, 0, txn=True)  # offset 2: txn B opens
    log.data(1, 0, 1, txn=True)  # offset 3
    assert psm.first_unstable_offset() == 1
    _, done = log.marker(1, 0, commit=False)  # offset 4: A aborted
    (a,) = done
    assert a == CompletedTxn(1, 1, 4, True)
    assert psm.last_stable_offset(a) == 2  # B is still open
    # A is decided but its marker is not below the HW yet.
    assert psm.first_unstable_offset() == 1
    psm.on_high_watermark(5)
    assert psm.first_unstable_offset() == 2
    _, (b,) = log.marker(2, 0, commit=True)  # offset 5
    assert psm.last_stable_offset(b) == 6
    assert psm.first_unstable_offset() == 2
    psm.on_high_watermark(5)  # marker at 5 is not below 5
    assert psm.first_unstable_offset() == 2
    psm.on_high_watermark(6)
    assert psm.first_unstable_offset() is None


def test_lso_of_markers_completed_in_one_append(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(1, 0, 0, txn=True)  # 0
    log.data(2, 0, 0, txn=True)  # 1
    ma = BatchInfo(1, 0, -1, -1, 2, 2, NOW, True, True, False, 0)
    mb = BatchInfo(2, 0, -1, -1, 3, 3, NOW, True, True, False, 0)
    a, b = psm.apply(psm.prepare_append([ma, mb], "replication"))
    # As in Kafka, each LSO is taken just before that transaction completes.
    assert psm.last_stable_offset(a) == 1
    assert psm.last_stable_offset(b) == 4


def _snapshot_files(d: Path) -> list[Path]:
    return sorted(d.glob("*.snapshot"))


def test_snapshot_byte_format_and_round_trip(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    log = Log(psm)
    log.data(5, 1, 10, n=3, ts=NOW + 7)  # offsets 0..2
    log.data(5, 1, 13, n=2, ts=NOW + 8)  # offsets 3..4, the one persisted
    log.data(6, 0, 0, txn=True, ts=NOW + 9)  # offset 5, open txn
    log.data(-1, -1, -1)  # offset 6, plain write
    assert psm.map_end_offset == 7
    psm.take_snapshot(7)
    (path,) = _snapshot_files(tmp_path)
    assert path.name == "00000000000000000007.snapshot"
    raw = path.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", raw)
    assert (version, count) == (1, 2)
    assert SNAPSHOT_ENTRY_SIZE == 46 and len(raw) == 10 + 2 * 46
    assert crc == crc32c.crc32c(raw[6:])
    e5 = struct.unpack_from(">qhiqiqiq", raw, 10)
    e6 = struct.unpack_from(">qhiqiqiq", raw, 10 + 46)
    assert e5 == (5, 1, 14, 4, 1, NOW + 8, -1, -1)
    assert e6 == (6, 0, 0, 5, 0, NOW + 9, -1, 5)

    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 7, now_ms=NOW) == 7
    assert fresh.map_end_offset == 7
    def key(e: ProducerEntry) -> int:
        return e.producer_id

    assert sorted(fresh.active_producers(), key=key) == sorted(psm.active_producers(), key=key)
    assert fresh.first_unstable_offset() == 5
    # Only the last batch survives a restart.
    assert fresh.find_duplicate(BatchInfo(5, 1, 13, 14, 9, 10, NOW, False, False)) == (
        3, 4, NOW + 8)
    assert fresh.find_duplicate(BatchInfo(5, 1, 10, 12, 9, 11, NOW, False, False)) is None
    with pytest.raises(OutOfOrderSequence):
        fresh.prepare_append([BatchInfo(5, 1, 16, 16, 7, 7, NOW, False, False)], "client")
    fresh.prepare_append([BatchInfo(5, 1, 15, 15, 7, 7, NOW, False, False)], "client")


def test_snapshot_is_written_whole_by_short_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write() may write less than it is given (a signal, a nearly full disk): the snapshot
    is written whole all the same, and a restart finds the producers in it."""
    psm = ProducerStateManager(tmp_path)
    log = Log(psm)
    log.data(5, 1, 10, n=3, ts=NOW + 7)
    log.data(6, 0, 0, n=2, ts=NOW + 8)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:7])))
    psm.take_snapshot(5)
    monkeypatch.undo()
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 5, now_ms=NOW) == 5
    assert (sorted(e.producer_id for e in fresh.active_producers())
            == sorted(e.producer_id for e in psm.active_producers()) == [5, 6])


def test_corrupt_and_newer_snapshots_are_deleted(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    log = Log(psm)
    log.data(1, 0, 0)
    psm.take_snapshot(1)
    log.data(1, 0, 1)
    psm.take_snapshot(2)
    log.data(1, 0, 2)
    psm.take_snapshot(3)
    # Flip a byte in the snapshot at 2; the one at 3 is beyond the (truncated) log end.
    p2 = tmp_path / "00000000000000000002.snapshot"
    raw = bytearray(p2.read_bytes())
    raw[-1] ^= 0xFF
    p2.write_bytes(bytes(raw))
    (tmp_path / "00000000000000000009.snapshot.tmp").write_bytes(b"junk")

    fresh = ProducerStateManager(tmp_path)
    assert fresh.load(0, 2, now_ms=NOW) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000001.snapshot"]
    assert fresh.active_producers()[0].last_sequence == 0


def test_load_without_snapshot_replays_from_log_start(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    assert psm.load(4, 10) == 4
    assert psm.active_producers() == []


def test_replay_after_snapshot_rebuilds_state(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    log = Log(psm)
    log.data(1, 0, 0, txn=True)
    psm.take_snapshot(1)
    log.data(1, 0, 1, txn=True)
    log.marker(1, 0, commit=False)

    fresh = ProducerStateManager(tmp_path)
    start = fresh.load(0, log.next_offset, now_ms=NOW)
    for b in log.batches:
        if b.first_offset >= start:
            fresh.apply(fresh.prepare_append([b], "replication"))
    assert fresh.active_producers() == psm.active_producers()
    assert fresh.first_unstable_offset() == 0  # completed but not yet below the HW
    fresh.on_high_watermark(log.next_offset)
    assert fresh.first_unstable_offset() is None


def test_truncate_reloads_from_older_snapshot(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    log = Log(psm)
    log.data(1, 0, 0)
    psm.take_snapshot(1)
    log.data(1, 0, 1)
    psm.take_snapshot(2)
    psm.truncate(0, 1, now_ms=NOW)
    assert [p.name for p in _snapshot_files(tmp_path)] == ["00000000000000000001.snapshot"]
    assert psm.map_end_offset == 1
    assert psm.active_producers()[0].last_sequence == 0


def test_truncate_start_only_keeps_memory_state(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    log = Log(psm)
    log.data(1, 0, 0)
    psm.take_snapshot(1)
    log.data(1, 0, 1)
    psm.truncate(1, 2, now_ms=NOW)  # segments below 1 deleted; log end unchanged
    assert _snapshot_files(tmp_path) == []
    assert psm.active_producers()[0].last_sequence == 1


def test_delete_snapshots_below(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    log = Log(psm)
    for i in range(3):
        log.data(1, 0, i)
        psm.take_snapshot(i + 1)
    psm.delete_snapshots_below(3)
    assert [p.name for p in _snapshot_files(tmp_path)] == ["00000000000000000003.snapshot"]


def test_remove_stray_snapshots(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    for o in (0, 5, 7, 10, 12):
        psm.take_snapshot(o)
    psm.remove_stray_snapshots([0, 10])
    assert psm.snapshot_offsets() == [0, 10, 12]


def test_expiration_skips_open_transactions(psm: ProducerStateManager) -> None:
    log = Log(psm)
    day = psm.producer_id_expiration_ms
    log.data(1, 0, 0, ts=NOW)
    log.data(2, 0, 0, ts=NOW, txn=True)
    log.data(3, 0, 0, ts=NOW + 1000)
    psm.remove_expired(NOW + day - 1)
    assert len(psm.active_producers()) == 3
    psm.remove_expired(NOW + day)
    assert sorted(p.producer_id for p in psm.active_producers()) == [2, 3]
    # Once expired, the producer may resume with any sequence.
    log.data(1, 0, 17)


def test_expired_producers_are_not_loaded(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    log = Log(psm)
    log.data(1, 0, 0, ts=NOW)
    psm.take_snapshot(1)
    fresh = ProducerStateManager(tmp_path, producer_id_expiration_ms=1000)
    fresh.load(0, 1, now_ms=NOW + 1000)
    assert fresh.active_producers() == []


def test_plain_batches_advance_map_end_only(psm: ProducerStateManager) -> None:
    log = Log(psm)
    log.data(-1, -1, -1, n=4)
    assert psm.map_end_offset == 4
    assert psm.active_producers() == []


_i64 = st.integers(-(2**63), 2**63 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)


@given(st.lists(st.tuples(
    st.integers(0, 2**63 - 1), st.integers(-1, 2**15 - 1), st.integers(0, 2**31 - 1),
    st.integers(-1, 2**62), st.integers(0, 10_000), _i64, _i32, st.integers(-1, 2**62),
), unique_by=lambda t: t[0], max_size=20))
def test_snapshot_codec_round_trip(rows: list[tuple[int, ...]]) -> None:
    entries = []
    for pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first in rows:
        e = ProducerStateEntry(pid, epoch, coord, ts, txn_first if txn_first >= 0 else None)
        if last_offset >= 0:
            e.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
        entries.append(e)
    raw = encode_snapshot(entries)
    assert len(raw) == 10 + SNAPSHOT_ENTRY_SIZE * len(entries)
    assert [e.view() for e in decode_snapshot(raw)] == [e.view() for e in entries]


# One append: (producer id, epoch, base sequence, records, transactional, origin, marker).
_append_steps = st.lists(st.tuples(
    st.sampled_from([-1, 1, 2]), st.integers(-1, 2), st.integers(-1, 12), st.integers(1, 3),
    st.booleans(), st.sampled_from(["client", "replication", "coordinator"]),
    st.sampled_from([None, True, False]),
), max_size=40)


def _outcome(psm: ProducerStateManager, step: tuple, offset: int) -> tuple[object, int]:
    pid, epoch, seq, n, txn, origin, marker = step
    if marker is not None:
        b = BatchInfo(pid, epoch, -1, -1, offset, offset, NOW + offset, True, True, marker, 0)
    else:
        last_seq = seq + n - 1 if seq >= 0 else -1
        b = BatchInfo(pid, epoch, seq, last_seq, offset, offset + n - 1, NOW + offset, txn,
                      False)
    try:
        done = psm.apply(psm.prepare_append([b], origin))
    except Exception as exc:  # noqa: BLE001  (the outcome compared is the error's type)
        return type(exc).__name__, offset
    return done, b.last_offset + 1


@settings(max_examples=300)
@given(_append_steps)
def test_next_batch_plan_agrees_with_the_validator(tmp_path_factory: pytest.TempPathFactory,
                                                    steps: list[tuple]) -> None:
    """The one-batch plan without a copy accepts, rejects and records what the validator does."""
    fast = ProducerStateManager(tmp_path_factory.mktemp("fast"))
    full = ProducerStateManager(tmp_path_factory.mktemp("full"))
    full._prepare_next_batch = lambda b, origin: None  # type: ignore[method-assign]
    fast_offset = full_offset = 0
    for step in steps:
        fast_done, fast_offset = _outcome(fast, step, fast_offset)
        full_done, full_offset = _outcome(full, step, full_offset)
        assert fast_done == full_done, step
        assert fast.active_producers() == full.active_producers(), step
        assert fast.first_unstable_offset() == full.first_unstable_offset()
        assert fast.map_end_offset == full.map_end_offset
        for pid in (1, 2):  # the retained batches, as a retry sees them
            for seq in range(-1, 14):
                retry = BatchInfo(pid, step[1], seq, seq + step[3] - 1, 0, 0, NOW, False, False)
                assert fast.find_duplicate(retry) == full.find_duplicate(retry)
