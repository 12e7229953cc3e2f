"""A single broker in ZooKeeper killed with SIGKILL and started again (issue 51): as the
restarted node's processes, it registers before its controller writes its leaderships again at
the next leader epoch, and no Metadata answer in between names the epoch it then fences
(tests/node/test_restart_epochs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster
from tests.node.test_restart_epochs import check_restart

pytestmark = pytest.mark.timeout(420)


def test_no_metadata_names_a_leader_epoch_fenced_after_a_single_broker_restarts(
        zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    cluster = Cluster(zookeeper, tmp_path, size=1).start()
    try:
        broker = cluster.brokers[0]
        check_restart(broker.bootstrap, [broker.bootstrap], broker.kill9, broker.start)
    finally:
        cluster.close()
