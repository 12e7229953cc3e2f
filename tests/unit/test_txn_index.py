from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from samsa.storage import txn_index
from samsa.storage.txn_index import AbortedTxn, CorruptIndex, TransactionIndex


def _index(tmp_path: Path, base: int = 0) -> TransactionIndex:
    return TransactionIndex(tmp_path / f"{base:020d}.txnindex")


def test_created_lazily_and_byte_format(tmp_path: Path) -> None:
    idx = _index(tmp_path)
    assert not idx.path.exists()
    assert idx.all_entries() == []
    idx.append(AbortedTxn(7, 10, 15, 12))
    idx.flush()
    raw = idx.path.read_bytes()
    assert raw == struct.pack(">hqqqq", 0, 7, 10, 15, 12)
    assert len(raw) == 34
    idx.close()


def test_last_offset_must_increase(tmp_path: Path) -> None:
    idx = _index(tmp_path)
    idx.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(2, 1, 5, 6))
    idx.close()
    # The check survives a reopen.
    reopened = _index(tmp_path)
    with pytest.raises(ValueError):
        reopened.append(AbortedTxn(2, 1, 4, 6))
    reopened.append(AbortedTxn(2, 1, 6, 7))
    assert [t.last_offset for t in reopened.all_entries()] == [5, 6]
    reopened.close()


def test_collect_aborted(tmp_path: Path) -> None:
    idx = _index(tmp_path)
    a = AbortedTxn(1, 0, 10, 5)  # another txn still open from 5 when this aborted
    b = AbortedTxn(2, 5, 20, 21)
    c = AbortedTxn(3, 25, 30, 31)
    for t in (a, b, c):
        idx.append(t)
    # [12, 22): a ended before 12; b overlaps; c starts after, and its LSO ends the scan.
    assert idx.collect_aborted(12, 22) == ([b], True)
    # [0, 8): a and b overlap; a's LSO (5) < 8, b's LSO (21) >= 8 so the scan stops there.
    assert idx.collect_aborted(0, 8) == ([a, b], True)
    assert idx.collect_aborted(31, 40) == ([], False)
    assert idx.collect_aborted(0, 100) == ([a, b, c], False)
    idx.close()


def test_truncate_to(tmp_path: Path) -> None:
    idx = _index(tmp_path)
    for i in range(1, 4):
        idx.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    idx.truncate_to(25)  # drops the entry ending at 25 and everything after
    assert [t.last_offset for t in idx.all_entries()] == [15]
    assert idx.path.stat().st_size == 34
    idx.append(AbortedTxn(9, 18, 19, 20))  # the last offset went back to 15
    idx.truncate_to(100)
    assert len(idx.all_entries()) == 2
    idx.reset()
    assert idx.all_entries() == []
    idx.append(AbortedTxn(1, 0, 1, 2))
    idx.delete()
    assert not idx.path.exists()


def test_appends_land_where_the_file_ends_without_asking_it_each_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An abort marker on each partition of a transaction appends to its segment's index: the
    file's size is asked once, then known, until a truncation, reset or close."""
    asked: list[int] = []
    fstat = os.fstat
    monkeypatch.setattr(txn_index.os, "fstat", lambda fd: asked.append(fd) or fstat(fd))
    idx = _index(tmp_path)
    first = [AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6) for i in range(1, 4)]
    for txn in first:
        idx.append(txn)
    assert idx.path.read_bytes() == b"".join(t.to_bytes() for t in first)
    assert len(asked) == 1
    idx.truncate_to(25)
    then = [AbortedTxn(9, 18, 19, 20), AbortedTxn(8, 21, 22, 23)]
    for txn in then:
        idx.append(txn)
    assert idx.path.read_bytes() == b"".join(t.to_bytes() for t in first[:1] + then)
    idx.close()
    after_close = AbortedTxn(7, 24, 26, 27)
    idx.append(after_close)
    assert idx.path.read_bytes() == b"".join(
        t.to_bytes() for t in first[:1] + then + [after_close])
    idx.reset()
    again = AbortedTxn(1, 0, 1, 2)
    idx.append(again)
    assert idx.path.read_bytes() == again.to_bytes()
    assert len(asked) == 4  # at the first append and after each of the three
    idx.close()


def test_sanity_check(tmp_path: Path) -> None:
    idx = _index(tmp_path, base=100)
    idx.sanity_check()  # no file yet
    idx.append(AbortedTxn(1, 100, 105, 106))
    idx.flush()
    idx.sanity_check()
    idx.close()
    with open(idx.path, "ab") as f:
        f.write(b"\x00" * 5)
    with pytest.raises(CorruptIndex):
        _index(tmp_path, base=100).sanity_check()
    below = _index(tmp_path, base=200)
    below.path.write_bytes(AbortedTxn(1, 100, 105, 106).to_bytes())
    with pytest.raises(CorruptIndex):
        below.sanity_check()


def test_torn_tail_is_overwritten_on_append(tmp_path: Path) -> None:
    idx = _index(tmp_path)
    idx.path.write_bytes(AbortedTxn(1, 0, 5, 6).to_bytes() + b"\x01\x02\x03")
    idx.append(AbortedTxn(2, 6, 8, 9))
    assert idx.path.stat().st_size == 68
    assert [t.producer_id for t in idx.all_entries()] == [1, 2]
    idx.close()


def test_reads_come_from_memory_after_the_first(tmp_path: Path) -> None:
    """After the first read the entries are answered from memory, and writes through the
    index keep that copy equal to the file (append, truncate, reset)."""
    idx = _index(tmp_path)
    txns = [AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6) for i in range(1, 6)]
    for t in txns[:3]:
        idx.append(t)
    assert idx.collect_aborted(0, 100) == (txns[:3], False)  # loads the copy
    for t in txns[3:]:
        idx.append(t)
    saved = idx.path.read_bytes()
    idx.path.rename(tmp_path / "away")  # no file: only the in-memory copy can answer
    assert idx.collect_aborted(0, 100) == (txns, False)
    assert idx.collect_aborted(26, 36) == ([txns[2]], True)
    assert idx.collect_aborted(26, 41) == ([txns[2], txns[3]], True)
    (tmp_path / "away").rename(idx.path)
    idx.truncate_to(40)
    assert idx.all_entries() == txns[:3] and idx.last_offset == 35
    assert idx.path.read_bytes() == saved[: 3 * 34]
    idx.append(txns[3])
    assert _index(tmp_path).all_entries() == idx.all_entries() == txns[:4]
    idx.reset()
    assert idx.all_entries() == [] and idx.path.read_bytes() == b""
    idx.close()


def test_memory_budget_drops_least_recently_read(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import samsa.storage.txn_index as txn_index

    monkeypatch.setattr(txn_index, "MAX_CACHED_BYTES", 3 * (34 + 8))
    first, second = _index(tmp_path, 0), _index(tmp_path, 100)
    a = [AbortedTxn(1, i, i, i + 1) for i in range(0, 4, 2)]
    b = [AbortedTxn(2, i, i, i + 1) for i in range(100, 104, 2)]
    for t in a:
        first.append(t)
    for t in b:
        second.append(t)
    assert first.all_entries() == a and second.all_entries() == b  # 4 entries > budget of 3
    assert first._cache is None and second._cache is not None  # the older copy was dropped
    assert first.all_entries() == a  # read from its file again, which drops the other
    assert second._cache is None
    assert second.collect_aborted(0, 200) == (b, False)
    first.close()
    second.close()
