"""Delegation tokens (38-41): create, renew, expire and describe as Kafka's KafkaApis and
DelegationTokenManager answer them, and a SCRAM login with `tokenauth=true`."""

from __future__ import annotations

import asyncio
import base64
import hmac
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from samsa.broker.context import ANONYMOUS, KafkaPrincipal
from samsa.broker.security.sasl import SaslConfig, SaslSession
from samsa.broker.security.scram import ScramClient
from samsa.broker.security.tokens import TokenManager
from samsa.protocol.errors import ErrorCode

from .harness import ADMIN, ALICE, Handlers

KEY = "token-secret"
BOB = KafkaPrincipal("User", "bob")
SASL = "SASL_PLAINTEXT"
SETTINGS = {"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
            "delegation.token.secret.key": KEY,
            "delegation.token.max.lifetime.ms": 3_600_000,
            "delegation.token.expiry.time.ms": 600_000}


@pytest.fixture
async def tokens(tmp_path: Path) -> AsyncIterator[Handlers]:
    h = await Handlers.open(tmp_path / "data", SETTINGS)
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def secured_tokens(tmp_path: Path) -> AsyncIterator[Handlers]:
    h = await Handlers.open(tmp_path / "data", SETTINGS, authorizer=True)
    try:
        yield h
    finally:
        await h.close()


async def _create(h, principal=ALICE, renewers=(), max_lifetime=-1, owner=None, **kw):
    body = {"renewers": [{"principal_type": r.principal_type, "principal_name": r.name}
                         for r in renewers], "max_lifetime": max_lifetime}
    if owner is not None:
        body |= {"owner_principal_type": owner.principal_type,
                 "owner_principal_name": owner.name}
    return await h.call("CreateDelegationToken", 3, body, principal=principal,
                        listener=kw.pop("listener", SASL), **kw)


async def _renew(h, token_hmac, period=-1, principal=ALICE):
    return await h.call("RenewDelegationToken", 2, {"hmac": token_hmac, "renew_period": period},
                        principal=principal, listener=SASL)


async def _expire(h, token_hmac, period=-1, principal=ALICE):
    return await h.call("ExpireDelegationToken", 2,
                        {"hmac": token_hmac, "expiry_time_period": period},
                        principal=principal, listener=SASL)


async def _describe(h, owners=None, principal=ALICE, version=3):
    r = await h.call("DescribeDelegationToken", version, {"owners": None if owners is None else [
        {"principal_type": o.principal_type, "principal_name": o.name} for o in owners]},
        principal=principal, listener=SASL)
    assert r.error_code == ErrorCode.none
    return {t.token_id: t for t in r.tokens}


def _ms(value) -> int:
    return round(value.timestamp() * 1000)


async def test_create_renew_expire_describe(tokens):
    created = await _create(tokens, renewers=[BOB])
    assert created.error_code == ErrorCode.none
    assert (created.principal_name, created.token_requester_principal_name) == ("alice", "alice")
    issue = _ms(created.issue_timestamp)
    assert _ms(created.expiry_timestamp) == issue + 600_000  # delegation.token.expiry.time.ms
    assert _ms(created.max_timestamp) == issue + 3_600_000  # delegation.token.max.lifetime.ms
    # the HMAC is HMAC-SHA512 of the token id with the secret key
    assert created.hmac == hmac.digest(KEY.encode(), created.token_id.encode(), "sha512")
    described = await _describe(tokens)
    assert list(described) == [created.token_id]
    token = described[created.token_id]
    assert token.hmac == created.hmac and token.expiry_timestamp == _ms(created.expiry_timestamp)
    assert [(r.principal_type, r.principal_name) for r in token.renewers] == [("User", "bob")]

    renewed = await _renew(tokens, created.hmac, 1_200_000, principal=BOB)  # a renewer
    assert renewed.error_code == ErrorCode.none
    assert _ms(renewed.expiry_timestamp) > _ms(created.expiry_timestamp)
    # a renewal never goes past the max lifetime
    capped = await _renew(tokens, created.hmac, 10 * 3_600_000)
    assert _ms(capped.expiry_timestamp) == _ms(created.max_timestamp)

    expired = await _expire(tokens, created.hmac)  # negative: now, and the token is gone
    assert expired.error_code == ErrorCode.none
    assert await _describe(tokens) == {}
    assert (await _renew(tokens, created.hmac)).error_code == ErrorCode.delegation_token_not_found


