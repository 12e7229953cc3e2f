"""The broker's loop watchdog: a blocked event loop gets a log line that says where it is
stuck (the stack of the loop's thread) and, once it runs again, how long it was blocked."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from samsa.broker.network.loop_watchdog import LoopWatchdog


def _block_the_loop_synchronously(seconds: float) -> None:
    time.sleep(seconds)  # what a synchronous ZooKeeper call or a long load does to the loop


def test_a_blocked_loop_is_logged_with_its_stack(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        dog = LoopWatchdog(threshold_s=0.3, interval_s=0.05)
        dog.start()
        try:
            await asyncio.sleep(0.2)
            _block_the_loop_synchronously(1.0)
            await asyncio.sleep(0.2)
        finally:
            await dog.stop()

    with caplog.at_level(logging.WARNING, logger="samsa.broker.network.loop_watchdog"):
        asyncio.run(main())
    stuck = [r.getMessage() for r in caplog.records if "has not run for" in r.getMessage()]
    assert len(stuck) == 1, caplog.text  # one stack per stall, not one per check
    assert "_block_the_loop_synchronously" in stuck[0] and "time.sleep" in stuck[0]
    blocked = [r.getMessage() for r in caplog.records if "did not run for" in r.getMessage()]
    assert len(blocked) == 1 and float(blocked[0].split()[-2]) >= 0.9, caplog.text


def test_a_busy_but_running_loop_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        dog = LoopWatchdog(threshold_s=0.6, interval_s=0.05)
        dog.start()
        try:
            for _ in range(10):
                _block_the_loop_synchronously(0.1)  # steps well below the threshold
                await asyncio.sleep(0)
        finally:
            await dog.stop()

    with caplog.at_level(logging.WARNING, logger="samsa.broker.network.loop_watchdog"):
        asyncio.run(main())
    assert not caplog.records, caplog.text


_STOPPED_CHILD = """
import asyncio, logging, sys
from samsa.broker.network.loop_watchdog import LoopWatchdog
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
async def main():
    dog = LoopWatchdog(threshold_s=0.3, interval_s=0.05)
    dog.start()
    print("ready", flush=True)
    await asyncio.sleep(2.5)
    await dog.stop()
asyncio.run(main())
"""


def test_a_stopped_process_gets_no_stack() -> None:
    # SIGSTOP stops the watching thread too: the loop did not run, but nothing blocked it.
    child = subprocess.Popen([sys.executable, "-c", _STOPPED_CHILD], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    os.kill(child.pid, signal.SIGSTOP)
    time.sleep(1.0)
    os.kill(child.pid, signal.SIGCONT)
    _, err = child.communicate(timeout=20)
    assert "did not run for" in err  # the stop is seen ...
    assert "has not run for" not in err, err  # ... without a stack of an idle loop
