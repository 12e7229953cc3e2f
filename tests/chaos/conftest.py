"""Fixtures of the chaos tests: a ZooKeeper for the session and a fresh 3-broker cluster per
test (its brokers' log tails are added to a failing test's report); for partitions, a cluster
whose brokers each run in a network namespace, with a ZooKeeper of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.chaos.nemesis import partitionable_cluster, start_cluster
from tests.chaos.netns import NetLab, unavailable_reason
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
        _append_logs(request, cluster)
        cluster.close()


@pytest.fixture
def partitioned_cluster(tmp_path: Path, request: pytest.FixtureRequest
                        ) -> Iterator[tuple[Cluster, NetLab]]:
    """(cluster, lab). Skips, saying why, where network namespaces cannot be made; fails if
    the lab leaves a namespace, link or process behind."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with partitionable_cluster(tmp_path) as (cluster, lab):
        try:
            yield cluster, lab
        finally:
            _append_logs(request, cluster)
    assert not lab.leaked_pids, f"processes left in the namespaces: {lab.leaked_pids}"
    assert not lab.leftovers(), f"left behind: {lab.leftovers()}"


def _append_logs(request: pytest.FixtureRequest, cluster: Cluster) -> None:
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        rep.sections.append(("broker logs", cluster.logs_tail()))
