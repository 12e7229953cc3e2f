"""ACLs and Kafka's authorizer semantics (StandardAuthorizer / AclAuthorizer).

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED; the LITERAL name `*` matches
every name) to an entry (principal `Type:name` or `User:*`, host or `*`, operation, ALLOW or
DENY). An action (principal, host, operation, resource type and name) is decided so:

* a super user (`super.users`) may do anything;
* the ACLs whose pattern matches the resource are gathered; if there are none at all (for any
  principal), `allow.everyone.if.no.acl.found` decides (default: deny);
* a matching DENY entry denies, whatever ALLOWs match;
* else a matching ALLOW entry allows: ALL matches every operation, an ALLOW of READ, WRITE,
  DELETE or ALTER also allows DESCRIBE, an ALLOW of ALTER_CONFIGS also DESCRIBE_CONFIGS
  (a DENY denies only its own operation, or every one for ALL);
* else deny.

Filters (DescribeAcls, DeleteAcls) select ACLs as Kafka's AclBindingFilter does: ANY matches
any value; pattern type MATCH selects the patterns that would apply to the named resource
(the literal name, the wildcard, the prefixes of the name).

The ACLs themselves live in the metadata store (one `AclCache` per store, kept current from
ZooKeeper in a cluster); the `Authorizer` decides against the cache it is given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

log = logging.getLogger(__name__)
audit = logging.getLogger("kafka.authorizer.logger")

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# Kafka's AclEntry.supportedOperations: what KIP-430's authorized operations report per type.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def pascal(name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part.capitalize() for part in name.split("_"))


def from_pascal(enum: type[IntEnum], text: str) -> int:
    """The member named `text` in Kafka's Pascal case or upper case; ValueError if none."""
    for member in enum:
        if text in (pascal(member.name), member.name):
            return int(member)
    raise ValueError(f"unknown {enum.__name__} {text!r}")


