"""`samsa` CLI: argument parsing, config building, error exit codes."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from samsa.broker import cli
from samsa.config import BrokerConfig


def _args(*argv: str):
    return cli.make_parser().parse_args(["serve", *argv])


def test_flags_map_onto_properties(tmp_path: Path) -> None:
    cfg = cli.build_config(_args("--data-dir", str(tmp_path), "--listen", "127.0.0.2:9999",
                                 "--broker-id", "7", "--set", "num.partitions=4"))
    assert cfg.data_dir == tmp_path
    assert (cfg.listen_host, cfg.listen_port) == ("127.0.0.2", 9999)
    assert cfg["listeners"] == "PLAINTEXT://127.0.0.2:9999"
    assert cfg.broker_id == 7 and cfg["broker.id"] == 7
    assert cfg["num.partitions"] == 4


def test_flags_win_over_yaml_and_later_flags_win(tmp_path: Path) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("num.partitions: 2\nlog.dirs: /nowhere\nnode.id: 1\n")
    cfg = cli.build_config(_args("--config", str(f), "--set", "num.partitions=5",
                                 "--data-dir", str(tmp_path / "a"),
                                 "--set", f"log.dirs={tmp_path / 'b'}", "--broker-id", "3"))
    assert cfg["num.partitions"] == 5
    assert cfg.data_dir == tmp_path / "b"
    assert cfg.broker_id == 3
    assert cfg.source("num.partitions") == "STATIC_BROKER_CONFIG"


def test_set_value_may_contain_equals() -> None:
    cfg = cli.build_config(_args("--set", "broker.rack=a=b"))
    assert cfg["broker.rack"] == "a=b"


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--set", "num.partitions=zero"], "num.partitions"),
        (["--set", "no.such.key=1"], "no.such.key"),
        (["--set", "novalue"], "key=value"),
        (["--listen", "10.0.0.1:9092"], "listeners"),
        (["--broker-id", "x"], "node.id"),
        (["--set", "initial.feature.levels=no.version=1"],
         "initial.feature.levels: unknown feature 'no.version'"),
        (["--set", "initial.feature.levels=transaction.version=3"],
         "transaction.version supports levels 0 to 2, not 3"),
        (["--set", "initial.feature.levels=share.version=2"],
         "share.version supports levels 0 to 1, not 2"),
    ],
)
def test_config_error_exits_2(argv: list[str], needle: str,
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("samsa: config error: ")
    assert needle in err


def test_bad_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "b.yaml"
    f.write_text("log.segment.bytes: ten\n")
    assert cli.main(["serve", "--config", str(f)]) == 2
    assert "log.segment.bytes" in capsys.readouterr().err


def test_no_command_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert cli.main(["--help"]) == 0
    assert cli.main(["serve", "--bogus"]) == 2


def test_serve_runs_app_with_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[BrokerConfig] = []

    def run(config: BrokerConfig) -> int:
        seen.append(config)
        return 0

    fake = types.ModuleType("samsa.broker.app")
    fake.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "samsa.broker.app", fake)
    from samsa import broker

    monkeypatch.setattr(broker, "app", fake, raising=False)
    assert cli.main(["serve", "--data-dir", str(tmp_path), "--set",
                     "samsa.log.level=DEBUG"]) == 0
    assert seen and seen[0].data_dir == tmp_path
    import logging

    assert logging.getLogger().level == logging.DEBUG
