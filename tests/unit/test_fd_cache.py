"""Open files follow use, not partitions x segments (issue 7): segment, index and txn-index fds
live in a bounded LRU (storage/fdcache.py), are reopened on demand, and recovery of many
partitions stays under the cap, even under a small RLIMIT_NOFILE."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.protocol.records import build_batch
from samsa.storage.config import LogConfig
from samsa.storage.fdcache import DEFAULT_MAX_OPEN_FILES, FD_CACHE, CachedFile, FdCache
from samsa.storage.log import Log
from samsa.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager


def batch(i: int, ts: int = 1000) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d" % i + b"x" * 100, [], ts + i)])


def open_fds_under(root: Path) -> int:
    """fds of this process that point at files under `root` (from /proc, not our own count)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root) + os.sep):
            n += 1
    return n


@pytest.fixture
def cap() -> Iterator[int]:
    """A small cap on the process-wide fd cache for the test; restored afterwards."""
    old = FD_CACHE.capacity
    FD_CACHE.close_all()
    FD_CACHE.capacity = 8
    try:
        yield 8
    finally:
        FD_CACHE.close_all()
        FD_CACHE.capacity = old


def values(log: Log) -> list[bytes]:
    from samsa.protocol.records import decode_records, iter_batches

    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).records
        assert data, f"no data at {offset}"
        for pos, h in iter_batches(data):
            out.extend(r.value or b"" for r in decode_records(data, pos, h))
            offset = h.next_offset
    return out


def test_many_segments_hold_at_most_cap_fds_and_old_reads_reopen(tmp_path: Path, cap: int) -> None:
    size = len(batch(0))
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=size * 2, index_interval_bytes=1),
                   recover=False)
    for i in range(120):  # 60+ segments, each with .log, .index and .timeindex written
        log.append_as_leader(batch(i), 0)
    assert log.num_segments >= 50
    assert open_fds_under(tmp_path) <= cap
    assert FD_CACHE.open_count <= cap
    first = log.segments[0]
    assert first.open_files == 0  # evicted long ago

    opens = FD_CACHE.opens
    data = log.read(0, 1 << 20).records  # the oldest segment: reopened on demand
    assert data and first.open_files >= 1 and FD_CACHE.opens > opens
    assert values(log) == [b"v%d" % i + b"x" * 100 for i in range(120)]
    assert open_fds_under(tmp_path) <= cap

    log.release_files()
    assert log.open_files == 0 and open_fds_under(tmp_path) == 0
    log.append_as_leader(batch(120), 0)  # the active segment reopens for the append
    log.close()
    assert open_fds_under(tmp_path) == 0

    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=size * 2), recover=False)
    assert len(values(log)) == 121 and open_fds_under(tmp_path) <= cap
    log.close()


def test_acknowledged_appends_survive_a_crash_with_evicted_fds(tmp_path: Path, cap: int) -> None:
    """Appends whose fds were closed by eviction (never fsynced) are in the files: a crash
    (no flush, no close, no marker) followed by recovery finds every one of them."""
    lm = LogManager(tmp_path, LogConfig())
    lm.startup(lambda topic: LogConfig())
    logs = [lm.create_log("t", p) for p in range(30)]
    for i in range(5):
        for lg in logs:
            lg.append_as_leader(batch(i), 0)
    assert FD_CACHE.evictions > 0 and open_fds_under(tmp_path) <= cap
    lm.checkpoint()
    FD_CACHE.close_all()  # the process dies: its fds go, nothing was flushed
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()

    lm2 = LogManager(tmp_path, LogConfig())
    lm2.startup(lambda topic: LogConfig())
    assert not lm2.had_clean_shutdown
    for p in range(30):
        lg = lm2.get_log("t", p)
        assert lg is not None and lg.log_end_offset == 5
        assert values(lg) == [b"v%d" % i + b"x" * 100 for i in range(5)]
    assert open_fds_under(tmp_path) <= cap
    lm2.shutdown()