def valid_principal(text: str) -> bool:
    """Kafka's SecurityUtils.parseKafkaPrincipal: `type:name`."""
    return bool(text) and ":" in text


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"{pascal(self.resource_type.name)}:{self.pattern_type.name}:{self.name}"

    @classmethod
    def named(cls, resource_type: str, name: str, pattern_type: str) -> ResourcePattern:
        """The pattern of a resource type and pattern type given by their names, in Kafka's
        Pascal or upper case (as its stores write them); ValueError for an unknown one."""
        return cls(ResourceType(from_pascal(ResourceType, resource_type)), name,
                   PatternType(from_pascal(PatternType, pattern_type)))


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: PermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: None (a null string) and ANY match anything."""

    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def unknown(self) -> str | None:
        """Why the filter is invalid (one of its enums is UNKNOWN or out of range), or None."""
        for value, enum, what in ((self.resource_type, ResourceType, "resource type"),
                                  (self.pattern_type, PatternType, "pattern type"),
                                  (self.operation, AclOperation, "operation"),
                                  (self.permission_type, PermissionType, "permission type")):
            if value not in enum._value2member_map_ or value == 0:
                return f"Unknown {what} {value} in filter"
        return None

    def matches_pattern(self, p: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        if (self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
                and self.pattern_type != p.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, p.pattern_type):
            return self.name == p.name
        if p.pattern_type == PatternType.LITERAL:  # MATCH
            return self.name == p.name or p.name == WILDCARD
        return self.name.startswith(p.name)

    def matches_entry(self, e: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == e.principal)
                and (self.host is None or self.host == e.host)
                and (self.operation == AclOperation.ANY or self.operation == e.operation)
                and (self.permission_type == PermissionType.ANY
                     or self.permission_type == e.permission_type))

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b.pattern) and self.matches_entry(b.entry)


def invalid_new_acl(b: AclBinding) -> str | None:
    """Why Kafka refuses to create this ACL (INVALID_REQUEST), or None."""
    p, e = b.pattern, b.entry
    if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {p.resource_type.name}"
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {p.pattern_type.name}"
    if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {e.operation.name}"
    if e.permission_type not in (PermissionType.ALLOW, PermissionType.DENY):
        return f"Invalid permissionType {e.permission_type.name}"
    if not p.name:
        return "Resource name should not be empty"
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not valid_principal(e.principal):
        return f"Invalid principal {e.principal!r}: expected principalType:principalName"
    if not e.host:
        return "Invalid empty host"
    return None


class AclCache:
    """Every ACL by resource pattern, with the names of the PREFIXED patterns per resource type
    (so a check looks at the prefixes that exist, not at every prefix of the name)."""

    def __init__(self) -> None:
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._prefixes: dict[ResourceType, set[str]] = {}

    def __len__(self) -> int:
        return sum(len(v) for v in self._acls.values())

    def get(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acls.get(pattern, frozenset())

    def patterns(self) -> list[ResourcePattern]:
        return list(self._acls)

    def set(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Replace the pattern's ACLs (none: forget the pattern)."""
        entries = frozenset(entries)
        prefixed = pattern.pattern_type == PatternType.PREFIXED
        if entries:
            self._acls[pattern] = entries
            if prefixed:
                self._prefixes.setdefault(pattern.resource_type, set()).add(pattern.name)
        else:
            self._acls.pop(pattern, None)
            if prefixed:
                self._prefixes.get(pattern.resource_type, set()).discard(pattern.name)

    def bindings(self, flt: AclBindingFilter | None = None) -> Iterator[AclBinding]:
        for pattern, entries in list(self._acls.items()):
            if flt is not None and not flt.matches_pattern(pattern):
                continue
            for e in entries:
                if flt is None or flt.matches_entry(e):
                    yield AclBinding(pattern, e)

    def matching(self, rtype: ResourceType, name: str) -> Iterator[AccessControlEntry]:
        """The entries of every pattern that applies to the resource `rtype:name`."""
        yield from self._acls.get(ResourcePattern(rtype, name, PatternType.LITERAL), ())
        if name != WILDCARD:
            yield from self._acls.get(ResourcePattern(rtype, WILDCARD, PatternType.LITERAL), ())
        prefixes = self._prefixes.get(rtype)
        if not prefixes:
            return
        if len(prefixes) <= len(name):
            found = [p for p in prefixes if name.startswith(p)]
        else:  # fewer prefixes of the name than PREFIXED patterns: look each up
            found = [name[:i] for i in range(1, len(name) + 1) if name[:i] in prefixes]
        for prefix in found:
            yield from self._acls.get(ResourcePattern(rtype, prefix, PatternType.PREFIXED), ())


