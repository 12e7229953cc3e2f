"""LogSegment.read finds the end of its answer from the offset index (reading a few KiB, not
the whole answer), and a zero-copy read answers with a FileRegion of the same bytes.

The reference is the plain definition: walk every batch from the one holding the fetch
offset, keep whole batches that fit in max_size and end below max_offset (the first one even
if bigger, with min_one_message)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from samsa.protocol.records import build_batch, iter_batches
from samsa.storage.config import LogConfig
from samsa.storage.fdcache import CachedFile
from samsa.storage.file_region import FileRegion, RegionTruncated
from samsa.storage.log import Log
from samsa.storage.segment import ZERO_COPY_MIN_BYTES


def _log(tmp_path: Path, index_interval: int) -> tuple[Log, list[tuple[int, int, int]]]:
    """A one-segment log of batches of assorted sizes; (position, base, last offset) of each."""
    rnd = random.Random(index_interval)
    log = Log.open(tmp_path / f"t-{index_interval}", LogConfig(
        index_interval_bytes=index_interval, segment_bytes=1 << 30), recover=False)
    for _ in range(300):
        n = rnd.choice((1, 1, 2, 5, 20))
        size = rnd.choice((10, 100, 700, 3000, 9000))
        log.append_as_leader(build_batch([(None, os.urandom(size), [], 1000)] * n), 0)
    seg = log.active_segment
    batches = [(pos, h.base_offset, h.last_offset)
               for pos, h in iter_batches(seg.read_bytes(0, seg.size))]
    return log, batches


def _reference(batches: list[tuple[int, int, int]], seg_size: int, start_offset: int,
               max_size: int, max_offset: int | None, min_one: bool) -> tuple[int, int, int]:
    """(position, size, next offset) of the answer by walking every batch."""
    ends = [p for p, _, _ in batches[1:]] + [seg_size]
    i = next(k for k, (_, _, last) in enumerate(batches) if last >= start_offset)
    pos = batches[i][0]
    end, next_offset = pos, start_offset
    for k in range(i, len(batches)):
        _, _, last = batches[k]
        if max_offset is not None and last >= max_offset:
            break
        if ends[k] - pos > max_size and not (k == i and min_one):
            break
        end, next_offset = ends[k], last + 1
        if ends[k] - pos > max_size:
            break
    return pos, end - pos, next_offset


@pytest.mark.parametrize("index_interval", [1, 500, 4096, 1 << 20])
def test_read_ends_where_a_walk_over_every_batch_ends(tmp_path: Path, index_interval: int):
    log, batches = _log(tmp_path, index_interval)
    seg = log.active_segment
    rnd = random.Random(7)
    last = batches[-1][2]
    for _ in range(1500):
        start = rnd.randint(0, last)
        max_size = rnd.choice((1, 50, 1000, 5000, 20_000, 100_000, 1 << 20, 1 << 30))
        max_offset = rnd.choice((None, rnd.randint(0, last + 2)))
        min_one = rnd.random() < 0.8
        got = seg.read(start, max_size, max_offset, min_one)
        assert got is not None
        records, _base, next_offset = got
        pos, size, want_next = _reference(batches, seg.size, start, max_size, max_offset,
                                          min_one)
        assert (bytes(records), next_offset if size else start) == (
            seg.read_bytes(pos, size), want_next if size else start), \
            (start, max_size, max_offset, min_one)


def test_a_fetch_of_big_batches_reads_each_header_once(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    """librdkafka's 1 MB batches: a fetch that fits one of them reads the previous batch's
    header (where the index points), its own, the next one's (to see it does not fit), then
    the batch: no header twice."""
    log = Log.open(tmp_path / "big-0", LogConfig(index_interval_bytes=4096, segment_bytes=1 << 30),
                   recover=False)
    for _ in range(5):
        log.append_as_leader(build_batch([(None, os.urandom(1000), [], 1000)] * 300), 0)
    seg = log.active_segment
    batches = list(iter_batches(seg.read_bytes(0, seg.size)))
    reads: list[tuple[int, int]] = []
    pread = CachedFile.pread

    def counted(self: CachedFile, size: int, pos: int) -> bytes:
        reads.append((pos, size))
        return pread(self, size, pos)

    monkeypatch.setattr(CachedFile, "pread", counted)
    pos, h = batches[2]
    got = seg.read(h.base_offset, 400_000)
    assert got is not None and bytes(got[0]) == seg.read_bytes(pos, h.size)
    header_reads = [p for p, size in reads if size < h.size]
    assert sorted(header_reads) == [batches[1][0], pos, batches[3][0]], reads
    log.close()


def test_zero_copy_read_is_a_region_of_the_same_bytes(tmp_path: Path):
    log, batches = _log(tmp_path, 4096)
    for start, max_size in [(0, 1 << 20), (batches[40][1], 200_000), (5, 100)]:
        plain = log.read(start, max_size)
        region = log.read(start, max_size, zero_copy=True)
        assert (region.first_batch_offset, region.next_offset) == (
            plain.first_batch_offset, plain.next_offset)
        if len(plain.records) >= ZERO_COPY_MIN_BYTES:
            assert isinstance(region.records, FileRegion)
            assert region.records.read() == bytes(plain.records)
            region.records.release()
        else:  # small answers are cheaper copied than sent by a system call of their own
            assert region.records == bytes(plain.records)
    log.close()


def test_a_region_survives_its_segment_being_deleted_and_not_its_truncation(tmp_path: Path):
    log, _ = _log(tmp_path, 4096)
    seg = log.active_segment
    data = log.read(0, 1 << 20, zero_copy=True).records
    assert isinstance(data, FileRegion)
    expected = seg.read_bytes(0, len(data))
    os.unlink(seg.log_path)  # the open, pinned fd still reads the file, as Kafka's channel
    seg._log.close()  # a pinned fd is not closed
    assert data.read() == expected
    other = log.read(0, 1 << 20, zero_copy=True).records
    assert isinstance(other, FileRegion)
    os.ftruncate(other.fd, len(other) // 2)
    with pytest.raises(RegionTruncated):
        other.read()
    data.release()
    other.release()