async def test_max_lifetime_asked_for_is_capped(tokens):
    short = await _create(tokens, max_lifetime=60_000)
    assert _ms(short.max_timestamp) - _ms(short.issue_timestamp) == 60_000
    assert short.expiry_timestamp == short.max_timestamp
    long = await _create(tokens, max_lifetime=100 * 3_600_000)
    assert _ms(long.max_timestamp) - _ms(long.issue_timestamp) == 3_600_000


async def test_owner_mismatch_and_expired(tokens):
    created = await _create(tokens)
    assert (await _renew(tokens, created.hmac, principal=BOB)).error_code == \
        ErrorCode.delegation_token_owner_mismatch
    assert (await _expire(tokens, created.hmac, principal=BOB)).error_code == \
        ErrorCode.delegation_token_owner_mismatch
    later = await _expire(tokens, created.hmac, 0)  # expires now, not removed yet
    assert later.error_code == ErrorCode.none
    await asyncio.sleep(0.01)
    assert (await _renew(tokens, created.hmac)).error_code == ErrorCode.delegation_token_expired
    assert (await _expire(tokens, created.hmac)).error_code == ErrorCode.delegation_token_expired
    # the expiry check removes it
    manager = TokenManager(tokens.broker.config, tokens.broker.store.delegation_tokens)
    assert await manager.remove_expired(_ms(later.expiry_timestamp) + 1) == [created.token_id]
    assert await _describe(tokens) == {}


async def test_refused_on_plaintext(tokens):
    r = await _create(tokens, listener="PLAINTEXT")
    assert (r.error_code, r.token_id) == (ErrorCode.delegation_token_request_not_allowed, "")
    for api in ("RenewDelegationToken", "ExpireDelegationToken", "DescribeDelegationToken"):
        body = {"owners": None} if api.startswith("Describe") else {"hmac": b"x"}
        r = await tokens.call(api, 2, body, principal=ALICE, listener="PLAINTEXT")
        assert r.error_code == ErrorCode.delegation_token_request_not_allowed, api


