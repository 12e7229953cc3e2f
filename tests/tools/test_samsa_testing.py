"""samsa.testing: the context manager, and the pytest plugin as a user's project runs it
(opt-in, both fixture scopes, under pytest-xdist)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import samsa.testing
from samsa.testing import _wire

ROOT = Path(__file__).resolve().parents[2]


def _topic_ready(bootstrap: str, topic: str, partitions: int) -> bool:
    return _wire._has_leaders(bootstrap, topic, partitions, 10.0)


def test_context_manager_create_restart_kill(tmp_path: Path) -> None:
    with samsa.testing.broker({"num.partitions": 2}, auto_create_topics_enable=False) as b:
        assert b.bootstrap.startswith("127.0.0.1:") and b.is_running()
        assert b.startup_seconds is not None
        print(f"\nsamsa.testing.broker ready after {b.startup_seconds:.3f} s")
        assert "--set" in b.command() and "auto.create.topics.enable=false" in b.command()
        b.create_topic("orders", partitions=3, config={"cleanup.policy": "compact"})
        assert _topic_ready(b.bootstrap, "orders", 3)
        with pytest.raises(RuntimeError, match="error 36"):  # TOPIC_ALREADY_EXISTS
            b.create_topic("orders")
        port, data = b.port, b.data_dir
        b.restart()
        assert (b.port, b.data_dir) == (port, data)
        assert _topic_ready(b.bootstrap, "orders", 3)
        b.kill()
        assert not b.is_running()
        b.start()
        assert _topic_ready(b.bootstrap, "orders", 3)
    assert not b.is_running() and not data.exists()


def test_own_process_exit_code_environment_and_log(tmp_path: Path) -> None:
    """What the project's own tests (tests/support/broker.py) take from samsa.testing: a
    process of its own whose exit code is kept, an added environment, and each start headed
    in the log."""
    b = samsa.testing.SamsaBroker({"no.such.property": 1}, data_dir=tmp_path / "d",
                                  fork=False, env={"SAMSA_TEST_MARK": "x"})
    with pytest.raises(samsa.testing.BrokerStartError, match="exited with code 2"):
        b.start()
    assert b.last_returncode == 2 and b.starts == 1 and not b.is_running()
    assert "===== start #1 at " in b.log_tail() and "no.such.property" in b.log_tail()
    b.settings.clear()
    b.start()
    try:
        environ = Path(f"/proc/{b.pid}/environ").read_bytes().split(b"\0")
        assert b"SAMSA_TEST_MARK=x" in environ
    finally:
        assert b.stop() == 0 and b.last_returncode == 0
    assert "===== start #2 at " in b.log_text()


def test_forked_broker_exit_status_is_real(tmp_path: Path) -> None:
    """A broker forked from the launcher reports the exit status it really had, as a process
    of its own does: the refused start-up's 2, a clean stop's 0, SIGKILL's -9."""
    if not samsa.testing._use_zygote():
        pytest.skip("brokers are not forked here (SAMSA_BROKER_CMD or SAMSA_TESTING_FORK=0)")
    b = samsa.testing.SamsaBroker({"no.such.property": 1}, data_dir=tmp_path / "d")
    assert b._forked()
    with pytest.raises(samsa.testing.BrokerStartError, match="exited with code 2"):
        b.start()
    assert b.last_returncode == 2 and not b.is_running()
    b.settings.clear()
    b.start()
    assert b.stop() == 0 and b.last_returncode == 0
    b.start()
    b.kill()
    assert b.last_returncode == -9
    b.start()
    pid = b.pid
    assert pid is not None
    os.kill(pid, 15)  # a SIGTERM from outside: the broker still shuts down cleanly
    assert b.proc is not None and b.proc.wait(30) == 0


def _user_project(tmp_path: Path, conftest: str = "", ini: str = "") -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    if conftest:
        (project / "conftest.py").write_text(conftest)
    (project / "test_user.py").write_text(textwrap.dedent("""
        import os, socket

        import pytest

        def _ok(bootstrap):
            host, port = bootstrap.split(":")
            socket.create_connection((host, int(port)), timeout=5).close()

        def test_function_scope(samsa_broker):
            _ok(samsa_broker.bootstrap)
            samsa_broker.create_topic("t")

        def test_function_scope_is_fresh(samsa_broker):
            samsa_broker.create_topic("t")  # would fail (exists) on the broker of another test

        @pytest.mark.samsa_settings(**{"num.partitions": 4})
        def test_settings_marker(samsa_broker):
            assert "num.partitions=4" in samsa_broker.command()

        def test_session_a(samsa_session_broker, tmp_path_factory):
            _ok(samsa_session_broker.bootstrap)
            os.environ["SEEN"] = samsa_session_broker.bootstrap

        def test_session_b(samsa_session_broker):
            if "SEEN" in os.environ:  # same worker: the same broker
                assert os.environ["SEEN"] == samsa_session_broker.bootstrap
    """))
    return project


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=280)


