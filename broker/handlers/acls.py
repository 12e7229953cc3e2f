"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): the cluster's ACLs, as Kafka's AclApis
serves them.

Without an authorizer (authorizer.class.name unset) each answers SECURITY_DISABLED; with one,
describing needs DESCRIBE on the cluster and creating or deleting ALTER on it
(CLUSTER_AUTHORIZATION_FAILED otherwise). A request holding an UNKNOWN (0) resource type,
pattern type, operation or permission type does not parse in Kafka, which closes the
connection; so does this broker. Any other invalid ACL or filter is refused per entry with
INVALID_REQUEST (Kafka's AclControlManager checks).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Any, TypeVar

from samsa.protocol.errors import ErrorCode

from ..context import AclContext, RequestContext
from ..network.signals import CloseConnection
from ..security.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    invalid_new_acl,
)
from .declare import api

if TYPE_CHECKING:
    from .requests import (
        AclCreation,
        CreateAclsRequest,
        DeleteAclsFilter,
        DeleteAclsRequest,
        DescribeAclsRequest,
    )

log = logging.getLogger(__name__)

E = TypeVar("E", bound=IntEnum)

NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _not_authorized(ctx: AclContext, api: str) -> str:
    return f"Request {api} from {ctx.principal} is not authorized."


def _refuse_unknown(api: str, *codes: int) -> None:
    """Kafka's request classes refuse UNKNOWN elements while parsing: the connection closes."""
    if 0 in codes:
        raise CloseConnection(f"{api} request contains UNKNOWN elements")


def _enum(enum: type[E], value: int) -> E:
    """The member, or UNKNOWN for a code this version of Kafka does not know (fromCode)."""
    try:
        return enum(value)
    except ValueError:
        return enum["UNKNOWN"]


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(f.resource_type_filter, f.resource_name_filter,
                            f.pattern_type_filter, f.principal_filter, f.host_filter,
                            f.operation, f.permission_type)


@api(29, "DescribeAcls", (1, 3))
async def handle_describe_acls(ctx: RequestContext,
                               request: DescribeAclsRequest) -> dict[str, Any]:
    _refuse_unknown("DescribeAcls", request.resource_type_filter, request.pattern_type_filter,
                    request.operation, request.permission_type)
    out: dict[str, Any] = {"throttle_time": 0, "error_code": ErrorCode.none,
                           "error_message": None, "resources": []}
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return out | {"error_code": ErrorCode.cluster_authorization_failed,
                      "error_message": _not_authorized(ctx, "DescribeAcls")}
    if ctx.authorizer is None:
        return out | {"error_code": ErrorCode.security_disabled, "error_message": NO_AUTHORIZER}
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in ctx.store.acls().bindings(_filter(request)):
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    out["resources"] = [
        {"resource_type": p.resource_type, "resource_name": p.name,
         "pattern_type": p.pattern_type,
         "acls": [{"principal": e.principal, "host": e.host, "operation": e.operation,
                   "permission_type": e.permission_type} for e in entries]}
        for p, entries in by_pattern.items()]
    return out


@api(30, "CreateAcls", (1, 3), structs={"AclCreation": "AclCreation"})
async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequest) -> dict[str, Any]:
    creations: Sequence[AclCreation] = request.creations
    for c in creations:
        _refuse_unknown("CreateAcls", c.resource_type, c.resource_pattern_type, c.operation,
                        c.permission_type)
    n = len(creations)

    def every(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"throttle_time": 0,
                "results": [{"error_code": code, "error_message": message}] * n}

    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        return every(ErrorCode.cluster_authorization_failed, _not_authorized(ctx, "CreateAcls"))
    if ctx.authorizer is None:
        return every(ErrorCode.security_disabled, "No Authorizer is configured.")
    results: list[dict[str, Any]] = [{"error_code": ErrorCode.none, "error_message": None}
                                     for _ in range(n)]
    valid: list[tuple[int, AclBinding]] = []
    for i, c in enumerate(creations):
        binding = AclBinding(
            ResourcePattern(_enum(ResourceType, c.resource_type), c.resource_name,
                            _enum(PatternType, c.resource_pattern_type)),
            AccessControlEntry(c.principal, c.host, _enum(AclOperation, c.operation),
                               _enum(PermissionType, c.permission_type)))
        why = invalid_new_acl(binding)
        if why is not None:
            results[i] = {"error_code": ErrorCode.invalid_request, "error_message": why}
        else:
            valid.append((i, binding))
    if valid:
        refused = await ctx.store.create_acls([b for _, b in valid])
        for (i, b), why in zip(valid, refused, strict=True):
            if why is not None:
                results[i] = {"error_code": ErrorCode.invalid_request, "error_message": why}
            else:
                log.info("%s added ACL %s %s %s on %s from host %s", ctx.principal,
                         b.entry.permission_type.name, b.entry.operation.name,
                         b.entry.principal, b.pattern, b.entry.host)
    return {"throttle_time": 0, "results": results}


@api(31, "DeleteAcls", (1, 3), structs={"DeleteAclsFilter": "DeleteAclsFilter"})
async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> dict[str, Any]:
    filters: Sequence[DeleteAclsFilter] = request.filters
    for f in filters:
        _refuse_unknown("DeleteAcls", f.resource_type_filter, f.pattern_type_filter,
                        f.operation, f.permission_type)
    n = len(filters)

    def every(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"throttle_time": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []}] * n}

    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        return every(ErrorCode.cluster_authorization_failed, _not_authorized(ctx, "DeleteAcls"))
    if ctx.authorizer is None:
        return every(ErrorCode.security_disabled, "No Authorizer is configured.")
    results: list[dict[str, Any]] = [{} for _ in range(n)]
    valid: list[tuple[int, AclBindingFilter]] = []
    for i, f in enumerate(filters):
        flt = _filter(f)
        why = flt.unknown()
        if why is not None:
            results[i] = {"error_code": ErrorCode.invalid_request, "error_message": why,
                          "matching_acls": []}
        else:
            valid.append((i, flt))
    deleted = await ctx.store.delete_acls([f for _, f in valid]) if valid else []
    for (i, _), bindings in zip(valid, deleted, strict=True):
        for b in bindings:
            log.info("%s removed ACL %s %s %s on %s from host %s", ctx.principal,
                     b.entry.permission_type.name, b.entry.operation.name, b.entry.principal,
                     b.pattern, b.entry.host)
        results[i] = {"error_code": ErrorCode.none, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None,
             "resource_type": b.pattern.resource_type, "resource_name": b.pattern.name,
             "pattern_type": b.pattern.pattern_type, "principal": b.entry.principal,
             "host": b.entry.host, "operation": b.entry.operation,
             "permission_type": b.entry.permission_type} for b in bindings]}
    return {"throttle_time": 0, "filter_results": results}
