"""`samsa serve --zookeeper` and `samsa cluster` argument handling (no processes started)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from samsa.broker import cli
from samsa.broker.cluster.local_cluster import (
    ClusterError,
    LocalCluster,
    describe_exit,
    run_cluster,
)
from samsa.broker.node.supervisor import node_processes
from samsa.config.schema import ConfigError


def test_serve_zookeeper_sets_zookeeper_connect(tmp_path: Path) -> None:
    args = cli.make_parser().parse_args(
        ["serve", "--data-dir", str(tmp_path), "--zookeeper", "127.0.0.1:2181/samsa",
         "--broker-id", "2"])
    cfg = cli.build_config(args)
    assert cfg["zookeeper.connect"] == "127.0.0.1:2181/samsa"
    assert cfg.broker_id == 2


def test_serve_zookeeper_and_set_later_flag_wins(tmp_path: Path) -> None:
    args = cli.make_parser().parse_args(
        ["serve", "--zookeeper", "zk:2181", "--set", "zookeeper.connect=zk:2182/x"])
    assert cli.build_config(args)["zookeeper.connect"] == "zk:2182/x"
    args = cli.make_parser().parse_args(
        ["serve", "--set", "zookeeper.connect=zk:2182/x", "--zookeeper", "zk:2181"])
    assert cli.build_config(args)["zookeeper.connect"] == "zk:2181"


def test_serve_without_zookeeper_stays_single_broker() -> None:
    cfg = cli.build_config(cli.make_parser().parse_args(["serve"]))
    assert cfg["zookeeper.connect"] is None


def test_cluster_arguments_and_defaults(tmp_path: Path) -> None:
    args = cli.make_parser().parse_args(
        ["cluster", "--brokers", "3", "--data-dir", str(tmp_path),
         "--set", "num.partitions=3", "--set", "default.replication.factor=3"])
    assert (args.brokers, args.data_dir, args.base_port, args.zk_port, args.host) == (
        3, tmp_path, 9092, 2181, "127.0.0.1")
    assert args.settings == ["num.partitions=3", "default.replication.factor=3"]


def test_cluster_requires_brokers_and_data_dir() -> None:
    assert cli.main(["cluster", "--brokers", "3"]) == 2
    assert cli.main(["cluster", "--data-dir", "x"]) == 2


def test_broker_commands(tmp_path: Path) -> None:
    c = LocalCluster(3, tmp_path, base_port=19092, zk_port=12181,
                     settings=["num.partitions=3", "num.partitions=4", "log.segment.bytes=1024"],
                     serve_command=["samsa", "serve"])
    assert c.zookeeper_connect == "127.0.0.1:12181/samsa"
    assert c.bootstrap == "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094"
    b = c.brokers[2]
    assert b.command == [
        "samsa", "serve", "--zookeeper", "127.0.0.1:12181/samsa", "--broker-id", "2",
        "--listen", "127.0.0.1:19094", "--data-dir", str(tmp_path.resolve() / "broker-2"),
        "--set", "num.partitions=4", "--set", "log.segment.bytes=1024",
    ]
    assert b.log_path == tmp_path.resolve() / "broker-2" / "broker.log"
    assert c.zookeeper.data_dir == tmp_path.resolve() / "zookeeper"
    # Every command is one that `samsa serve` accepts, with the properties it should set.
    for b in c.brokers:
        cfg = cli.build_config(cli.make_parser().parse_args(b.command[1:]))
        assert cfg.broker_id == b.broker_id
        assert (cfg.listen_host, cfg.listen_port) == ("127.0.0.1", 19092 + b.broker_id)
        assert cfg["zookeeper.connect"] == "127.0.0.1:12181/samsa"
        assert cfg.data_dir == b.data_dir


def test_node_commands(tmp_path: Path) -> None:
    """--processes 2: node k is `samsa serve --processes 2` as brokers 2k, 2k+1 on the ports
    after the previous node's, its processes in rack node-k."""
    c = LocalCluster(2, tmp_path, base_port=19092, zk_port=12181, processes=2,
                     settings=["num.partitions=3"], serve_command=["samsa", "serve"])
    assert c.bootstrap == ",".join(f"127.0.0.1:{p}" for p in range(19092, 19096))
    node = c.brokers[1]
    assert (node.name, node.ports) == ("node 1", [19094, 19095])
    assert node.command == [
        "samsa", "serve", "--zookeeper", "127.0.0.1:12181/samsa", "--broker-id", "2",
        "--listen", "127.0.0.1:19094", "--data-dir", str(tmp_path.resolve() / "node-1"),
        "--processes", "2", "--set", "broker.rack=node-1", "--set", "num.partitions=3",
    ]
    assert node.log_path == tmp_path.resolve() / "node-1" / "node.log"
    # What each node's supervisor runs: brokers with ids and ports that no other node has.
    seen = []
    for node in c.brokers:
        args = cli.make_parser().parse_args(node.command[1:])
        assert args.processes == 2
        for p in node_processes(None, cli._overrides(args), args.processes, ["samsa", "serve"]):
            cfg = cli.build_config(cli.make_parser().parse_args(p.command[1:]))
            seen.append((cfg.broker_id, cfg.listen_port, cfg["broker.rack"], cfg.data_dir))
    assert seen == [(i, 19092 + i, f"node-{i // 2}",
                     tmp_path.resolve() / f"node-{i // 2}" / f"broker-{i}") for i in range(4)]


