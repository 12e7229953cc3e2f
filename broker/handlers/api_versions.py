"""ApiVersions (18): the API table clients negotiate against, and from v3 the feature levels
this broker supports and the cluster finalized (broker/cluster/features.py; Admin.describeFeatures
and the clients' choice of the transaction protocol read them). From v5 (KIP-1242; kio lacks it:
protocol/own_versions.py) a client names the cluster and node it believes it reached: another
cluster's id, or this cluster's with another node id, is REBOOTSTRAP_REQUIRED and nothing else,
so a client whose bootstrap address now leads elsewhere starts over."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode
from samsa.protocol.registry import ApiRegistry, Handler

from ..cluster.features import UNSTABLE_APIS, UNSTABLE_VERSIONS, api_enabled, supported
from ..context import RequestContext
from .common import field
from .declare import api

if TYPE_CHECKING:
    from .requests import ApiVersionsRequest


@api(18, "ApiVersions", (0, 5), needs_registry=True)
def make_handler(registry: ApiRegistry[RequestContext]) -> Handler[RequestContext]:
    async def handle(ctx: RequestContext, request: ApiVersionsRequest) -> dict[str, Any]:
        if ctx.version >= 3:  # the client's software, what telemetry subscriptions match on
            ctx.telemetry.client_software(f"{ctx.listener} {ctx.peer}",
                                          field(request, "client_software_name", None),
                                          field(request, "client_software_version", None))
        if _reached_elsewhere(ctx, request):
            return {"error_code": ErrorCode.rebootstrap_required, "api_keys": [],
                    "throttle_time": 0}
        finalized = ctx.store.finalized_features()
        unstable = ctx.config["unstable.api.versions.enable"]
        response: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "api_keys": [
                {"api_key": s.key, "min_version": s.advertised_min,
                 "max_version": s.max_version if unstable
                 else min(s.max_version, UNSTABLE_VERSIONS.get(s.key, 1 << 15) - 1)}
                for s in registry.all() if s.advertised and api_enabled(s.key, finalized)
                and (unstable or s.key not in UNSTABLE_APIS)
            ],
            "throttle_time": 0,
        }
        if ctx.version >= 3:
            response["supported_features"] = [
                {"name": name, "min_version": low, "max_version": high}
                for name, (low, high) in sorted(
                    supported(ctx.config["unstable.feature.versions.enable"]).items())
                # v0-v3 clients may reject a minimum of 0, so those omit it (KAFKA-17011).
                if low > 0 or ctx.version >= 4
            ]
            response["finalized_features_epoch"] = finalized.epoch
            response["finalized_features"] = [
                {"name": name, "max_version_level": level, "min_version_level": level}
                for name, level in sorted(finalized.levels.items())
            ]
        return response

    return handle


def _reached_elsewhere(ctx: RequestContext, request: ApiVersionsRequest) -> bool:
    """Kafka's check (v5+): only a client that names a cluster id is checked, and then its
    node id too."""
    cluster_id: str | None = field(request, "cluster_id", None)
    if cluster_id is None:
        return False
    return cluster_id != ctx.store.cluster_id or field(request, "node_id", -1) != ctx.broker_id
