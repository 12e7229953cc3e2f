"""examples/spark_exactly_once.py, run in the suite's Spark session (spark-connector.md §5):
transactional producers -> Samsa -> Spark (read_committed) -> file sink and Samsa topic."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.spark.helpers import REPO_ROOT
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.timeout(300)


def load_example() -> ModuleType:
    path = REPO_ROOT / "examples" / "spark_exactly_once.py"
    spec = importlib.util.spec_from_file_location("spark_exactly_once", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_exactly_once_example(spark: Any, spark_broker: BrokerProcess, offset_path: str,
                              tmp_path: Path) -> None:
    example = load_example()
    result = example.run_pipeline(spark, spark_broker.bootstrap, tmp_path)
    assert result.problems() == []
    # The scenario's shape, so that "no problems" cannot come from an empty run:
    # T1 (5) + plain (4 + 2) + 3 single-record txns + y = 15 committed;
    # T2 (5) + x + 2 records of the transaction left open = 8 invisible.
    assert len(result.written.committed) == 15
    assert len(result.written.invisible) == 8
    assert len(result.file_rows) == 15 and len(result.kafka_out) == 15
    assert sorted(result.lso_probe_visible) == sorted(result.lso_probe_expected)
    assert len(result.lso_probe_visible) == 14  # everything committed before x, but not y
