"""The authorizer's decisions (Kafka's StandardAuthorizer rules) on an ACL cache."""

from __future__ import annotations

from pathlib import Path

from samsa.broker.security.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclCache,
    AclOperation,
    Authorizer,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    invalid_new_acl,
    parse_super_users,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
Op = AclOperation


def acl(cache: AclCache, rtype: ResourceType, name: str, ptype: PatternType, principal: str,
        op: AclOperation, perm: PermissionType, host: str = "*") -> None:
    p = ResourcePattern(rtype, name, ptype)
    cache.set(p, cache.get(p) | {AccessControlEntry(principal, host, op, perm)})


def make(allow_if_no_acl: bool = False, supers: str = "") -> tuple[AclCache, Authorizer]:
    cache = AclCache()
    return cache, Authorizer(lambda: cache, parse_super_users(supers), allow_if_no_acl)


def test_no_acl_denies_unless_allow_everyone() -> None:
    _, a = make()
    assert not a.authorize("User:alice", "1.2.3.4", Op.READ, T, "t")
    _, a = make(allow_if_no_acl=True)
    assert a.authorize("User:alice", "1.2.3.4", Op.READ, T, "t")


def test_acls_for_others_deny_even_with_allow_everyone() -> None:
    cache, a = make(allow_if_no_acl=True)
    acl(cache, T, "t", LIT, "User:bob", Op.READ, ALLOW)
    assert not a.authorize("User:alice", "h", Op.READ, T, "t")
    assert a.authorize("User:bob", "h", Op.READ, T, "t")
    assert a.authorize("User:alice", "h", Op.READ, T, "other")  # no ACL on that one


def test_deny_beats_allow_and_wildcards() -> None:
    cache, a = make()
    acl(cache, T, "*", LIT, "User:*", Op.ALL, ALLOW)
    assert a.authorize("User:alice", "h", Op.WRITE, T, "any")
    acl(cache, T, "secret", LIT, "User:alice", Op.READ, DENY)
    assert not a.authorize("User:alice", "h", Op.READ, T, "secret")
    assert a.authorize("User:alice", "h", Op.WRITE, T, "secret")
    assert a.authorize("User:bob", "h", Op.READ, T, "secret")


def test_prefixed_and_literal() -> None:
    cache, a = make()
    acl(cache, T, "app-", PRE, "User:alice", Op.WRITE, ALLOW)
    acl(cache, T, "app-x", LIT, "User:alice", Op.WRITE, DENY)
    assert a.authorize("User:alice", "h", Op.WRITE, T, "app-1")
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "app-x")
    assert a.authorize("User:alice", "h", Op.WRITE, T, "app-xy")  # literal: exact name only
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "ap")
    acl(cache, T, "ap", PRE, "User:alice", Op.ALL, DENY)
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "app-1")


def test_implied_operations_only_for_allow() -> None:
    cache, a = make()
    acl(cache, T, "t", LIT, "User:alice", Op.READ, ALLOW)
    acl(cache, T, "t", LIT, "User:alice", Op.ALTER_CONFIGS, ALLOW)
    assert a.authorize("User:alice", "h", Op.DESCRIBE, T, "t")
    assert a.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, T, "t")
    assert not a.authorize("User:alice", "h", Op.WRITE, T, "t")
    acl(cache, G, "g", LIT, "User:alice", Op.ALL, ALLOW)
    acl(cache, G, "g", LIT, "User:alice", Op.READ, DENY)
    assert a.authorize("User:alice", "h", Op.DESCRIBE, G, "g")  # DENY READ is not DENY DESCRIBE
    assert not a.authorize("User:alice", "h", Op.READ, G, "g")


def test_host_match() -> None:
    cache, a = make()
    acl(cache, C, "kafka-cluster", LIT, "User:alice", Op.CREATE, ALLOW, host="10.0.0.1")
    assert a.authorize("User:alice", "10.0.0.1", Op.CREATE, C, "kafka-cluster")
    assert not a.authorize("User:alice", "10.0.0.2", Op.CREATE, C, "kafka-cluster")


