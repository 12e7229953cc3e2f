"""Operator-facing logs: recovery says what it truncated and how far it got, compaction says
what it did, per-module levels apply, per-request rejections stay below INFO."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from samsa.broker import cli
from samsa.config.schema import BrokerConfig, ConfigError
from samsa.protocol.records import build_batch
from samsa.storage import log_manager
from samsa.storage.config import LogConfig
from samsa.storage.log_manager import LogManager


def batch(n: int = 1) -> bytes:
    return build_batch([(b"k%d" % i, b"v" * 50, [], 1000 + i) for i in range(n)])


def start(tmp_path: Path) -> LogManager:
    lm = LogManager(tmp_path, LogConfig(), producer_id_expiration_ms=86_400_000)
    lm.startup(lambda topic: LogConfig(segment_bytes=500))
    return lm


def crash_with_torn_tails(tmp_path: Path, partitions: int) -> int:
    """Write to `partitions` logs, append 30 bytes of garbage to each, 'kill -9'."""
    lm = start(tmp_path)
    for p in range(partitions):
        lg = lm.create_log("t", p, LogConfig(segment_bytes=500))
        for _ in range(5):
            lg.append_as_leader(batch(1), 0)
        path = lg.active_segment.log_path
        lg.close_without_flush()
        with open(path, "ab") as f:
            f.write(b"\x00" * 30)
    return 30 * partitions


def test_recovery_logs_truncation_and_summary(tmp_path: Path, caplog) -> None:
    garbage = crash_with_torn_tails(tmp_path, 3)
    caplog.set_level(logging.INFO)
    lm = start(tmp_path)
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    truncations = [m for m in messages if "recovery truncated" in m]
    assert sorted(m.split(":")[0] for m in truncations) == ["t-0", "t-1", "t-2"]
    assert all("recovery truncated 30 bytes" in m for m in truncations)
    (summary,) = [m for m in messages if m.startswith("recovered ")]
    assert "recovered 3 logs in" in summary and f"{garbage} bytes truncated in 3 logs" in summary
    assert any("recovering 3 logs" in m for m in messages)
    lm.shutdown()

    caplog.clear()
    start(tmp_path).shutdown()  # clean start: nothing recovered, nothing said at INFO
    assert not [r for r in caplog.records if r.name == "samsa.storage.log_manager"
                and r.levelno >= logging.INFO]


def test_recovery_progress_lines(tmp_path: Path, caplog, monkeypatch) -> None:
    crash_with_torn_tails(tmp_path, 4)
    monkeypatch.setattr(log_manager, "PROGRESS_INTERVAL_S", 0.0)
    caplog.set_level(logging.INFO)
    start(tmp_path).shutdown()
    progress = [r.getMessage() for r in caplog.records if "logs: " in r.getMessage()]
    assert [m.split(" (")[0] for m in progress] == [
        "recovering logs: 1/4 done", "recovering logs: 2/4 done", "recovering logs: 3/4 done"
    ]


def test_compaction_is_logged(tmp_path: Path, caplog) -> None:
    lm = start(tmp_path)
    cfg = LogConfig(segment_bytes=300, cleanup_policy="compact", min_compaction_lag_ms=0)
    lg = lm.create_log("c", 0, cfg)
    for _ in range(20):
        lg.append_as_leader(build_batch([(b"same-key", b"v" * 50, [], 1000)]), 0)
    lg.update_high_watermark(lg.log_end_offset)
    caplog.set_level(logging.INFO)
    assert lm.run_cleaner(force=True) == 1
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("compacted")]
    assert line.startswith("compacted c-0 offsets 0..") and "records removed" in line
    lm.shutdown()


def test_per_module_levels(monkeypatch) -> None:
    config = BrokerConfig(
        {"samsa.log.level": "WARN",
         "samsa.log.loggers":
             "samsa.coordinator.transaction=DEBUG, samsa.broker.handlers.produce=error"}
    )
    try:
        cli.setup_logging(config)
        assert logging.getLogger().level == logging.WARNING
        assert logging.getLogger("samsa.coordinator.transaction").level == logging.DEBUG
        txn_coordinator = logging.getLogger("samsa.coordinator.transaction.coordinator")
        assert txn_coordinator.isEnabledFor(logging.DEBUG)
        assert logging.getLogger("samsa.broker.handlers.produce").level == logging.ERROR
    finally:
        for name in ("samsa.coordinator.transaction", "samsa.broker.handlers.produce"):
            logging.getLogger(name).setLevel(logging.NOTSET)
    with pytest.raises(ConfigError, match="samsa.log.loggers"):
        BrokerConfig({"samsa.log.loggers": "broker=LOUD"})
    with pytest.raises(ConfigError, match="samsa.log.loggers"):
        BrokerConfig({"samsa.log.loggers": "broker"})