def test_one_process_per_broker_by_default(tmp_path: Path) -> None:
    args = cli.make_parser().parse_args(["cluster", "--brokers", "2", "--data-dir", "d"])
    assert args.processes == 1
    args = cli.make_parser().parse_args(["cluster", "--brokers", "2", "--processes", "3",
                                         "--data-dir", "d"])
    assert args.processes == 3
    c = LocalCluster(2, tmp_path, serve_command=["samsa", "serve"])
    assert [(b.name, b.ports, b.log_path.name) for b in c.brokers] == [
        ("broker 0", [9092], "broker.log"), ("broker 1", [9093], "broker.log")]
    assert "--processes" not in c.brokers[0].command


def test_rack_is_the_clusters_with_nodes(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="samsa cluster sets broker.rack for each node"):
        LocalCluster(2, tmp_path, processes=2, settings=["broker.rack=r"])
    c = LocalCluster(2, tmp_path, settings=["broker.rack=r"], serve_command=["samsa", "serve"])
    assert c.brokers[0].command[-2:] == ["--set", "broker.rack=r"]


def test_host_other_loopback_address(tmp_path: Path) -> None:
    c = LocalCluster(1, tmp_path, host="127.0.0.2", serve_command=["samsa", "serve"])
    assert c.brokers[0].command[c.brokers[0].command.index("--listen") + 1] == "127.0.0.2:9092"
    assert c.zookeeper.host == "127.0.0.2"


@pytest.mark.parametrize("setting", ["listeners=PLAINTEXT://127.0.0.1:1", "log.dirs=/x",
                                     "node.id=1", "broker.id=1", "zookeeper.connect=h:1"])
def test_reserved_settings_refused(tmp_path: Path, setting: str) -> None:
    with pytest.raises(ClusterError, match="samsa cluster sets"):
        LocalCluster(3, tmp_path, settings=[setting])


def test_bad_settings_fail_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="num.partitions"):
        LocalCluster(3, tmp_path, settings=["num.partitions=many"])
    with pytest.raises(ConfigError, match="no.such.property"):
        LocalCluster(3, tmp_path, settings=["no.such.property=1"])
    with pytest.raises(ConfigError):
        LocalCluster(3, tmp_path, settings=["novalue"])


def test_non_loopback_host_refused(tmp_path: Path) -> None:
    # The broker binds 127.0.0.0/8 only; the cluster says so before starting anything.
    with pytest.raises(ConfigError, match="127.0.0.0/8"):
        LocalCluster(3, tmp_path, host="0.0.0.0")
    assert run_cluster(3, tmp_path / "d", host="192.0.2.1") == 2
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("kwargs", [{"brokers": 0}, {"base_port": 65535},
                                    {"zk_port": 0}, {"zk_port": 9093}, {"processes": 0},
                                    {"processes": 2, "base_port": 65531},
                                    {"processes": 2, "zk_port": 9097}])
def test_bad_numbers_refused(tmp_path: Path, kwargs: dict[str, int]) -> None:
    args = {"brokers": 3, **kwargs}
    with pytest.raises(ClusterError):
        LocalCluster(args.pop("brokers"), tmp_path, **args)


def test_busy_port_refused_before_zookeeper_starts(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        c = LocalCluster(1, tmp_path, base_port=port, zk_port=port - 1 if port > 1 else 2)
        with pytest.raises(ClusterError, match=f"{port}.*in use"):
            c.start()
    assert not (tmp_path / "zookeeper").exists()


def test_describe_exit() -> None:
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-9) == "was killed by SIGKILL"
