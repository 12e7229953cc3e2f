"""`samsa cluster describe`: the cluster id, the controller and the brokers, from
DescribeCluster where the broker serves it (Kafka 2.8+), else from Metadata."""

from __future__ import annotations

from typing import Any

from .client import Admin, check

DESCRIBE_CLUSTER = 60


def describe(admin: Admin) -> dict[str, Any]:
    conn = admin.any()
    if conn.supports(DESCRIBE_CLUSTER):
        resp = conn.call(DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False,
                                            "endpoint_type": 1, "include_fenced_brokers": False})
        check(resp.error_code, resp.error_message)
        brokers = [(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers]
    else:
        resp = admin.metadata([])
        brokers = [(b.node_id, b.host, b.port, b.rack) for b in resp.brokers]
    return {"cluster_id": resp.cluster_id, "controller_id": int(resp.controller_id),
            "brokers": [{"id": int(i), "host": h, "port": int(p), "rack": r}
                        for i, h, p, r in sorted(brokers)]}