def test_a_reused_pid_is_not_taken_for_the_broker_that_had_it() -> None:
    """The launcher's reports as its reader takes them: a broker with pid 4242 ends (code 0),
    then the kernel gives 4242 to the next broker. The new one must not read as exited with
    the old one's status (a long run wraps pid_max, and a start then failed with "exited with
    code 0 before accepting connections"). The launcher here is a real process that writes
    those reports, then ends with its last child still running."""
    import queue
    import threading

    script = textwrap.dedent("""
        import json, sys
        for m in ({"ready": True}, {"pid": 4242}, {"exit": 4242, "code": 0}, {"pid": 4242}):
            print(json.dumps(m), flush=True)
        sys.stdin.read()  # until the test lets it end
    """)
    launcher = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
    zygote = samsa.testing._Zygote()
    ready = threading.Event()
    answers: queue.Queue = queue.Queue()
    reader = threading.Thread(target=zygote._read, args=(launcher, ready, answers), daemon=True)
    reader.start()
    try:
        first = samsa.testing._Forked(*answers.get(timeout=10), zygote)
        assert first.wait(10) == 0
        second = samsa.testing._Forked(*answers.get(timeout=10), zygote)
        assert second.pid == first.pid == 4242
        assert second.poll() is None and first.poll() == 0
    finally:
        assert launcher.stdin is not None
        launcher.stdin.close()
        launcher.wait(10)
        reader.join(10)
    assert second.poll() == -9  # the launcher's end takes its children with it
    assert first.poll() == 0


def test_free_port_never_hands_out_a_port_twice() -> None:
    """Ports picked before any is bound (a cluster's listeners, then its schema registries')
    are all different: drawn from ~12,000 ports, 500 picks would repeat one almost surely
    (about 1 - e^-10) if the picks were independent."""
    picked = [samsa.testing.free_port() for _ in range(500)]
    assert len(set(picked)) == len(picked)


def test_plugin_is_off_unless_the_project_opts_in(tmp_path: Path) -> None:
    res = _pytest(_user_project(tmp_path), "test_user.py::test_function_scope")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "fixture 'samsa_broker' not found" in res.stdout


def test_plugin_with_dash_p(tmp_path: Path) -> None:
    res = _pytest(_user_project(tmp_path), "-p", "samsa.testing")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "5 passed" in res.stdout
    assert "samsa.testing: 4 broker start(s), start-up median" in res.stdout, res.stdout
    summary = next(line for line in res.stdout.splitlines() if "samsa.testing:" in line)
    print("\n" + summary)
    # forked from a launcher that has imported Samsa: well under half a second (the minimum,
    # so that one start slowed by a busy machine does not fail the test); without forking
    # (SAMSA_TESTING_FORK=0, SAMSA_BROKER_CMD) each start pays Python's start-up and imports
    if samsa.testing._use_zygote():
        assert float(re.search(r"min ([0-9.]+) s", summary)[1]) < 0.5, summary


def test_plugin_from_conftest(tmp_path: Path) -> None:
    project = _user_project(tmp_path, conftest='pytest_plugins = ["samsa.testing"]\n')
    res = _pytest(project, "-k", "function_scope")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 passed" in res.stdout


def test_plugin_under_xdist(tmp_path: Path) -> None:
    pytest.importorskip("xdist", reason="pytest-xdist (the [test] extra) is not installed yet")
    res = _pytest(_user_project(tmp_path), "-p", "samsa.testing", "-n", "2")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "5 passed" in res.stdout


def test_cluster_fixture(tmp_path: Path) -> None:
    if not samsa.testing.zookeeper_available():
        pytest.skip("ZooKeeper is not installed")
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_cluster.py").write_text(textwrap.dedent("""
        def test_three(samsa_cluster):
            c = samsa_cluster(3)
            assert len(c.bootstrap.split(",")) == 3
            c.create_topic("replicated", partitions=2, replication_factor=3)
    """))
    res = _pytest(project, "-p", "samsa.testing")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 passed" in res.stdout
