"""Client metrics subscriptions (KIP-714 CLIENT_METRICS config resources) in ZooKeeper: what
one broker stores the others read, under /config/client-metrics/<name>, and a subscription
with no configs left is gone."""

from __future__ import annotations

import uuid

from samsa.broker.cluster.metadata_store import BrokerInfo
from samsa.broker.cluster.zk.store import ZkMetadataStore
from samsa.broker.telemetry import TelemetryManager


def _store(zookeeper, chroot: str, broker_id: int) -> ZkMetadataStore:
    info = BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id)
    return ZkMetadataStore(f"{zookeeper.connect_string}/{chroot}", info, session_timeout_ms=4000)


async def test_subscriptions_are_shared_through_zookeeper(zookeeper):
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    await b.start()
    try:
        assert await b.client_metrics_configs() == {}
        await a.set_client_metrics_configs("prod/java", {"metrics": "org.apache.kafka.",
                                                         "interval.ms": "1000"})
        await a.set_client_metrics_configs("all", {"metrics": "*"})
        assert await b.client_metrics_configs() == {
            "prod/java": {"metrics": "org.apache.kafka.", "interval.ms": "1000"},
            "all": {"metrics": "*"}}
        # the other broker's telemetry sees them at its next refresh
        telemetry = TelemetryManager(b, 1 << 20)
        await telemetry.refresh(0)
        assert telemetry.names() == ["all", "prod/java"]
        assert telemetry.subscriptions["prod/java"].interval_ms == 1000
        await b.set_client_metrics_configs("all", {})
        assert list(await a.client_metrics_configs()) == ["prod/java"]
        assert a.session.zk.get_children("/config/client-metrics") == ["prod%2Fjava"]
    finally:
        await a.close()
        await b.close()
