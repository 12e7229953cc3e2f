"""The ZooKeeper store's cache against a real ZooKeeper: a re-read of every topic (the refresh
after a new session) never undoes a newer partition state a watch delivered (issue 45: a broker
cut off one way kept an old ISR in its Metadata for minutes after it registered again)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from samsa.broker.cluster.metadata_store import BrokerInfo, PartitionState, TopicState
from samsa.broker.cluster.zk.process import ZooKeeperProcess
from samsa.broker.cluster.zk.store import ZkMetadataStore


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def _isr(store: ZkMetadataStore) -> list[int] | None:
    topic = store.topic("t")
    return None if topic is None else topic.partitions[0].isr


def _store(zookeeper: ZooKeeperProcess, chroot: str, broker_id: int) -> ZkMetadataStore:
    info = BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id)
    return ZkMetadataStore(f"{zookeeper.connect_string}/{chroot}", info, session_timeout_ms=4000)


async def test_a_refresh_read_before_an_isr_change_does_not_undo_it(
        zookeeper: ZooKeeperProcess) -> None:
    chroot = f"c{uuid.uuid4().hex[:8]}"
    leader, victim = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await leader.start()
    await victim.start()
    try:
        await leader.create_topic(TopicState(
            "t", uuid.uuid4(), {0: PartitionState([1, 2, 3], 1, 4, [1, 3])}, {}))
        await _until(lambda: victim.topic("t") is not None)
        # The victim's refresh reads every topic: here, before the leader's ISR change...
        stale = await asyncio.to_thread(victim.topic_store.read_all_topics)
        doc, version = await leader.states.read_partition_state("t", 0)
        assert await leader.states.write_partition_states(
            [("t", 0, {**doc, "isr": [1, 3, 2]}, version)], as_controller=False)
        # ...whose watch reaches the victim before the read is applied.
        await _until(lambda: _isr(victim) == [1, 3, 2])
        victim.topic_store.read_all_topics = lambda: stale  # type: ignore[method-assign]
        await victim.refresh()
        topic = victim.topic("t")
        assert topic is not None
        state = topic.partitions[0]
        assert (state.leader, state.leader_epoch, state.isr) == (1, 4, [1, 3, 2])
    finally:
        await victim.close()
        await leader.close()
