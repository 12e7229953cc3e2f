"""DescribeUserScramCredentials (50), AlterUserScramCredentials (51): SCRAM users in the cluster
metadata; each user answers for itself, and a user with one failed alteration gets none."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE

SHA256, SHA512 = 1, 2


def _upsert(name: str, mechanism: int = SHA256, iterations: int = 8192) -> dict:
    return {"name": name, "mechanism": mechanism, "iterations": iterations,
            "salt": b"salt", "salted_password": b"x" * 32}


async def _alter(h, upsertions=(), deletions=(), **kw):
    r = await h.call("AlterUserScramCredentials", 0, {"upsertions": list(upsertions),
                                                      "deletions": list(deletions)}, **kw)
    return {x.user: x.error_code for x in r.results}


async def test_upsert_then_describe_then_delete(handlers):
    assert await _alter(handlers, [_upsert("alice"), _upsert("bob", SHA512, 4096)]) == {
        "alice": ErrorCode.none, "bob": ErrorCode.none}
    r = await handlers.call("DescribeUserScramCredentials", 0, {"users": None})
    assert r.error_code == ErrorCode.none
    assert {x.user: [(c.mechanism, c.iterations) for c in x.credential_infos]
            for x in r.results} == {"alice": [(SHA256, 8192)], "bob": [(SHA512, 4096)]}
    assert await _alter(handlers, deletions=[{"name": "alice", "mechanism": SHA256}]) == {
        "alice": ErrorCode.none}
    assert [x.user for x in (await handlers.call("DescribeUserScramCredentials", 0,
                                                 {"users": None})).results] == ["bob"]


async def test_describe_an_unknown_or_repeated_user(handlers):
    r = await handlers.call("DescribeUserScramCredentials", 0, {"users": [
        {"name": "nobody"}, {"name": "twice"}, {"name": "twice"}]})
    assert {x.user: x.error_code for x in r.results} == {
        "nobody": ErrorCode.resource_not_found, "twice": ErrorCode.duplicate_resource}


async def test_unacceptable_credentials(handlers):
    assert await _alter(handlers, [_upsert("few", iterations=1),
                                   _upsert("", SHA256),
                                   _upsert("odd", mechanism=9)]) == {
        "few": ErrorCode.unacceptable_credential, "": ErrorCode.unacceptable_credential,
        "odd": ErrorCode.unsupported_sasl_mechanism}
    assert await _alter(handlers, deletions=[{"name": "ghost", "mechanism": SHA256}]) == {
        "ghost": ErrorCode.resource_not_found}


async def test_cluster_authorization_failed(secured):
    assert await _alter(secured, [_upsert("alice")], principal=ALICE) == {
        "alice": ErrorCode.cluster_authorization_failed}
    r = await secured.call("DescribeUserScramCredentials", 0, {"users": None}, principal=ALICE)
    assert r.error_code == ErrorCode.cluster_authorization_failed
