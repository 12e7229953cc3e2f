"""`samsa serve --processes N` for tests: one node of N broker processes under its supervisor
(broker/node/supervisor.py), with a ZooKeeper of its own unless given one.

    with samsa.testing.node(processes=2) as n:      # brokers 0 and 1 on PORT and PORT+1
        n.create_topic("orders", partitions=4)
        produce_and_consume(n.bootstrap)
        n.kill_process(1)                           # SIGKILL broker 1 alone
        n.wait_restarted(1)                         # the supervisor started it again
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from samsa.testing import (
    START_TIMEOUT,
    STOP_TIMEOUT,
    BrokerStartError,
    _accepts,
    _free,
    _popen,
    _Served,
    _set_args,
    free_port,
    samsa_command,
    startup_times,
)

_STARTED = re.compile(r"samsa\.node: broker (\d+) started \(pid (\d+)\)")


class SamsaNode(_Served):
    """A node of `processes` brokers, ids broker_id.. on consecutive free loopback ports, data
    under one temporary directory. `zookeeper`: True starts a ZooKeeper for this node alone, a
    string is the zookeeper.connect of one already running, False runs the node without.
    `metrics`: the node's /metrics on `metrics_port`."""

    host = "127.0.0.1"

    def __init__(self, processes: int = 2, settings: Mapping[str, Any] | None = None, *,
                 zookeeper: bool | str = True, broker_id: int = 0,
                 metrics: bool = False) -> None:
        self.processes = processes
        self.broker_id = broker_id
        self.settings = dict(settings or {})
        self._tmp = tempfile.TemporaryDirectory(prefix="samsa-testing-node-")
        self._closing = contextlib.ExitStack()
        self._closing.callback(self._tmp.cleanup)
        self.dir = Path(self._tmp.name)
        self.log_path = self.dir / "node.log"
        self.zookeeper_setting = zookeeper
        self.zk: Any = None  # the ZooKeeperProcess this node started, if any
        base = self.free_ports(processes)
        self.ports = [base + i for i in range(processes)]
        self.metrics_port: int | None = None
        if metrics:  # the node's /metrics on it, process i's on the port 1+i after it
            self.metrics_port = self.free_ports(processes + 1)
            self.settings["metrics.port"] = self.metrics_port
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    def free_ports(self, count: int) -> int:
        """A port P with P..P+count-1 all free now."""
        while True:
            base = free_port(self.host)
            if all(_free(self.host, base + i) for i in range(count)):
                return base

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{p}" for p in self.ports)

    @property
    def broker_ids(self) -> list[int]:
        return [self.broker_id + i for i in range(self.processes)]

    def _zookeeper_connect(self) -> str | None:
        if self.zookeeper_setting is False:
            return None
        if isinstance(self.zookeeper_setting, str):
            return self.zookeeper_setting
        if self.zk is None:
            from samsa.broker.cluster.zk.process import ZooKeeperProcess

            self.zk = ZooKeeperProcess(self.dir / "zookeeper", free_port(self.host)).start()
            self._closing.callback(self.zk.stop)
        return f"{self.zk.connect_string}/node"

    def command(self) -> list[str]:
        zk = self._zookeeper_connect()
        return [*samsa_command(), "serve", "--processes", str(self.processes),
                "--listen", f"{self.host}:{self.ports[0]}", "--data-dir", str(self.dir / "data"),
                "--broker-id", str(self.broker_id), *(["--zookeeper", zk] if zk else []),
                *_set_args(self.settings)]

    def start(self, timeout: float = 3 * START_TIMEOUT) -> SamsaNode:
        taken = [p for p in self.ports if _accepts(self.host, p)]
        if taken:  # as SamsaBroker.start: the wait below would take their answers for ours
            raise BrokerStartError(f"the node's ports {taken} are taken by another process")
        t0 = time.perf_counter()
        self.proc = _popen(self.command(), self.log_path)
        deadline = time.monotonic() + timeout
        while not all(_accepts(self.host, p) for p in self.ports):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BrokerStartError(f"the node did not start\n{self.log_tail()}")
            time.sleep(0.05)
        self.startup_seconds = time.perf_counter() - t0
        startup_times.append((f"node of {self.processes}", self.startup_seconds))
        return self

    def pid(self, broker_id: int) -> int:
        """The process of broker `broker_id` the supervisor started last."""
        pids = [int(m.group(2)) for m in _STARTED.finditer(self.log_text())
                if int(m.group(1)) == broker_id]
        if not pids:
            raise LookupError(f"broker {broker_id} was not started\n{self.log_tail()}")
        return pids[-1]

    def kill_process(self, broker_id: int) -> int:
        """SIGKILL one broker process of the node (a crash); returns its pid."""
        pid = self.pid(broker_id)
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill(self) -> None:
        """SIGKILL every broker process and the supervisor at once (the host crashing);
        start() brings the node back on the same data."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        pids = [self.pid(b) for b in self.broker_ids]
        # The supervisor stopped first (it must not see the brokers die and restart them),
        # killed last: its death sends each broker still alive SIGTERM, a clean shutdown.
        proc.send_signal(signal.SIGSTOP)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
        # SIGKILL takes effect when the process next runs: on a busy host a killed broker
        # can still hold its port when start() looks, which would take it for the new one.
        deadline = time.monotonic() + STOP_TIMEOUT
        while any(map(alive, pids)):
            if time.monotonic() > deadline:
                raise AssertionError(f"killed brokers {pids} still run\n{self.log_tail()}")
            time.sleep(0.02)

    def wait_restarted(self, broker_id: int, old_pid: int, timeout: float = 60.0) -> int:
        """Until the supervisor has started broker `broker_id` again and it accepts
        connections; its new pid."""
        port = self.ports[broker_id - self.broker_id]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid(broker_id) != old_pid and _accepts(self.host, port):
                return self.pid(broker_id)
            time.sleep(0.1)
        raise AssertionError(f"broker {broker_id} was not restarted\n{self.log_tail()}")

    def stop(self, timeout: float = 2 * STOP_TIMEOUT) -> int | None:
        """SIGTERM to the supervisor (every process shuts down cleanly); its exit code."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        proc.terminate()  # nothing if it has exited
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:  # the supervisor and its brokers, whatever they do
            os.killpg(proc.pid, signal.SIGKILL)
            return proc.wait()

    def close(self) -> None:
        with self._closing:  # the ZooKeeper, then the directory, whatever stop() raised
            self.stop()

    def __enter__(self) -> SamsaNode:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def alive(pid: int) -> bool:
    """True while any thread of process `pid` runs. A zombie is gone once all its threads
    are: a killed process's main thread turns zombie while its other threads still exit,
    and until the last of them has, its files (its listening sockets) are still open."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return False
    for task in tasks:
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue  # that thread is gone
        if state not in ("Z", "X"):
            return True
    return False
