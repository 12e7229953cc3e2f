"""Two test sessions share one dockerd: the one that started it leaves it running while another
session is registered, and the last one out stops it (tests/support/docker_env.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import docker_env


@pytest.fixture
def users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(docker_env, "USERS", tmp_path)
    return tmp_path


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_the_starter_leaves_the_engine_to_a_session_still_using_it(users: Path) -> None:
    daemon, other = sleeper(), sleeper()  # a stand-in dockerd; another session's process
    try:
        (users / str(other.pid)).touch()
        starter = docker_env.Engine()
        starter.proc = daemon
        starter.stop()
        assert daemon.poll() is None, "stopped under another session"
        assert (users / docker_env.HANDOVER).exists()

        other.kill()
        other.wait()
        docker_env.Engine().stop()  # the last session out (its entry is gone with its process)
        assert daemon.wait(10) is not None
        assert not (users / docker_env.HANDOVER).exists()
    finally:
        for p in (daemon, other):
            p.kill()
            p.wait()


def test_alone_the_starter_stops_it(users: Path) -> None:
    daemon = sleeper()
    try:
        (users / "999999999").touch()  # a session that died without unregistering
        starter = docker_env.Engine()
        starter.proc = daemon
        starter.stop()
        assert daemon.wait(10) is not None
        assert list(users.iterdir()) == []
    finally:
        daemon.kill()
        daemon.wait()