def test_super_users_bypass_deny() -> None:
    cache, a = make(supers="User:admin; User:CN=broker,O=x")
    acl(cache, T, "*", LIT, "User:*", Op.ALL, DENY)
    assert a.authorize("User:admin", "h", Op.DELETE, T, "t")
    assert a.authorize("User:CN=broker,O=x", "h", Op.DELETE, T, "t")
    assert not a.authorize("User:alice", "h", Op.DELETE, T, "t")


def test_by_resource_type() -> None:
    cache, a = make()
    assert not a.authorize_by_resource_type("User:alice", "h", Op.WRITE, T)
    acl(cache, T, "app-", PRE, "User:alice", Op.WRITE, ALLOW)
    assert a.authorize_by_resource_type("User:alice", "h", Op.WRITE, T)
    acl(cache, T, "app", PRE, "User:alice", Op.WRITE, DENY)
    assert not a.authorize_by_resource_type("User:alice", "h", Op.WRITE, T)


def test_filters() -> None:
    cache, _ = make()
    acl(cache, T, "app-", PRE, "User:alice", Op.WRITE, ALLOW)
    acl(cache, T, "app-1", LIT, "User:bob", Op.READ, ALLOW)
    acl(cache, T, "*", LIT, "User:carol", Op.READ, DENY)
    acl(cache, G, "g", LIT, "User:alice", Op.READ, ALLOW)

    def names(rtype: int, name: str | None, ptype: int, principal: str | None = None) -> set:
        f = AclBindingFilter(rtype, name, ptype, principal, None, Op.ANY, PermissionType.ANY)
        return {(b.pattern.name, b.entry.principal) for b in cache.bindings(f)}

    assert len(names(ResourceType.ANY, None, PatternType.ANY)) == 4
    assert names(T, "app-1", PatternType.MATCH) == {
        ("app-", "User:alice"), ("app-1", "User:bob"), ("*", "User:carol")}
    assert names(T, "app-1", PatternType.ANY) == {("app-1", "User:bob")}
    assert names(T, None, PRE) == {("app-", "User:alice")}
    assert names(ResourceType.ANY, None, PatternType.ANY, "User:alice") == {
        ("app-", "User:alice"), ("g", "User:alice")}
    bad = AclBindingFilter(0, None, PatternType.ANY, None, None, Op.ANY, PermissionType.ANY)
    assert bad.unknown() is not None


def test_new_acl_validation() -> None:
    def check(rtype: ResourceType, name: str, ptype: PatternType, principal: str = "User:a",
              op: AclOperation = Op.READ) -> str | None:
        return invalid_new_acl(AclBinding(ResourcePattern(rtype, name, ptype),
                                          AccessControlEntry(principal, "*", op, ALLOW)))

    assert check(T, "t", LIT) is None
    assert check(T, "t", PatternType.MATCH) is not None
    assert check(T, "", LIT) is not None
    assert check(C, "other", LIT) is not None
    assert check(C, "kafka-cluster", LIT) is None
    assert check(ResourceType.ANY, "t", LIT) is not None
    assert check(T, "t", LIT, principal="alice") is not None
    assert check(T, "t", LIT, op=Op.ANY) is not None


async def test_local_store_keeps_acls_across_restarts(tmp_path: Path) -> None:
    from samsa.broker.cluster.metadata_store import BrokerInfo, LocalMetadataStore

    info = BrokerInfo(0, "127.0.0.1", 9092)
    store = LocalMetadataStore(tmp_path, info)
    lit = AclBinding(ResourcePattern(T, "orders", LIT),
                     AccessControlEntry("User:alice", "*", Op.READ, ALLOW))
    pre = AclBinding(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx-", PRE),
                     AccessControlEntry("User:*", "10.0.0.1", Op.WRITE, DENY))
    assert await store.create_acls([lit, pre]) == [None, None]
    assert set(LocalMetadataStore(tmp_path, info).acls().bindings()) == {lit, pre}
    every = AclBindingFilter(ResourceType.ANY, None, PatternType.ANY, "User:*", None, Op.ANY,
                             PermissionType.ANY)
    assert await store.delete_acls([every]) == [[pre]]
    assert set(LocalMetadataStore(tmp_path, info).acls().bindings()) == {lit}
