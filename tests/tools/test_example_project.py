"""examples/orders-app, a user's project (its own pyproject.toml and a module named config)
whose confluent-kafka, aiokafka and kafka-python code is tested with samsa_broker, passes under
its own pytest settings; the fixture's start-up times are printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "examples" / "orders-app"


def test_orders_app_passes_with_samsa_broker() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTEST_ADDOPTS", None)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
         "-W", "ignore::DeprecationWarning"],
        cwd=PROJECT, env=env, capture_output=True, text=True, timeout=280)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "4 passed" in res.stdout, res.stdout
    summary = next(line for line in res.stdout.splitlines() if line.startswith("samsa.testing:"))
    print(f"\norders-app: {summary}")
