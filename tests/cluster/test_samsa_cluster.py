"""`samsa cluster --brokers 3` as a user runs it: a local ZooKeeper and three broker processes
that register under /samsa/brokers/ids, answer Kafka clients, survive one broker's death and
all stop on Ctrl-C; and `samsa cluster --brokers 2 --processes 2`, two nodes of two processes
each, whose replicas of a partition are on different nodes and which all stop on SIGTERM."""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from samsa.broker.cluster.local_cluster import port_accepts, port_is_free
from samsa.broker.cluster.zk.process import zookeeper_installed
from samsa.testing._node import alive
from tests.support.broker import REPO_ROOT, samsa_command

pytestmark = pytest.mark.skipif(
    not zookeeper_installed(),
    reason="needs Debian's zookeeper package and java (make zk-deps)",
)

BROKERS = 3
START_TIMEOUT = 120.0
T = TypeVar("T")


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
            if m := re.match(r"(zookeeper|broker \d+|node \d+): .*\(pid (\d+)", line):
                pids[m.group(1)] = int(m.group(2))
        return pids


def logs(data_dir: Path) -> str:
    parts = []
    for log in sorted(data_dir.glob("broker-*/broker.log")):
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-25:])
        parts.append(f"----- {log} -----\n{tail}")
    return "\n".join(parts)


def node_broker_pids(data_dir: Path) -> dict[int, int]:
    """{broker id: pid} of every process the nodes' supervisors started (the last of each)."""
    pids: dict[int, int] = {}
    for log in sorted(data_dir.glob("node-*/node.log")):
        for m in re.finditer(r"samsa\.node: broker (\d+) started \(pid (\d+)\)",
                             log.read_text(errors="replace")):
            pids[int(m.group(1))] = int(m.group(2))
    return pids


@contextlib.contextmanager
def running(data_dir: Path, brokers: int, processes: int = 1,
            ) -> Iterator[tuple[ClusterRun, int, int]]:
    """`samsa cluster --brokers K [--processes N]` on free ports: (run, zk_port, base_port)."""
    zk_port, base_port = free_port_block(brokers * processes)
    run = ClusterRun([*samsa_command(), "cluster", "--brokers", str(brokers),
                      *(["--processes", str(processes)] if processes > 1 else []),
                      "--data-dir", str(data_dir), "--base-port", str(base_port),
                      "--zk-port", str(zk_port),
                      "--set", "zookeeper.session.timeout.ms=6000"])
    try:
        yield run, zk_port, base_port
    finally:
        # Whatever happened, leave no process behind: the cluster, then its children.
        if run.proc.poll() is None:
            run.proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.proc.wait(90)
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
        for pid in [*run.child_pids().values(), *node_broker_pids(data_dir).values()]:
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ClusterRun, Path, int, int]]:
    data_dir = tmp_path / "cluster"
    with running(data_dir, BROKERS) as (run, zk_port, base_port):
        yield run, data_dir, zk_port, base_port


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


