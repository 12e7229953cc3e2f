"""Finalized feature levels in ZooKeeper's /feature znode (Kafka's FeatureZNode): a new cluster
creates it, a level one broker finalizes every broker reports, the epoch is the znode version,
and a bad update changes nothing."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from samsa.broker.cluster.features import InvalidUpdateVersion, UpgradeType, apply_updates
from samsa.broker.cluster.metadata_store import BrokerInfo
from samsa.broker.cluster.zk.store import ZkMetadataStore


def _store(zookeeper, chroot: str, broker_id: int, **kw) -> ZkMetadataStore:
    info = BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id)
    return ZkMetadataStore(f"{zookeeper.connect_string}/{chroot}", info, session_timeout_ms=4000,
                           **kw)


async def test_initial_feature_levels_apply_to_a_new_cluster_only(zookeeper):
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a = _store(zookeeper, chroot, 1, initial_levels={"transaction.version": 0,
                                                     "share.version": 0})
    await a.start()
    b = _store(zookeeper, chroot, 2, initial_levels={"group.version": 0})
    await b.start()
    try:
        await _until(lambda: b.finalized_features().epoch == 0)
        # the first broker created the cluster: its levels; the second's are not read
        assert a.finalized_features().levels == b.finalized_features().levels == {
            "group.version": 1, "streams.version": 1}
    finally:
        await a.close()
        await b.close()


async def test_a_new_cluster_has_its_features_from_its_first_moment(zookeeper):
    """/cluster/id and /feature are created in one transaction (one zxid): a broker starting
    beside the first (a node's other process) that found the id without /feature took the
    cluster for one from before /feature and finalized no feature at all (no KIP-848 or
    share groups), as the node tests met under load."""
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a = _store(zookeeper, chroot, 1)
    await a.start()
    try:
        zk = a.session.zk
        assert zk.exists("/cluster/id").czxid == zk.exists("/feature").czxid
    finally:
        await a.close()
    for _ in range(5):  # and brokers starting at once agree on the default levels
        chroot = f"c{uuid.uuid4().hex[:8]}"
        stores = [_store(zookeeper, chroot, i) for i in (1, 2, 3)]
        await asyncio.gather(*(s.start() for s in stores))
        try:
            await _until(lambda started=stores: all(
                s.finalized_features().epoch == 0 for s in started))
            assert all(s.finalized_features().levels == {
                "group.version": 1, "share.version": 1, "streams.version": 1,
                "transaction.version": 2} for s in stores)
        finally:
            await asyncio.gather(*(s.close() for s in stores))


async def _until(check, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_feature_levels_are_shared_through_zookeeper(zookeeper):
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    await b.start()
    try:
        await _until(lambda: a.finalized_features().epoch == 0
                     and b.finalized_features().epoch == 0)
        # A new cluster finalizes transactions v2, the consumer group protocol, share groups
        # and streams groups (Kafka 4.4's defaults).
        assert a.finalized_features().levels == b.finalized_features().levels == {
            "group.version": 1, "share.version": 1, "streams.version": 1,
            "transaction.version": 2}

        def upgrade(levels: dict[str, int]) -> dict[str, int]:
            return apply_updates(1, levels, [("transaction.version", 1,
                                              UpgradeType.SAFE_DOWNGRADE)])

        done = await a.update_features(upgrade)
        levels = {"group.version": 1, "share.version": 1, "streams.version": 1,
                  "transaction.version": 1}
        assert (done.epoch, done.levels) == (1, levels)
        await _until(lambda: b.finalized_features().epoch == 1)
        assert b.finalized_features().levels == levels
        doc = json.loads(a.session.zk.get("/feature")[0])
        assert doc == {"version": 2, "status": 1, "features": {
            name: {"max_version_level": level} for name, level in levels.items()}}

        def too_far(levels: dict[str, int]) -> dict[str, int]:
            return apply_updates(2, levels, [("transaction.version", 3, UpgradeType.UPGRADE)])

        with pytest.raises(InvalidUpdateVersion):
            await b.update_features(too_far)
        assert a.session.zk.get("/feature")[1].version == 1
    finally:
        await a.close()
        await b.close()
