"""A coordinator's one-batch append (storage/log.py's _append_coordinator_batch: a
transaction's markers, one per partition it wrote, and the coordinators' own records) does
what the general append does: the same bytes, answers and refusals, producer state, last
stable offset and transaction index, whichever way each batch goes: a marker recorded without
a plan (the producer state's marker_entry and append_marker), with _prepare_marker's plan, or
through AppendValidator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samsa.protocol.records import build_batch, build_control_batch
from samsa.storage import producer_state
from samsa.storage.config import LogConfig
from samsa.storage.log import Log
from samsa.storage.producer_state import ProducerStateManager


def data(pid: int, epoch: int, seq: int, n: int = 1, transactional: bool = True) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * 20, [], 1000 + i) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=transactional)


def state(n: int = 1) -> bytes:
    """A coordinator's own records (no producer id)."""
    return build_batch([(b"txn-%d" % i, b"s" * 30, [], 1500 + i) for i in range(n)])


def marker(pid: int, epoch: int, commit: bool, coordinator_epoch: int = 3) -> bytes:
    return build_control_batch(pid, epoch, commit, coordinator_epoch, 2000)


# (records, origin, transaction version of a marker)
SCENARIO: list[tuple[bytes, str, int]] = [
    (state(), "coordinator", 0),
    (data(7, 0, 0, 2), "client", 0),
    (data(9, 0, 0, transactional=False), "client", 0),
    (state(3), "coordinator", 0),
    (data(12, 0, 0), "coordinator", 0),                          # a group's pending offsets
    (marker(7, 0, commit=False), "coordinator", 0),              # aborted: the txn index
    (data(8, 0, 0), "client", 0),                                 # 8's stays open
    (marker(12, 0, commit=True), "coordinator", 0),              # the group's committed
    (data(7, 0, 2), "client", 0),
    (marker(7, 0, commit=True), "coordinator", 0),               # LSO held by 8's
    (marker(7, 0, commit=True, coordinator_epoch=2), "coordinator", 0),  # fenced coordinator
    (marker(8, 0, commit=True), "coordinator", 0),               # 8's committed
    (data(8, 0, 1), "client", 0),
    (marker(8, 0, commit=False), "coordinator", 2),               # TV2: the open txn's epoch
    (marker(8, 1, commit=False), "coordinator", 2),               # TV2: bumped, aborted
    (data(7, 1, 0), "client", 0),
    (data(8, 1, 0), "client", 0),
    (marker(8, 1, commit=False), "coordinator", 0),              # aborted, LSO held by 7's
    (marker(7, 0, commit=True), "coordinator", 0),               # an older producer epoch
    (marker(11, 0, commit=True), "coordinator", 0),              # an unknown producer
    (marker(7, 1, commit=True), "coordinator", 0),
    (marker(7, 1, commit=True), "coordinator", 0),               # nothing open: empty
]


def run(tmp_path: Path, name: str) -> dict[str, Any]:
    log = Log.open(tmp_path / f"{name}-0", LogConfig(segment_bytes=600), recover=False)
    answers: list[Any] = []
    for records, origin, version in SCENARIO:
        try:
            info = log.append_as_leader(records, 4, origin=origin, now_ms=5000,
                                        transaction_version=version)
            answers.append((info.first_offset, info.last_offset, info.record_count,
                            info.max_timestamp, info.log_start_offset))
        except Exception as exc:  # the refusal's kind is what is compared
            answers.append(type(exc).__name__)
        log.update_high_watermark(log.log_end_offset)
        answers.append((log.last_stable_offset, log.producer_state.map_end_offset))
    read, offset = [], 0
    while offset < log.log_end_offset:
        chunk = bytes(log.read(offset, 1 << 20).records)
        read.append(chunk)
        offset = log.log_end_offset
    out = {
        "answers": answers,
        "bytes": b"".join(read),
        "producers": sorted(log.producer_state.active_producers(), key=lambda e: e.producer_id),
        "aborted": log.collect_aborted_transactions(0, log.log_end_offset),
        "segments": len(log.segments),
    }
    log.close()
    return out


def test_markers_appended_as_the_general_path_appends_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded: list[int] = []
    append_marker = ProducerStateManager.append_marker

    def record(psm: ProducerStateManager, e: Any, h: Any, *args: Any) -> Any:
        recorded.append(h.producer_id)
        return append_marker(psm, e, h, *args)

    monkeypatch.setattr(ProducerStateManager, "append_marker", record)
    plan_free = run(tmp_path, "plan-free")
    monkeypatch.setattr(ProducerStateManager, "marker_entry", lambda *_: None)
    planned = run(tmp_path, "planned")
    monkeypatch.setattr(Log, "_append_coordinator_batch", lambda *_: None)
    monkeypatch.setattr(ProducerStateManager, "_prepare_marker", lambda *_: None)
    general = run(tmp_path, "general")
    assert plan_free == planned == general
    # what the scenario is meant to reach: every marker its producer takes as it stands went
    # without a plan, the others were refused or checked by the general path
    assert recorded == [7, 12, 7, 8, 8, 8, 7, 7]
    assert [a for a in plan_free["answers"] if isinstance(a, str)] == [
        "TransactionCoordinatorFenced", "InvalidProducerEpoch", "InvalidProducerEpoch"]
    assert [(a.producer_id, a.first_offset, a.last_stable_offset)
            for a in plan_free["aborted"]] == [(7, 1, 7), (8, 14, 16), (8, 17, 16)]
    assert plan_free["segments"] > 1


def test_a_marker_takes_neither_the_general_checks_nor_a_plan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), recover=False)
    log.append_as_leader(data(7, 0, 0, 2), 0)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0

    def general(*_: object, **__: object) -> None:
        raise AssertionError("the marker took the general path")

    monkeypatch.setattr(log._validator, "analyze", general)
    monkeypatch.setattr(producer_state, "AppendValidator", general)
    monkeypatch.setattr(ProducerStateManager, "prepare_append", general)
    info = log.append_as_leader(marker(7, 0, commit=False), 0, origin="coordinator")
    assert (info.first_offset, info.last_offset) == (2, 2)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3
    assert [(a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset)
            for a in log.collect_aborted_transactions(0, 3)] == [(7, 0, 2, 3)]
    log.close()
