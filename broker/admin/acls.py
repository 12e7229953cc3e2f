"""`samsa acl list|create|delete`: DescribeAcls, CreateAcls and DeleteAcls, with Kafka's names
of resource types, pattern types, operations and permissions (as kafka-acls.sh prints them).

A filter (list, delete) leaves out what it does not name: any resource type, name, pattern
type (ANY; MATCH also finds the literal, wildcard and prefixed ACLs that apply to a name),
principal, host, operation and permission."""

from __future__ import annotations

from typing import Any

from .client import Admin, AdminError, check

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
# Each enum by its wire code (the index), as Kafka's ResourceType, PatternType, AclOperation
# and AclPermissionType number them.
RESOURCE_TYPES = ("UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID",
                  "DELEGATION_TOKEN", "USER")
PATTERN_TYPES = ("UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED")
OPERATIONS = ("UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
              "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
              "CREATE_TOKENS", "DESCRIBE_TOKENS")
PERMISSIONS = ("UNKNOWN", "ANY", "DENY", "ALLOW")
ANY = 1
CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name


def code(names: tuple[str, ...], value: str | None, what: str) -> int:
    """A name given on the command line (any case, - or _) as its wire code; None: ANY."""
    if value is None:
        return ANY
    key = value.upper().replace("-", "_")
    if key not in names[1:]:
        raise AdminError("INVALID_REQUEST", f"unknown {what} {value!r}: one of "
                         f"{', '.join(n.lower() for n in names[1:])}")
    return names.index(key)


class Filter:
    """An ACL binding filter from the command's options."""

    def __init__(self, resource_type: str | None = None, resource_name: str | None = None,
                 pattern_type: str | None = None, principal: str | None = None,
                 host: str | None = None, operation: str | None = None,
                 permission: str | None = None) -> None:
        self.resource_type = code(RESOURCE_TYPES, resource_type, "resource type")
        self.pattern_type = code(PATTERN_TYPES, pattern_type, "pattern type")
        self.operation = code(OPERATIONS, operation, "operation")
        self.permission = code(PERMISSIONS, permission, "permission")
        self.resource_name, self.principal, self.host = resource_name, principal, host

    def body(self) -> dict[str, Any]:
        return {"resource_type_filter": self.resource_type,
                "resource_name_filter": self.resource_name,
                "pattern_type_filter": self.pattern_type, "principal_filter": self.principal,
                "host_filter": self.host, "operation": self.operation,
                "permission_type": self.permission}


def _named(resource_type: int, name: str, pattern_type: int, principal: str, host: str,
           operation: int, permission: int) -> dict[str, Any]:
    return {"resource_type": RESOURCE_TYPES[resource_type], "resource_name": name,
            "pattern_type": PATTERN_TYPES[pattern_type], "principal": principal, "host": host,
            "operation": OPERATIONS[operation], "permission": PERMISSIONS[permission]}


def _row(resource_type: int, name: str, pattern_type: int, acl: Any) -> dict[str, Any]:
    return _named(resource_type, name, pattern_type, acl.principal, acl.host, acl.operation,
                  acl.permission_type)


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def list_acls(admin: Admin, where: Filter) -> list[dict[str, Any]]:
    resp = admin.any().call(DESCRIBE_ACLS, where.body())
    check(resp.error_code, resp.error_message)
    return _sorted([_row(r.resource_type, r.resource_name, r.pattern_type, a)
                    for r in resp.resources for a in r.acls])


def create(admin: Admin, resource_type: str, resource_name: str | None, pattern_type: str,
           principal: str, host: str, operations: list[str], permission: str
           ) -> list[dict[str, Any]]:
    """One ACL per operation; a cluster ACL's resource name is kafka-cluster."""
    kind = code(RESOURCE_TYPES, resource_type, "resource type")
    if RESOURCE_TYPES[kind] == "CLUSTER":
        resource_name = resource_name or CLUSTER_NAME
    if resource_name is None:
        raise AdminError("INVALID_REQUEST", "an ACL needs --resource-name")
    pattern = code(PATTERN_TYPES, pattern_type, "pattern type")
    allow = code(PERMISSIONS, permission, "permission")
    ops = [code(OPERATIONS, op, "operation") for op in operations]
    creations = [{"resource_type": kind, "resource_name": resource_name,
                  "resource_pattern_type": pattern, "principal": principal, "host": host,
                  "operation": op, "permission_type": allow} for op in ops]
    for result in admin.any().call(CREATE_ACLS, {"creations": creations}).results:
        check(result.error_code, result.error_message)
    return [_named(kind, resource_name, pattern, principal, host, op, allow) for op in ops]


def delete(admin: Admin, where: Filter) -> list[dict[str, Any]]:
    """Every ACL the filter matches; the ones deleted."""
    resp = admin.any().call(DELETE_ACLS, {"filters": [where.body()]})
    rows = []
    for result in resp.filter_results:
        check(result.error_code, result.error_message)
        for m in result.matching_acls:
            check(m.error_code, m.error_message)
            rows.append(_row(m.resource_type, m.resource_name, m.pattern_type, m))
    return _sorted(rows)
