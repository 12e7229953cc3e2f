"""A real Samsa broker for the tests of code that talks Kafka.

Any test runner:

    import samsa.testing

    with samsa.testing.broker(**{"auto.create.topics.enable": False}) as b:
        b.create_topic("orders", partitions=3)
        produce_and_consume(b.bootstrap)     # "127.0.0.1:PORT"
        b.restart()                          # clean stop, same port and data
        b.kill()                             # SIGKILL: a crash; b.start() brings it back

pytest (opt-in: `-p samsa.testing` on the command line, `addopts = "-p samsa.testing"` or
`samsa = true` in the project's pytest settings, or `pytest_plugins = ["samsa.testing"]` in its
top conftest.py):

    def test_orders(samsa_broker):           # a broker for this test alone
        ...
    def test_many(samsa_session_broker):     # one broker for the whole session
        ...
    def test_replicas(samsa_cluster):        # samsa_cluster(3): ZooKeeper and 3 brokers
        ...                                  # (skipped where ZooKeeper is not installed)
    def test_faults(samsa_embedded_broker):  # in this process, with intercepts (below)
        ...

`node(processes=2)` is one node of broker processes under `samsa serve --processes N`'s
supervisor, with a ZooKeeper of its own (samsa/testing/_node.py); `cluster(2, processes=2)` is
ZooKeeper and two such nodes (`samsa cluster --processes 2`).

Each broker is a `samsa serve` process on a free loopback port with a temporary data
directory, removed when the broker is closed. Keyword arguments are broker properties (`--set
key=value`, underscores for dots); a dict works too: broker({"num.partitions": 3}). Start-up
time is measured (`b.startup_seconds`) and the pytest plugin prints it in its summary.

The brokers are forked from one process that has imported Samsa once (samsa.testing._zygote),
so a broker is ready in a fraction of a second; SAMSA_TESTING_FORK=0 starts each as `python -m
samsa serve` instead, and SAMSA_BROKER_CMD (a shell-style command) replaces `python -m samsa`.

Faults without extra processes: `embedded_broker()` runs the broker on a thread of the test's
own process, where a test can make it answer chosen requests otherwise:

    from samsa.protocol.errors import ErrorCode

    with samsa.testing.embedded_broker() as b:
        b.create_topic("orders")
        b.intercept("Produce", error=ErrorCode.not_enough_replicas, times=1)
        b.intercept("Fetch", delay=2.0)                       # served, two seconds late
        b.intercept("Metadata", drop=True, times=1)           # the connection is closed
        b.intercept(1, when=lambda r: r.request.isolation_level == 1,  # API key, predicate
                    error=ErrorCode.not_leader_or_follower)
        rule = b.intercept("JoinGroup", answer=lambda r: {"error_code": 27})  # built answer
        ...
        rule.hits; rule.remove(); b.clear_intercepts()

An error answer names every topic, partition, group or key of the request with that error,
as Kafka's error responses do. A predicate gets an `Intercepted`: api_key, version, client_id
and the decoded request (kio's class of that version). The first rule that takes a request
decides; `times` limits how many it takes. See EmbeddedBroker.intercept.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import queue
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from samsa.testing._embedded import EmbeddedBroker
    from samsa.testing._intercept import Intercept, Intercepted
    from samsa.testing._node import SamsaNode

__all__ = ["SamsaBroker", "SamsaCluster", "SamsaNode", "BrokerStartError", "broker", "cluster",
           "node", "free_port",
           "zookeeper_available", "startup_times", "warm_up", "EmbeddedBroker",
           "embedded_broker", "Intercept", "Intercepted"]

START_TIMEOUT = float(os.environ.get("SAMSA_TESTING_START_TIMEOUT", "30"))
STOP_TIMEOUT = float(os.environ.get("SAMSA_TESTING_STOP_TIMEOUT", "30"))
ZOOKEEPER_JAR = Path(os.environ.get("SAMSA_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar"))

# Every broker start in this process: (what, seconds). The pytest plugin summarises them.
startup_times: list[tuple[str, float]] = []


class BrokerStartError(RuntimeError):
    """The broker exited, or did not accept connections in time; the message has its log."""


# Ports this process has handed out, newest last: a port is free until its server binds, so
# without this two picks before either binds could be the same one (seen: a broker's listener
# and its schema registry's, EADDRINUSE at start-up).
_HANDED_OUT: deque[int] = deque(maxlen=4096)


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, chosen below the kernel's ephemeral range: outgoing connections
    (ZooKeeper sessions, clients, replica fetchers) take their local ports from that range, so
    a port picked there (as `bind(0)` does) can be taken by one of them before the server that
    was meant to listen on it binds (seen: a broker's metrics.port, EADDRINUSE at start-up).
    Never one this process has handed out in its last 4,096 picks."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200 if low > 2048 else 0):
        port = random.randint(max(1024, low - 12_000), low - 1)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            _HANDED_OUT.append(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _settings(settings: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(settings or {})
    # keyword arguments spell dots as underscores: auto_create_topics_enable=False
    out.update({k.replace("_", ".") if "." not in k else k: v for k, v in kwargs.items()})
    return out


def _set_args(settings: Mapping[str, Any]) -> list[str]:
    args = []
    for key, value in settings.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        args += ["--set", f"{key}={value}"]
    return args


def samsa_command() -> list[str]:
    """How a broker is started: SAMSA_BROKER_CMD (a shell-style string) or this interpreter's
    `-m samsa`."""
    override = os.environ.get("SAMSA_BROKER_CMD")
    if override:
        return shlex.split(override)
    return [sys.executable, "-m", "samsa"]


def _load_prctl() -> Any:
    if sys.platform != "linux":
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None


_PRCTL = _load_prctl()  # resolved here: the child between fork and exec must not import


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: SIGKILL the broker if the test process dies (even by SIGKILL), so a crashed
    test run never leaves brokers behind holding ports and temporary directories."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _popen(cmd: list[str], log_path: Path, env: Mapping[str, str] | None = None,
           cwd: str | os.PathLike[str] | None = None,
           header: str | None = None) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as log:
        log.write(f"\n===== {header or ' '.join(cmd)}\n".encode())
        log.flush()
        return subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd,
            env=dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", **(env or {})),
            start_new_session=True,  # a ^C in the terminal goes to the test runner
            preexec_fn=_die_with_parent if _PRCTL is not None else None,
        )


def _use_zygote() -> bool:
    return (not os.environ.get("SAMSA_BROKER_CMD")
            and os.environ.get("SAMSA_TESTING_FORK", "1") != "0" and hasattr(os, "fork"))


class _Forked:
    """A broker forked by the zygote: the subset of Popen that SamsaBroker uses. The zygote
    reaps it and reports its exit status, which is its returncode as for a process of its own."""

    def __init__(self, pid: int, token: int, zygote: _Zygote) -> None:
        self.pid = pid
        self._token = token  # this child's own key: its pid may be reused once it is reaped
        self._zygote = zygote

    def poll(self) -> int | None:
        return self._zygote.exit_code(self._token)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # once reaped, the pid may be another process's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        code = self._zygote.wait_exit(self._token, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0)
        return code

    @property
    def returncode(self) -> int | None:
        return self.poll()


class _Zygote:
    """samsa.testing._zygote, started once per test process (warm() starts it early). A thread
    reads what it writes: answers to spawn requests, and its children's exit statuses.

    Exit statuses are kept by spawn, not by pid: over a long test session the kernel hands a
    reaped child's pid to a new process (pid_max is 32768 here), and a new broker must not be
    taken for the old one that ended."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.lock = threading.Lock()  # one spawn request at a time
        self.ready = threading.Event()
        # answers (pid, spawn token); None: the zygote ended
        self.pids: queue.Queue[tuple[int, int] | None] = queue.Queue()
        self.exits: dict[int, int] = {}  # by spawn token
        self._tokens = itertools.count()
        self.exited = threading.Condition()
        self.waited = 0.0  # seconds a broker start spent waiting for the launcher's imports

    def warm(self) -> None:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.ready = threading.Event()
                self.pids = queue.Queue()
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "samsa.testing._zygote"], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, text=True, bufsize=1,
                    env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
                threading.Thread(target=self._read, args=(self.proc, self.ready, self.pids),
                                 name="samsa-zygote-reader", daemon=True).start()
                atexit.register(self.close)

    def _read(self, proc: subprocess.Popen[str], ready: threading.Event,
              pids: queue.Queue[tuple[int, int] | None]) -> None:
        assert proc.stdout is not None
        # the token of each child not reaped yet, by pid; the zygote answers a spawn before it
        # can report that child's end, so a pid's exit always belongs to its latest spawn
        live: dict[int, int] = {}
        for line in proc.stdout:
            message = json.loads(line)
            if "exit" in message:
                with self.exited:
                    token = live.pop(int(message["exit"]), None)
                    if token is not None:
                        self.exits[token] = int(message["code"])
                        self.exited.notify_all()
            elif "pid" in message:
                token = next(self._tokens)
                live[int(message["pid"])] = token
                pids.put((int(message["pid"]), token))
            elif message.get("ready"):
                ready.set()
        ready.set()
        pids.put(None)
        # the zygote is gone and its children with it (SIGKILL on its death)
        with self.exited:
            for token in live.values():
                self.exits[token] = -signal.SIGKILL
            self.exited.notify_all()

    def exit_code(self, token: int) -> int | None:
        with self.exited:
            return self.exits.get(token)

    def wait_exit(self, token: int, timeout: float | None) -> int | None:
        with self.exited:
            self.exited.wait_for(lambda: token in self.exits, timeout)
            return self.exits.get(token)

    def spawn(self, argv: list[str], log_path: Path, env: Mapping[str, str] | None = None,
              cwd: str | os.PathLike[str] | None = None,
              header: str | None = None) -> _Forked:
        self.warm()
        with self.lock:
            proc = self.proc
            assert proc is not None and proc.stdin is not None
            if not self.ready.is_set():
                t0 = time.perf_counter()
                self.ready.wait()
                self.waited += time.perf_counter() - t0
            if proc.poll() is not None:
                raise BrokerStartError("samsa.testing's broker launcher exited at start-up")
            with open(log_path, "ab") as log:
                log.write(f"\n===== {header or 'samsa ' + ' '.join(argv)}\n".encode())
            proc.stdin.write(json.dumps({"argv": argv, "log": str(log_path),
                                         "env": dict(os.environ, **(env or {})),
                                         "cwd": str(cwd or os.getcwd())}) + "\n")
            proc.stdin.flush()
            answer = self.pids.get()
            if answer is None:
                raise BrokerStartError("samsa.testing's broker launcher exited")
            return _Forked(*answer, self)

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            assert proc.stdin is not None
            with contextlib.suppress(OSError):
                proc.stdin.close()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


