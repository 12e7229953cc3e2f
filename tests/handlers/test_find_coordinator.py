"""FindCoordinator (10): the broker coordinating a group (key type 0), a transactional id (1) or
a share-partition (2); before v4 one key, from v4 a batch of keys each answered."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE


async def test_group_and_transaction_coordinators_are_this_broker(handlers):
    group = await handlers.find_coordinator("g")
    txn = await handlers.find_coordinator("tx", key_type=1)
    for c in (group, txn):
        assert (c.error_code, c.node_id, c.host, c.port) == (ErrorCode.none, 0, "127.0.0.1",
                                                              9092)
    assert handlers.broker.store.topic("__consumer_offsets") is not None
    assert handlers.broker.store.topic("__transaction_state") is not None


async def test_v3_answers_one_key_at_the_top_level(handlers):
    await handlers.find_coordinator("g")
    r = await handlers.call("FindCoordinator", 3, {"key": "g", "key_type": 0})
    assert (r.error_code, r.node_id, r.port) == (ErrorCode.none, 0, 9092)


async def test_unknown_key_type_is_an_invalid_request(handlers):
    r = await handlers.call("FindCoordinator", 4, {"key_type": 7, "coordinator_keys": ["g"]})
    assert r.coordinators[0].error_code == ErrorCode.invalid_request


async def test_share_key_while_share_groups_are_off(handlers):
    r = await handlers.call("FindCoordinator", 6, {"key_type": 2,
                                                   "coordinator_keys": ["g:topic:0"]})
    assert r.coordinators[0].error_code == ErrorCode.invalid_request


async def test_authorization_failed_per_key_type(secured):
    r = await secured.call("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": ["g"]},
                           principal=ALICE)
    t = await secured.call("FindCoordinator", 4, {"key_type": 1, "coordinator_keys": ["tx"]},
                           principal=ALICE)
    assert (r.coordinators[0].key, r.coordinators[0].error_code) == (
        "g", ErrorCode.group_authorization_failed)
    assert t.coordinators[0].error_code == ErrorCode.transactional_id_authorization_failed
