"""A leader's own ISR change (broker/cluster/member.py `write_isr`) against a real ZooKeeper:
it is written only over the ISR it was made from (issue 45).

The leader computes an ISR expansion from the ISR it knows; if the controller has changed the
stored ISR meanwhile (it took out a broker that died, or one in a previous life), writing the
expansion over it would put those brokers back: an ISR naming a dead broker, or one the next
controller shrinks again at once. Kafka's AlterPartition carries the partition epoch the
change was made at and the controller refuses a stale one; ZooKeeper-era leaders wrote
conditional on the zkVersion they knew."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from kazoo.protocol.states import Callback

from samsa.broker.app import Broker
from samsa.broker.cluster.member import ClusterMember
from samsa.broker.cluster.metadata_store import PartitionState, TopicState
from samsa.broker.cluster.zk.process import ZooKeeperProcess
from samsa.broker.replication.partition import Partition
from samsa.config.loader import load_config
from samsa.storage.config import LogConfig
from samsa.storage.log import Log

LEADER, F2, F3 = 1, 2, 3


def _member(broker: Broker) -> ClusterMember:
    """The part of a ZooKeeper broker that writes its ISR changes."""
    assert broker.cluster_member is not None
    return broker.cluster_member


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


async def test_an_isr_expansion_is_not_written_over_a_shrink_it_did_not_see(
        zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    chroot = f"c{uuid.uuid4().hex[:8]}"
    config = load_config(None, {
        "broker.id": str(LEADER), "log.dirs": str(tmp_path / "logs"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "zookeeper.connect": f"{zookeeper.connect_string}/{chroot}",
        "zookeeper.session.timeout.ms": "6000"})
    broker = Broker(config)
    zk = broker.zk_store
    await zk.start()
    log = Log.open(tmp_path / "t-0", LogConfig.from_properties({}), recover=False)
    try:
        topic = TopicState("t", uuid.uuid4(),
                           {0: PartitionState([LEADER, F2, F3], LEADER, 3, [LEADER, F2])}, {})
        await zk.create_topic(topic)
        partition = Partition("t", 0, topic.topic_id, log, 3, [LEADER, F2, F3], LEADER,
                              leader_id=-1)
        partition.make_leader(3, [LEADER, F2], [LEADER, F2, F3])
        written: list[bool] = []

        async def writer(p: Partition, isr: list[int]) -> bool:
            ok = await _member(broker).write_isr(p, isr)
            written.append(ok)
            return ok

        partition.isr_writer = writer
        # The controller takes F2 out (its broker died); the leader has not seen it yet.
        doc, version = await zk.states.read_partition_state("t", 0)
        assert await zk.states.write_partition_states(
            [("t", 0, {**doc, "isr": [LEADER]}, version)], as_controller=False)
        # F3 catches up: the leader's expansion, made from [LEADER, F2], is refused.
        partition.record_follower_fetch(F3, 0)
        await _until(lambda: len(written) == 1)
        stored, _ = await zk.states.read_partition_state("t", 0)
        assert (written, stored["isr"]) == ([False], [LEADER])
        # Once it knows the stored ISR, the expansion is made from it and written.
        partition.update_isr([LEADER])
        partition.record_follower_fetch(F3, 0)
        await _until(lambda: len(written) == 2)
        stored, _ = await zk.states.read_partition_state("t", 0)
        assert (written, stored["isr"], partition.isr) == ([False, True], [LEADER, F3],
                                                           [LEADER, F3])
    finally:
        log.close()
        await zk.close()


async def test_a_leaders_own_isr_change_is_in_its_cache_before_the_watch_brings_it(
        zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    """Until the state watch delivered the leader's own ISR change, any change of the topic
    (another partition's) applied the cached ISR to the leader again: a shrink below
    min.insync.replicas undone and redone, produce refused, accepted, refused."""
    chroot = f"c{uuid.uuid4().hex[:8]}"
    config = load_config(None, {
        "broker.id": str(LEADER), "log.dirs": str(tmp_path / "logs"),
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "zookeeper.connect": f"{zookeeper.connect_string}/{chroot}",
        "zookeeper.session.timeout.ms": "6000"})
    broker = Broker(config)
    zk = broker.zk_store
    await zk.start()
    log = Log.open(tmp_path / "t-0", LogConfig.from_properties({}), recover=False)
    release = threading.Event()
    try:
        topic = TopicState("t", uuid.uuid4(),
                           {0: PartitionState([LEADER, F2, F3], LEADER, 3, [LEADER, F2, F3])}, {})
        await zk.create_topic(topic)
        await _until(lambda: zk.topic("t") is not None)
        partition = Partition("t", 0, topic.topic_id, log, 3, [LEADER, F2, F3], LEADER,
                              leader_id=-1)
        partition.make_leader(3, [LEADER, F2, F3], [LEADER, F2, F3])
        asked: list[list[int]] = []

        async def ask(p: Partition, isr: list[int]) -> bool:
            asked.append(isr)
            return False  # written below, by hand

        partition.isr_writer = ask
        partition.shrink_isr_if_lagging(0)  # F2 and F3 have not fetched
        await _until(lambda: asked == [[LEADER]])
        # The store's watches are late: kazoo runs their callbacks one at a time, here behind
        # one that waits.
        zk.session.zk.handler.dispatch_callback(Callback("watch", release.wait, (10.0,)))
        assert await _member(broker).write_isr(partition, [LEADER])
        cached = zk.topic("t")
        assert cached is not None and cached.partitions[0].isr == [LEADER]
    finally:
        release.set()
        log.close()
        await zk.close()
