"""The contracts made explicit in storage/: error codes, the offsets' single writers, the
loader's result and the segment list."""

import inspect
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import samsa.protocol.errors
import samsa.storage.errors
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.records import build_batch
from samsa.storage.config import LogConfig
from samsa.storage.errors import StorageError
from samsa.storage.log import Log
from samsa.storage.log_loader import LogLoader
from samsa.storage.log_segments import LogSegments
from samsa.storage.segment import LogSegment


def batch(n: int = 1) -> bytes:
    return build_batch([(b"k%d" % i, b"v", [], 1000 + i) for i in range(n)])


def open_log(tmp_path: Path, **kw: Any) -> Log:
    return Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1024), **kw)


def test_every_storage_error_carries_an_error_code_member() -> None:
    classes = [c for _, c in inspect.getmembers(samsa.storage.errors, inspect.isclass)
               if issubclass(c, KafkaError)]
    assert StorageError in classes
    for cls in classes:
        assert issubclass(cls, KafkaError)
        assert isinstance(cls.error_code, ErrorCode), cls


def test_record_format_errors_are_the_protocol_ones() -> None:
    for name in ("CorruptRecord", "InvalidRecord", "UnsupportedForMessageFormat"):
        cls = getattr(samsa.storage.errors, name)
        assert cls is getattr(samsa.protocol.errors, name)
        assert name in samsa.storage.errors.__all__
        assert not issubclass(cls, StorageError)


def test_offsets_are_read_only(tmp_path: Path) -> None:
    log = open_log(tmp_path, recover=False)
    for name in ("high_watermark", "log_start_offset", "recovery_point"):
        with pytest.raises(AttributeError):
            setattr(log, name, 5)


def test_high_watermark_stays_within_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path, recover=False)
    for _ in range(10):
        log.append_as_leader(batch(3), leader_epoch=0)
    assert log.update_high_watermark(100) == 30
    assert log.update_high_watermark(12) == 12
    assert log.delete_records_before(9) == 9
    assert log.update_high_watermark(3) == 9  # not below the log start
    assert log.update_high_watermark(20) == 20
    assert log.truncate_to(15)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (9, 15, 15)
    assert log.recovery_point <= log.log_end_offset
    log.truncate_fully_and_start_at(40)
    assert (log.log_start_offset, log.high_watermark, log.recovery_point,
            log.log_end_offset) == (40, 40, 40, 40)


def test_opened_high_watermark_is_clamped_to_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path, recover=False)
    for _ in range(4):
        log.append_as_leader(batch(2), leader_epoch=0)
    log.close()
    for checkpointed, expected in ((None, 8), (100, 8), (5, 5), (-3, 0)):
        log = open_log(tmp_path, recover=False, high_watermark=checkpointed)
        assert log.high_watermark == expected
        log.close()


def test_advancing_the_log_start_moves_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, recover=False)
    for _ in range(10):
        log.append_as_leader(batch(3), leader_epoch=0)
    log.update_high_watermark(30)
    assert log.recovery_point == 0
    log.delete_records_before(21)
    assert log.recovery_point == 21
    assert log.leader_epoch_cache.entries == [(0, 21)]


def test_loader_reports_what_it_loaded(tmp_path: Path) -> None:
    log = open_log(tmp_path, recover=False)
    for _ in range(40):
        log.append_as_leader(batch(3), leader_epoch=0)
    assert log.num_segments > 2
    log.close_without_flush()
    fresh = Log(tmp_path / "t-0", LogConfig(segment_bytes=1024), 86_400_000)
    loader = LogLoader(fresh.dir, partial(LogSegment, fresh.dir, config=fresh.config),
                       fresh.producer_state, fresh.leader_epoch_cache)
    loaded = loader.load(recover=True, recovery_point=0, log_start_offset=None, now_ms=None)
    assert [s.base_offset for s in loaded.segments] == [s.base_offset for s in log.segments]
    assert loaded.log_end_offset == loaded.recovery_point == 120
    assert loaded.log_start_offset == 0
    assert loaded.recovered_segments == len(loaded.segments)
    assert loaded.recovery_truncated_bytes == 0
    for seg in loaded.segments:
        seg.close()


def test_log_segments_replace_and_detach(tmp_path: Path) -> None:
    segs = [LogSegment(tmp_path, base) for base in (0, 10, 20)]
    lst = LogSegments()
    lst.install(segs[:2])
    lst.add(segs[2])
    view = lst.view
    assert view[1] == [0, 10, 20]
    assert lst.replace(segs[:2], detach=True)
    assert view[1] == [0, 10, 20]  # an earlier view never changes
    assert lst.view[1] == [20]
    assert not lst.replace(segs[:1])  # already gone: nothing done
    assert not lst.contains(segs[0]) and lst.contains(segs[2])
    assert lst.take_detached([segs[1]]) == [segs[1]]
    assert lst.take_detached([segs[1]]) == []  # handed out once
    assert lst.take_detached() == [segs[0]]
    for seg in segs:
        seg.close()
