"""Configs: DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44).

Topic overrides and group configs (Kafka 4's GROUP resources: consumer.session.timeout.ms...)
live in the metadata store. BROKER resources are Kafka's dynamic broker configs
(broker/dynamic_config.py): the broker's own id names its per-broker configs, the empty name
the cluster-wide defaults; another broker's id is INVALID_REQUEST (the Admin client sends
each broker its own). CLIENT_METRICS resources are KIP-714's client metrics subscriptions
(broker/telemetry/subscriptions.py), kept in the metadata store.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from samsa.config.dynamic import DynamicConfigError
from samsa.config.group import describe_group_config, validate_group_configs
from samsa.config.schema import BROKER_PROPERTIES, ConfigSource, ConfigType
from samsa.config.topic import (
    ConfigEntry,
    InvalidConfigError,
    describe_broker_config,
    describe_topic_config,
)
from samsa.protocol.errors import ErrorCode

from ..cluster.topic_admin import TopicError
from ..context import AdminContext, RequestContext
from ..security.authorizer import AclOperation, ResourceType
from ..telemetry import SubscriptionError
from ..telemetry import subscriptions as client_metrics
from .common import field
from .declare import api

if TYPE_CHECKING:
    from .requests import (
        AlterConfigsRequest,
        AlterConfigsResource,
        DescribeConfigsRequest,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResource,
    )

log = logging.getLogger(__name__)

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
CLIENT_METRICS = 16
GROUP = 32

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# Kafka's ConfigHelper / KafkaApis: what a config resource's authorization is checked on and
# the error of a refusal.
_AUTH_RESOURCE = {
    TOPIC: (ResourceType.TOPIC, ErrorCode.topic_authorization_failed),
    GROUP: (ResourceType.GROUP, ErrorCode.group_authorization_failed),
    BROKER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
    BROKER_LOGGER: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
    CLIENT_METRICS: (ResourceType.CLUSTER, ErrorCode.cluster_authorization_failed),
}


def _denied(ctx: AdminContext, op: AclOperation, resource_type: int,
            resource_name: str) -> ErrorCode | None:
    """The authorization error for `op` on the config resource, None when allowed (or of a
    type the handler refuses anyway)."""
    if resource_type not in _AUTH_RESOURCE:
        return None
    rtype, error = _AUTH_RESOURCE[resource_type]
    allowed = (ctx.authorize(op, rtype) if rtype == ResourceType.CLUSTER
               else ctx.authorize(op, rtype, resource_name))
    return None if allowed else error


# A change of a topic's overrides: the current ones -> the new ones (raises TopicError).
ConfigChange = Callable[[dict[str, str]], dict[str, str]]
# APPEND or SUBTRACT: (the configs so far, the op, the name, the values) -> the new items
ListOp = Callable[[dict[str, str], int, str, list[str]], list[str]]


class _Refused(Exception):
    """A resource DescribeConfigs answers with an error code and Kafka's message."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def _named(name: str, what: str) -> str:
    if not name:
        raise _Refused(ErrorCode.invalid_request, f"{what} must not be empty")
    return name


async def _described(ctx: RequestContext, resource_type: int,
                     name: str) -> list[ConfigEntry]:
    """One resource's configs, by its type."""
    if resource_type == TOPIC:
        topic = ctx.store.topic(name)
        if topic is None:
            raise _Refused(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist")
        return describe_topic_config(topic.name, topic.configs, ctx.config)
    if resource_type == BROKER:
        if name in ("", str(ctx.broker_id)):
            return describe_broker_config(ctx.config, per_broker=name != "")
        if not name.lstrip("-").isdigit():
            raise _Refused(ErrorCode.invalid_request,
                           f"Broker id must be an integer, but it is: {name}")
        raise _Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected "
                       f"{ctx.broker_id} or empty string, but received {name}")
    if resource_type == BROKER_LOGGER:
        return []
    if resource_type == GROUP:
        overrides = await ctx.store.group_configs(_named(name, "Group name"))
        return describe_group_config(overrides, ctx.config)
    if resource_type == CLIENT_METRICS:
        return await _describe_client_metrics(
            ctx, _named(name, "Client metrics subscription name"))
    raise _Refused(ErrorCode.invalid_request, "Unknown resource")


