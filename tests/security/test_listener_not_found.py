"""A partition leader (or coordinator) without an endpoint on the listener a client came in on:
Metadata v6+ answers LISTENER_NOT_FOUND (v0-5: LEADER_NOT_AVAILABLE), DescribeTopicPartitions
no leader, FindCoordinator COORDINATOR_NOT_AVAILABLE, as Kafka's MetadataCache does."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import CLUSTER_SETTINGS
from tests.protocol.wire import WireClient
from tests.support.broker import BrokerProcess, free_port

pytestmark = pytest.mark.timeout(300)


def test_leader_without_the_clients_listener(tmp_path: Path) -> None:
    zk = ZooKeeperProcess(tmp_path / "zk", free_port()).start()
    chroot = f"{zk.connect_string}/samsa-{uuid.uuid4().hex[:8]}"
    plain0, external0, plain1 = free_port(), free_port(), free_port()
    brokers = [
        BrokerProcess(tmp_path / "b0", broker_id=0, port=plain0, name="broker0", settings={
            **CLUSTER_SETTINGS, "zookeeper.connect": chroot,
            "listeners": f"PLAINTEXT://127.0.0.1:{plain0},EXTERNAL://127.0.0.1:{external0}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"}),
        BrokerProcess(tmp_path / "b1", broker_id=1, port=plain1, name="broker1", settings={
            **CLUSTER_SETTINGS, "zookeeper.connect": chroot}),
    ]
    try:
        for b in brokers:
            b.start()
        with WireClient(brokers[0].bootstrap) as w:
            deadline = time.monotonic() + 20
            while len(w.call(3, 1, {"topics": []}).brokers) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.2)
            r = w.call(19, 4, {"topics": [{
                "name": "split", "num_partitions": -1, "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [0]},
                                {"partition_index": 1, "broker_ids": [1]}],
                "configs": []}], "timeout": 20000, "validate_only": False})
            assert r.topics[0].error_code == 0
            # A group whose coordinator is broker 1, found on the PLAINTEXT listener.
            group, i = None, 0
            deadline = time.monotonic() + 30
            while group is None:
                assert time.monotonic() < deadline, "no group coordinated by broker 1"
                c = w.call(10, 2, {"key": f"g{i}", "key_type": 0})
                if c.error_code != 0:  # the offsets topic is being created
                    time.sleep(0.2)
                    continue
                if c.node_id == 1:
                    group = f"g{i}"
                i += 1
        with WireClient(f"127.0.0.1:{external0}") as w:
            deadline = time.monotonic() + 20
            while True:
                md = w.call(3, 12, {"topics": [{"name": "split"}],
                                    "allow_auto_topic_creation": False})
                parts = {p.partition_index: p for p in md.topics[0].partitions}
                if len(parts) == 2 and parts[0].leader_id == 0:
                    break
                assert time.monotonic() < deadline
                time.sleep(0.2)
            assert [b.node_id for b in md.brokers] == [0]  # broker 1 has no EXTERNAL
            assert (parts[0].error_code, parts[0].leader_id) == (0, 0)
            assert (parts[1].error_code, parts[1].leader_id) == (72, -1)  # LISTENER_NOT_FOUND
            assert list(parts[1].replica_nodes) == [1]
            md5 = w.call(3, 5, {"topics": [{"name": "split"}],
                                "allow_auto_topic_creation": False})
            p1 = next(p for p in md5.topics[0].partitions if p.partition_index == 1)
            assert (p1.error_code, p1.leader_id) == (5, -1)  # LEADER_NOT_AVAILABLE
            dtp = w.call(75, 0, {"topics": [{"name": "split"}],
                                 "response_partition_limit": 10, "cursor": None})
            leaders = {p.partition_index: (p.error_code, p.leader_id)
                       for p in dtp.topics[0].partitions}
            assert leaders == {0: (0, 0), 1: (0, -1)}
            c = w.call(10, 2, {"key": group, "key_type": 0})
            assert (c.error_code, c.node_id) == (15, -1)  # COORDINATOR_NOT_AVAILABLE
    finally:
        for b in brokers:
            b.close()
        zk.stop()