_zygote = _Zygote()


def warm_up() -> None:
    """Start the process that brokers are forked from now, so that the first broker does not
    wait for its imports (the pytest plugin calls this at session start)."""
    if _use_zygote():
        _zygote.warm()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    return (f"----- last {min(lines, len(text))} lines of {path} -----\n"
            + "\n".join(text[-lines:]))


class _Served:
    """What a broker, a cluster and a node share: their output in `log_path` (every start)
    and CreateTopics through their `bootstrap`."""

    log_path: Path

    @property
    def bootstrap(self) -> str:
        raise NotImplementedError

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> None:
        """CreateTopics; waits until the topic's leaders are known."""
        create_topic(self.bootstrap, name, partitions, replication_factor, config, timeout)

    def log_text(self) -> str:
        """All the output so far (every start)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        """The last lines of the output, headed by the log's path."""
        return _tail(self.log_path, lines)


class SamsaBroker(_Served):
    """One `samsa serve` process. Use `broker(...)` or the pytest fixtures.

    Besides the broker properties: `data_dir` (default: a temporary directory, removed by
    close()), `port`, `broker_id`, `name` (of its log file, beside the data directory),
    `host` (another loopback address; one outside 127.0.0.0/8 is advertised), `env` (added to
    the environment of a broker then started as a new process), `extra_args` (after `samsa
    serve ...`), `command_prefix` (run the broker through another command, e.g. `ip netns
    exec NS`: it needs a `port`), `cwd`, `log_path`, `fork` (False: always a new `samsa
    serve` process; None: forked from the launcher where SAMSA_TESTING_FORK allows). Either
    way the exit code of the last process that ended is `last_returncode`."""

    host = "127.0.0.1"
    # a broker that does not exit within stop()'s timeout of SIGTERM is killed; when this is
    # true stop() then fails (AssertionError): a clean shutdown is part of the contract
    clean_stop_required = False

    def __init__(self, settings: Mapping[str, Any] | None = None, *,
                 data_dir: str | os.PathLike[str] | None = None, port: int | None = None,
                 broker_id: int = 0, name: str = "samsa", host: str | None = None,
                 env: Mapping[str, str] | None = None, extra_args: Iterable[str] = (),
                 command_prefix: Sequence[str] = (), cwd: str | os.PathLike[str] | None = None,
                 log_path: str | os.PathLike[str] | None = None,
                 fork: bool | None = None) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samsa-testing-")
            data_dir = Path(self._tmp.name) / "data"
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if host is not None:
            self.host = host
        self.command_prefix = list(command_prefix)
        if port is None and self.command_prefix:
            raise ValueError("a broker run through a command prefix needs an explicit port "
                             "(its host may not be bindable here to find a free one)")
        self.port = port or free_port(self.host)
        self.broker_id = broker_id
        self.name = name
        self.settings: dict[str, Any] = dict(settings or {})
        self.env = dict(env or {})
        self.extra_args = list(extra_args)
        self.cwd = cwd
        self.fork = fork
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | _Forked | None = None
        self.startup_seconds: float | None = None
        self.starts = 0  # start() calls
        self.last_returncode: int | None = None  # of the last process that exited

    @property
    def bootstrap(self) -> str:
        """"127.0.0.1:PORT", the bootstrap.servers of every client."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def serve_args(self) -> list[str]:
        settings = dict(self.settings)
        if not self.host.startswith("127.") and "advertised.listeners" not in settings:
            settings["advertised.listeners"] = f"PLAINTEXT://{self.bootstrap}"
        return ["serve", "--listen", self.bootstrap, "--data-dir", str(self.data_dir),
                "--broker-id", str(self.broker_id), *_set_args(settings), *self.extra_args]

    def command(self) -> list[str]:
        """The command line of this broker (run as such where it is not forked)."""
        return self.command_prefix + samsa_command() + self.serve_args()

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _forked(self) -> bool:
        # an added environment may be read at import (PYTHONPATH, ...): only a new process has it
        return (self.fork is not False and not self.command_prefix and not self.env
                and _use_zygote())

    def start(self, timeout: float = START_TIMEOUT) -> SamsaBroker:
        """Start (again: same port, same data) and wait until it accepts connections."""
        if self.is_running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        if _accepts(self.host, self.port):
            # Another process took the port since it was chosen: the wait below would take
            # its answer for this broker's.
            raise BrokerStartError(f"{self.name}: {self.bootstrap} is taken by another process")
        self.starts += 1
        cmd = self.command()
        header = f"start #{self.starts} at {time.strftime('%H:%M:%S')}: {shlex.join(cmd)}"
        t0 = time.perf_counter()
        if self._forked():
            waited = _zygote.waited
            self.proc = _zygote.spawn(self.serve_args(), self.log_path, self.env, self.cwd,
                                      header)
            t0 += _zygote.waited - waited  # the launcher's imports: once, not this broker's
        else:
            self.proc = _popen(cmd, self.log_path, self.env, self.cwd, header)
        deadline = time.monotonic() + timeout
        while not _accepts(self.host, self.port):
            rc = self.proc.poll()
            if rc is not None:
                self.proc, self.last_returncode = None, rc
                raise BrokerStartError(f"{self.name} exited with code {rc} before accepting "
                                       f"connections on {self.bootstrap}\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(f"{self.name} did not accept connections on "
                                       f"{self.bootstrap} within {timeout:.0f}s\n"
                                       f"{self.log_tail()}")
            time.sleep(0.01)
        self.startup_seconds = time.perf_counter() - t0
        startup_times.append((self.name, self.startup_seconds))
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM (a clean shutdown), then wait; the exit code, None if it was not running."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                self.last_returncode = proc.returncode
                if self.clean_stop_required:
                    raise AssertionError(f"{self.name} did not exit within {timeout:.0f}s of "
                                         f"SIGTERM\n{self.log_tail()}") from None
        self.last_returncode = proc.returncode
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: the broker crashes, nothing flushed; start() recovers the same data."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            self.last_returncode = proc.returncode

    def restart(self, timeout: float = START_TIMEOUT) -> SamsaBroker:
        """Clean stop, then start on the same port with the same data."""
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        """Stop and remove the temporary data directory (if this object made it)."""
        try:
            try:
                self.stop()
            except AssertionError:
                pass  # killed: close() is for clean-up
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    def __enter__(self) -> SamsaBroker:
        return self.start() if not self.is_running() else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"<{type(self).__name__} {self.name} {self.bootstrap} {state} data={self.data_dir}>"


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication_factor: int = 1,
                 config: Mapping[str, Any] | None = None, timeout: float = 30.0) -> None:
    """CreateTopics through the broker's own wire protocol (no Kafka client needed)."""
    from samsa.testing._wire import create_topic as _create

    _create(bootstrap, name, partitions, replication_factor,
            {k: str(v).lower() if isinstance(v, bool) else str(v)
             for k, v in (config or {}).items()}, timeout)


