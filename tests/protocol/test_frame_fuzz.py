"""The frame-level fuzzer (frame_fuzz.py) against a broker of its own, for a bounded time:
no traceback or error in its log, never down, always answering, no acked record lost.

SAMSA_FUZZ_SECONDS (default 20) and SAMSA_FUZZ_SEED (default 1) set the run; `make chaos`
runs it longer with a new seed each time (tests/chaos/run.py --workload fuzz).
"""

from __future__ import annotations

import os

from .frame_fuzz import fuzz_broker


def test_fuzzed_frames_never_break_the_broker(broker):
    seconds = float(os.environ.get("SAMSA_FUZZ_SECONDS", "20"))
    seed = int(os.environ.get("SAMSA_FUZZ_SEED", "1"))
    report = fuzz_broker(broker, seconds, seed)
    print(report.text())
    assert report.ok, report.text()
    assert report.frames > 100 and report.canary_acked > 0, report.text()
