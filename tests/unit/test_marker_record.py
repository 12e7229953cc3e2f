"""A transaction marker's control record, read from fixed places when it is laid out as this
broker writes it (storage/producer_append.py's control_record): the same answer as decoding
it, and the decoding for any other layout."""

from __future__ import annotations

import struct

import pytest

from samsa.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    build_batch,
    build_control_batch,
    parse_control_record,
)
from samsa.storage import producer_append
from samsa.storage.producer_append import BatchInfo, control_record


@pytest.mark.parametrize("commit", [True, False])
@pytest.mark.parametrize("coordinator_epoch", [0, 7, -1, 2**31 - 1, -(2**31)])
def test_a_marker_is_read_as_decoding_reads_it(commit: bool, coordinator_epoch: int) -> None:
    batch = build_control_batch(42, 3, commit, coordinator_epoch, 1_700_000_000_000,
                                base_offset=1000, partition_leader_epoch=5)
    h = BatchHeader.parse(batch)
    want = (CONTROL_COMMIT if commit else CONTROL_ABORT, coordinator_epoch)
    assert parse_control_record(batch, 0, h) == want
    assert control_record(batch, 0, h) == want
    assert control_record(memoryview(batch), 0, h) == want  # as a segment read hands it
    info = BatchInfo.of_batch(h, batch, 0)
    assert (info.control_commit, info.coordinator_epoch) == (commit, coordinator_epoch)


def test_a_marker_after_other_batches_is_read_at_its_position() -> None:
    first = build_batch([(b"k", b"v")], producer_id=42, producer_epoch=3, base_sequence=0,
                        transactional=True)
    marker = build_control_batch(42, 3, False, 9, 1_700_000_000_000, base_offset=1)
    buf = first + marker
    h = BatchHeader.parse(buf, len(first))
    assert control_record(buf, len(first), h) == (CONTROL_ABORT, 9)


def test_a_marker_is_not_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixed-place read is what a marker takes: the decoding (a record object, varints)
    costs ten times as much, once per partition of every transaction."""
    def decoded(*_: object) -> tuple[int, int]:
        raise AssertionError("a marker laid out as written here was decoded")

    monkeypatch.setattr(producer_append, "parse_control_record", decoded)
    batch = build_control_batch(1, 0, True, 4, 1_700_000_000_000)
    assert control_record(batch, 0, BatchHeader.parse(batch)) == (CONTROL_COMMIT, 4)


@pytest.mark.parametrize("records", [
    # a header on the record
    [(struct.pack(">hh", 0, CONTROL_COMMIT), struct.pack(">hi", 0, 6), [("h", b"x")])],
    # a value of another version, longer
    [(struct.pack(">hh", 0, CONTROL_COMMIT), struct.pack(">hih", 1, 6, 0))],
    # a control type that is not a marker's
    [(struct.pack(">hh", 0, 5), struct.pack(">hi", 0, 6))],
])
def test_other_control_records_are_decoded(records: list[tuple[bytes, bytes]]) -> None:
    batch = build_batch(records, producer_id=1, producer_epoch=0, transactional=True,
                        control=True)
    h = BatchHeader.parse(batch)
    assert control_record(batch, 0, h) == parse_control_record(batch, 0, h)
