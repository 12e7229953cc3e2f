"""DescribeCluster (60): brokers, controller and cluster id (Java Admin prefers it)."""

from __future__ import annotations

from typing import Any


async def handle_describe_cluster(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    return {
        "throttle_time": 0,
        "error_code": 0,
        "cluster_id": broker.store.cluster_id,
        "controller_id": broker.controller_id(),
        "brokers": [
            {"broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in broker.store.brokers()
        ],
    }
