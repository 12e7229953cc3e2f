"""DescribeClientQuotas (48), AlterClientQuotas (49): quotas by user and client id (and IP) in
the cluster metadata, as Kafka's ClientQuotaControlManager checks them."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _entry(entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]]) -> dict:
    return {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "ops": [{"key": k, "value": v, "remove": r} for k, v, r in ops]}


async def _alter(h, entries: list[dict], **kw) -> list[ErrorCode]:
    r = await h.call("AlterClientQuotas", 1, {"entries": entries, "validate_only": False}, **kw)
    return [e.error_code for e in r.entries]


async def _describe(h, components: list[dict], strict: bool = False, **kw):
    return await h.call("DescribeClientQuotas", 1, {"components": components,
                                                    "strict": strict}, **kw)


async def test_alter_then_describe(handlers):
    assert await _alter(handlers, [
        _entry([("user", "alice")], [("producer_byte_rate", 1024.0, False)]),
        _entry([("client-id", None)], [("request_percentage", 50.0, False)])]) == [
        ErrorCode.none, ErrorCode.none]
    r = await _describe(handlers, [{"entity_type": "user", "match_type": EXACT,
                                    "match": "alice"}])
    assert r.error_code == ErrorCode.none
    assert [([(e.entity_type, e.entity_name) for e in x.entity],
             [(v.key, v.value) for v in x.values]) for x in r.entries] == [
        ([("user", "alice")], [("producer_byte_rate", 1024.0)])]
    defaults = await _describe(handlers, [{"entity_type": "client-id", "match_type": DEFAULT,
                                           "match": None}])
    assert [[(v.key, v.value) for v in x.values] for x in defaults.entries] == [
        [("request_percentage", 50.0)]]


async def test_remove_a_quota(handlers):
    await _alter(handlers, [_entry([("user", "bob")], [("consumer_byte_rate", 10.0, False)])])
    await _alter(handlers, [_entry([("user", "bob")], [("consumer_byte_rate", 0.0, True)])])
    r = await _describe(handlers, [{"entity_type": "user", "match_type": SPECIFIED,
                                    "match": None}])
    assert r.entries == ()


async def test_invalid_quota_keys_and_entities(handlers):
    assert await _alter(handlers, [
        _entry([("user", "alice")], [("no_such_quota", 1.0, False)]),
        _entry([("user", "alice"), ("user", "bob")], [("producer_byte_rate", 1.0, False)]),
        _entry([("ip", "not-an-ip")], [("connection_creation_rate", 1.0, False)]),
    ]) == [ErrorCode.invalid_request] * 3
    bad_filter = await _describe(handlers, [{"entity_type": "user", "match_type": 7,
                                             "match": None}])
    assert bad_filter.error_code == ErrorCode.invalid_request


async def test_cluster_authorization_failed(secured):
    assert await _alter(secured, [_entry([("user", "alice")],
                                         [("producer_byte_rate", 1.0, False)])],
                        principal=ALICE) == [ErrorCode.cluster_authorization_failed]
    r = await _describe(secured, [], principal=ALICE)
    assert r.error_code == ErrorCode.cluster_authorization_failed
