"""Run a real `samsa serve` process for tests: samsa.testing's broker, as the project's tests
use it.

    b = BrokerProcess(data_dir=tmp_path / "data")
    b.start()                # free 127.0.0.1 port, waits until it accepts connections
    b.bootstrap              # "127.0.0.1:PORT"
    b.stop()                 # SIGTERM + wait (clean shutdown; fails if the broker hangs)
    b.kill9()                # SIGKILL + wait (crash)
    b.start()                # same port, same data dir
    b.log_tail()             # last lines of the broker's output (all starts, appended)

The command is `python -m samsa serve --listen 127.0.0.1:PORT --data-dir DIR --broker-id N
[--set key=value ...]`, forked from samsa.testing's launcher (which has imported Samsa once)
or, with `env` or `command_prefix`, a process of its own; either way its real exit code is kept
as `last_returncode`. SAMSA_BROKER_CMD (a shell-style string) replaces `python -m samsa` and
always starts a process of its own.

`host` and `command_prefix` place a broker elsewhere, e.g. in a network namespace (the chaos
tests' partitions): BrokerProcess(dir, host="10.213.7.10", port=9092,
command_prefix=["ip", "netns", "exec", "NS"]). `ip netns exec` execs, so the pid is still the
broker's (SIGKILL, SIGSTOP and PR_SET_PDEATHSIG reach it). A non-loopback host is also
advertised (Samsa binds other addresses only when advertised.listeners is set).
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

# Re-exported for the tests that import them from here.
from samsa.testing import _PRCTL as _PRCTL
from samsa.testing import BrokerStartError as BrokerStartError
from samsa.testing import SamsaBroker
from samsa.testing import _die_with_parent as _die_with_parent
from samsa.testing import free_port as free_port
from samsa.testing import samsa_command as samsa_command

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = float(os.environ.get("SAMSA_BROKER_START_TIMEOUT", "30"))
STOP_TIMEOUT = float(os.environ.get("SAMSA_BROKER_STOP_TIMEOUT", "30"))

# Every broker started in this process, so that a crashed test run leaves no orphan behind.
_LIVE: weakref.WeakSet[BrokerProcess] = weakref.WeakSet()
# The brokers started since the current test's setup began (tests/conftest.py empties it): a
# failing test's report carries their logs however the test made them (a Cluster of its own).
STARTED_THIS_TEST: list[BrokerProcess] = []


class BrokerProcess(SamsaBroker):
    clean_stop_required = True

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
        super().__init__(settings, data_dir=data_dir, port=port, broker_id=broker_id, name=name,
                         host=host, env=env, extra_args=extra_args,
                         command_prefix=command_prefix, cwd=REPO_ROOT, log_path=log_path)

    def start(self, timeout: float = START_TIMEOUT) -> BrokerProcess:
        _LIVE.add(self)
        STARTED_THIS_TEST.append(self)
        super().start(timeout)
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        return super().stop(timeout)

    def restart(self, timeout: float = START_TIMEOUT) -> BrokerProcess:
        self.stop()
        return self.start(timeout)

    def kill9(self) -> None:
        self.kill()

    def __enter__(self) -> BrokerProcess:
        return self.start()


def kill_all_live() -> None:
    for b in list(_LIVE):
        with contextlib.suppress(Exception):
            b.kill9()
