"""A worker process run the way deployments run one: restarted when it exits without having
finished, and killed (SIGKILL) and restarted when it makes no progress for `stall_s` seconds,
e.g. a client stuck inside a call after a broker died. The worker reports on stdout, one JSON
object a line: {"progress": n} when it got n more units of work done, {"done": true} when all
is done (then it exits 0). Each run's stdout and stderr go to files of their own.

    w = Supervised("copier", [sys.executable, "-m", "tests.cluster.eos_copier", ...], out_dir,
                   stall_s=30).start()   # a thread that supervises until done or stop()
    w.progress, w.done.is_set(), w.crashes, w.stalls, w.stderr_tail()
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from tests.support.broker import _PRCTL, REPO_ROOT, _die_with_parent


class Supervised(threading.Thread):
    def __init__(self, name: str, cmd: Sequence[str], out_dir: Path, stall_s: float,
                 poll_s: float = 0.2) -> None:
        super().__init__(name=f"supervisor-{name}", daemon=True)
        self.worker, self.cmd, self.out_dir = name, list(cmd), out_dir
        self.stall_s, self.poll_s = stall_s, poll_s
        self.progress = 0
        self.runs = 0
        self.crashes: list[str] = []  # runs that exited without finishing
        self.stalls: list[str] = []  # runs killed for making no progress
        self.done = threading.Event()
        self._halt = threading.Event()

    def start(self) -> Supervised:  # type: ignore[override]
        super().start()
        return self

    def stop(self, timeout: float = 30) -> None:
        self._halt.set()
        if self.ident is not None:  # a test that failed before starting it stops it too
            self.join(timeout)

    @property
    def restarts(self) -> int:
        return len(self.crashes) + len(self.stalls)

    def stderr_tail(self, lines: int = 20) -> str:
        try:
            text = (self.out_dir / f"{self.worker}.run{self.runs}.stderr").read_text(
                errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # The processes are started and killed in this thread only: PR_SET_PDEATHSIG ties each to
    # the thread that forked it, and this thread outlives every run it starts.
    def run(self) -> None:
        while not self._halt.is_set() and not self.done.is_set():
            self.runs += 1
            stdout = self.out_dir / f"{self.worker}.run{self.runs}.stdout"
            with open(stdout, "wb") as out, open(stdout.with_suffix(".stderr"), "wb") as err:
                proc = subprocess.Popen(
                    self.cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=REPO_ROOT,
                    start_new_session=True,
                    preexec_fn=_die_with_parent if _PRCTL is not None else None)
            try:
                self._watch(proc, stdout)
            finally:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
            if not self.done.is_set() and not self._halt.is_set():
                time.sleep(0.5)

    def _watch(self, proc: subprocess.Popen[bytes], stdout: Path) -> None:
        pos, last_progress, done_at = 0, time.monotonic(), 0.0
        while not self._halt.is_set():
            time.sleep(self.poll_s)
            rc = proc.poll()
            with open(stdout, "rb") as f:
                f.seek(pos)
                chunk = f.read()
            end = chunk.rfind(b"\n") + 1  # whole lines only
            pos += end
            for line in chunk[:end].splitlines():
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if msg.get("progress"):
                    self.progress += int(msg["progress"])
                    last_progress = time.monotonic()
                if msg.get("done"):
                    self.done.set()
            if rc is not None:
                if not self.done.is_set():
                    self.crashes.append(f"run {self.runs} exited {rc}: {self.stderr_tail(2)}")
                return
            if self.done.is_set():  # finished: it exits by itself, or is made to
                done_at = done_at or time.monotonic()
                if time.monotonic() - done_at > 30:
                    proc.kill()
                continue
            if time.monotonic() - last_progress > self.stall_s:
                proc.kill()
                self.stalls.append(f"run {self.runs}: no progress for {self.stall_s:.0f} s: "
                                   f"{self.stderr_tail(2)}")
                return
