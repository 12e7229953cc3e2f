"""ApiVersions (18): the API table clients negotiate against."""

from __future__ import annotations

from typing import Any

from protocol.registry import ApiRegistry


def make_handler(registry: ApiRegistry):
    async def handle(ctx: Any, request: Any) -> dict[str, Any]:
        return {
            "error_code": 0,
            "api_keys": [
                {"api_key": s.key, "min_version": s.advertised_min, "max_version": s.max_version}
                for s in registry.all()
            ],
            "throttle_time": 0,
        }

    return handle
