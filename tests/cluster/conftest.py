"""A real ZooKeeper (Debian's package, installed by `make test`) for the cluster tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster
from tests.support.broker import free_port


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"), free_port()).start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def cluster(zookeeper: ZooKeeperProcess, tmp_path: Path,
            request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """Three brokers of their own (own ZooKeeper chroot) for one test; a failing test's
    report carries their log tails."""
    c = Cluster(zookeeper, tmp_path).start()
    try:
        yield c
    finally:
        rep = getattr(request.node, "rep_call", None)
        if rep is not None and rep.failed:
            for b in c.brokers:
                rep.sections.append((f"{b.name} log", b.log_tail(120)))
        c.close()
