"""`samsa cluster`: a local ZooKeeper and N `samsa serve` processes on loopback.

    samsa cluster --brokers 3 --data-dir ./cluster
    # DIR/zookeeper/          ZooKeeper's zoo.cfg, data and zookeeper.log
    # DIR/broker-<i>/         broker i's log.dirs, and its output in broker.log

Broker i is `samsa serve --zookeeper HOST:ZK_PORT/samsa --broker-id i --listen
HOST:BASE_PORT+i --data-dir DIR/broker-<i>` plus the `--set` values. Once every broker accepts
connections the bootstrap string is printed. SIGINT (Ctrl-C), SIGTERM or SIGHUP stop the brokers
(SIGTERM, then SIGKILL after a grace period) and then ZooKeeper, and the command exits 0. A broker
that dies while the cluster runs is reported with the command that restarts it; the others keep
running.

With `--processes N` (N > 1) each of the K children is a node, `samsa serve --processes N`
under its own supervisor (broker/node/supervisor.py): node k is brokers kN..kN+N-1 on ports
BASE_PORT+kN.., in DIR/node-<k> (each process's log.dirs DIR/node-<k>/broker-<id>, the node's
output in node.log), its processes sharing `broker.rack` node-<k> so that replica placement
keeps a partition's replicas on different nodes. The bootstrap string lists every process.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from samsa.config.loader import load_config, parse_override
from samsa.config.schema import ConfigError

from .zk.process import ZooKeeperProcess, ZooKeeperUnavailable

log = logging.getLogger("samsa.cluster")

CHROOT = "/samsa"
DEFAULT_HOST = "127.0.0.1"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
# A node (`samsa serve --processes N`) kills a process still running this long after SIGTERM;
# the cluster gives a node that, and NODE_STOP_GRACE for the supervisor itself to exit.
NODE_STOP_TIMEOUT = 60.0
NODE_STOP_GRACE = 10.0
POLL_INTERVAL = 0.2

# Set by the cluster for every broker; a --set of one of these would break the layout.
RESERVED = ("listeners", "log.dirs", "log.dir", "node.id", "broker.id", "zookeeper.connect")
# ... and, for nodes of several processes, for every node.
NODE_RESERVED = ("broker.rack",)


class ClusterError(RuntimeError):
    """The cluster cannot start; the message says why."""


@dataclass
class BrokerChild:
    """A child of the cluster: one broker, or (processes > 1) a node of brokers broker_id..
    on ports port.., whose supervisor is the child."""

    broker_id: int
    port: int
    data_dir: Path
    command: list[str]
    proc: subprocess.Popen[bytes] | None = None
    reported_exit: bool = field(default=False)
    processes: int = 1

    @property
    def index(self) -> int:
        """Its place in the cluster: the broker's id, or the node's number."""
        return self.broker_id // self.processes

    @property
    def name(self) -> str:
        return f"{'broker' if self.processes == 1 else 'node'} {self.index}"

    @property
    def ports(self) -> list[int]:
        return [self.port + i for i in range(self.processes)]

    @property
    def log_path(self) -> Path:
        return self.data_dir / ("broker.log" if self.processes == 1 else "node.log")

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: a broker gets SIGTERM (a clean shutdown) if `samsa cluster` itself dies."""
    if sys.platform == "linux":
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def default_serve_command() -> list[str]:
    """`samsa serve` of this installation (the script beside this interpreter if any)."""
    script = Path(sys.executable).parent / "samsa"
    if script.exists():
        return [str(script), "serve"]
    return [sys.executable, "-m", "samsa.broker.cli", "serve"]


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def port_is_free(host: str, port: int) -> bool:
    """Whether a server could listen there now (SO_REUSEADDR as servers set it, so that
    TIME_WAIT connections of a previous run do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class LocalCluster:
    def __init__(
        self,
        brokers: int,
        data_dir: Path,
        *,
        base_port: int = 9092,
        zk_port: int = 2181,
        host: str = DEFAULT_HOST,
        settings: Sequence[str] = (),
        serve_command: Sequence[str] | None = None,
        out: Callable[[str], None] | None = None,
        processes: int = 1,
    ) -> None:
        if brokers < 1:
            raise ClusterError("--brokers must be at least 1")
        if processes < 1:
            raise ClusterError("--processes must be at least 1")
        last_port = base_port + brokers * processes - 1
        if not 1 <= base_port <= last_port <= 65535:
            raise ClusterError(f"--base-port {base_port}: ports {base_port}.."
                               f"{last_port} are not all valid")
        if not 1 <= zk_port <= 65535:
            raise ClusterError(f"--zk-port {zk_port} is not a valid port")
        if base_port <= zk_port <= last_port:
            raise ClusterError(f"--zk-port {zk_port} is one of the broker ports "
                               f"{base_port}..{last_port}")
        self.processes = processes
        self.host = host
        self.data_dir = Path(data_dir).resolve()
        self.base_port = base_port
        self.zk_port = zk_port
        self.settings = self._check_settings(settings)
        self.serve_command = list(serve_command or default_serve_command())
        self.out = out or (lambda line: print(line, flush=True))
        self.zookeeper = ZooKeeperProcess(self.data_dir / "zookeeper", zk_port, host=host)
        self.brokers = [self._child(i) for i in range(brokers)]
        self._stop_requested = False
        self._zk_reported = False

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.host}:{self.zk_port}{CHROOT}"

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{port}" for b in self.brokers for port in b.ports)

    # ------------------------------------------------------------------ set-up
    def _check_settings(self, settings: Sequence[str]) -> dict[str, str]:
        parsed: dict[str, str] = {}
        for text in settings:
            key, value = parse_override(text)
            if key in RESERVED:
                raise ClusterError(f"--set {key}=...: samsa cluster sets {key} for each broker")
            if key in NODE_RESERVED and self.processes > 1:
                raise ClusterError(f"--set {key}=...: samsa cluster sets {key} for each node "
                                   "(node-<k>) when it runs --processes N")
            parsed.pop(key, None)
            parsed[key] = value
        # Validate once, as broker 0 would see it: a typo fails here, before anything starts.
        load_config(None, {**parsed, "listeners": f"PLAINTEXT://{self.host}:{self.base_port}",
                           "zookeeper.connect": self.zookeeper_connect})
        return parsed

    def _child(self, index: int) -> BrokerChild:
        """Broker `index`, or with --processes N node `index` (brokers index*N..)."""
        broker_id = index * self.processes
        port = self.base_port + broker_id
        node = self.processes > 1
        data_dir = self.data_dir / (f"node-{index}" if node else f"broker-{broker_id}")
        cmd = [
            *self.serve_command,
            "--zookeeper", self.zookeeper_connect,
            "--broker-id", str(broker_id),
            "--listen", f"{self.host}:{port}",
            "--data-dir", str(data_dir),
        ]
        if node:  # the processes of one host share a rack: here each node is a host
            cmd += ["--processes", str(self.processes), "--set", f"broker.rack=node-{index}"]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return BrokerChild(broker_id, port, data_dir, cmd, processes=self.processes)

    def _check_ports(self) -> None:
        busy = [p for p in [self.zk_port, *(port for b in self.brokers for port in b.ports)]
                if not port_is_free(self.host, p)]
        if busy:
            raise ClusterError(f"port(s) {', '.join(map(str, busy))} on {self.host} are in use "
                               "(choose others with --base-port / --zk-port)")

    # ------------------------------------------------------------------ lifecycle
    def request_stop(self, signum: int, frame: FrameType | None = None) -> None:
        if not self._stop_requested:
            log.info("%s: stopping the cluster", signal.Signals(signum).name)
        self._stop_requested = True

    def start(self, timeout: float | None = None) -> bool:
        """ZooKeeper, then every broker; True once all accept connections, False when a stop
        was requested meanwhile. Raises ClusterError (after cleaning up) on failure.
        `timeout`: START_TIMEOUT for each process of a node."""
        timeout = START_TIMEOUT * self.processes if timeout is None else timeout
        self._check_ports()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.zookeeper.start()
        except ZooKeeperUnavailable as e:
            self.zookeeper.stop()
            raise ClusterError(f"ZooKeeper did not start: {e} "
                               f"(see {self.zookeeper.data_dir / 'zookeeper.log'})") from None
        self.out(f"zookeeper: {self.zookeeper_connect} (pid {self.zookeeper.pid}, "
                 f"log: {self.zookeeper.data_dir / 'zookeeper.log'})")
        for b in self.brokers:
            self._spawn(b)
        deadline = time.monotonic() + timeout
        waiting = list(self.brokers)
        while waiting:
            if self._stop_requested:
                return False
            for b in list(waiting):
                assert b.proc is not None
                rc = b.proc.poll()
                if rc is not None:
                    b.reported_exit = True
                    raise ClusterError(f"{b.name} {describe_exit(rc)} during "
                                       f"start-up; last lines of {b.log_path}:\n{b.log_tail()}")
                if all(port_accepts(self.host, port) for port in b.ports):
                    waiting.remove(b)
                    self.out(f"{b.name}: {self._started(b)} "
                             f"(pid {b.proc.pid}, log: {b.log_path})")
            if waiting and time.monotonic() > deadline:
                ids = ", ".join(str(b.index) for b in waiting)
                unit = "broker(s)" if self.processes == 1 else "node(s)"
                raise ClusterError(f"{unit} {ids} did not accept connections within "
                                   f"{timeout:.0f}s (see their {waiting[0].log_path.name})")
            time.sleep(POLL_INTERVAL)
        self.out(f"bootstrap: {self.bootstrap}")
        return True

    def _started(self, b: BrokerChild) -> str:
        """Where a started child serves: HOST:PORT of a broker; a node's brokers and rack."""
        if b.processes == 1:
            return f"{self.host}:{b.port}"
        brokers = ", ".join(f"{b.broker_id + i} on {self.host}:{port}"
                            for i, port in enumerate(b.ports))
        return f"brokers {brokers}, rack node-{b.index}"

    def _spawn(self, b: BrokerChild) -> None:
        b.data_dir.mkdir(parents=True, exist_ok=True)
        with open(b.log_path, "ab") as out:
            out.write(f"===== {time.strftime('%Y-%m-%d %H:%M:%S')} samsa cluster: "
                      f"{shlex.join(b.command)}\n".encode())
            out.flush()
            b.proc = subprocess.Popen(
                b.command,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
                # Own session: a Ctrl-C in the terminal reaches only `samsa cluster`, which
                # then stops the brokers before ZooKeeper.
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        b.reported_exit = False

    def check_children(self) -> None:
        """Report children that died since the last call; the others keep running."""
        for b in self.brokers:
            if b.proc is None or b.reported_exit:
                continue
            rc = b.proc.poll()
            if rc is None:
                continue
            b.reported_exit = True
            alive = sum(1 for o in self.brokers if o.proc is not None and o.proc.poll() is None)
            log.error("%s (pid %d) %s; %d of %d %s still run. Its log: %s. "
                      "Restart it with: %s >> %s 2>&1", b.name, b.proc.pid,
                      describe_exit(rc), alive, len(self.brokers),
                      "brokers" if self.processes == 1 else "nodes", b.log_path,
                      shlex.join(b.command), shlex.quote(str(b.log_path)))
        zk_rc = self.zookeeper.poll()
        if zk_rc is not None and not self._zk_reported:
            self._zk_reported = True
            log.error("ZooKeeper %s (log: %s); the brokers cannot coordinate until it runs "
                      "again", describe_exit(zk_rc), self.zookeeper.data_dir / "zookeeper.log")

    def run_until_stopped(self) -> None:
        while not self._stop_requested:
            self.check_children()
            time.sleep(POLL_INTERVAL)

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM every broker (node), SIGKILL those still running after `timeout`, then
        ZooKeeper. A node's supervisor kills its own stuck processes before that: killed
        itself, it would leave them running."""
        if timeout is None:
            timeout = STOP_TIMEOUT if self.processes == 1 else NODE_STOP_TIMEOUT + NODE_STOP_GRACE
        stop_processes({b.name: b.proc for b in self.brokers
                        if b.proc is not None and b.proc.poll() is None}, timeout)
        for b in self.brokers:
            if b.proc is not None:
                b.proc.poll()  # reap one that died earlier and was never waited for
        self.zookeeper.stop()


def stop_processes(running: Mapping[str, subprocess.Popen[bytes]], timeout: float) -> None:
    """SIGTERM every process (by name: `broker 3`), SIGKILL those still running after
    `timeout` in all."""
    for proc in running.values():
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for name, proc in running.items():
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s (pid %d) ignored SIGTERM for %.0f s: killing it",
                        name, proc.pid, timeout)
            proc.kill()
            proc.wait()


def run_cluster(brokers: int, data_dir: Path, **options: Any) -> int:
    """The `samsa cluster` command (`options`: LocalCluster's keyword arguments): 0 after a
    requested stop, 1 when start-up fails, 2 on bad arguments."""
    try:
        cluster = LocalCluster(brokers, data_dir, **options)
    except (ClusterError, ConfigError) as e:
        print(f"samsa cluster: {e}", file=sys.stderr)
        return 2
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, cluster.request_stop) for sig in handled}
    try:
        try:
            started = cluster.start()
        except ClusterError as e:
            print(f"samsa cluster: {e}", file=sys.stderr)
            return 1
        if started:
            cluster.out("Ctrl-C stops the cluster.")
            cluster.run_until_stopped()
        return 0
    finally:
        cluster.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        cluster.out("cluster stopped")
