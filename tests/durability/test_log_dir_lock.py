"""A log directory is one broker's (Kafka's `.lock`, LogManager.lockLogDirs): a second broker
on it, in another process or on another thread of the same one, is refused with Kafka's message
while the first goes on serving; the lock dies with its process, so a broker killed with -9
leaves nothing that stops the next one."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from samsa.storage.check import check_data_dir
from samsa.storage.log_dir_lock import LOCK_FILE, LogDirLock, LogDirLockError, lock_log_dirs
from samsa.testing import EmbeddedBroker
from tests.durability.test_durability import _check, _consume_all, _produce
from tests.support.broker import BrokerProcess, BrokerStartError

REFUSED = ("Failed to acquire lock on file .lock in {}. A Kafka instance in another process or "
           "thread is using this directory.")


def test_a_second_broker_process_on_the_data_dir_exits_and_the_first_serves_on(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = BrokerProcess(data, name="first")
    second = BrokerProcess(data, name="second")
    first.start()
    try:
        assert len(_produce(first.bootstrap, "locked", 0, 500)) == 500
        with pytest.raises(BrokerStartError, match="exited with code 1"):
            second.start()
        assert second.last_returncode == 1
        assert REFUSED.format(data) in second.log_text()
        assert "serving on" not in second.log_text()  # refused before it listened
        # the first broker's log is whole and still grows
        assert sorted(_produce(first.bootstrap, "locked", 500, 500)) == list(range(500, 1000))
        _check(_consume_all(first.bootstrap, "locked", 1000), 1000)
    finally:
        first.close()
        second.close()
    # a clean stop released the lock: the second starts now, on the same data
    second.start()
    try:
        _check(_consume_all(second.bootstrap, "locked", 1000), 1000)
    finally:
        second.close()


def test_a_broker_starts_on_the_dir_of_one_killed_with_minus_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    crashed = BrokerProcess(data, name="crashed")
    crashed.start()
    try:
        _produce(crashed.bootstrap, "after-crash", 0, 1000)
    finally:
        crashed.kill9()
    assert (data / LOCK_FILE).is_file()  # left behind, and nothing to clean up
    with BrokerProcess(data, name="next") as following:
        _check(_consume_all(following.bootstrap, "after-crash", 1000), 1000)
    # the lock file is no partition: neither recovery nor the offline check takes it for one
    names = [r.name for r in check_data_dir(data)]
    assert [n for n in names if not n.startswith("__consumer_offsets-")] == ["after-crash-0"]


def test_a_second_embedded_broker_on_a_locked_dir_of_this_process_is_refused(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    with EmbeddedBroker(data_dir=data) as first:
        second = EmbeddedBroker(data_dir=data)
        with pytest.raises(RuntimeError, match="did not start") as refused:
            second.start()
        assert isinstance(refused.value.__cause__, LogDirLockError)
        assert str(refused.value.__cause__) == REFUSED.format(data)
        first.create_topic("still-served", partitions=2)  # the first is untouched
    with second:  # the first stopped cleanly: its dir is free again
        second.create_topic("after", partitions=1)
    assert [r.name for r in check_data_dir(data)] == [
        "after-0", "still-served-0", "still-served-1"]


def test_a_directory_named_another_way_is_the_same_lock(tmp_path: Path) -> None:
    data = tmp_path / "data"
    held = LogDirLock.acquire(data)
    os.symlink(data, tmp_path / "alias")
    try:
        with pytest.raises(LogDirLockError, match="in " + str(tmp_path / "alias")):
            LogDirLock.acquire(tmp_path / "alias")
    finally:
        held.release()
    LogDirLock.acquire(tmp_path / "alias").release()


def test_this_process_refuses_its_own_lock_where_flock_would_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over NFS, flock is the per-process POSIX lock: a second descriptor of the same process
    gets it too. The set of locks this process holds refuses the second broker all the same."""
    def posix_lock(fd: int, op: int) -> None:
        fcntl.lockf(fd, op)

    monkeypatch.setattr(fcntl, "flock", posix_lock)
    held = LogDirLock.acquire(tmp_path)
    try:
        with pytest.raises(LogDirLockError):
            LogDirLock.acquire(tmp_path)
    finally:
        held.release()


def test_all_directories_or_none(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    other = _lock_in_another_process(b)
    try:
        with pytest.raises(LogDirLockError, match=f"in {b}\\."):
            lock_log_dirs([a, b])
        LogDirLock.acquire(a).release()  # what was locked before the refusal was released
    finally:
        other.kill()
        other.wait()
    for held in lock_log_dirs([a, b]):  # the killed process's lock is gone with it
        held.release()


def _lock_in_another_process(log_dir: Path) -> subprocess.Popen[str]:
    """A process holding `log_dir`'s lock until killed."""
    code = ("import sys; from pathlib import Path; "
            "from samsa.storage.log_dir_lock import LogDirLock; "
            "LogDirLock.acquire(Path(sys.argv[1])); print('locked', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(log_dir)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    return proc


def test_a_dir_that_cannot_be_locked_for_an_io_error_is_offline_and_the_others_serve(
        tmp_path: Path) -> None:
    served, broken = tmp_path / "served", tmp_path / "broken"
    broken.write_text("a file where a log directory should be")  # no .lock can be made in it
    with EmbeddedBroker({"log.dirs": f"{served},{broken}"}, data_dir=served) as b:
        assert b.broker is not None
        assert b.broker.log_manager.offline_dirs == [str(broken)]
        b.create_topic("on-the-live-dir", partitions=2)
        assert (served / LOCK_FILE).is_file()
        with pytest.raises(LogDirLockError):  # the live one is locked all the same
            LogDirLock.acquire(served)
    assert [r.name for r in check_data_dir(served)] == [
        "on-the-live-dir-0", "on-the-live-dir-1"]
