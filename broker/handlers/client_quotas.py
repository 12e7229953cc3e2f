"""DescribeClientQuotas (48) and AlterClientQuotas (49): user and client-id quotas, stored as
Kafka stores them (ZooKeeper's /config/users and /config/clients; the single-broker metadata
file) and enforced by broker/network/quotas.py.

Matching and validation follow Kafka's ClientQuotasImage.describe and
ClientQuotaControlManager: a filter component matches an exact name, the default, or any
name of its entity type; `strict` leaves out entities with other entity types; an alteration
names a known key with a value greater than 0 (a whole number for the byte rates). IP quotas
(connection_creation_rate) are not kept: an alteration of one is INVALID_REQUEST, and a
filter for them matches nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode, KafkaError

from ..cluster.metadata_store import QUOTA_CLIENT_ID, QUOTA_CONFIGS, QUOTA_USER, QuotaEntity
from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .common import refused_on_cluster
from .declare import api

if TYPE_CHECKING:
    from .requests import (
        AlterClientQuotasEntity,
        AlterClientQuotasOp,
        AlterClientQuotasRequest,
        DescribeClientQuotasRequest,
    )

log = logging.getLogger(__name__)

QUOTA_IP = "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class _Invalid(KafkaError):
    """A filter or an alteration Kafka refuses: answered with its code and message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message, code)


@api(48, "DescribeClientQuotas", (0, 1))
async def handle_describe_client_quotas(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> dict[str, Any]:
    if refused := refused_on_cluster(ctx, AclOperation.DESCRIBE_CONFIGS, error_message=None,
                                     entries=None):
        return refused
    try:
        exact, specified = _parse_filter(request)
    except _Invalid as exc:
        return {"throttle_time": 0, "error_code": exc.error_code, "error_message": str(exc),
                "entries": None}
    entries = []
    if QUOTA_IP not in exact and QUOTA_IP not in specified:
        for entity, config in sorted(ctx.store.client_quotas().items(), key=_sort_key):
            if _matches(entity, exact, specified, request.strict):
                entries.append({
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "values": [{"key": k, "value": v} for k, v in sorted(config.items())],
                })
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "entries": entries}


def _sort_key(item: tuple[QuotaEntity, dict[str, float]]) -> list[tuple[str, str]]:
    return [(t, "" if n is None else n) for t, n in item[0]]


def _parse_filter(
    request: DescribeClientQuotasRequest,
) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in request.components:
        if not c.entity_type:
            raise _Invalid(ErrorCode.invalid_request, "Invalid empty entity type.")
        if c.entity_type in exact or c.entity_type in specified:
            raise _Invalid(ErrorCode.invalid_request, f"Entity type {c.entity_type} cannot "
                           "appear more than once in the filter.")
        if c.entity_type not in (QUOTA_USER, QUOTA_CLIENT_ID, QUOTA_IP):
            raise _Invalid(ErrorCode.unsupported_version,
                           f"Unsupported entity type {c.entity_type}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise _Invalid(ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, "
                               "but set match string to null.")
            exact[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            if c.match is not None:
                raise _Invalid(ErrorCode.invalid_request, "Request specified "
                               "MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            if c.match is not None:
                raise _Invalid(ErrorCode.invalid_request, "Request specified "
                               "MATCH_TYPE_SPECIFIED, but also specified a match string.")
            specified.add(c.entity_type)
        else:
            raise _Invalid(ErrorCode.invalid_request, f"Unknown match type {c.match_type}")
    types = exact.keys() | specified
    if QUOTA_IP in types and (QUOTA_USER in types or QUOTA_CLIENT_ID in types):
        raise _Invalid(ErrorCode.invalid_request, "Invalid entity filter component "
                       "combination. IP filter component should not be used with user or "
                       "clientId filter component.")
    return exact, specified


def _matches(entity: QuotaEntity, exact: dict[str, str | None], specified: set[str],
             strict: bool) -> bool:
    names = dict(entity)
    if strict and len(names) != len(exact) + len(specified):
        return False
    for entity_type, name in exact.items():
        if entity_type not in names or names[entity_type] != name:
            return False
    return all(t in names for t in specified)


@api(49, "AlterClientQuotas", (0, 1),
     structs={"AlterClientQuotasEntity": "EntityData", "AlterClientQuotasOp": "OpData"})
async def handle_alter_client_quotas(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    changes: list[tuple[QuotaEntity, dict[str, float | None]]] = []
    seen: set[QuotaEntity] = set()
    allowed = ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER)
    for entry in request.entries:
        wire = [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                for e in entry.entity]
        if not allowed:
            results.append({"error_code": ErrorCode.cluster_authorization_failed,
                            "error_message": None, "entity": wire})
            continue
        try:
            entity = _validate_entity(entry.entity)
            if entity in seen:
                raise _Invalid(ErrorCode.invalid_request, f"Ignoring duplicate entity {wire}")
            seen.add(entity)
            ops = _validate_ops(entry.ops, entity)
        except _Invalid as exc:
            log.info("AlterClientQuotas from %s refused: %s", ctx.peer, exc)
            results.append({"error_code": exc.error_code, "error_message": str(exc),
                            "entity": wire})
            continue
        changes.append((entity, ops))
        results.append({"error_code": ErrorCode.none, "error_message": None, "entity": wire})
    if changes and not request.validate_only:
        await ctx.store.alter_client_quotas(changes)
        log.info("client quotas altered: %s", "; ".join(
            f"{dict(entity)} {ops}" for entity, ops in changes))
    return {"throttle_time": 0, "entries": results}


def _validate_entity(components: Sequence[AlterClientQuotasEntity]) -> QuotaEntity:
    names: dict[str, str | None] = {}
    if not components:
        raise _Invalid(ErrorCode.invalid_request, "Invalid empty client quota entity")
    for c in components:
        if c.entity_type in names:
            raise _Invalid(ErrorCode.invalid_request, "Invalid client quota entity, duplicate "
                           f"entity entry {c.entity_type}")
        if c.entity_type == QUOTA_IP:
            raise _Invalid(ErrorCode.invalid_request, "IP quotas (connection_creation_rate) "
                           "are not supported by this broker")
        if c.entity_type not in (QUOTA_USER, QUOTA_CLIENT_ID):
            raise _Invalid(ErrorCode.invalid_request,
                           f"Unhandled client quota entity type: {c.entity_type}")
        if c.entity_name is not None and not c.entity_name:
            raise _Invalid(ErrorCode.invalid_request, f"Empty {c.entity_type} not supported")
        names[c.entity_type] = c.entity_name
    return tuple(sorted(names.items()))


def _validate_ops(ops: Sequence[AlterClientQuotasOp], entity: QuotaEntity
                  ) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for op in ops:
        if op.key in out:
            raise _Invalid(ErrorCode.invalid_request, f"Duplicate quota key {op.key} not "
                           f"updating quota for this entity {dict(entity)}")
        if op.remove:
            out[op.key] = None
            continue
        kind = QUOTA_CONFIGS.get(op.key)
        value = float(op.value)
        if kind is None:
            raise _Invalid(ErrorCode.invalid_request, f"Invalid configuration key {op.key}")
        if not value > 0.0:
            raise _Invalid(ErrorCode.invalid_request, f"Quota {op.key} must be greater than 0")
        if kind is int:
            if value > 2**63 - 1:
                raise _Invalid(ErrorCode.invalid_request,
                               f"Proposed value for {op.key} is too large for a LONG.")
            if abs(value % 1.0) > 1e-6:
                raise _Invalid(ErrorCode.invalid_request,
                               f"{op.key} cannot be a fractional value.")
        out[op.key] = value
    return out
