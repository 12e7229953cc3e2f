"""Group configs (Kafka 4's GROUP config resources) in ZooKeeper: what one broker stores the
others read, deleting the last override removes the node, and any group id works as a name."""

from __future__ import annotations

import uuid

from samsa.broker.cluster.metadata_store import BrokerInfo
from samsa.broker.cluster.zk.store import ZkMetadataStore


def _store(zookeeper, chroot: str, broker_id: int) -> ZkMetadataStore:
    info = BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id)
    return ZkMetadataStore(f"{zookeeper.connect_string}/{chroot}", info, session_timeout_ms=4000)


async def test_group_configs_are_shared_through_zookeeper(zookeeper):
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    await b.start()
    try:
        group = "team/orders"  # a group id may hold '/'
        assert await b.group_configs(group) == {}
        await a.set_group_configs(group, {"consumer.session.timeout.ms": "50000"})
        assert await b.group_configs(group) == {"consumer.session.timeout.ms": "50000"}
        await b.set_group_configs(group, {"consumer.heartbeat.interval.ms": "6000"})
        assert await a.group_configs(group) == {"consumer.heartbeat.interval.ms": "6000"}
        assert await a.group_configs("team") == {}
        await a.set_group_configs(group, {})
        assert await b.group_configs(group) == {}
        assert a.session.zk.get_children("/config/groups") == []
    finally:
        await a.close()
        await b.close()
