"""Offline verification of a data directory (`samsa check-log DIR`).

Reads every partition's files the way recovery would and reports what it finds without
changing anything: CRC and framing of every batch, offsets increasing within and across
segments, torn tails, offset-index entries that point at real batch starts, producer
snapshots whose CRC matches, transaction indexes that parse.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from samsa.protocol.errors import KafkaError
from samsa.protocol.records import iter_batches, validate_batch
from samsa.storage.errors import StorageError
from samsa.storage.producer_snapshot import CorruptSnapshot, decode_snapshot
from samsa.storage.txn_index import TransactionIndex

_INDEX_ENTRY = struct.Struct(">ii")


@dataclass
class PartitionReport:
    name: str
    segments: int = 0
    batches: int = 0
    records: int = 0
    bytes: int = 0
    first_offset: int | None = None
    next_offset: int | None = None
    problems: list[str] = field(default_factory=list)


def partition_dirs(data_dir: Path) -> Iterator[Path]:
    for d in sorted(data_dir.iterdir()):
        if d.is_dir() and "-" in d.name and d.name.rsplit("-", 1)[1].isdigit():
            yield d


def check_partition(pdir: Path, progress: Callable[[str], None] | None = None) -> PartitionReport:
    report = PartitionReport(pdir.name)
    expected_next: int | None = None
    for seg in sorted(pdir.glob("*.log")):
        base = int(seg.stem)
        report.segments += 1
        if progress is not None:
            progress(f"{pdir.name}/{seg.name}")
        starts = _check_segment(seg, base, expected_next, report)
        if report.next_offset is not None:
            expected_next = report.next_offset
        _check_offset_index(seg.with_suffix(".index"), base, starts, report)
    for snap in sorted(pdir.glob("*.snapshot")):
        try:
            decode_snapshot(snap.read_bytes())
        except (CorruptSnapshot, ValueError, struct.error) as exc:
            report.problems.append(f"{snap.name}: corrupt producer snapshot ({exc})")
    for txn in sorted(pdir.glob("*.txnindex")):
        try:
            TransactionIndex(txn, int(txn.stem)).sanity_check()
        except (StorageError, ValueError) as exc:
            report.problems.append(f"{txn.name}: {exc}")
    return report


def _check_segment(
    seg: Path, base: int, expected_next: int | None, report: PartitionReport
) -> dict[int, int]:
    """Validate batches; returns {position: last offset} of every batch start."""
    starts: dict[int, int] = {}
    size = seg.stat().st_size
    report.bytes += size
    if size == 0:
        return starts
    with (
        open(seg, "rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
        memoryview(mapped) as buf,
    ):
        end = 0
        previous_next = expected_next
        try:
            for pos, h in iter_batches(buf):
                validate_batch(buf, pos, h)
                if h.base_offset < base:
                    report.problems.append(
                        f"{seg.name}@{pos}: batch offset {h.base_offset} below segment base {base}"
                    )
                if previous_next is not None and h.base_offset < previous_next:
                    report.problems.append(
                        f"{seg.name}@{pos}: offset {h.base_offset} < {previous_next}"
                    )
                previous_next = h.next_offset
                starts[pos] = h.last_offset
                report.batches += 1
                report.records += h.records_count
                if report.first_offset is None:
                    report.first_offset = h.base_offset
                report.next_offset = h.next_offset
                end = pos + h.size
        except KafkaError as exc:  # CorruptRecord, InvalidRecord, UnsupportedForMessageFormat
            report.problems.append(f"{seg.name}@{end}: invalid batch ({type(exc).__name__}: {exc})")
            return starts
        if end != size:
            report.problems.append(
                f"{seg.name}: torn tail of {size - end} bytes after position {end}"
            )
    return starts


def _check_offset_index(
    index: Path, base: int, starts: dict[int, int], report: PartitionReport
) -> None:
    if not index.exists():
        return
    data = index.read_bytes()
    usable = len(data) - len(data) % _INDEX_ENTRY.size
    for i in range(0, usable, _INDEX_ENTRY.size):
        rel, pos = _INDEX_ENTRY.unpack_from(data, i)
        if rel == 0 and pos == 0 and i > 0:
            break  # preallocated, unused tail
        last = starts.get(pos)
        if last is None:
            report.problems.append(
                f"{index.name}: entry {i // 8} points at {pos}, not a batch start"
            )
        elif base + rel > last:
            report.problems.append(
                f"{index.name}: entry {i // 8} maps {base + rel} past batch end {last}"
            )


def check_data_dir(
    data_dir: Path, progress: Callable[[str], None] | None = None
) -> list[PartitionReport]:
    return [check_partition(d, progress) for d in partition_dirs(data_dir)]