def _applies(e: AccessControlEntry, op: AclOperation) -> bool:
    """Does the entry's operation cover `op` (with ALLOW's implications)?"""
    if e.operation in (AclOperation.ALL, op):
        return True
    if e.permission_type != PermissionType.ALLOW:
        return False
    if op == AclOperation.DESCRIBE:
        return e.operation in _IMPLIES_DESCRIBE
    if op == AclOperation.DESCRIBE_CONFIGS:
        return e.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: `User:a;User:b` (ValueError on an entry that is no principal)."""
    out = set()
    for part in (value or "").split(";"):
        part = part.strip()
        if not part:
            continue
        if not valid_principal(part):
            raise ValueError(f"expected a string in format principalType:principalName but "
                             f"got {part}")
        out.add(part)
    return frozenset(out)


class Authorizer:
    """Decides actions against the ACLs of `cache()` (the metadata store's)."""

    def __init__(self, cache: Callable[[], AclCache], super_users: frozenset[str] = frozenset(),
                 allow_if_no_acl: bool = False) -> None:
        self._cache = cache
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl

    def authorize(self, principal: str, host: str, op: AclOperation, rtype: ResourceType,
                  name: str, log_denied: bool = True) -> bool:
        if principal in self.super_users:
            return True
        found = allowed = False
        for e in self._cache().matching(rtype, name):
            found = True
            if e.principal != principal and e.principal != WILDCARD_PRINCIPAL:
                continue
            if e.host != WILDCARD and e.host != host:
                continue
            if not _applies(e, op):
                continue
            if e.permission_type == PermissionType.DENY:
                allowed = False
                break
            allowed = True
        else:
            if not found:
                allowed = self.allow_if_no_acl
        if not allowed and log_denied:
            audit.info("Principal = %s is Denied operation = %s from host = %s on resource = "
                       "%s:LITERAL:%s", principal, op.name, host, pascal(rtype.name), name)
        return allowed

    def authorize_by_resource_type(self, principal: str, host: str, op: AclOperation,
                                   rtype: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the principal do `op` on at least
        one resource of the type (an ALLOW not dominated by a DENY)?"""
        if self.authorize(principal, host, op, rtype, "hardcode", log_denied=False):
            return True
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(),
                                             PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(),
                                              PatternType.PREFIXED: set()}
        flt = AclBindingFilter(rtype, None, PatternType.ANY, None, None, AclOperation.ANY,
                               PermissionType.ANY)
        for b in self._cache().bindings(flt):
            e, p = b.entry, b.pattern
            if e.host not in (host, WILDCARD):
                continue
            if e.principal not in (principal, WILDCARD_PRINCIPAL):
                continue
            if e.operation not in (op, AclOperation.ALL):
                continue
            if p.pattern_type not in deny:
                continue
            if e.permission_type == PermissionType.DENY:
                if p.pattern_type == PatternType.LITERAL and p.name == WILDCARD:
                    return False
                deny[p.pattern_type].add(p.name)
            elif e.permission_type == PermissionType.ALLOW:
                if p.pattern_type == PatternType.LITERAL and p.name == WILDCARD:
                    return True
                allow[p.pattern_type].add(p.name)
        for ptype, names in allow.items():
            for name in names:
                if ptype == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED]
                           for i in range(1, len(name) + 1)):
                    return True
        return False


def configured_authorizer(config: Any, acls: Callable[[], AclCache],
                          clustered: bool) -> Authorizer | None:
    """authorizer.class.name: Kafka's ACL authorizer over the store's `acls`, or none
    (everything allowed). `clustered`: the broker talks to other brokers."""
    if not (config["authorizer.class.name"] or "").strip():
        return None
    authorizer = Authorizer(acls, parse_super_users(config["super.users"]),
                            config["allow.everyone.if.no.acl.found"])
    log.info("authorizer: ACLs (%d), super.users=%s, allow.everyone.if.no.acl.found=%s",
             len(acls()), ",".join(sorted(authorizer.super_users)) or "(none)",
             authorizer.allow_if_no_acl)
    if clustered and "User:ANONYMOUS" not in authorizer.super_users:
        log.warning("authorizer.class.name is set but super.users lacks User:ANONYMOUS, "
                    "the principal of the brokers' PLAINTEXT connections to each other: "
                    "follower fetches and transaction markers need CLUSTER_ACTION on the "
                    "cluster (an ACL), else replication stops")
    return authorizer


# ---- Kafka's JSON of ACL entries (ZooKeeper's /kafka-acl znodes, the local metadata file) ----
def entries_to_json(entries: Iterable[AccessControlEntry]) -> dict[str, object]:
    """{"version":1,"acls":[{"principal","permissionType","operation","host"}]} as Kafka's
    AclEntry.toJsonCompatibleMap writes it."""
    return {"version": 1, "acls": [
        {"principal": e.principal, "permissionType": pascal(e.permission_type.name),
         "operation": pascal(e.operation.name), "host": e.host}
        for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation,
                                                e.permission_type))]}


def entries_from_json(doc: object) -> frozenset[AccessControlEntry]:
    """Kafka's AclEntry.fromBytes (ValueError/KeyError/TypeError on a malformed document)."""
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ValueError(f"unsupported ACL document {doc!r}")
    out = set()
    for item in doc["acls"]:
        principal = str(item["principal"])
        if not valid_principal(principal):
            raise ValueError(f"invalid principal {principal!r}")
        out.add(AccessControlEntry(
            principal, str(item["host"]),
            AclOperation(from_pascal(AclOperation, str(item["operation"]))),
            PermissionType(from_pascal(PermissionType, str(item["permissionType"])))))
    return frozenset(out)
