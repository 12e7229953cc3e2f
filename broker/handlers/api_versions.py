"""ApiVersions (18): the API table clients negotiate against."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode
from protocol.registry import ApiRegistry, Handler

from ..context import RequestContext

if TYPE_CHECKING:
    from .requests import ApiVersionsRequest


def make_handler(registry: ApiRegistry[RequestContext]) -> Handler[RequestContext]:
    async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> dict[str, Any]:
        return {
            "error_code": ErrorCode.none,
            "api_keys": [
                {"api_key": s.key, "min_version": s.advertised_min, "max_version": s.max_version}
                for s in registry.all()
            ],
            "throttle_time": 0,
        }

    return handle
