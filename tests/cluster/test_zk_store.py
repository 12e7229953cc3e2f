"""The ZooKeeper metadata store against a real ZooKeeper: registration, topics, watches, CAS."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

from samsa.broker.cluster.metadata_store import BrokerInfo, PartitionState, TopicState
from samsa.broker.cluster.zk.process import ZooKeeperProcess
from samsa.broker.cluster.zk.store import ZkMetadataStore
from tests.support.broker import free_port


async def _until(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


def _store(zookeeper, chroot: str, broker_id: int) -> ZkMetadataStore:
    info = BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id)
    return ZkMetadataStore(f"{zookeeper.connect_string}/{chroot}", info, session_timeout_ms=4000)


async def test_brokers_register_and_see_each_other(zookeeper):
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    await b.start()
    try:
        assert a.cluster_id and a.cluster_id == b.cluster_id
        await _until(lambda: [x.broker_id for x in a.brokers()] == [1, 2])
        assert a.registry.broker_epoch != b.registry.broker_epoch
    finally:
        await b.close()
    # b's ephemeral registration goes with its session.
    await _until(lambda: [x.broker_id for x in a.brokers()] == [1])
    await a.close()


async def test_topic_changes_reach_other_brokers(zookeeper):
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    await b.start()
    try:
        topic = TopicState(
            "orders",
            uuid.uuid4(),
            {0: PartitionState([1, 2], 1, 0, [1, 2]), 1: PartitionState([2, 1], 2, 0, [2, 1])},
            {"retention.ms": "1000"},
        )
        await a.create_topic(topic)
        await _until(lambda: b.topic("orders") is not None)
        seen = b.topic("orders")
        assert seen.topic_id == topic.topic_id
        assert seen.partitions[1].replicas == [2, 1] and seen.partitions[1].leader == 2
        assert seen.configs == {"retention.ms": "1000"}

        topic.configs = {"retention.ms": "5"}
        topic.partitions[2] = PartitionState([1, 2], 1, 0, [1, 2])
        await a.update_topic(topic)
        await _until(lambda: 2 in b.topic("orders").partitions)
        assert b.topic("orders").configs == {"retention.ms": "5"}

        await a.delete_topic("orders")
        await _until(lambda: b.topic("orders") is None)
    finally:
        await a.close()
        await b.close()


async def test_producer_id_blocks_never_overlap(zookeeper):
    chroot = f"c{uuid.uuid4().hex[:8]}"
    stores = [_store(zookeeper, chroot, i) for i in (1, 2, 3)]
    for s in stores:
        await s.start()
    try:
        starts = await asyncio.gather(
            *(s.producer_ids.allocate(1000) for s in stores for _ in range(5))
        )
        assert sorted(starts) == [i * 1000 for i in range(15)]
    finally:
        for s in stores:
            await s.close()


async def test_a_replaced_controller_cannot_write(zookeeper):
    """Kafka's fencing: every controller write checks the /controller_epoch version it won."""
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    await b.start()
    try:
        assert await a.controller.elect()
        assert not await b.controller.elect()  # /controller exists
        await a.create_topic(
            TopicState("t", uuid.uuid4(), {0: PartitionState([1, 2], 1, 0, [1, 2])})
        )
        doc, version = await a.states.read_partition_state("t", 0)
        # a is frozen; its /controller goes (session expiry) and b takes over with epoch 2
        await a.controller.resign()
        assert await b.controller.elect()
        assert b.controller.epoch == a.controller.epoch + 1
        stale = {**doc, "leader": 2, "leader_epoch": 1, "isr": [2]}
        assert not await a.states.write_partition_states([("t", 0, stale, version)],
                                                         as_controller=True)
        assert (await a.states.read_partition_state("t", 0))[0]["leader"] == 1  # nothing written
        assert await b.states.write_partition_states([("t", 0, stale, version)],
                                                     as_controller=True)
        # a conditional write from an old read is refused too (partition epoch)
        assert not await b.states.write_partition_states([("t", 0, doc, version)],
                                                         as_controller=True)
    finally:
        await a.close()
        await b.close()