def test_recovery_of_many_partitions_fits_a_small_rlimit(tmp_path: Path, cap: int) -> None:
    """300 partitions x 2 segments need 1,800 files; recovery (no clean-shutdown marker) under a
    soft RLIMIT_NOFILE of (open now + 100) must neither fail with EMFILE nor keep them open."""
    size = len(batch(0))
    config = LogConfig(segment_bytes=size * 2, index_interval_bytes=1)
    lm = LogManager(tmp_path, config)
    lm.startup(lambda topic: config)
    for p in range(300):
        lg = lm.create_log("t", p, config)
        for i in range(3):
            lg.append_as_leader(batch(i), 0)
    lm.checkpoint()
    for lg in lm.logs().values():
        # "kill -9" after the checkpoint: torn garbage at the end of every active segment
        with open(lg.active_segment.log_path, "ab") as f:
            f.write(b"\x00" * 30)
    FD_CACHE.close_all()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 100, hard))
    try:
        lm2 = LogManager(tmp_path, config, io_threads=4)
        lm2.startup(lambda topic: config)
        assert open_fds_under(tmp_path) <= cap
        assert all(lg.log_end_offset == 3 and lg.recovery_truncated_bytes == 30
                   for lg in lm2.logs().values())
        lm2.shutdown()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert open_fds_under(tmp_path) <= cap

    lm3 = LogManager(tmp_path, config)
    lm3.startup(lambda topic: config)
    assert lm3.had_clean_shutdown and len(lm3.logs()) == 300
    lg = lm3.get_log("t", 299)
    assert lg is not None and values(lg) == [b"v%d" % i + b"x" * 100 for i in range(3)]
    lm3.shutdown()


def test_write_parts_writes_them_in_order(tmp_path: Path) -> None:
    # More parts than one writev takes (IOV_MAX, 1024 on Linux), of every kind, some empty.
    parts = [[b"a" * (i % 7), bytearray(b"b" * (i % 3)), memoryview(b"cd" * i)[i:]][i % 3]
             for i in range(2500)]
    f = CachedFile(tmp_path / "f", os.O_RDWR | os.O_CREAT | os.O_APPEND, cache=FdCache(2))
    f.write_all(b"head")
    f.write_parts(parts)
    assert (tmp_path / "f").read_bytes() == b"head" + b"".join(parts)
    f.close()


def test_pinned_fd_is_not_evicted(tmp_path: Path) -> None:
    cache = FdCache(2)
    files = [CachedFile(tmp_path / f"f{i}", os.O_RDWR | os.O_APPEND, cache=cache)
             for i in range(6)]
    fd = files[0].acquire()  # a syscall on it is "in progress" in another thread
    try:
        for f in files[1:]:
            f.write_all(b"x")
        assert files[0].is_open and cache.open_count <= 3
        os.write(fd, b"pinned")  # still the same, valid fd
        files[0].close()  # a close while pinned is deferred to the LRU
        assert files[0].is_open
    finally:
        files[0].release()
    files[1].write_all(b"y")  # the now unpinned, least recently used fd goes
    assert not files[0].is_open and cache.open_count <= 2
    assert (tmp_path / "f0").read_bytes() == b"pinned"
    cache.close_all()


def test_fsync_only_what_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), recover=False)
    log.append_as_leader(batch(0), 0)
    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    log.flush()
    assert calls  # the appended segment
    calls.clear()
    log.flush()
    assert not calls  # nothing written since: no fsync, no epoch checkpoint rewrite
    log.append_as_leader(batch(1), 0)
    log.flush()
    assert calls
    log.close()


def test_reopen_does_not_recreate_a_deleted_segment(tmp_path: Path, cap: int) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(), recover=False)
    log.append_as_leader(batch(0), 0)
    seg = log.active_segment
    log.release_files()
    seg.log_path.unlink()
    with pytest.raises(FileNotFoundError):
        seg.read_bytes(0, 10)
    assert not seg.log_path.exists()


def test_the_default_bound_follows_a_raised_open_files_limit() -> None:
    """A broker raises its soft RLIMIT_NOFILE at start (broker/network/server.py): the default
    bound, taken at import from the lower limit, follows it; a configured bound does not."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard < 2048:
        pytest.skip(f"hard RLIMIT_NOFILE {hard}: no room to lower and raise the soft limit here")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        cache = FdCache()
        assert cache.capacity == 256  # a quarter of 1,024
        configured = FdCache(100)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        cache.follow_open_files_limit()
        configured.follow_open_files_limit()
        assert cache.capacity == min(DEFAULT_MAX_OPEN_FILES, hard // 4) > 256
        assert configured.capacity == 100
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
