"""`samsa serve --processes N`'s supervisor (broker/node/supervisor.py) without brokers: what
each process of a node is configured as, and the supervisor's restarts, output and stop with
small stand-in processes."""

from __future__ import annotations

import io
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from samsa.broker.cli import main
from samsa.broker.node.supervisor import (
    BrokerProcess,
    Supervisor,
    node_processes,
    process_settings,
    processes_arg,
    shift_ports,
)
from samsa.config.loader import load_config
from samsa.config.schema import ConfigError


def test_every_listener_port_is_shifted_and_port_zero_kept() -> None:
    assert shift_ports("PLAINTEXT://127.0.0.1:9092,SSL://:9093", 2) == (
        "PLAINTEXT://127.0.0.1:9094,SSL://:9095")
    assert shift_ports("INTERNAL://[::1]:19092, EXTERNAL://host.example:0", 1) == (
        "INTERNAL://[::1]:19093, EXTERNAL://host.example:0")
    assert shift_ports("http://127.0.0.1:8081", 3) == "http://127.0.0.1:8084"


def test_process_i_is_broker_b_plus_i_with_its_own_dirs_and_the_host_as_rack() -> None:
    node = load_config(None, {
        "node.id": "5", "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
        "advertised.listeners": "PLAINTEXT://kafka1:9092,SSL://kafka1:9093",
        "log.dirs": "/d1,/d2", "metrics.port": "9404",
        "schema.registry.listeners": "http://127.0.0.1:8081",
        "zookeeper.connect": "zk:2181"})
    assert process_settings(node, 2) == {
        "node.id": "7", "broker.id": "7",
        "listeners": "PLAINTEXT://127.0.0.1:9094,SSL://127.0.0.1:9095",
        "advertised.listeners": "PLAINTEXT://kafka1:9094,SSL://kafka1:9095",
        "log.dirs": "/d1/broker-7,/d2/broker-7",
        "broker.rack": socket.gethostname(),
        "metrics.port": "9407",
        "schema.registry.listeners": "http://127.0.0.1:8083",
    }
    racked = load_config(None, {"broker.rack": "r1", "log.dirs": "/d"})
    assert process_settings(racked, 1)["broker.rack"] == "r1"
    assert process_settings(racked, 1)["log.dirs"] == "/d/broker-1"


def test_node_processes_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        node_processes(None, {"zookeeper.connect": "zk:2181", "num.partitions": "zero"}, 2)
    procs = node_processes(None, {"zookeeper.connect": "zk:2181", "log.dirs": str(tmp_path),
                                  "listeners": "PLAINTEXT://127.0.0.1:9092"}, 2,
                           serve_command=["samsa", "serve"])
    assert [p.broker_id for p in procs] == [0, 1]
    second = procs[1].command
    assert second[:2] == ["samsa", "serve"]
    assert "listeners=PLAINTEXT://127.0.0.1:9093" in second
    assert f"log.dirs={tmp_path}/broker-1" in second
    assert not any("samsa.metadata.shared.file" in arg for arg in second)


def test_without_zookeeper_the_processes_share_the_node_s_metadata_file(tmp_path: Path) -> None:
    procs = node_processes(None, {"log.dirs": str(tmp_path)}, 2, serve_command=["samsa"])
    for p in procs:
        assert f"samsa.metadata.shared.file={tmp_path}/samsa-metadata.db" in p.command
    chosen = node_processes(None, {"log.dirs": str(tmp_path),
                                   "samsa.metadata.shared.file": "/m.db"}, 2)
    assert all("samsa.metadata.shared.file=/m.db" in p.command for p in chosen)


def test_processes_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert processes_arg("3") == 3
    assert processes_arg("auto") >= 1
    with pytest.raises(ValueError):
        processes_arg("0")
    assert main(["serve", "--processes", "none"]) == 2
    assert "--processes none" in capsys.readouterr().err
    assert main(["serve", "--processes", "2", "--set", "num.partitions=zero"]) == 2
    assert "num.partitions" in capsys.readouterr().err


