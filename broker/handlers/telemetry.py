"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72) and
ListConfigResources (74; v0 was ListClientMetricsResources), on the broker's telemetry manager
(broker/telemetry/). Kafka offers 71 and 72 when a telemetry receiver plugin is configured;
the broker's own exporter (its /metrics) always is one, so they are always offered."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType
from ..telemetry import TelemetryError
from ..telemetry.manager import ACCEPTED_COMPRESSION
from .declare import api

if TYPE_CHECKING:
    from .requests import (
        GetTelemetrySubscriptionsRequest,
        ListConfigResourcesRequest,
        PushTelemetryRequest,
    )

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# v1's types (KIP-1142), all of them when the request names none.
_ALL_TYPES = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)
# Kafka's reserved ids: ZERO_UUID and METADATA_TOPIC_ID (1) are never client instances.
_RESERVED = (0, 1)


def _error(code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code}


@api(71, "GetTelemetrySubscriptions", (0, 0))
async def handle_get_telemetry_subscriptions(
    ctx: RequestContext, request: GetTelemetrySubscriptionsRequest
) -> dict[str, Any]:
    telemetry, now = ctx.telemetry, ctx.received_ms
    await telemetry.refresh(now)
    instance_id = request.client_instance_id
    if instance_id is None or instance_id.int == 0:
        instance_id = telemetry.new_instance_id()
    instance = telemetry.instance(instance_id, ctx.client_id, ctx.listener, ctx.peer, now)
    try:
        telemetry.get_subscriptions(instance, now)
    except TelemetryError as exc:
        return _error(exc.error_code)
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "client_instance_id": instance_id,
        "subscription_id": instance.subscription_id,
        "accepted_compression_types": list(ACCEPTED_COMPRESSION),
        "push_interval": instance.push_interval_ms,
        "telemetry_max_bytes": telemetry.max_bytes,
        "delta_temporality": True,
        "requested_metrics": instance.metrics,
    }


@api(72, "PushTelemetry", (0, 0))
async def handle_push_telemetry(
    ctx: RequestContext, request: PushTelemetryRequest
) -> dict[str, Any]:
    instance_id: uuid.UUID | None = request.client_instance_id
    if instance_id is None or instance_id.int in _RESERVED:
        return _error(ErrorCode.invalid_request)
    telemetry, now = ctx.telemetry, ctx.received_ms
    await telemetry.refresh(now)
    instance = telemetry.instance(instance_id, ctx.client_id, ctx.listener, ctx.peer, now)
    try:
        telemetry.push(instance, request.subscription_id, request.terminating,
                       request.compression_type, bytes(request.metrics or b""), now)
    except TelemetryError as exc:
        return _error(exc.error_code)
    return _error(ErrorCode.none)


@api(74, "ListConfigResources", (0, 1))
async def handle_list_config_resources(
    ctx: RequestContext, request: ListConfigResourcesRequest
) -> dict[str, Any]:
    """v0 lists the client metrics subscriptions; v1 the config resources of the types asked
    for (all when none is), UNSUPPORTED_VERSION for another type. DESCRIBE_CONFIGS on the
    cluster is needed, as in Kafka."""
    out: dict[str, Any] = {"throttle_time": 0, "error_code": ErrorCode.none,
                           "config_resources": []}
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
        return out | {"error_code": ErrorCode.cluster_authorization_failed}
    types = (CLIENT_METRICS,) if ctx.version == 0 else (
        tuple(getattr(request, "resource_types", ())) or _ALL_TYPES)
    if any(t not in _ALL_TYPES for t in types):
        return out | {"error_code": ErrorCode.unsupported_version}
    await ctx.telemetry.refresh(ctx.received_ms, force=True)
    for rtype in types:
        out["config_resources"] += [{"resource_name": name, "resource_type": rtype}
                                    for name in await _names(ctx, rtype)]
    return out


async def _names(ctx: RequestContext, rtype: int) -> list[str]:
    if rtype == CLIENT_METRICS:
        return ctx.telemetry.names()
    if rtype == TOPIC:
        return sorted(ctx.store.topics())
    if rtype == BROKER:
        return [str(b.broker_id) for b in ctx.store.brokers()]
    if rtype == BROKER_LOGGER:  # this broker's own loggers
        return [str(ctx.broker_id)]
    # the groups there are and those with config overrides (Kafka lists both: kafka-configs
    # asks before describing a group's configs, which it may have before any member joins)
    _, groups = ctx.groups.list_groups()
    return sorted({str(g["group_id"]) for g in groups} | set(await ctx.store.configured_groups()))
