"""Metadata answers reused between requests (broker/cluster/metadata_cache.py) follow leadership and
broker changes on every broker of a 3-broker cluster: each broker is asked for the full
metadata (twice, so the second answer comes from what it kept) before every change, and must
show the change once its ZooKeeper view has it (Kafka's brokers, too, learn of a change a
moment after the controller made it: the checks wait for it, and a broker that kept serving
what it had kept would never get there)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster, create_topic, wait_until
from tests.cluster.test_leader_election import PREFERRED, _elect, _start
from tests.protocol.wire import WireClient

pytestmark = pytest.mark.timeout(240)

METADATA = 3
VERSIONS = (1, 9, 12)


def _partition(bootstrap: str, version: int, topic: str) -> tuple[int, list[int]]:
    """(leader, offline replicas) of partition 0 of `topic` in a full Metadata answer."""
    with WireClient(bootstrap) as w:
        md = w.call(METADATA, version, {"topics": None, "allow_auto_topic_creation": False})
    t = next(t for t in md.topics if t.name == topic)
    p = next(p for p in t.partitions if p.partition_index == 0)
    return p.leader_id, sorted(getattr(p, "offline_replicas", ()))


def _warm(cluster: Cluster, topic: str) -> None:
    for b in cluster.brokers:
        if b.is_running():
            for v in VERSIONS:
                _partition(b.bootstrap, v, topic)
                _partition(b.bootstrap, v, topic)
            AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10)


def _every_broker_says(cluster: Cluster, topic: str, leader: int,
                       offline: list[int] | None = None) -> bool:
    for b in cluster.brokers:
        if not b.is_running():
            continue
        for v in VERSIONS:
            got_leader, got_offline = _partition(b.bootstrap, v, topic)
            if got_leader != leader:
                return False
            if offline is not None and v >= 5 and got_offline != offline:
                return False
    return True


def test_leader_changes_and_broker_departures_reach_every_brokers_metadata(
        zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    cluster = _start(zookeeper, tmp_path, **{"auto.leader.rebalance.enable": False})
    try:
        topic = "mc-" + uuid.uuid4().hex[:6]
        create_topic(cluster, topic, 1)
        md = cluster.admin().list_topics(topic, timeout=10).topics[topic].partitions[0]
        preferred, others = md.replicas[0], md.replicas[1:]
        wait_until(lambda: _every_broker_says(cluster, topic, preferred, []), 30,
                   "every broker names the preferred leader")

        # A broker goes away: the others list it as an offline replica and, since it led,
        # name another leader.
        _warm(cluster, topic)
        cluster.broker(preferred).stop()
        wait_until(lambda: _every_broker_says(cluster, topic, cluster.leaders(topic)[0],
                                              [preferred])
                   and cluster.leaders(topic)[0] in others, 30,
                   "the stopped broker offline and another leader, on every broker")

        # It comes back (no replica offline any more), then a preferred election alone (no
        # broker comes or goes) moves the leadership back.
        cluster.broker(preferred).start()
        wait_until(lambda: all(preferred in isr for isr in cluster.isr(topic).values()), 60,
                   "the restarted broker back in the ISR")
        interim = cluster.leaders(topic)[0]
        wait_until(lambda: _every_broker_says(cluster, topic, interim, []), 30,
                   "every broker names the interim leader, no replica offline")
        _warm(cluster, topic)
        assert _elect(cluster.broker(others[0]).bootstrap, PREFERRED, {topic: [0]}) == {
            (topic, 0): 0}
        wait_until(lambda: _every_broker_says(cluster, topic, preferred, []), 30,
                   "every broker names the elected leader")
    finally:
        cluster.close()
