"""Run a real `samsa serve` process for tests.

    b = BrokerProcess(data_dir=tmp_path / "data")
    b.start()                # free 127.0.0.1 port, waits until it accepts connections
    b.bootstrap              # "127.0.0.1:PORT"
    b.stop()                 # SIGTERM + wait (clean shutdown)
    b.kill9()                # SIGKILL + wait (crash)
    b.start()                # same port, same data dir
    b.log_tail()             # last lines of the broker's stderr (all starts, appended)

The command is `<venv>/bin/samsa serve --listen 127.0.0.1:PORT --data-dir DIR --broker-id N
[--set key=value ...]`; SAMSA_BROKER_CMD (a shell-style string) replaces `<venv>/bin/samsa`.

`host` and `command_prefix` place a broker elsewhere, e.g. in a network namespace (the chaos
tests' partitions): BrokerProcess(dir, host="10.213.7.10", port=9092,
command_prefix=["ip", "netns", "exec", "NS"]). `ip netns exec` execs, so the pid is still the
broker's (SIGKILL, SIGSTOP and PR_SET_PDEATHSIG reach it). A non-loopback host is also
advertised (Samsa binds other addresses only when advertised.listeners is set).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

# A port free now, below the kernel's ephemeral range (samsa.testing explains why); re-exported
# for the tests that import it from here.
from samsa.testing import free_port as free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = float(os.environ.get("SAMSA_BROKER_START_TIMEOUT", "30"))
STOP_TIMEOUT = float(os.environ.get("SAMSA_BROKER_STOP_TIMEOUT", "30"))

# Every broker started in this process, so that a crashed test run leaves no orphan behind.
_LIVE: weakref.WeakSet[BrokerProcess] = weakref.WeakSet()


class BrokerStartError(RuntimeError):
    pass


def samsa_command() -> list[str]:
    override = os.environ.get("SAMSA_BROKER_CMD")
    if override:
        return shlex.split(override)
    script = Path(sys.executable).parent / "samsa"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "samsa.broker.cli"]


def _load_prctl():
    if sys.platform != "linux":
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None


_PRCTL = _load_prctl()  # resolved here: the child between fork and exec must not import


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: SIGKILL the broker if the test process dies (even by SIGKILL or abort), so a
    crashed pytest run never leaves orphan brokers holding ports and temp dirs."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def port_accepts(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class BrokerProcess:
    host = "127.0.0.1"

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        broker_id: int = 0,
        settings: Mapping[str, object] | None = None,
        extra_args: Iterable[str] = (),
        log_path: str | os.PathLike[str] | None = None,
        name: str = "broker",
        host: str | None = None,
        command_prefix: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.env = dict(env or {})  # added to the broker process's environment
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="samsa-test-")
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
        self.settings: dict[str, object] = dict(settings or {})
        self.extra_args = list(extra_args)
        self.name = name
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.last_returncode: int | None = None

    # ------------------------------------------------------------------ properties
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self) -> list[str]:
        cmd = self.command_prefix + samsa_command() + [
            "serve",
            "--listen",
            self.bootstrap,
            "--data-dir",
            str(self.data_dir),
            "--broker-id",
            str(self.broker_id),
        ]
        settings = dict(self.settings)
        if not self.host.startswith("127.") and "advertised.listeners" not in settings:
            settings["advertised.listeners"] = f"PLAINTEXT://{self.bootstrap}"
        for key, value in settings.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            cmd += ["--set", f"{key}={value}"]
        return cmd + self.extra_args

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = START_TIMEOUT) -> BrokerProcess:
        if self.is_running():
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        cmd = self.command()
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(
                f"\n===== start #{self.starts} at {time.strftime('%H:%M:%S')}: "
                f"{shlex.join(cmd)}\n".encode()
            )
            log.flush()
            env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", **self.env)
            self.proc = subprocess.Popen(
                cmd,
                cwd=REPO_ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a ^C in the terminal goes to pytest, not the broker
                preexec_fn=_die_with_parent if _PRCTL is not None else None,
            )
        _LIVE.add(self)
        deadline = time.monotonic() + timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self.last_returncode = rc
                self.proc = None
                raise BrokerStartError(
                    f"{self.name} exited with code {rc} before accepting connections on "
                    f"{self.bootstrap}\n{self.log_tail()}"
                )
            if port_accepts(self.host, self.port):
                return self
            if time.monotonic() > deadline:
                self.kill9()
                raise BrokerStartError(
                    f"{self.name} did not accept connections on {self.bootstrap} within "
                    f"{timeout:.0f}s\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, then wait. Returns the exit code (None if it was not running).

        A broker that ignores SIGTERM for `timeout` seconds is killed and the call fails:
        a clean shutdown is part of the contract.
        """
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                self.last_returncode = proc.returncode
                raise AssertionError(
                    f"{self.name} did not exit within {timeout:.0f}s of SIGTERM\n{self.log_tail()}"
                ) from None
        self.last_returncode = proc.returncode
        return proc.returncode

    def kill9(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        self.last_returncode = proc.returncode

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop (kill if need be) and remove the temporary directory, if this object made one."""
        try:
            if self.is_running():
                try:
                    self.stop()
                except AssertionError:
                    pass
            else:
                self.kill9()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    # ------------------------------------------------------------------ diagnostics
    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_text().splitlines()
        tail = "\n".join(text[-lines:])
        return f"----- last {min(lines, len(text))} lines of {self.log_path} -----\n{tail}"

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"<BrokerProcess {self.name} {self.bootstrap} {state} data={self.data_dir}>"


def kill_all_live() -> None:
    for b in list(_LIVE):
        with contextlib.suppress(Exception):
            b.kill9()
