"""`samsa serve --processes N`: N full brokers of one node under one supervisor.

Process i of a node configured as broker B on port P (every listener and advertised listener)
is broker B+i on port P+i, with its log directories DIR/broker-<B+i> under each DIR of
log.dirs, the schema registry's port shifted by i as well, and the node's `broker.rack` (the
host name unless set), so that replica placement keeps a partition's replicas on different
hosts (docs/design/cores.md). With metrics.port M, process i serves its /metrics on M+1+i and
the supervisor serves the node's on M, every process's series labelled by it (metrics.py).
The processes share the cluster metadata through ZooKeeper (zookeeper.connect) or, without
it, one SQLite file (samsa.metadata.shared.file, DIR/samsa-metadata.db unless set). A single
broker's data directory is carried over before the processes start: its data becomes broker
B's, process 0's (layout.py).

The supervisor prefixes every line a process writes with `[broker <id>] ` on its own stderr,
restarts a process that exits while the node runs (after a back-off that doubles with each
quick exit, logged), and on SIGTERM, SIGINT or SIGHUP sends every process SIGTERM (each shuts
down as a single broker does, with a controlled shutdown), kills those still running after
STOP_TIMEOUT and exits 0.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from samsa.config.loader import load_config
from samsa.config.schema import BrokerConfig, ConfigError

from ..cluster.local_cluster import (
    NODE_STOP_TIMEOUT,
    _die_with_parent,
    default_serve_command,
    describe_exit,
    stop_processes,
)
from ..cluster.shared import NODE_FILE
from .layout import LayoutError, adopt_single_broker, warn_unstarted
from .metrics import serve_node_metrics

log = logging.getLogger("samsa.node")

POLL_INTERVAL = 0.2  # how often it looks at its processes where the system has no pidfds
STOP_TIMEOUT = NODE_STOP_TIMEOUT  # 60 s; `samsa cluster` waits that long for a node
FIRST_BACKOFF = 1.0
MAX_BACKOFF = 30.0
# A process that ran this long before it exited is restarted after FIRST_BACKOFF again.
STABLE_AFTER = 60.0

_PORT = re.compile(r"(://(?:\[[^\]]*\]|[^:/,\s]*):)(\d+)")


def processes_arg(value: str) -> int:
    """--processes: a positive count or `auto` (the cores this process may run on)."""
    if value == "auto":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"--processes {value}: a count of at least 1, or auto")
    return n


def shift_ports(listeners: str, by: int) -> str:
    """Every NAME://HOST:PORT (or URL) of a comma-separated list with PORT+by; port 0 (any
    free port) stays 0."""
    def shifted(m: re.Match[str]) -> str:
        port = int(m.group(2))
        return f"{m.group(1)}{port + by if port else 0}"

    return _PORT.sub(shifted, listeners)


def process_settings(config: BrokerConfig, index: int) -> dict[str, str]:
    """What process `index` of a node sets over the node's configuration."""
    broker_id = config.broker_id + index
    settings = {
        "node.id": str(broker_id),
        "broker.id": str(broker_id),
        "listeners": shift_ports(config["listeners"], index),
        "log.dirs": ",".join(str(d / f"broker-{broker_id}") for d in config.log_dirs),
        "broker.rack": config["broker.rack"] or socket.gethostname(),
    }
    if config["zookeeper.connect"] is None and not config["samsa.metadata.shared.file"]:
        # without ZooKeeper the processes share the node's metadata file (broker/cluster/shared)
        settings["samsa.metadata.shared.file"] = str(config.log_dirs[0] / NODE_FILE)
    if config["advertised.listeners"] is not None:
        settings["advertised.listeners"] = shift_ports(config["advertised.listeners"], index)
    if config["metrics.port"]:  # the node's own endpoint is on the port itself (metrics.py)
        settings["metrics.port"] = str(config["metrics.port"] + 1 + index)
    if config["schema.registry.listeners"]:
        settings["schema.registry.listeners"] = ",".join(
            shift_ports(url, index) for url in config["schema.registry.listeners"])
    return settings


@dataclass
class BrokerProcess:
    """One broker of the node: its command, its process and its restart schedule."""

    broker_id: int
    command: list[str]
    proc: subprocess.Popen[bytes] | None = None
    pidfd: int | None = None  # readable once proc has exited (Linux 5.3+)
    started: float = 0.0
    backoff: float = FIRST_BACKOFF
    restart_at: float | None = None


