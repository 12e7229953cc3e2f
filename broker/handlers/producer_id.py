"""InitProducerId (22) for idempotent producers (no transactional.id).

Java producers are idempotent by default, so even plain producing needs a producer id.
Transactional ids are the transaction coordinator's (not implemented yet): answer like a broker
without a coordinator for them.
"""

from __future__ import annotations

from typing import Any

COORDINATOR_NOT_AVAILABLE = 15
INVALID_REQUEST = 42


async def handle_init_producer_id(ctx: Any, request: Any) -> dict[str, Any]:
    if request.transactional_id is not None:
        code = INVALID_REQUEST if request.transactional_id == "" else COORDINATOR_NOT_AVAILABLE
        return {"throttle_time": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
    producer_id = ctx.broker.producer_ids.next_id()
    return {"throttle_time": 0, "error_code": 0, "producer_id": producer_id, "producer_epoch": 0}
