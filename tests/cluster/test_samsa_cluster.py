"""`samsa cluster --brokers 3` as a user runs it: a local ZooKeeper and three broker processes
that register under /samsa/brokers/ids, answer Kafka clients, survive one broker's death and
all stop on Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from samsa.broker.cluster.local_cluster import port_accepts, port_is_free
from samsa.broker.cluster.zk.process import zookeeper_installed
from tests.support.broker import REPO_ROOT, samsa_command

pytestmark = pytest.mark.skipif(
    not zookeeper_installed(),
    reason="needs Debian's zookeeper package and java (make zk-deps)",
)

BROKERS = 3
START_TIMEOUT = 120.0


def free_port_block(count: int) -> tuple[int, int]:
    """(zk_port, base_port): count consecutive free ports and one more, below Linux's
    ephemeral range so that client sockets do not take them meanwhile."""
    for _ in range(200):
        base = random.randrange(20000, 32000 - count)
        ports = [base - 1, *range(base, base + count)]
        if all(port_is_free("127.0.0.1", p) for p in ports):
            return base - 1, base
    raise RuntimeError("no block of free ports found")


class ClusterRun:
    """A `samsa cluster` child process whose output is collected by a reader thread."""

    def __init__(self, cmd: list[str]) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if m := re.search(pattern, line):
                    return m
            if self.proc.poll() is not None:
                time.sleep(0.2)  # let the reader drain what is left
                for line in list(self.lines):
                    if m := re.search(pattern, line):
                        return m
                pytest.fail(f"samsa cluster exited ({self.proc.returncode}) before printing "
                            f"{pattern!r}:\n{self.output}")
            time.sleep(0.1)
        pytest.fail(f"no {pattern!r} within {timeout:.0f}s:\n{self.output}")

    def child_pids(self) -> dict[str, int]:
        pids: dict[str, int] = {}
        for line in list(self.lines):
            if m := re.match(r"(zookeeper|broker \d+): .*\(pid (\d+)", line):
                pids[m.group(1)] = int(m.group(2))
        return pids


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def logs(data_dir: Path) -> str:
    parts = []
    for log in sorted(data_dir.glob("broker-*/broker.log")):
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        parts.append(f"----- {log} -----\n{tail}")
    return "\n".join(parts)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ClusterRun, Path, int, int]]:
    zk_port, base_port = free_port_block(BROKERS)
    data_dir = tmp_path / "cluster"
    run = ClusterRun([*samsa_command(), "cluster", "--brokers", str(BROKERS),
                      "--data-dir", str(data_dir), "--base-port", str(base_port),
                      "--zk-port", str(zk_port),
                      "--set", "zookeeper.session.timeout.ms=6000"])
    try:
        yield run, data_dir, zk_port, base_port
    finally:
        # Whatever happened, leave no process behind: the cluster, then its children.
        if run.proc.poll() is None:
            run.proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.proc.wait(60)
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
        for pid in run.child_pids().values():
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_three_brokers_register_serve_and_stop_on_ctrl_c(
    cluster: tuple[ClusterRun, Path, int, int],
) -> None:
    run, data_dir, zk_port, base_port = cluster
    m = run.wait_for(r"^bootstrap: (\S+)$", START_TIMEOUT)
    bootstrap = m.group(1)
    ports = [base_port + i for i in range(BROKERS)]
    assert bootstrap == ",".join(f"127.0.0.1:{p}" for p in ports)
    pids = run.child_pids()
    assert set(pids) == {"zookeeper", *(f"broker {i}" for i in range(BROKERS))}, run.output
    for i in range(BROKERS):
        assert (data_dir / f"broker-{i}" / "broker.log").stat().st_size > 0

    # Every broker registered in ZooKeeper under the chroot.
    zk = KazooClient(hosts=f"127.0.0.1:{zk_port}/samsa")
    zk.start(timeout=15)
    try:
        deadline = time.monotonic() + 60
        ids: list[str] = []
        while time.monotonic() < deadline:
            ids = zk.get_children("/brokers/ids") if zk.exists("/brokers/ids") else []
            if len(ids) == BROKERS:
                break
            time.sleep(0.2)
        assert sorted(ids, key=int) == [str(i) for i in range(BROKERS)], (
            f"/samsa/brokers/ids = {ids}\n{run.output}\n{logs(data_dir)}")
    finally:
        zk.stop()
        zk.close()

    # Each port answers a Kafka client on its own: with one bootstrap address and no other
    # broker known yet, librdkafka's ApiVersions and Metadata go to that port.
    for i, port in enumerate(ports):
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        md = admin.list_topics(timeout=20)
        assert i in md.brokers, f"port {port}: brokers {md.brokers}\n{logs(data_dir)}"
        assert (md.brokers[i].host, md.brokers[i].port) == ("127.0.0.1", port)

    # A broker that dies is reported; the cluster and the other brokers keep running.
    os.kill(pids["broker 2"], signal.SIGKILL)
    run.wait_for(r"broker 2 \(pid \d+\) was killed by SIGKILL.*Restart it with: ", 15)
    assert run.proc.poll() is None
    assert port_accepts("127.0.0.1", ports[0]) and port_accepts("127.0.0.1", ports[1])

    # Ctrl-C: brokers stop, then ZooKeeper; exit status 0; nothing left behind.
    run.proc.send_signal(signal.SIGINT)
    assert run.proc.wait(90) == 0, run.output
    run.wait_for(r"^cluster stopped$", 5)
    left = {name: pid for name, pid in pids.items() if alive(pid)}
    assert not left, f"still running after samsa cluster exited: {left}\n{run.output}"
    for port in [zk_port, *ports]:
        assert not port_accepts("127.0.0.1", port), port
    for i in range(2):  # the two brokers stopped by SIGTERM shut down cleanly
        assert "shut down cleanly" in (data_dir / f"broker-{i}" / "broker.log").read_text()
