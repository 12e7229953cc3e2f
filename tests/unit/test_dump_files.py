"""`samsa dump-log` on .index, .timeindex, .txnindex and producer .snapshot files."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from samsa.broker import cli
from samsa.protocol.records import build_batch, build_control_batch
from samsa.storage.config import LogConfig
from samsa.storage.dump import dump_file
from samsa.storage.log import Log


def batch(n: int, ts: int, **kw) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * 200, [], ts + i) for i in range(n)], **kw)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """Segments of ~5 batches with an index entry every batch; an aborted transaction of
    producer 7 (offsets 10..12, marker at 13) and an open one of producer 8."""
    cfg = LogConfig(segment_bytes=len(batch(2, 0)) * 5, index_interval_bytes=1)
    log = Log.open(tmp_path / "t-0", cfg, recover=False)
    ts = 1_000_000
    for _ in range(5):
        log.append_as_leader(batch(2, ts), 0)
        ts += 10
    txn = dict(producer_id=7, producer_epoch=3, transactional=True)
    log.append_as_leader(batch(3, ts, base_sequence=0, **txn), 0)  # 10..12
    log.append_as_leader(build_control_batch(7, 3, commit=False, coordinator_epoch=2,
                                             timestamp=ts + 5), 0, origin="coordinator")  # 13
    log.append_as_leader(batch(1, ts + 6, producer_id=8, producer_epoch=0, base_sequence=0,
                               transactional=True), 0)  # 14, left open
    log.update_high_watermark(log.log_end_offset)
    log.close()  # writes a producer snapshot at the log end offset
    return tmp_path / "t-0"


def _dump(path: Path) -> list[str]:
    out = io.StringIO()
    dump_file(path, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"Dumping {path}"
    return lines[1:]


def test_offset_and_time_index(log_dir: Path) -> None:
    first = _dump(log_dir / "00000000000000000000.index")
    assert first and all(line.startswith("offset: ") for line in first)
    offsets = [int(line.split()[1]) for line in first]
    positions = [int(line.split()[3]) for line in first]
    assert offsets == sorted(offsets) and positions == sorted(positions)
    assert set(offsets) <= {1, 3, 5, 7, 9}  # last offsets of the first segment's batches
    later = sorted(log_dir.glob("*.index"))[-1]
    base = int(later.name.split(".")[0])
    assert all(int(line.split()[1]) >= base for line in _dump(later))
    times = _dump(log_dir / "00000000000000000000.timeindex")
    assert times and all(line.startswith("timestamp: ") for line in times)
    stamps = [int(line.split()[1]) for line in times]
    assert stamps == sorted(stamps) and stamps[0] >= 1_000_000


def test_txn_index_and_snapshot(log_dir: Path) -> None:
    (txnindex,) = [p for p in log_dir.glob("*.txnindex") if p.stat().st_size]
    assert _dump(txnindex) == [
        "version: 0 producerId: 7 firstOffset: 10 lastOffset: 13 lastStableOffset: 14"
    ]
    snapshots = sorted(log_dir.glob("*.snapshot"))
    assert snapshots[-1].name == "00000000000000000015.snapshot"
    lines = _dump(snapshots[-1])
    by_pid = {int(line.split()[1]): line for line in lines}
    assert by_pid.keys() == {7, 8}
    assert ("producerId: 7 producerEpoch: 3 coordinatorEpoch: 2 "
            "currentTxnFirstOffset: OptionalLong.empty") in by_pid[7]
    assert "producerId: 8 producerEpoch: 0 coordinatorEpoch: -1 " \
           "currentTxnFirstOffset: OptionalLong[14]" in by_pid[8]
    assert "firstSequence: 0 lastSequence: 0 lastOffset: 14 offsetDelta: 0" in by_pid[8]


def test_cli_dispatches_by_suffix(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in sorted(log_dir.iterdir())
             if p.suffix in (".log", ".index", ".timeindex", ".txnindex", ".snapshot")]
    assert cli.main(["dump-log", *paths]) == 0
    out = capsys.readouterr().out
    assert out.count("Dumping ") == len(paths)
    assert "baseOffset: 0 lastOffset: 1" in out  # a segment, dumped as before
    assert "producerId: 7 firstOffset: 10" in out


def test_damaged_files_are_reported(tmp_path: Path) -> None:
    idx = tmp_path / "00000000000000000100.index"
    idx.write_bytes(b"\x00\x00\x00\x05\x00\x00\x00\x10" + b"\x00" * 16 + b"\x01\x02\x03")
    assert _dump(idx) == ["offset: 105 position: 16",
                          "Found 3 trailing bytes that are not a whole entry"]
    snap = tmp_path / "00000000000000000100.snapshot"
    snap.write_bytes(b"\x00\x01junk")
    (line,) = _dump(snap)
    assert line.startswith("Corrupt producer snapshot: ")
