"""FindCoordinator (10): which broker coordinates a group (key_type 0) or transactional id (1).

The coordinator of a key is the leader of its partition of the internal topic
(`__consumer_offsets` / `__transaction_state`), `abs(javaHash(key)) % partitions`. The topic
is created on first use. v4+ batches keys (`coordinator_keys`). Share keys (2) are refused.
"""

from __future__ import annotations

import logging
from typing import Any

from coordinator.internal_log import partition_for

from .common import INVALID_REQUEST, field

log = logging.getLogger(__name__)

GROUP, TRANSACTION = 0, 1
COORDINATOR_NOT_AVAILABLE = 15


async def handle_find_coordinator(ctx: Any, request: Any) -> dict[str, Any]:
    key_type = field(request, "key_type", GROUP)
    if ctx.version >= 4:
        coordinators = [
            {"key": key, **await _find(ctx.broker, key_type, key)}
            for key in request.coordinator_keys
        ]
        return {"throttle_time": 0, "coordinators": coordinators}
    return {"throttle_time": 0, **await _find(ctx.broker, key_type, request.key)}


def _error(code: int, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "node_id": -1, "host": "", "port": -1}


async def _find(broker: Any, key_type: int, key: str) -> dict[str, Any]:
    try:
        if key_type == GROUP:
            groups = broker.groups
            await groups.ensure_topic()
            topic, partition = groups.topic.name, groups.partition_for(key)
        elif key_type == TRANSACTION:
            txn_topic = getattr(broker, "txn_topic", None)
            if txn_topic is None:
                return _error(COORDINATOR_NOT_AVAILABLE, "transactions are not available")
            await txn_topic.ensure_created()
            topic = txn_topic.name
            partition = partition_for(key, broker.config["transaction.state.log.num.partitions"])
        else:
            return _error(INVALID_REQUEST, f"unsupported coordinator key type {key_type}")
    except Exception as exc:
        log.warning("FindCoordinator(%d, %r): %r", key_type, key, exc)
        return _error(COORDINATOR_NOT_AVAILABLE, "the coordinator topic is not available")
    state = broker.store.topic(topic)
    pstate = state.partitions.get(partition) if state is not None else None
    if pstate is None or pstate.leader < 0:
        return _error(COORDINATOR_NOT_AVAILABLE, f"{topic}-{partition} has no leader")
    for b in broker.store.brokers():
        if b.broker_id == pstate.leader:
            return {"error_code": 0, "error_message": None, "node_id": b.broker_id,
                    "host": b.host, "port": b.port}
    return _error(COORDINATOR_NOT_AVAILABLE, f"leader {pstate.leader} of {topic}-{partition} "
                  "is not alive")
