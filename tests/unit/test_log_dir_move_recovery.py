"""A move between log directories cut short by a crash (storage layer, real files): a future
log next to its current replica is discarded and the move is to start again; a future log whose
current replica was already renamed for deletion (the crash fell between the swap's two
renames) is the replica, and start-up makes it current with its data and transactions'
index."""

from __future__ import annotations

from pathlib import Path

from samsa.protocol.records import build_batch
from samsa.storage.config import LogConfig
from samsa.storage.log_dir_failure import dir_key
from samsa.storage.log_dirs import LogDirs

CONFIG = LogConfig.from_properties({})


def _dirs(a: Path, b: Path) -> LogDirs:
    dirs = LogDirs([a, b], CONFIG)
    dirs.startup(lambda _topic: CONFIG)
    return dirs


def _filled(a: Path, b: Path) -> tuple[LogDirs, int]:
    """`t-0` in `a` with 10 batches, and its future log in `b` holding a copy of them."""
    dirs = _dirs(a, b)
    cur = dirs.create_log("t", 0)
    for i in range(10):
        cur.append_as_leader(build_batch([(None, f"v{i}".encode(), [], 1_700_000_000_000)]),
                             leader_epoch=3)
    fut = dirs.create_future_log("t", 0, dir_key(b), CONFIG, None)
    data = cur.read(0, 1 << 20).records
    assert isinstance(data, bytes | memoryview)
    fut.append_as_follower(data)
    assert fut.log_end_offset == cur.log_end_offset == 10
    return dirs, 10


def test_future_log_next_to_its_replica_is_discarded_and_the_move_resumed(
        tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    dirs, _ = _filled(a, b)
    dirs.shutdown()  # the future log is left on disk, as a crash leaves it
    assert [p for p in b.iterdir() if p.name.endswith("-future")]
    again = _dirs(a, b)
    assert again.dir_of("t", 0) == dir_key(a)
    assert again.resumed_moves == {("t", 0): dir_key(b)}
    assert not [p for p in b.iterdir() if p.name.endswith("-future")]
    assert again.future_log("t", 0) is None
    again.shutdown()


def test_future_log_whose_replica_was_renamed_for_deletion_becomes_current(
        tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    dirs, leo = _filled(a, b)
    fut = dirs.future_log("t", 0)
    assert fut is not None
    fut.close()  # the swap flushes and closes both logs, then renames the current one...
    dirs.shutdown()
    (a / "t-0").rename(a / "t-0.0123456789abcdef0123456789abcdef-delete")
    # ...and the crash comes before the future one is renamed.
    again = _dirs(a, b)
    assert again.dir_of("t", 0) == dir_key(b)
    assert again.resumed_moves == {}
    lg = again.get_log("t", 0)
    assert lg is not None and lg.log_end_offset == leo
    assert (b / "t-0").is_dir() and not [p for p in a.iterdir() if p.name.startswith("t-0")]
    assert lg.leader_epoch_cache.entries == [(3, 0)]
    again.shutdown()


def test_future_log_is_left_alone_while_a_log_dir_is_offline(tmp_path: Path) -> None:
    """Its current replica may be in the offline directory: the future log, perhaps partial,
    neither becomes the replica nor is deleted."""
    a, b = tmp_path / "a", tmp_path / "b"
    dirs, _ = _filled(a, b)
    dirs.shutdown()
    # A directory where a checkpoint file must be written: `a` fails as it loads.
    (a / "recovery-point-offset-checkpoint").unlink()
    (a / "recovery-point-offset-checkpoint").mkdir()
    again = _dirs(a, b)
    assert again.offline_dirs == [dir_key(a)]
    assert again.get_log("t", 0) is None and again.resumed_moves == {}
    assert [p for p in b.iterdir() if p.name.endswith("-future")]
