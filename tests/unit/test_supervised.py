"""tests/support/supervised.py with real worker processes: a stalled run is killed and
restarted, a crashed one restarted, and a finished one ends the supervision."""

from __future__ import annotations

import sys

from tests.support.supervised import Supervised

# Run 1 stalls (no output), run 2 crashes after some progress, run 3 finishes.
WORKER = """
import json, pathlib, sys, time
runs = pathlib.Path(sys.argv[1])
n = int(runs.read_text() or 0) + 1 if runs.exists() else 1
runs.write_text(str(n))
if n == 1:
    time.sleep(60)
print(json.dumps({"progress": 2}), flush=True)
if n == 2:
    sys.exit(3)
print(json.dumps({"done": True}), flush=True)
"""


def test_stalled_and_crashed_runs_are_restarted(tmp_path):
    w = Supervised("worker", [sys.executable, "-c", WORKER, str(tmp_path / "runs")], tmp_path,
                   stall_s=1.0, poll_s=0.05).start()
    try:
        assert w.done.wait(30)
    finally:
        w.stop()
    assert (w.runs, len(w.stalls), len(w.crashes), w.progress) == (3, 1, 1, 4)
    assert "exited 3" in w.crashes[0]