async def test_a_leadership_of_a_previous_life_is_named_once_written_again(zookeeper):
    """A state written before its leader's current registration names no leader to clients
    (issue 51); its write in the leader's current life reaches the other brokers as a topic
    change even when it reads as the state they hold (a write the controller reflected in its
    cache at once, without the mzxid): a Metadata cache entry made meanwhile is dropped. The
    controller's offline-partitions count has it offline until then."""
    from samsa.broker.cluster.metadata_cache import TopicMetadataCache
    from samsa.broker.metrics_endpoint import offline_partitions

    chroot = f"c{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    try:
        await a.create_topic(TopicState("t", uuid.uuid4(), {0: PartitionState([2], 2, 0, [2])}))
        await _until(lambda: a.topic("t") is not None)
        await b.start()  # broker 2 registers after the state naming it leader was written
        await _until(lambda: [x.broker_id for x in a.brokers()] == [1, 2])
        assert a.leader_in_previous_life(a.topic("t").partitions[0])
        assert offline_partitions(a, a.topics().values()) == (1, 1)
        cache = TopicMetadataCache()
        a.add_listener(cache.on_change)
        cache.entry("t", 12, "PLAINTEXT", lambda: b"no leader")
        path = "/brokers/topics/t/partitions/0/state"
        data, _ = await asyncio.to_thread(a.session.zk.get, path)
        await asyncio.to_thread(a.session.zk.set, path, data)  # the same state, written again
        await _until(lambda: not a.leader_in_previous_life(a.topic("t").partitions[0]))
        await _until(lambda: len(cache) == 0)
        assert offline_partitions(a, a.topics().values()) == (0, 1)
    finally:
        await a.close()
        await b.close()


async def test_a_connection_loop_that_fails_is_replaced_and_the_broker_registers_again(zookeeper):
    """kazoo's connection thread ends on an exception it does not expect (such as its
    RuntimeError for a reply whose xid is not the one it waits for): the broker's client must
    connect again with a new session, so that the broker can register again, rather than
    stay away from /brokers/ids while it goes on serving."""
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    await b.start()
    try:
        await _until(lambda: [x.broker_id for x in b.brokers()] == [1, 2])
        epoch = a.registry.broker_epoch
        connection = a.session.zk._connection
        read_socket = connection._read_socket

        def fails_once(*args, **kwargs):
            connection._read_socket = read_socket
            raise RuntimeError("xids do not match")

        connection._read_socket = fails_once
        with contextlib.suppress(Exception):  # the read whose reply the loop fails on
            await asyncio.to_thread(a.session.zk.exists, "/")
        await asyncio.wait_for(a.session.session_lost.wait(), 10)
        # what the broker's session watch does (broker/cluster/member.py)
        await a.registry.reregister(timeout_s=15)
        epochs = b.registry.broker_epochs
        await _until(lambda: 1 in epochs() and epochs()[1] != epoch)
        assert a.registry.broker_epoch == b.registry.broker_epochs()[1]
    finally:
        await a.close()
        await b.close()


async def test_a_session_cut_off_longer_than_it_may_live_counts_as_lost(tmp_path: Path) -> None:
    """kazoo learns that its session expired only once it reaches ZooKeeper again: cut off
    (here a ZooKeeper of its own, frozen), the store would stay "registered" and its broker
    go on leading. Once the connection has been gone as long as ZooKeeper may keep the
    session, it counts as lost (the broker resigns, and takes no leadership until it has
    registered again), before ZooKeeper is reachable again; reachable again, it registers."""
    zk = ZooKeeperProcess(tmp_path / "zk", free_port()).start()
    store = ZkMetadataStore(zk.connect_string, BrokerInfo(1, "127.0.0.1", 9001),
                            session_timeout_ms=4000)
    try:
        await store.start()
        assert not store.session.session_lost.is_set()
        assert zk.pid is not None
        os.kill(zk.pid, signal.SIGSTOP)  # silence, as a cut network
        started = time.monotonic()
        try:
            await asyncio.wait_for(store.session.session_lost.wait(), 8)
            # kazoo notices the silence within 2/3 of the session timeout and the store gives
            # up a quarter of it later: before ZooKeeper may expire it (1 s for a busy machine)
            assert time.monotonic() - started < 4.0 + 1.0
            assert not store.session.registered
            # ZooKeeper has not said so: /controller may live
            assert not store.session.session_expired
        finally:
            os.kill(zk.pid, signal.SIGCONT)
        await store.registry.reregister(timeout_s=30)
        assert store.session.registered
    finally:
        with contextlib.suppress(Exception):
            await store.close()
        zk.stop()
