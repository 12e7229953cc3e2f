"""docker/entrypoint.py, the image's entry point: KAFKA_CFG_*/SAMSA_CFG_* variables to the
broker's properties, their order against flags, and the listener its health check asks.
(tests/cluster/test_docker_image.py runs the image itself.)"""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from samsa.broker import cli
from samsa.config.loader import ConfigError
from tests.support.broker import REPO_ROOT


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("image_entrypoint",
                                                  REPO_ROOT / "docker" / "entrypoint.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


entrypoint = _load()


def test_variables_name_properties_over_the_image_defaults() -> None:
    props = entrypoint.properties({
        "KAFKA_CFG_LOG_RETENTION_HOURS": "24",
        "KAFKA_CFG_ADVERTISED_LISTENERS": "PLAINTEXT://broker:9092",
        "KAFKA_CFG_NUM_PARTITIONS": "1", "SAMSA_CFG_NUM_PARTITIONS": "3",  # SAMSA_CFG_ wins
        "KAFKA_CFG_": "x", "KAFKA_HEAP_OPTS": "-Xmx1g", "PATH": "/usr/bin"})
    assert props == {"listeners": "PLAINTEXT://0.0.0.0:9092", "log.dirs": "/var/lib/samsa",
                     "node.id": "0", "log.retention.hours": "24",
                     "advertised.listeners": "PLAINTEXT://broker:9092", "num.partitions": "3"}
    assert entrypoint.properties({})["advertised.listeners"] == "PLAINTEXT://localhost:9092"


def test_flags_after_serve_win_and_other_commands_run_as_they_are() -> None:
    env = {"KAFKA_CFG_NODE_ID": "5", "KAFKA_CFG_LISTENERS": "PLAINTEXT://0.0.0.0:9093"}
    command = entrypoint.serve_command(["serve", "--listen", "0.0.0.0:19092"], env)
    assert command[:2] == ["samsa", "serve"]
    props = entrypoint.effective(command)
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:19092"  # the flag, after the variable
    assert props["node.id"] == "5"
    assert entrypoint.serve_command([], env)[:2] == ["samsa", "serve"]  # the image's CMD
    assert entrypoint.serve_command(["dump-log", "a.log"], env) == ["samsa", "dump-log", "a.log"]


def test_the_broker_takes_the_properties_and_refuses_a_misspelt_one() -> None:
    args = cli.make_parser().parse_args(entrypoint.serve_command(["serve"], {})[1:])
    assert cli.build_config(args).advertised_listener.port == 9092  # the defaults start
    env = {"KAFKA_CFG_LOG_RETENTION_HOURS": "24", "KAFKA_CFG_LOG_DIRS": "/tmp/samsa-image"}
    args = cli.make_parser().parse_args(entrypoint.serve_command(["serve"], env)[1:])
    assert cli.build_config(args).log_retention_ms == 24 * 3600 * 1000
    env["KAFKA_CFG_LOG_RETENTON_HOURS"] = "24"
    args = cli.make_parser().parse_args(entrypoint.serve_command(["serve"], env)[1:])
    with pytest.raises(ConfigError, match="log.retenton.hours"):
        cli.build_config(args)


@pytest.mark.parametrize(("props", "expected"), [
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, ("PLAINTEXT", "127.0.0.1", 9092)),
    ({"listeners": "SASL_SSL://:9094,PLAINTEXT://:9092"}, ("SASL_SSL", "127.0.0.1", 9094)),
    ({"listeners": "INTERNAL://10.0.0.5:9093",
      "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:PLAINTEXT"},
     ("SSL", "10.0.0.5", 9093)),
])
def test_the_health_check_asks_the_first_listener(props: dict[str, str],
                                                  expected: tuple[str, str, int]) -> None:
    assert entrypoint._first_listener(props) == expected
