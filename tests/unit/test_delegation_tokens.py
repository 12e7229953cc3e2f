"""broker/security/tokens.py: Kafka 3.x's token znode, the HMAC, and the periodic removal of
expired tokens (delegation.token.expiry.check.interval.ms)."""

from __future__ import annotations

import asyncio
import hmac
import time

from samsa.broker.context import KafkaPrincipal
from samsa.broker.security.tokens import (
    LocalTokens,
    TokenInformation,
    TokenManager,
    expire_tokens_forever,
)
from samsa.config.loader import load_config

ALICE = KafkaPrincipal("User", "alice")
CONFIG = load_config(None, {"delegation.token.secret.key": "k"})


def test_znode_round_trip_and_versions_without_a_requester() -> None:
    info = TokenInformation("id1", ALICE, KafkaPrincipal("User", "a:b c"),
                            (KafkaPrincipal("User", "bob"),), 1, 3, 2)
    assert TokenInformation.from_json(info.to_json()) == info
    assert b'"tokenRequester":"User%3Aa%3Ab%20c"' in info.to_json()
    old = (b'{"version":1,"owner":"User%3Aalice","renewers":[],"issueTimestamp":1,'
           b'"maxTimestamp":3,"expiryTimestamp":2,"tokenId":"id1"}')
    assert TokenInformation.from_json(old).requester == ALICE


def test_the_legacy_secret_key_name_is_used_when_the_new_one_is_unset() -> None:
    config = load_config(None, {"delegation.token.master.key": "old"})
    tokens = TokenManager(config, LocalTokens(lambda: None))
    info = TokenInformation("id1", ALICE, ALICE, (), 1, 3, 2)
    assert tokens.enabled and tokens.hmac_of(info) == hmac.digest(b"old", b"id1", "sha512")
    assert not TokenManager(load_config(None, {}), LocalTokens(lambda: None)).enabled


async def test_expired_tokens_are_removed_on_the_check_interval() -> None:
    store = LocalTokens(lambda: None)
    tokens = TokenManager(CONFIG, store)
    now = int(time.time() * 1000)
    live, _ = await tokens.create(ALICE, ALICE, (), -1, now)
    dead, _ = await tokens.create(ALICE, ALICE, (), 1, now - 1000)  # lived 1 ms
    task = asyncio.create_task(expire_tokens_forever(lambda: tokens, 10))
    try:
        deadline = time.monotonic() + 5
        while dead.token_id in store.tokens():
            assert time.monotonic() < deadline, "the expired token was not removed"
            await asyncio.sleep(0.01)
        assert list(store.tokens()) == [live.token_id]
    finally:
        task.cancel()