@api(32, "DescribeConfigs", (1, 4))
async def handle_describe_configs(
    ctx: RequestContext, request: DescribeConfigsRequest
) -> dict[str, Any]:
    synonyms = request.include_synonyms
    docs: bool = field(request, "include_documentation", False)
    results = []
    for r in request.resources:
        out: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "resource_type": r.resource_type,
            "resource_name": r.resource_name,
            "configs": [],
        }
        denied = _denied(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        entries: list[ConfigEntry] | None = None
        if denied is not None:
            out.update(error_code=denied)
        else:
            try:
                entries = await _described(ctx, r.resource_type, r.resource_name)
            except _Refused as exc:
                out.update(error_code=exc.error_code, error_message=exc.message)
        keys = set(r.configuration_keys) if r.configuration_keys else None
        for e in entries or []:
            if keys is not None and e.name not in keys:
                continue
            out["configs"].append(
                {
                    "name": e.name,
                    "value": e.value,
                    "read_only": e.read_only,
                    "config_source": e.source,
                    "is_sensitive": e.is_sensitive,
                    # v0 had is_default instead of config_source; kio drops what a version lacks.
                    "is_default": e.source == ConfigSource.DEFAULT_CONFIG,
                    "synonyms": [
                        {"name": s.name, "value": s.value, "source": s.source} for s in e.synonyms
                    ]
                    if synonyms
                    else [],
                    "config_type": e.config_type,
                    "documentation": e.documentation if docs else None,
                }
            )
        results.append(out)
    return {"throttle_time": 0, "results": results}


@api(33, "AlterConfigs", (0, 2), structs={"AlterConfigsResource": "AlterConfigsResource"})
async def handle_alter_configs(
    ctx: RequestContext, request: AlterConfigsRequest
) -> dict[str, Any]:
    changes = [(r, _replacement(r)) for r in request.resources]
    return await _alter_each(ctx, changes, request.validate_only)


@api(44, "IncrementalAlterConfigs", (0, 1),
     structs={"IncrementalAlterConfigsResource": "AlterConfigsResource"})
async def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> dict[str, Any]:
    changes = [(r, _operations(r)) for r in request.resources]
    return await _alter_each(ctx, changes, request.validate_only)


class _Resource(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...


async def _alter_each(ctx: AdminContext, changes: Iterable[tuple[_Resource, ConfigChange]],
                      validate_only: bool) -> dict[str, Any]:
    """AlterConfigs and IncrementalAlterConfigs: each resource changed by its change, this
    broker's (or the cluster default's) dynamic configs, or a topic's or a group's."""
    responses = []
    for r, change in changes:
        if r.resource_type == BROKER:
            code, message = await _apply_broker(ctx, r.resource_name, change, validate_only)
        else:
            code, message = await _apply(ctx, r.resource_type, r.resource_name, change,
                                         validate_only)
        responses.append(_result(r.resource_type, r.resource_name, code, message))
    return {"throttle_time": 0, "responses": responses}


def _replacement(r: AlterConfigsResource) -> ConfigChange:
    """AlterConfigs: the resource's configs become the request's (the null values left out)."""
    new = {c.name: c.value for c in r.configs if c.value is not None}
    return lambda _current: new


def _operations(r: IncrementalAlterConfigsResource) -> ConfigChange:
    """IncrementalAlterConfigs: the request's operations on the resource's configs."""
    ops: list[tuple[int, str, str | None]] = [
        (c.config_operation, c.name, c.value) for c in r.configs
    ]
    apply_ops = _broker_ops if r.resource_type == BROKER else _resource_ops
    return lambda current: apply_ops(current, ops)


def _incremental(current: dict[str, str], ops: list[tuple[int, str, str | None]],
                 list_op: ListOp, null_set: str | None) -> dict[str, str]:
    """IncrementalAlterConfigs' operations in order: SET (a null value as `null_set`) and
    DELETE as for every resource, APPEND and SUBTRACT by the resource's `list_op`."""
    updated = dict(current)
    for op, name, value in ops:
        if op == SET:
            # kio types the value nullable
            updated[name] = value if value is not None else null_set  # type: ignore[assignment]
        elif op == DELETE:
            updated.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            updated[name] = ",".join(list_op(updated, op, name, (value or "").split(",")))
        else:
            raise TopicError(ErrorCode.invalid_request, f"Unknown operation {op}")
    return updated


def _resource_list_op(updated: dict[str, str], op: int, name: str,
                      values: list[str]) -> list[str]:
    """APPEND and SUBTRACT on a topic's or a group's config: a list of the non-empty items."""
    items = [x for x in updated.get(name, "").split(",") if x]
    values = [x for x in values if x]
    if op == APPEND:
        return items + [v for v in values if v not in items]
    return [x for x in items if x not in values]


def _resource_ops(current: dict[str, str],
                  ops: list[tuple[int, str, str | None]]) -> dict[str, str]:
    """IncrementalAlterConfigs' operations on a topic's or a group's configs (a null SET value
    is passed on as sent)."""
    return _incremental(current, ops, _resource_list_op, None)


async def _apply(
    ctx: AdminContext,
    resource_type: int,
    resource_name: str,
    change: ConfigChange,
    validate_only: bool,
) -> tuple[int, str | None]:
    denied = _denied(ctx, AclOperation.ALTER_CONFIGS, resource_type, resource_name)
    if denied is not None:
        return denied, None
    if resource_type == GROUP:
        return await _apply_group(ctx, resource_name, change, validate_only)
    if resource_type == CLIENT_METRICS:
        return await _apply_client_metrics(ctx, resource_name, change, validate_only)
    if resource_type != TOPIC:
        return ErrorCode.invalid_request, f"Unsupported resource type {resource_type}"
    topic = ctx.store.topic(resource_name)
    if topic is None:
        return ErrorCode.unknown_topic_or_partition, f"Topic {resource_name} does not exist"
    try:
        updated = change(dict(topic.configs))
        if validate_only:
            ctx.topics.validate_configs(updated)
        else:
            await ctx.topics.set_configs(topic.name, updated)
    except TopicError as exc:
        return exc.error_code, exc.message
    return ErrorCode.none, None


def _broker_list_op(updated: dict[str, str], op: int, name: str,
                    values: list[str]) -> list[str]:
    """Kafka's prepareIncrementalConfigs: APPEND and SUBTRACT only on LIST properties (APPEND
    starting from the default when unset)."""
    verb = "append" if op == APPEND else "subtract"
    prop = BROKER_PROPERTIES.get(name)
    if prop is None:
        raise TopicError(ErrorCode.invalid_config, f"Unknown config name: {name}")
    if prop.type is not ConfigType.LIST:
        raise TopicError(ErrorCode.invalid_request,
                         f"Config value {verb} is not allowed for config key: {name}")
    if name in updated:
        items = updated[name].split(",")
    elif op == APPEND:
        items = (prop.default_string() or "").split(",")
    else:
        items = []
    if op == APPEND:
        return list(dict.fromkeys(x for x in items + values if x))
    return [x for x in items if x not in values]


def _broker_ops(current: dict[str, str],
                ops: list[tuple[int, str, str | None]]) -> dict[str, str]:
    """The operations on a broker's stored dynamic configs (a null SET value as "")."""
    return _incremental(current, ops, _broker_list_op, "")


async def _apply_broker(
    ctx: AdminContext, resource_name: str, change: ConfigChange, validate_only: bool
) -> tuple[int, str | None]:
    """Kafka's alterBrokerConfigs: this broker's own id or the cluster default ("")."""
    denied = _denied(ctx, AclOperation.ALTER_CONFIGS, BROKER, resource_name)
    if denied is not None:
        return denied, None
    if resource_name and not resource_name.lstrip("-").isdigit():
        return (ErrorCode.invalid_request,
                f"Broker id must be an integer, but it is: {resource_name}")
    if resource_name and int(resource_name) != ctx.broker_id:
        return (ErrorCode.invalid_request, f"Unexpected broker id, expected {ctx.broker_id}, "
                f"but received {resource_name}")
    dynamic = ctx.dynamic_config
    if dynamic is None:
        return ErrorCode.invalid_request, "Dynamic broker configs are not available"
    resource = f"ConfigResource(type=BROKER, name='{resource_name}')"
    try:
        await dynamic.alter(resource_name, change, validate_only)
    except TopicError as exc:
        return exc.error_code, exc.message
    except DynamicConfigError as exc:
        log.info("Invalid config value for resource %s: %s", resource, exc)
        return exc.error_code, str(exc)
    return ErrorCode.none, None


async def _apply_group(
    ctx: AdminContext, group: str, change: ConfigChange, validate_only: bool
) -> tuple[int, str | None]:
    """A group's configs: the whole new set is validated (Kafka's GroupConfig.validate), then
    stored; a group need not exist to have configs."""
    if not group:
        return ErrorCode.invalid_request, "Default group resources are not allowed."

    async def load() -> dict[str, str]:
        return await ctx.store.group_configs(group)

    async def store(updated: dict[str, str]) -> None:
        await ctx.store.set_group_configs(group, updated)

    return await _change_whole(load, change, lambda updated: validate_group_configs(
        updated, ctx.config), None if validate_only else store)


async def _change_whole(load: Callable[[], Awaitable[dict[str, str]]], change: ConfigChange,
                        validate: Callable[[dict[str, str]], object],
                        store: Callable[[dict[str, str]], Awaitable[None]] | None
                        ) -> tuple[int, str | None]:
    """A group's or a client metrics subscription's configs: changed, the new set validated
    whole, then stored (`store` None: only validated)."""
    try:
        updated = change(await load())
        validate(updated)
    except TopicError as exc:
        return exc.error_code, exc.message
    except (InvalidConfigError, SubscriptionError) as exc:
        return exc.error_code, str(exc)
    if store is not None:
        await store(updated)
    return ErrorCode.none, None


# Kafka's ClientMetricsConfigs: each config's type and default, as DescribeConfigs shows them.
_CLIENT_METRICS_DEFS = (
    (client_metrics.METRICS, ConfigType.LIST, ""),
    (client_metrics.INTERVAL_MS, ConfigType.INT, str(client_metrics.INTERVAL_MS_DEFAULT)),
    (client_metrics.MATCH, ConfigType.LIST, ""),
)
CLIENT_METRICS_CONFIG = 7  # DescribeConfigs' ConfigSource of a subscription's own value


async def _describe_client_metrics(ctx: AdminContext, name: str) -> list[ConfigEntry]:
    """A subscription's configs: its own values, the defaults for the rest."""
    stored = (await ctx.store.client_metrics_configs()).get(name, {})
    return [
        ConfigEntry(key, stored[key], CLIENT_METRICS_CONFIG, False, False, ctype, None)
        if key in stored else
        ConfigEntry(key, default, ConfigSource.DEFAULT_CONFIG, False, False, ctype, None)
        for key, ctype, default in _CLIENT_METRICS_DEFS
    ]


async def _apply_client_metrics(
    ctx: AdminContext, name: str, change: ConfigChange, validate_only: bool
) -> tuple[int, str | None]:
    """A client metrics subscription: validated whole (Kafka's ClientMetricsConfigs.validate),
    then stored; no configs left deletes it. The broker's telemetry reads it at once."""

    async def load() -> dict[str, str]:
        return dict((await ctx.store.client_metrics_configs()).get(name, {}))

    async def store(updated: dict[str, str]) -> None:
        await ctx.store.set_client_metrics_configs(name, updated)
        await ctx.telemetry.refresh(ctx.received_ms, force=True)

    return await _change_whole(load, change, lambda updated: client_metrics.validate(
        name, updated), None if validate_only else store)


def _result(
    resource_type: int, resource_name: str, code: int, message: str | None
) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "resource_type": resource_type,
        "resource_name": resource_name,
    }
