"""Delegation tokens (KIP-48, KIP-373) as Kafka's DelegationTokenManager keeps them.

A token is its TokenInformation (id, owner, requester, renewers, issue/expiry/max timestamps),
stored by the metadata store (ZooKeeper's /delegation_token/tokens/<id> in Kafka 3.x's JSON, or
the single broker's metadata file), and its HMAC: HMAC-SHA512 of the token id keyed with
`delegation.token.secret.key`, never stored but derived by every broker that has the key. A
client logs in with SCRAM and the `tokenauth=true` extension, the token id as user name and the
base64 HMAC as password; the broker derives the SCRAM credential from the HMAC as Kafka's
DelegationTokenCache does (ScramFormatter at the mechanism's minimum iterations), and the
connection's principal is the token's owner.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol
from urllib.parse import quote, unquote

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.uuids import random_kafka_uuid_string

from ..context import KafkaPrincipal
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import MIN_ITERATIONS, ScramCredential, credential_from_salted

log = logging.getLogger(__name__)

ZK_VERSION = 3  # DelegationTokenManagerZk.CurrentVersion


@dataclass(frozen=True, slots=True)
class TokenInformation:
    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Kafka's TokenInformation.ownerOrRenewer: who may renew, expire and see the token."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms

    def to_json(self) -> bytes:
        """Kafka 3.x's znode (DelegationTokenManagerZk.toJsonCompatibleMap): principals as
        sanitized `Type:name` strings."""
        return json.dumps({
            "version": ZK_VERSION,
            "owner": _sanitize(str(self.owner)),
            "tokenRequester": _sanitize(str(self.requester)),
            "renewers": [_sanitize(str(r)) for r in self.renewers],
            "issueTimestamp": self.issue_ms,
            "maxTimestamp": self.max_ms,
            "expiryTimestamp": self.expiry_ms,
            "tokenId": self.token_id,
        }, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> TokenInformation:
        """ValueError (or KeyError) when it is not a token's znode. Versions before 3 have no
        requester: the owner requested it."""
        doc = json.loads(data)
        owner = parse_principal(unquote(doc["owner"]))
        requester = doc.get("tokenRequester")
        return cls(str(doc["tokenId"]), owner,
                   parse_principal(unquote(requester)) if requester else owner,
                   tuple(parse_principal(unquote(r)) for r in doc.get("renewers", [])),
                   int(doc["issueTimestamp"]), int(doc["maxTimestamp"]),
                   int(doc["expiryTimestamp"]))


def _sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize (URL encoding, '*' and '~' escaped too)."""
    return quote(name, safe="").replace("~", "%7E")


def parse_principal(text: str) -> KafkaPrincipal:
    """`Type:name` (Kafka's SecurityUtils.parseKafkaPrincipal)."""
    kind, sep, name = text.partition(":")
    if not sep or not kind:
        raise ValueError(f"not a principal: {text!r}")
    return KafkaPrincipal(kind, name)


class TokenStore(Protocol):
    """Where a metadata store keeps the cluster's tokens: every broker's view, kept current."""

    def tokens(self) -> Mapping[str, TokenInformation]: ...
    async def put_token(self, info: TokenInformation) -> None: ...
    async def remove_token(self, token_id: str) -> None: ...


class LocalTokens:
    """The tokens of a single broker's metadata store: `save` writes the store's file."""

    def __init__(self, save: Callable[[], None]) -> None:
        self.current: dict[str, TokenInformation] = {}
        self._save = save

    def tokens(self) -> Mapping[str, TokenInformation]:
        return self.current

    async def put_token(self, info: TokenInformation) -> None:
        self.current[info.token_id] = info
        self._save()

    async def remove_token(self, token_id: str) -> None:
        if self.current.pop(token_id, None) is not None:
            self._save()

    def load(self, docs: Iterable[str]) -> None:
        for text in docs:
            info = TokenInformation.from_json(text.encode())
            self.current[info.token_id] = info

    def doc(self) -> list[str]:
        return [info.to_json().decode() for info in self.current.values()]


class TokenError(KafkaError):
    """A token request refused with a Kafka error code."""


def secret_key(config: Any) -> bytes | None:
    """The key tokens are signed with; None (tokens disabled) when unset or empty, as Kafka's
    tokenAuthEnabled."""
    value = config["delegation.token.secret.key"] or config["delegation.token.master.key"]
    return str(value).encode() if value else None


def token_hmac(token_id: str, key: bytes) -> bytes:
    """DelegationTokenManager.createHmac: HMAC-SHA512 of the token id."""
    return hmac.digest(key, token_id.encode(), "sha512")


def scram_credential(token_hmac_b64: str, mechanism: str) -> ScramCredential:
    """The token's SCRAM credential for `mechanism`: its base64 HMAC as the password, a fresh
    salt, the mechanism's minimum iterations (DelegationTokenManager.prepareScramCredentials)."""
    salt = os.urandom(32)
    salted = hashlib.pbkdf2_hmac(SCRAM_MECHANISMS[mechanism], token_hmac_b64.encode(), salt,
                                 MIN_ITERATIONS)
    return credential_from_salted(mechanism, salted, salt, MIN_ITERATIONS)


