"""A process that has imported the broker once and forks a `samsa serve` per request, so that
a test's broker is ready in well under a second (the imports, not the broker, take the time).

Protocol on stdin/stdout, one JSON object a line: request {"argv": [...], "log": PATH, "env":
{...}, "cwd": DIR}, answer {"pid": N}. The first line it writes is {"ready": true}. It reaps its
children and reports each one's end as {"exit": PID, "code": C}, C as Popen's returncode (minus
the signal's number for a broker killed by one), so a forked broker's exit status is as real as
a process of its own. EOF on stdin ends it. Each child gets SIGKILL if the zygote dies, and the
zygote ends with the test process (EOF).
"""

from __future__ import annotations

import faulthandler
import json
import os
import select
import signal
import sys
from typing import TextIO


def _child(request: dict[str, object], inherited: list[int]) -> None:  # pragma: no cover
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        for fd in inherited:  # the zygote's own pipe ends are not the broker's
            os.close(fd)
        os.setsid()
        _die_with_parent()
        fd = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        faulthandler.enable()  # as PYTHONFAULTHANDLER does for a broker of its own
        env = request.get("env")
        if isinstance(env, dict):
            os.environ.clear()
            os.environ.update(env)
        os.chdir(str(request.get("cwd") or "/"))
        from samsa.broker.cli import main

        argv = request["argv"]
        assert isinstance(argv, list)
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _die_with_parent() -> None:  # pragma: no cover - runs in the fork
    if sys.platform == "linux":
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:
            pass


def _send(out: TextIO, message: dict[str, object]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _reap(out: TextIO) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _send(out, {"exit": pid, "code": code})


def serve() -> None:
    # the heavy imports, once, before any fork (no thread, no event loop is made by them)
    import samsa.broker.app  # noqa: F401
    import samsa.broker.cli  # noqa: F401

    _die_with_parent()
    # SIGCHLD wakes the select below through this pipe; the handler itself does nothing, so
    # a child's end is reported between requests, never in the middle of writing an answer
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C is for the test runner
    out = sys.stdout
    stdin = sys.stdin.fileno()
    _send(out, {"ready": True})
    pending = b""
    while True:
        try:
            readable, _, _ = select.select([stdin, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
            _reap(out)
        if stdin not in readable:
            continue
        data = os.read(stdin, 65536)
        if not data:
            return
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(request, [wake_r, wake_w])
            _send(out, {"pid": pid})


if __name__ == "__main__":
    serve()
