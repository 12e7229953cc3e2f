"""A log line that explains a stalled broker: the event loop blocked by something synchronous
(a ZooKeeper call, a long load, a sleep) answers nobody and logs nothing, which from outside
looks like a broker that went quiet. A thread watches a heartbeat the loop updates; once it
is older than `threshold_s`, it logs where the loop's thread is (its stack), once per stall,
and the loop logs how long it did not run when it runs again (a process stopped as a whole,
SIGSTOP, gets only that line: the watching thread did not run either). Costs one wake-up per
`interval_s` on each side.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

log = logging.getLogger(__name__)

STALL_THRESHOLD_S = 5.0


class LoopWatchdog:
    def __init__(self, threshold_s: float = STALL_THRESHOLD_S, interval_s: float = 0.5) -> None:
        self.threshold_s = threshold_s
        self.interval_s = interval_s
        self._beat = time.monotonic()
        self._loop_thread: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """On the loop to watch."""
        self._loop_thread = threading.get_ident()
        self._beat = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._heartbeat())
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            now = time.monotonic()
            gap = now - self._beat
            self._beat = now
            if gap > self.threshold_s:
                log.warning("the event loop did not run for %.1f s", gap)

    def _watch(self) -> None:
        reported = -1.0  # the heartbeat already reported on (one stack per stall)
        woke = time.monotonic()
        while not self._stop.wait(self.interval_s):
            now, last_woke = time.monotonic(), woke
            woke = now
            if now - last_woke > self.threshold_s:
                continue  # this thread did not run either: the whole process was stopped
            beat = self._beat
            if beat == reported or now - beat <= self.threshold_s:
                continue
            reported = beat
            frame = sys._current_frames().get(self._loop_thread or -1)
            stack = "".join(traceback.format_stack(frame)) if frame is not None else "?"
            log.warning("the event loop has not run for %.1f s; its thread is at:\n%s",
                        time.monotonic() - beat, stack.rstrip())
