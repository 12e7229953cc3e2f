"""Fixtures of the chaos tests: a ZooKeeper for the session and a fresh 3-broker cluster per
test (its brokers' log tails are added to a failing test's report)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.zk_process import ZooKeeperProcess
from tests.chaos.nemesis import start_cluster
from tests.cluster.cluster import Cluster
from tests.support.broker import free_port


@pytest.fixture(scope="session")
def chaos_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("chaos-zookeeper"), free_port()).start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def chaos_cluster(chaos_zookeeper: ZooKeeperProcess, tmp_path: Path,
                  request: pytest.FixtureRequest) -> Iterator[Cluster]:
    cluster = start_cluster(chaos_zookeeper, tmp_path / "cluster")
    try:
        yield cluster
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            rep.sections.append(("broker logs", cluster.logs_tail()))
        cluster.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    rep = yield
    if rep.when == "call":
        item.rep_call = rep  # type: ignore[attr-defined]
    return rep
