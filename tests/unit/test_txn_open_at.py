"""The producer state's txn_open_at (what produce verification asks of each partition of a
transactional Produce) says what the producer's entry view says: a transaction open here at
that epoch."""

from __future__ import annotations

from pathlib import Path

from samsa.protocol.records import build_batch, build_control_batch
from samsa.storage.config import LogConfig
from samsa.storage.log import Log


def _as_the_view_says(log: Log, pid: int, epoch: int) -> bool:
    entry = log.producer_state.last_entry(pid)
    return (entry is not None and entry.current_txn_start_offset >= 0
            and entry.producer_epoch == epoch)


def test_txn_open_at_as_the_entry_view(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), recover=False)
    asked = [(7, 0), (7, 1), (8, 0)]

    def check(expected: list[bool]) -> None:
        got = [log.producer_state.txn_open_at(pid, epoch) for pid, epoch in asked]
        assert got == [_as_the_view_says(log, pid, epoch) for pid, epoch in asked] == expected

    check([False, False, False])  # no producer
    log.append_as_leader(build_batch([(b"k", b"v")], producer_id=7, producer_epoch=0,
                                     base_sequence=0), 0)
    check([False, False, False])  # idempotent, no transaction
    log.append_as_leader(build_batch([(b"k", b"v")], producer_id=7, producer_epoch=0,
                                     base_sequence=1, transactional=True), 0)
    check([True, False, False])  # open at epoch 0
    log.append_as_leader(build_control_batch(7, 0, True, 0, 5), 0, origin="coordinator")
    check([False, False, False])  # committed
    log.append_as_leader(build_batch([(b"k", b"v")], producer_id=7, producer_epoch=1,
                                     base_sequence=0, transactional=True), 0)
    check([False, True, False])  # open at the next epoch
    log.close()