def wait_for_value(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while (value := probe()) is None:
        assert time.monotonic() < deadline, f"no {what} within {timeout:.0f} s"
        time.sleep(0.5)
    return value


def test_two_nodes_of_two_processes_place_replicas_apart_and_stop_on_sigterm(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "cluster"
    with running(data_dir, 2, processes=2) as (run, zk_port, base_port):
        bootstrap = run.wait_for(r"^bootstrap: (\S+)$", 2 * START_TIMEOUT).group(1)
        ports = [base_port + i for i in range(4)]
        assert bootstrap == ",".join(f"127.0.0.1:{p}" for p in ports)
        pids = run.child_pids()
        assert set(pids) == {"zookeeper", "node 0", "node 1"}, run.output
        admin = AdminClient({"bootstrap.servers": bootstrap})

        # The four processes are brokers 0..3 on the four ports, 0-1 of node 0, 2-3 of node 1.
        def all_four() -> dict[int, tuple[str, int, str | None]] | None:
            nodes = admin.describe_cluster(request_timeout=10).result(timeout=20).nodes
            found = {n.id: (n.host, n.port, n.rack) for n in nodes}
            return found if len(found) == 4 else None

        racks = {0: "node-0", 1: "node-0", 2: "node-1", 3: "node-1"}
        assert wait_for_value(all_four, 60, "four brokers") == {
            i: ("127.0.0.1", port, racks[i]) for i, port in enumerate(ports)}

        # Replication factor 2: one replica on each node, and leaders on every process.
        topic = "spread"
        admin.create_topics([NewTopic(topic, 4, 2)])[topic].result(timeout=60)

        def placed() -> dict[int, tuple[int, list[int]]] | None:
            t = admin.list_topics(topic, timeout=10).topics[topic]
            found = {p.id: (p.leader, list(p.replicas)) for p in t.partitions.values()}
            return found if len(found) == 4 and all(ld >= 0 for ld, _ in found.values()) \
                else None

        partitions = wait_for_value(placed, 60, f"leaders of {topic}")
        for _, replicas in partitions.values():
            assert sorted(racks[r] for r in replicas) == ["node-0", "node-1"], partitions
        assert {leader for leader, _ in partitions.values()} == {0, 1, 2, 3}, partitions

        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        sent = {f"v{i}".encode() for i in range(200)}
        for i, value in enumerate(sorted(sent)):
            producer.produce(topic, value, partition=i % 4)
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                             "auto.offset.reset": "earliest"})
        got: set[bytes | None] = set()
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            while got != sent and time.monotonic() < deadline:
                got |= {r.value() for r in consumer.consume(100, 0.5) if r.error() is None}
        finally:
            consumer.close()
        assert got == sent, f"{len(got)} of {len(sent)} read"

        # SIGTERM: the nodes stop their processes, then ZooKeeper stops; nothing is left.
        brokers = node_broker_pids(data_dir)
        assert set(brokers) == {0, 1, 2, 3}, brokers
        run.proc.send_signal(signal.SIGTERM)
        assert run.proc.wait(120) == 0, run.output
        run.wait_for(r"^cluster stopped$", 5)
        everything = {**pids, **{f"broker {b}": pid for b, pid in brokers.items()}}
        left = {name: pid for name, pid in everything.items() if alive(pid)}
        assert not left, f"still running after samsa cluster exited: {left}\n{run.output}"
        for port in [zk_port, *ports]:
            assert not port_accepts("127.0.0.1", port), port
        for node in ("node-0", "node-1"):
            log = (data_dir / node / "node.log").read_text()
            assert log.count("shut down cleanly") == 2, log[-3000:]


def test_samsa_testing_cluster_of_two_nodes_of_two_processes() -> None:
    """samsa.testing.cluster(2, processes=2): `samsa cluster --processes 2` for tests, its
    bootstrap listing every process, a partition's replicas on both nodes."""
    import samsa.testing

    with samsa.testing.cluster(2, processes=2) as c:
        assert len(c.ports) == 4 and c.bootstrap.count(",") == 3
        admin = AdminClient({"bootstrap.servers": c.bootstrap})

        def racks() -> dict[int, str | None] | None:
            nodes = admin.describe_cluster(request_timeout=10).result(timeout=20).nodes
            return {n.id: n.rack for n in nodes} if len(nodes) == 4 else None

        assert wait_for_value(racks, 60, "four brokers") == {
            0: "node-0", 1: "node-0", 2: "node-1", 3: "node-1"}
        admin.create_topics([NewTopic("paired", 2, 2)])["paired"].result(timeout=60)

        def replicas() -> list[list[int]] | None:
            t = admin.list_topics("paired", timeout=10).topics["paired"]
            found = [sorted(p.replicas) for p in t.partitions.values() if p.leader >= 0]
            return found if len(found) == 2 else None

        for pair in wait_for_value(replicas, 60, "leaders of paired"):
            assert pair[0] in (0, 1) and pair[1] in (2, 3), pair
