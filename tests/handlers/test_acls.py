"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): the cluster's ACLs; SECURITY_DISABLED
without an authorizer, CLUSTER_AUTHORIZATION_FAILED without the right on the cluster."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ADMIN, ALICE

TOPIC, LITERAL, ANY = 2, 3, 1
READ, ALLOW = 3, 3


def _binding(name: str = "t", principal: str = "User:alice") -> dict:
    return {"resource_type": TOPIC, "resource_name": name, "resource_pattern_type": LITERAL,
            "principal": principal, "host": "*", "operation": READ, "permission_type": ALLOW}


def _filter(**fields: object) -> dict:
    f = {"resource_type_filter": TOPIC, "resource_name_filter": None,
         "pattern_type_filter": ANY, "principal_filter": None, "host_filter": None,
         "operation": ANY, "permission_type": ANY}
    return f | fields


async def test_create_describe_delete(secured):
    created = await secured.call("CreateAcls", 3, {"creations": [_binding()]}, principal=ADMIN)
    described = await secured.call("DescribeAcls", 3, _filter(), principal=ADMIN)
    deleted = await secured.call("DeleteAcls", 3, {"filters": [_filter()]}, principal=ADMIN)
    after = await secured.call("DescribeAcls", 3, _filter(), principal=ADMIN)
    assert created.results[0].error_code == ErrorCode.none
    assert described.error_code == ErrorCode.none
    assert [(r.resource_name, [(a.principal, a.operation) for a in r.acls])
            for r in described.resources] == [("t", [("User:alice", READ)])]
    assert [a.principal for a in deleted.filter_results[0].matching_acls] == ["User:alice"]
    assert after.resources == ()


async def test_an_acl_lets_its_principal_in(secured):
    await secured.create_topic("t")
    await secured.produce("t", 0, [b"v"])
    before = await secured.fetch_as(ALICE, "t")
    await secured.call("CreateAcls", 3, {"creations": [_binding()]}, principal=ADMIN)
    after = await secured.fetch_as(ALICE, "t")
    assert (before, after) == (ErrorCode.topic_authorization_failed, ErrorCode.none)


async def test_invalid_binding_is_refused_per_entry(secured):
    bad = _binding(principal="alice")  # no principal type
    r = await secured.call("CreateAcls", 3, {"creations": [bad, _binding()]}, principal=ADMIN)
    assert [x.error_code for x in r.results] == [ErrorCode.invalid_request, ErrorCode.none]


async def test_security_disabled_without_an_authorizer(handlers):
    r = await handlers.call("DescribeAcls", 3, _filter())
    c = await handlers.call("CreateAcls", 3, {"creations": [_binding()]})
    assert r.error_code == ErrorCode.security_disabled
    assert c.results[0].error_code == ErrorCode.security_disabled


async def test_cluster_authorization_failed(secured):
    r = await secured.call("DescribeAcls", 3, _filter(), principal=ALICE)
    c = await secured.call("CreateAcls", 3, {"creations": [_binding()]}, principal=ALICE)
    assert r.error_code == ErrorCode.cluster_authorization_failed
    assert c.results[0].error_code == ErrorCode.cluster_authorization_failed
