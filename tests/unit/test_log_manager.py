"""LogManager start-up (clean and unclean), checkpoints, shutdown marker, background loop."""

import asyncio
import json
import os
import uuid
from pathlib import Path

from samsa.protocol.records import build_batch
from samsa.storage.checkpoint import OffsetCheckpointFile
from samsa.storage.config import LogConfig
from samsa.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE,
    LogManager,
    read_partition_metadata,
)


def batch(n: int = 1, ts: int = 1000) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * 50, [], ts + i) for i in range(n)])


def start(tmp_path: Path, **kw) -> LogManager:
    lm = LogManager(tmp_path, LogConfig(), producer_id_expiration_ms=86_400_000, **kw)
    lm.startup(lambda topic: LogConfig(segment_bytes=500))
    return lm


def test_create_write_shutdown_restart(tmp_path: Path) -> None:
    lm = start(tmp_path)
    tid = uuid.uuid4()
    lg = lm.create_log("orders.v1-eu", 2, LogConfig(segment_bytes=500), tid)
    assert (lg.dir / "partition.metadata").read_text().startswith("version: 0\ntopic_id: ")
    assert read_partition_metadata(lg.dir) == tid
    for _ in range(20):
        lg.append_as_leader(batch(2), 0)
        lg.update_high_watermark(lg.log_end_offset)
    lm.create_log("other", 0, None, None).append_as_leader(batch(1), 0)
    lm.shutdown()
    marker = tmp_path / CLEAN_SHUTDOWN_FILE
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": 0}
    rp = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read()
    assert rp == {("orders.v1-eu", 2): 40, ("other", 0): 1}
    hw = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint").read()
    assert hw[("orders.v1-eu", 2)] == 40
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text().startswith("0\n2\n")

    lm2 = start(tmp_path)
    assert lm2.had_clean_shutdown and not marker.exists()
    assert set(lm2.logs()) == {("orders.v1-eu", 2), ("other", 0)}
    lg2 = lm2.get_log("orders.v1-eu", 2)
    assert lg2 is not None and lg2.log_end_offset == 40
    assert lg2.read(0, 1 << 20).records
    lm2.shutdown()


def test_unclean_start_recovers(tmp_path: Path) -> None:
    lm = start(tmp_path)
    lg = lm.create_log("t", 0, LogConfig(segment_bytes=500))
    for _ in range(10):
        lg.append_as_leader(batch(1), 0)
    lm.checkpoint()
    seg_path = lg.active_segment.log_path
    lg.close_without_flush()  # "kill -9": no marker, no snapshot
    with open(seg_path, "ab") as f:
        f.write(b"\x00" * 30)  # torn garbage
    lm2 = start(tmp_path)
    assert not lm2.had_clean_shutdown
    lg2 = lm2.get_log("t", 0)
    assert lg2 is not None and lg2.log_end_offset == 10
    assert lg2.append_as_leader(batch(1), 0).first_offset == 10
    lm2.shutdown()


def test_delete_log(tmp_path: Path) -> None:
    lm = start(tmp_path)
    lg = lm.create_log("gone", 1)
    lg.append_as_leader(batch(1), 0)
    assert lm.delete_log("gone", 1)
    assert not lg.dir.exists() and lm.get_log("gone", 1) is None
    lm.shutdown()
    assert OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint").read() == {}


async def test_background_flushes_rolled_segments_and_retention(tmp_path: Path) -> None:
    lm = LogManager(tmp_path, LogConfig(), producer_id_expiration_ms=86_400_000,
                    retention_check_interval_ms=10, flush_scheduler_interval_ms=10,
                    flush_offset_checkpoint_interval_ms=10)
    lm.startup(lambda t: LogConfig())
    lg = lm.create_log("r", 0, LogConfig(segment_bytes=300, retention_ms=1000))
    for _ in range(6):
        lg.append_as_leader(batch(1, ts=1), 0)
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.num_segments > 1
    task = asyncio.create_task(lm.run_background())
    for _ in range(100):
        await asyncio.sleep(0.02)
        if lg.num_segments == 1:
            break
    task.cancel()
    assert lg.num_segments == 1
    assert lg.log_start_offset == lg.active_segment.base_offset
    assert lg.recovery_point >= lg.active_segment.base_offset
    lm.shutdown()


def test_created_partition_made_durable_by_first_flush(tmp_path: Path, monkeypatch) -> None:
    """partition.metadata and the leader-epoch checkpoint are written at creation without
    fsync (4 fsyncs per created partition before); the log's flush makes both durable."""
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    lm = start(tmp_path)
    monkeypatch.setattr(os, "fsync", recording_fsync)
    lg = lm.create_log("t", 0, topic_id=uuid.uuid4())
    lg.leader_epoch_cache.assign(0, 0)
    assert synced == []
    d = tmp_path / "t-0"
    assert read_partition_metadata(d) is not None
    assert (d / "leader-epoch-checkpoint").read_text().splitlines()[2] == "0 0"
    lg.flush()
    assert str(d / "partition.metadata") in synced
    assert str(d / "leader-epoch-checkpoint") in synced
    synced.clear()
    lg.flush()  # nothing written since: nothing to sync
    assert not [p for p in synced if p.startswith(str(d) + "/") and "epoch" in p]
    lm.shutdown()


def test_delete_records_deletes_files_in_the_deletion_thread(tmp_path: Path) -> None:
    """DeleteRecords and a follower following its leader's log start run on the event loop:
    they detach the segments there and leave the files to the LogManager's deletion thread."""
    import threading
    import time

    lm = start(tmp_path)
    lg = lm.create_log("d", 0, LogConfig(segment_bytes=300))
    for _ in range(6):
        lg.append_as_leader(batch(1), 0)
    lg.update_high_watermark(lg.log_end_offset)
    first = lg.segments[0]
    deleted_by: list[str] = []
    real_delete = first.delete

    def recording_delete() -> None:
        deleted_by.append(threading.current_thread().name)
        real_delete()

    first.delete = recording_delete  # type: ignore[method-assign]
    target = lg.segments[1].base_offset
    assert lg.delete_records_before(target) == target
    assert first not in lg.segments
    deadline = time.monotonic() + 10
    while first.log_path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not first.log_path.exists()
    assert deleted_by and deleted_by[0].startswith("log-deletion")
    lm.shutdown()
