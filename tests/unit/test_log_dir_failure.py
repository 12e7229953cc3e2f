"""Disk errors in the storage layer: a failed append on a full (tmpfs) directory leaves the file
exactly as long as the segment says, raises KAFKA_STORAGE_ERROR, and takes the directory
offline; LogDirs places partitions across log.dirs and stops using an offline one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from samsa.protocol.records import build_batch
from samsa.storage.config import LogConfig
from samsa.storage.errors import KafkaStorageError
from samsa.storage.log import Log
from samsa.storage.log_dir_failure import LogDirFailureChannel, dir_key
from samsa.storage.log_dirs import LogDirs
from tests.support.tmpfs import grow, small_tmpfs


def _batch(i: int) -> bytes:
    return build_batch([(None, f"{i:06d}".encode() * 500, [], 1_700_000_000_000 + i)])


def test_failed_append_leaves_the_file_as_the_segment_says(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "small", "256k") as small:
        channel = LogDirFailureChannel()
        reported: list[str] = []
        channel.listener = reported.append
        lg = Log.open(small / "t-0", LogConfig.from_properties({}), recover=False)
        lg.io.failure_channel = channel
        appended = 0
        with pytest.raises(KafkaStorageError, match=f"in dir {small}"):
            for i in range(1000):
                lg.append_as_leader(_batch(i), leader_epoch=0)
                appended += 1
        seg = lg.active_segment
        assert os.stat(seg.log_path).st_size == seg.size  # no torn bytes counted or left
        assert lg.log_end_offset == appended
        assert reported == [dir_key(small)] and lg.offline
        with pytest.raises(KafkaStorageError, match="offline"):
            lg.append_as_leader(_batch(0), leader_epoch=0)  # no more I/O in that directory
        assert os.stat(seg.log_path).st_size == seg.size
        lg.close_handlers()

        grow(small, "1m")  # recovery rewrites indexes: it needs room too
        again = Log.open(small / "t-0", LogConfig.from_properties({}), recover=True)
        assert again.log_end_offset == appended
        assert again.read(appended - 1, 1 << 20).records
        again.close()


def test_log_dirs_place_by_count_and_leave_an_offline_dir_alone(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    dirs = LogDirs([a, b], LogConfig.from_properties({}))
    dirs.startup(lambda _topic: LogConfig.from_properties({}))
    for p in range(4):
        dirs.create_log("t", p)
    assert sorted(dirs.dir_of("t", p) for p in range(4)) == sorted([dir_key(a)] * 2
                                                                    + [dir_key(b)] * 2)
    on_b = [p for p in range(4) if dirs.dir_of("t", p) == dir_key(b)]

    dirs.failure_channel.maybe_add_offline_log_dir(b, "test failure", OSError(5, "EIO"))
    assert dirs.handle_dir_failure(dir_key(b)) == [("t", p) for p in on_b]
    assert dirs.offline_dirs == [dir_key(b)] and dirs.live_dirs == [dir_key(a)]
    assert all(dirs.get_log("t", p) is None for p in on_b)
    with pytest.raises(KafkaStorageError, match="offline"):
        dirs.create_log("t", on_b[0], is_new=False)  # its data may be on the failed dir
    assert dirs.dir_of("u", 0) is None
    dirs.create_log("u", 0)  # a new partition goes to a live dir
    assert dirs.dir_of("u", 0) == dir_key(a)
    dirs.shutdown()
    assert (a / ".kafka_cleanshutdown").exists()
    assert not (b / ".kafka_cleanshutdown").exists()