@contextlib.contextmanager
def broker(settings: Mapping[str, Any] | None = None, /, **kwargs: Any) -> Iterator[SamsaBroker]:
    """A started broker, stopped and removed on leaving the block. Settings are broker
    properties: broker({"num.partitions": 3}) or broker(num_partitions=3)."""
    b = SamsaBroker(_settings(settings, kwargs))
    try:
        yield b.start()
    finally:
        b.close()


@contextlib.contextmanager
def embedded_broker(settings: Mapping[str, Any] | None = None, /,
                    **kwargs: Any) -> Iterator[EmbeddedBroker]:
    """A started broker on a thread of this process (a loopback port, a temporary data
    directory), stopped and removed on leaving the block; it takes request intercepts
    (EmbeddedBroker.intercept). Settings as broker()'s. One at a time per process: the broker's
    metrics and inter-broker security are the process's."""
    from samsa.testing._embedded import EmbeddedBroker

    b = EmbeddedBroker(_settings(settings, kwargs))
    try:
        yield b.start()
    finally:
        b.close()


def __getattr__(name: str) -> Any:
    # the embedded broker's names load the broker (and kio) only when a test asks for them
    if name == "EmbeddedBroker":
        from samsa.testing._embedded import EmbeddedBroker

        return EmbeddedBroker
    if name == "SamsaNode":
        from samsa.testing._node import SamsaNode

        return SamsaNode
    if name in ("Intercept", "Intercepted"):
        from samsa.testing import _intercept

        return getattr(_intercept, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def zookeeper_available() -> bool:
    return ZOOKEEPER_JAR.is_file() and shutil.which("java") is not None


class SamsaCluster(_Served):
    """`samsa cluster --brokers N`: a local ZooKeeper and N brokers on loopback; with
    `processes` P > 1, N nodes of P broker processes each (`--processes P`: node k is brokers
    k*P..k*P+P-1 on the ports after `ports[0]`, its processes on one rack)."""

    host = "127.0.0.1"

    def __init__(self, brokers: int, settings: Mapping[str, Any] | None = None, *,
                 processes: int = 1) -> None:
        if processes < 1:
            raise ValueError("processes: at least 1")
        self.size = brokers
        self.processes = processes
        self._tmp = tempfile.TemporaryDirectory(prefix="samsa-testing-cluster-")
        self.data_dir = Path(self._tmp.name)
        self.zk_port = free_port(self.host)
        # brokers on PORT..PORT+N*P-1: pick a base whose whole range is free now
        count = brokers * processes
        while True:
            base = free_port(self.host)
            if all(_free(self.host, base + i) for i in range(count)):
                break
        self.ports = [base + i for i in range(count)]
        self.settings = dict(settings or {})
        self.log_path = self.data_dir / "cluster.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{p}" for p in self.ports)

    def start(self, timeout: float | None = None) -> SamsaCluster:
        timeout = 90.0 * self.processes if timeout is None else timeout
        cmd = samsa_command() + [
            "cluster", "--brokers", str(self.size), "--data-dir", str(self.data_dir / "c"),
            "--base-port", str(self.ports[0]), "--zk-port", str(self.zk_port),
            "--host", self.host]
        if self.processes > 1:
            cmd += ["--processes", str(self.processes)]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
        t0 = time.perf_counter()
        self.proc = _popen(cmd, self.log_path)
        deadline = time.monotonic() + timeout
        while not (all(_accepts(self.host, p) for p in self.ports)
                   and "bootstrap" in _tail(self.log_path, 1000).lower()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BrokerStartError(f"samsa cluster did not start\n{_tail(self.log_path)}")
            time.sleep(0.05)
        self.startup_seconds = time.perf_counter() - t0
        what = (f"cluster of {self.size}" if self.processes == 1
                else f"cluster of {self.size} nodes of {self.processes}")
        startup_times.append((what, self.startup_seconds))
        return self

    def close(self) -> None:
        proc, self.proc = self.proc, None
        try:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(STOP_TIMEOUT + 15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        finally:
            self._tmp.cleanup()

    def __enter__(self) -> SamsaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


@contextlib.contextmanager
def cluster(brokers: int = 3, settings: Mapping[str, Any] | None = None, *,
            processes: int = 1, **kwargs: Any) -> Iterator[SamsaCluster]:
    """ZooKeeper and `brokers` brokers (with `processes` P > 1: `brokers` nodes of P
    processes each, as `samsa cluster --processes P`), stopped and removed on leaving the
    block."""
    c = SamsaCluster(brokers, _settings(settings, kwargs), processes=processes)
    try:
        yield c.start()
    finally:
        c.close()


@contextlib.contextmanager
def node(processes: int = 2, settings: Mapping[str, Any] | None = None, *,
         zookeeper: bool | str = True, metrics: bool = False,
         **kwargs: Any) -> Iterator[SamsaNode]:
    """`samsa serve --processes N`: one node of `processes` brokers under its supervisor,
    with a ZooKeeper of its own (`zookeeper`: a connect string to share one, False for none)
    and with `metrics` the node's /metrics on `n.metrics_port`; stopped and removed on leaving
    the block (samsa/testing/_node.py)."""
    from samsa.testing._node import SamsaNode

    n = SamsaNode(processes, _settings(settings, kwargs), zookeeper=zookeeper, metrics=metrics)
    try:
        yield n.start()
    finally:
        n.close()


# pytest: `-p samsa.testing` registers this module as a plugin; its fixtures live in _pytest.
try:
    import pytest as _pytest_module  # noqa: F401
except ImportError:  # another test runner: the context managers above are all there is
    pass
else:
    from samsa.testing._pytest import (  # noqa: F401
        pytest_configure,
        pytest_sessionstart,
        pytest_terminal_summary,
        samsa_broker,
        samsa_cluster,
        samsa_embedded_broker,
        samsa_session_broker,
    )
