"""A process that has imported the broker once and forks a `samsa serve` per request, so that
a test's broker is ready in well under a second (the imports, not the broker, take the time).

Protocol on stdin/stdout, one JSON object a line: request {"argv": [...], "log": PATH, "env":
{...}, "cwd": DIR}, answer {"pid": N}. The first line it writes is {"ready": true}. EOF on stdin
ends it. Children are reaped by the kernel (SIGCHLD ignored): a pid that is gone has exited.
Each child gets SIGKILL if the zygote dies, and the zygote ends with the test process (EOF).
"""

from __future__ import annotations

import json
import os
import signal
import sys


def _child(request: dict[str, object]) -> None:  # pragma: no cover - runs in the fork
    code = 1
    try:
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
        env = request.get("env")
        if isinstance(env, dict):
            os.environ.clear()
            os.environ.update(env)
        os.chdir(str(request.get("cwd") or "/"))
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
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


def serve() -> None:
    # the heavy imports, once, before any fork (no thread, no event loop is made by them)
    import samsa.broker.app  # noqa: F401
    import samsa.broker.cli  # noqa: F401

    _die_with_parent()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the brokers
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C is for the test runner
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()


if __name__ == "__main__":
    serve()
