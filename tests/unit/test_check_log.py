from pathlib import Path

from samsa.protocol.records import build_batch
from samsa.storage.check import check_data_dir
from samsa.storage.config import LogConfig
from samsa.storage.log import Log


def _write_log(data_dir: Path, batches: int = 20) -> Path:
    pdir = data_dir / "orders-0"
    pdir.mkdir(parents=True)
    log = Log.open(
        pdir,
        LogConfig.from_properties({"segment.bytes": 2000, "index.interval.bytes": 1}),
        recover=False,
    )
    for i in range(batches):
        log.append_as_leader(build_batch([(b"k%d" % i, b"v" * 100, [], 1000 + i)]), 0)
    log.close()
    return pdir


def test_clean_directory_has_no_problems(tmp_path):
    _write_log(tmp_path)
    (report,) = check_data_dir(tmp_path)
    assert report.problems == []
    assert (report.first_offset, report.next_offset, report.batches, report.records) == (
        0,
        20,
        20,
        20,
    )
    assert report.segments > 1


def test_corrupt_byte_is_reported(tmp_path):
    pdir = _write_log(tmp_path)
    seg = sorted(pdir.glob("*.log"))[0]
    data = bytearray(seg.read_bytes())
    data[70] ^= 0xFF  # inside the first batch's CRC-covered records
    seg.write_bytes(bytes(data))
    (report,) = check_data_dir(tmp_path)
    assert any("invalid batch" in p and "CorruptRecord" in p for p in report.problems), (
        report.problems
    )


def test_torn_tail_is_reported(tmp_path):
    pdir = _write_log(tmp_path)
    seg = sorted(pdir.glob("*.log"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x00" * 30)
    (report,) = check_data_dir(tmp_path)
    assert any("torn tail of 30 bytes" in p for p in report.problems), report.problems


def test_cli_check_log_exit_codes(tmp_path, capsys):
    from samsa.broker.cli import main

    pdir = _write_log(tmp_path)
    assert main(["check-log", "--quiet", str(tmp_path)]) == 0
    assert "orders-0: " in capsys.readouterr().out
    with open(sorted(pdir.glob("*.log"))[-1], "ab") as f:
        f.write(b"\x01" * 7)
    assert main(["check-log", "--quiet", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "torn tail of 7 bytes" in out and "1 problems" in out