class TokenManager:
    """The token lifecycle of Kafka's DelegationTokenManager over a store's tokens, with the
    broker's delegation.token.* configuration."""

    def __init__(self, config: Any, store: TokenStore) -> None:
        self._key = secret_key(config)
        self._max_lifetime = int(config["delegation.token.max.lifetime.ms"])
        self._renew_time = int(config["delegation.token.expiry.time.ms"])
        self._store = store

    @property
    def enabled(self) -> bool:
        return self._key is not None

    def _require_key(self) -> bytes:
        if self._key is None:
            raise TokenError("Delegation Token authentication is disabled",
                             error_code=ErrorCode.delegation_token_auth_disabled)
        return self._key

    def hmac_of(self, info: TokenInformation) -> bytes:
        return token_hmac(info.token_id, self._require_key())

    async def create(self, owner: KafkaPrincipal, requester: KafkaPrincipal,
                     renewers: tuple[KafkaPrincipal, ...], max_lifetime_ms: int,
                     now_ms: int) -> tuple[TokenInformation, bytes]:
        key = self._require_key()
        token_id = random_kafka_uuid_string()
        lifetime = (self._max_lifetime if max_lifetime_ms <= 0
                    else min(max_lifetime_ms, self._max_lifetime))
        max_ms = now_ms + lifetime
        info = TokenInformation(token_id, owner, requester, renewers, now_ms, max_ms,
                                min(max_ms, now_ms + self._renew_time))
        await self._store.put_token(info)
        log.info("Created a delegation token: %s for owner: %s", token_id, owner)
        return info, token_hmac(token_id, key)

    def _renewable(self, principal: KafkaPrincipal, hmac_bytes: bytes,
                   now_ms: int) -> TokenInformation:
        """The token with this HMAC that `principal` may renew or expire now."""
        key = self._require_key()
        info = next((t for t in self._store.tokens().values()
                     if hmac.compare_digest(token_hmac(t.token_id, key), hmac_bytes)), None)
        if info is None:
            raise TokenError("Delegation token not found",
                             error_code=ErrorCode.delegation_token_not_found)
        if not info.owner_or_renewer(principal):
            raise TokenError("Delegation token owner mismatch",
                             error_code=ErrorCode.delegation_token_owner_mismatch)
        if info.expired(now_ms):
            raise TokenError("Delegation token is expired",
                             error_code=ErrorCode.delegation_token_expired)
        return info

    async def renew(self, principal: KafkaPrincipal, hmac_bytes: bytes, period_ms: int,
                    now_ms: int) -> int:
        """The new expiry: now + the period (negative: expiry.time.ms), capped by the max."""
        info = self._renewable(principal, hmac_bytes, now_ms)
        period = self._renew_time if period_ms < 0 else period_ms
        expiry = min(info.max_ms, now_ms + period)
        await self._store.put_token(replace(info, expiry_ms=expiry))
        return expiry

    async def expire(self, principal: KafkaPrincipal, hmac_bytes: bytes, period_ms: int,
                     now_ms: int) -> int:
        """A negative period removes the token now; else it expires after it (capped)."""
        info = self._renewable(principal, hmac_bytes, now_ms)
        if period_ms < 0:
            await self._store.remove_token(info.token_id)
            log.info("Token expired for token: %s for owner: %s", info.token_id, info.owner)
            return now_ms
        expiry = min(info.max_ms, now_ms + period_ms)
        await self._store.put_token(replace(info, expiry_ms=expiry))
        return expiry

    async def remove_expired(self, now_ms: int) -> list[str]:
        """DelegationTokenManager.expireTokens: drop every token past its expiry."""
        gone = [t.token_id for t in list(self._store.tokens().values()) if t.expired(now_ms)]
        for token_id in gone:
            await self._store.remove_token(token_id)
            log.info("Delegation token expired for token: %s", token_id)
        return gone

    def login(self, token_id: str, mechanism: str,
              now_ms: int) -> tuple[ScramCredential, str, int] | None:
        """A SCRAM login with the token (scram.TokenLookup): its credential, its owner's name
        and its expiry; None when tokens are disabled, the token is unknown or it has expired
        (an expired token may not be removed yet)."""
        info = self._store.tokens().get(token_id)
        if info is None or self._key is None or info.expired(now_ms):
            return None
        password = base64.b64encode(token_hmac(token_id, self._key)).decode()
        return scram_credential(password, mechanism), info.owner.name, info.expiry_ms


async def expire_tokens_forever(manager: Callable[[], TokenManager], interval_ms: int) -> None:
    """Every `interval_ms` (delegation.token.expiry.check.interval.ms) remove the expired
    tokens, as each Kafka broker's delete-expired-tokens task does."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        tokens = manager()
        if not tokens.enabled:
            continue
        try:
            await tokens.remove_expired(int(time.time() * 1000))
        except Exception:  # a store that fails now may not next time
            log.exception("removing the expired delegation tokens failed")