async def test_ssl_needs_a_client_certificate(tmp_path):
    """One-way SSL (an anonymous client) may not ask for tokens; a client certificate's
    principal may."""
    settings = SETTINGS | {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9094"}
    h = await Handlers.open(tmp_path / "data", settings)
    try:
        r = await _create(h, principal=ANONYMOUS, listener="SSL")
        assert r.error_code == ErrorCode.delegation_token_request_not_allowed
        cert = KafkaPrincipal("User", "CN=alice")
        assert (await _create(h, principal=cert, listener="SSL")).error_code == ErrorCode.none
    finally:
        await h.close()


async def test_auth_disabled_without_a_secret_key(tmp_path):
    settings = {k: v for k, v in SETTINGS.items() if k != "delegation.token.secret.key"}
    h = await Handlers.open(tmp_path / "data", settings)
    try:
        assert (await _create(h)).error_code == ErrorCode.delegation_token_auth_disabled
        assert (await _renew(h, b"x")).error_code == ErrorCode.delegation_token_auth_disabled
        assert (await _expire(h, b"x")).error_code == ErrorCode.delegation_token_auth_disabled
        r = await h.call("DescribeDelegationToken", 3, {"owners": None}, principal=ALICE,
                         listener=SASL)
        assert r.error_code == ErrorCode.delegation_token_auth_disabled
    finally:
        await h.close()


async def test_invalid_renewer_type(tokens):
    r = await tokens.call("CreateDelegationToken", 3, {
        "renewers": [{"principal_type": "Group", "principal_name": "ops"}],
        "max_lifetime": -1}, principal=ALICE, listener=SASL)
    assert r.error_code == ErrorCode.invalid_principal_type


async def test_create_for_another_owner_needs_create_tokens(secured_tokens):
    r = await _create(secured_tokens, principal=ALICE, owner=BOB)
    assert r.error_code == ErrorCode.delegation_token_authorization_failed
    assert (r.principal_name, r.token_requester_principal_name) == ("bob", "alice")
    r = await _create(secured_tokens, principal=ADMIN, owner=BOB)  # a super user may
    assert r.error_code == ErrorCode.none
    assert (r.principal_name, r.token_requester_principal_name) == ("bob", "admin")
    # the requester may renew what it created for bob (KIP-373)
    assert (await _renew(secured_tokens, r.hmac, principal=ADMIN)).error_code == ErrorCode.none


async def test_describe_shows_own_tokens_and_filters_by_owner(secured_tokens):
    alices = await _create(secured_tokens, principal=ALICE)
    bobs = await _create(secured_tokens, principal=BOB, renewers=[ALICE])
    admins = await _create(secured_tokens, principal=ADMIN)
    # without ACLs alice sees her own and those she renews; the super user sees all
    assert set(await _describe(secured_tokens)) == {alices.token_id, bobs.token_id}
    assert set(await _describe(secured_tokens, principal=ADMIN)) == {
        alices.token_id, bobs.token_id, admins.token_id}
    assert set(await _describe(secured_tokens, [BOB], principal=ADMIN)) == {bobs.token_id}
    assert await _describe(secured_tokens, [], principal=ADMIN) == {}  # no owner: no token
    # v1 has no requester
    assert set(await _describe(secured_tokens, [ALICE], version=1)) == {
        alices.token_id, bobs.token_id}


async def test_tokens_persist_in_the_single_brokers_metadata(tmp_path):
    h = await Handlers.open(tmp_path / "data", SETTINGS)
    try:
        created = await _create(h)
    finally:
        await h.close()
    h = await Handlers.open(tmp_path / "data", SETTINGS)
    try:
        assert list(await _describe(h)) == [created.token_id]
        assert (await _renew(h, created.hmac)).error_code == ErrorCode.none
    finally:
        await h.close()


def _token_client(token_id: str, token_hmac: bytes) -> ScramClient:
    """A SCRAM-SHA-512 client logging in with a token (the tokenauth=true extension)."""
    client = ScramClient("SCRAM-SHA-512", token_id, base64.b64encode(token_hmac).decode())
    client._client_first_bare += ",tokenauth=true"
    return client


async def _token_login(h, token_id: str, token_hmac: bytes) -> SaslSession:
    config = SaslConfig(SASL, ("SCRAM-SHA-512",), {}, scram=lambda user, mechanism: None,
                        failed_delay_ms=0, tokens=h.broker._token_login)
    session = SaslSession(config, "127.0.0.1:50000")
    client = _token_client(token_id, token_hmac)
    await h.call("SaslHandshake", 1, {"mechanism": "SCRAM-SHA-512"}, sasl=session)
    first = await h.call("SaslAuthenticate", 2, {"auth_bytes": client.first()}, sasl=session)
    if first.error_code != ErrorCode.none:
        return session
    final = await h.call("SaslAuthenticate", 2, {"auth_bytes": client.final(first.auth_bytes)},
                         sasl=session)
    if final.error_code == ErrorCode.none:
        client.verify(final.auth_bytes)
    return session


async def test_scram_login_with_a_token(tokens):
    created = await _create(tokens)
    session = await _token_login(tokens, created.token_id, created.hmac)
    assert session.complete and session.principal == ALICE  # the token's owner
    assert session.token_authenticated
    # KIP-368: the session ends when the token expires
    assert session.expires_at is not None
    # a token-authenticated client may not create, renew or expire tokens
    r = await tokens.call("CreateDelegationToken", 3, {"renewers": [], "max_lifetime": -1},
                          principal=ALICE, listener=SASL, sasl=session)
    assert r.error_code == ErrorCode.delegation_token_request_not_allowed
    # a wrong HMAC does not log in; neither does a token past its expiry, not yet removed
    assert not (await _token_login(tokens, created.token_id, b"wrong")).complete
    assert (await _expire(tokens, created.hmac, 0)).error_code == ErrorCode.none
    await asyncio.sleep(0.01)
    assert created.token_id in tokens.broker.store.delegation_tokens.tokens()
    assert (await _token_login(tokens, created.token_id, created.hmac)).failed


async def test_a_removed_token_no_longer_logs_in(tokens):
    created = await _create(tokens)
    assert (await _token_login(tokens, created.token_id, created.hmac)).complete
    assert (await _expire(tokens, created.hmac)).error_code == ErrorCode.none
    assert (await _token_login(tokens, created.token_id, created.hmac)).failed