# A stand-in broker: says it started, exits with `code` at once or waits for SIGTERM.
CHILD = """
import signal, sys, time
print("up", flush=True)
if {code} is not None:
    sys.exit({code})
signal.signal(signal.SIGTERM, lambda *a: (print("stopping cleanly", flush=True), sys.exit(0)))
time.sleep(60)
"""


def _child(broker_id: int, code: int | None) -> BrokerProcess:
    return BrokerProcess(broker_id, [sys.executable, "-c", CHILD.format(code=code)],
                         backoff=0.2)


def _wait(cond: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_supervisor_restarts_with_backoff_names_each_line_and_forwards_sigterm(
        caplog: pytest.LogCaptureFixture) -> None:
    out = io.BytesIO()
    crashing, steady = _child(3, 7), _child(4, None)
    supervisor = Supervisor([crashing, steady], out=out, stop_timeout=20)
    caplog.set_level("INFO", logger="samsa.node")
    runner = threading.Thread(target=supervisor.run)
    runner.start()
    try:
        _wait(lambda: out.getvalue().count(b"[broker 3] up\n") >= 3)
    finally:
        supervisor.request_stop(15)
        runner.join(30)
    assert not runner.is_alive()
    restarts = [r.getMessage() for r in caplog.records if "restarting it in" in r.getMessage()]
    assert restarts[:2] == [m for m in restarts[:2] if "broker 3" in m and "code 7" in m]
    assert "in 0.2 s" in restarts[0] and "in 0.4 s" in restarts[1]  # doubled
    lines = out.getvalue().decode().splitlines()
    assert "[broker 4] up" in lines and "[broker 4] stopping cleanly" in lines
    assert all(line.startswith(("[broker 3] ", "[broker 4] ")) for line in lines)
    assert steady.proc is not None and steady.proc.returncode == 0


def test_the_node_metrics_merge_every_process_labelled_by_it() -> None:
    from prometheus_client import CollectorRegistry, Counter, generate_latest, start_http_server

    from samsa.broker.node.metrics import NodeCollector
    from samsa.testing import free_port

    urls, servers = {}, []
    for broker_id in (0, 1):
        registry = CollectorRegistry()
        Counter("kafka_requests", "Requests.", ["request"], registry=registry).labels(
            "Produce").inc(broker_id + 1)
        port = free_port()
        servers.append(start_http_server(port, addr="127.0.0.1", registry=registry)[0])
        urls[broker_id] = f"http://127.0.0.1:{port}/metrics"
    urls[2] = f"http://127.0.0.1:{free_port()}/metrics"  # a process down
    node = CollectorRegistry(auto_describe=False)
    node.register(NodeCollector(urls))
    try:
        text = generate_latest(node).decode()
    finally:
        for server in servers:
            server.shutdown()
    assert text.count("# TYPE kafka_requests_total counter") == 1
    assert 'kafka_requests_total{process="0",request="Produce"} 1.0' in text
    assert 'kafka_requests_total{process="1",request="Produce"} 2.0' in text
    assert 'samsa_node_process_up{process="1"} 1.0' in text
    assert 'samsa_node_process_up{process="2"} 0.0' in text


@pytest.mark.skipif(not hasattr(__import__("os"), "pidfd_open"),
                    reason="no pidfds on this system: the supervisor looks every 0.2 s there")
def test_the_supervisor_sleeps_while_its_processes_run_and_wakes_for_an_exit() -> None:
    out = io.BytesIO()
    steady = _child(5, None)
    supervisor = Supervisor([steady], out=out, stop_timeout=20)
    runner = threading.Thread(target=supervisor.run)
    runner.start()
    try:
        _wait(lambda: b"[broker 5] up\n" in out.getvalue())
        before = supervisor.passes
        time.sleep(2.0)
        assert supervisor.passes - before == 0  # a 0.2 s timer: about ten
        assert steady.proc is not None
        first = steady.proc
        first.kill()  # woken by the exit: restarted after its 0.2 s back-off
        _wait(lambda: out.getvalue().count(b"[broker 5] up\n") >= 2, timeout=5.0)
        assert steady.proc is not first and supervisor.passes - before <= 3
    finally:
        supervisor.request_stop(15)
        runner.join(30)
    assert not runner.is_alive()
    assert steady.proc is not None and steady.proc.returncode == 0