class Supervisor:
    def __init__(self, processes: Sequence[BrokerProcess], *,
                 out: IO[bytes] | None = None, stop_timeout: float = STOP_TIMEOUT) -> None:
        self.processes = list(processes)
        self.out = out or sys.stderr.buffer
        self.stop_timeout = stop_timeout
        self._write_lock = threading.Lock()
        self._stop = threading.Event()
        self._readers: list[threading.Thread] = []
        # The supervisor sleeps until a process exits (its pidfd), a restart is due or a stop
        # is asked for (the wake pipe: a signal handler's write ends the poll it interrupted).
        self._pidfds = hasattr(os, "pidfd_open") and hasattr(os, "pipe2")
        self._wake_r, self._wake_w = (os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC) if self._pidfds
                                      else (-1, -1))
        self.passes = 0  # times it looked at its processes

    def request_stop(self, signum: int, frame: FrameType | None = None) -> None:
        if not self._stop.is_set():
            log.info("%s: stopping the node's %d processes", signal.Signals(signum).name,
                     len(self.processes))
        self._stop.set()
        if self._wake_w >= 0:
            with contextlib.suppress(BlockingIOError, OSError):
                os.write(self._wake_w, b"\0")

    def run(self) -> int:
        try:
            for p in self.processes:
                self._start(p)
            while not self._stop.is_set():
                self._sleep()
                self.passes += 1
                for p in self.processes:
                    self._watch(p)
            self._stop_all()
        finally:
            for p in self.processes:
                self._close_pidfd(p)
            # forgotten before they are closed: a late request_stop writes to no other file
            wake, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
            for fd in wake:
                if fd >= 0:
                    os.close(fd)
        return 0

    def _sleep(self) -> None:
        """Until a process exits, its restart is due or a stop is asked for; without pidfds,
        POLL_INTERVAL."""
        if not self._pidfds or any(p.proc is not None and p.restart_at is None
                                   and p.pidfd is None for p in self.processes):
            self._stop.wait(POLL_INTERVAL)
            return
        due = [p.restart_at for p in self.processes if p.restart_at is not None]
        timeout = None if not due else max(0.0, min(due) - time.monotonic()) * 1000
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        for p in self.processes:
            if p.pidfd is not None:
                poller.register(p.pidfd, select.POLLIN)
        if poller.poll(timeout) and not self._stop.is_set():
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_r, 4096)

    # ------------------------------------------------------------------ one process
    def _start(self, p: BrokerProcess) -> None:
        p.proc = subprocess.Popen(
            p.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
            # Own session: a Ctrl-C in the terminal reaches the supervisor only, which stops
            # every process; the processes get SIGTERM too if the supervisor dies.
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        p.started = time.monotonic()
        p.restart_at = None
        if self._pidfds:
            try:  # not reaped before the supervisor waits for it: the pid is still its own
                p.pidfd = os.pidfd_open(p.proc.pid)
            except OSError as exc:  # e.g. ENOSYS under seccomp: looked at every POLL_INTERVAL
                log.debug("no pidfd for broker %d: %r", p.broker_id, exc)
        log.info("broker %d started (pid %d)", p.broker_id, p.proc.pid)
        reader = threading.Thread(target=self._copy_lines, args=(p.broker_id, p.proc.stdout),
                                  name=f"broker-{p.broker_id}-output", daemon=True)
        reader.start()
        self._readers = [t for t in self._readers if t.is_alive()] + [reader]

    def _copy_lines(self, broker_id: int, stream: IO[bytes] | None) -> None:
        """The process's output on the node's stream, each line naming the process."""
        if stream is None:
            return
        prefix = f"[broker {broker_id}] ".encode()
        for line in stream:
            with self._write_lock:
                self.out.write(prefix + line)
                self.out.flush()

    def _watch(self, p: BrokerProcess) -> None:
        """Schedule a restart of an exited process, or start it once its back-off is over."""
        now = time.monotonic()
        if p.restart_at is not None:
            if now >= p.restart_at:
                self._start(p)
            return
        rc = p.proc.poll() if p.proc is not None else None
        if rc is None:
            return
        self._close_pidfd(p)
        if now - p.started >= STABLE_AFTER:
            p.backoff = FIRST_BACKOFF
        p.restart_at = now + p.backoff
        log.warning("broker %d (pid %d) %s; restarting it in %.1f s", p.broker_id,
                    p.proc.pid if p.proc else -1, describe_exit(rc), p.backoff)
        p.backoff = min(p.backoff * 2, MAX_BACKOFF)

    @staticmethod
    def _close_pidfd(p: BrokerProcess) -> None:
        if p.pidfd is not None:
            os.close(p.pidfd)
            p.pidfd = None

    def _stop_all(self) -> None:
        stop_processes({f"broker {p.broker_id}": p.proc for p in self.processes
                        if p.proc is not None and p.proc.poll() is None}, self.stop_timeout)
        for reader in self._readers:  # their last lines, before the supervisor exits
            reader.join(timeout=2.0)
        log.info("the node's processes stopped")


def node_processes(config_path: Path | None, overrides: Mapping[str, str], count: int,
                   serve_command: Sequence[str] | None = None) -> list[BrokerProcess]:
    """The node's broker processes, each configuration checked before any starts (raises
    ConfigError)."""
    node = load_config(config_path, overrides)
    command = list(serve_command or default_serve_command())
    if config_path is not None:
        command += ["--config", str(config_path)]
    out = []
    for i in range(count):
        settings = {**overrides, **process_settings(node, i)}
        load_config(config_path, settings)
        args = [a for key, value in settings.items() for a in ("--set", f"{key}={value}")]
        out.append(BrokerProcess(node.broker_id + i, [*command, *args]))
    return out


def run_node(config_path: Path | None, overrides: Mapping[str, str], count: int,
             on_error: Callable[[str], Any] = print) -> int:
    """`samsa serve --processes N` (N > 1): 0 after a requested stop, 2 on a config error."""
    try:
        processes = node_processes(config_path, overrides, count)
    except ConfigError as e:
        on_error(f"samsa: config error: {e}")
        return 2
    node = load_config(config_path, overrides)
    try:  # a single broker's data directory becomes process 0's (layout.py)
        adopt_single_broker(node)
    except LayoutError as e:
        on_error(f"samsa: {e}")
        return 2
    warn_unstarted(node, count)
    if node["metrics.port"]:
        _serve_metrics(node, processes)
    supervisor = Supervisor(processes)
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, supervisor.request_stop) for sig in handled}
    try:
        return supervisor.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve_metrics(node: BrokerConfig, processes: Sequence[BrokerProcess]) -> None:
    """The node's /metrics on metrics.port, merging its processes' (on the ports after it)."""
    host = next(li.host for li in node.listeners if li.name == node.inter_broker_listener_name)
    reach = host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    port = int(node["metrics.port"])
    serve_node_metrics(host, port, {p.broker_id: f"http://{reach}:{port + 1 + i}/metrics"
                                    for i, p in enumerate(processes)})
