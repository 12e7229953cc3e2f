"""Delegation tokens in ZooKeeper as Kafka 3.x keeps them: /delegation_token/tokens/<id> (its
JSON, no HMAC) with a notification in /delegation_token/token_changes; a token one broker
creates logs in on another (each derives the HMAC from the shared secret key), and once removed
it logs in nowhere."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import uuid

from samsa.broker.cluster.metadata_store import BrokerInfo
from samsa.broker.cluster.zk import tokens as zk_tokens
from samsa.broker.cluster.zk.store import ZkMetadataStore
from samsa.broker.context import KafkaPrincipal
from samsa.broker.security.scram import ScramError, ScramServer
from samsa.broker.security.tokens import TokenManager
from samsa.config.loader import load_config

ALICE, BOB = KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "bob")
CONFIG = load_config(None, {"delegation.token.secret.key": "shared"})


def _store(zookeeper, chroot: str, broker_id: int) -> ZkMetadataStore:
    info = BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id)
    return ZkMetadataStore(f"{zookeeper.connect_string}/{chroot}", info, session_timeout_ms=4000)


async def _until(check, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _logs_in(manager: TokenManager, token_id: str, token_hmac: bytes) -> bool:
    """A SCRAM-SHA-256 exchange with the token as the client does it (tokenauth=true)."""
    server = ScramServer("SCRAM-SHA-256", lambda u, m: None,
                         lambda t, m: manager.login(t, m, int(time.time() * 1000)))
    password = base64.b64encode(token_hmac).decode()
    bare = f"n={token_id},r=clientnonce,tokenauth=true"
    try:
        first = server.evaluate(f"n,,{bare}".encode()).decode()
    except ScramError:
        return False
    attrs = dict(p.split("=", 1) for p in first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]),
                                 int(attrs["i"]))
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{bare},{first},{without_proof}".encode()
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    try:
        server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    except ScramError:
        return False
    return server.complete and server.username == "alice"


async def test_a_token_is_shared_through_zookeeper(zookeeper, monkeypatch):
    chroot = f"c{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    await b.start()
    try:
        on_a = TokenManager(CONFIG, a.delegation_tokens)
        on_b = TokenManager(CONFIG, b.delegation_tokens)
        now = int(time.time() * 1000)
        info, token_hmac = await on_a.create(ALICE, ALICE, (BOB,), -1, now)
        znode = json.loads(a.session.zk.get(f"/delegation_token/tokens/{info.token_id}")[0])
        assert znode == {"version": 3, "owner": "User%3Aalice", "tokenRequester": "User%3Aalice",
                         "renewers": ["User%3Abob"], "issueTimestamp": now,
                         "maxTimestamp": info.max_ms, "expiryTimestamp": info.expiry_ms,
                         "tokenId": info.token_id}
        changes = a.session.zk.get_children("/delegation_token/token_changes")
        assert [a.session.zk.get(f"/delegation_token/token_changes/{c}")[0]
                for c in changes] == [info.token_id.encode()]

        await _until(lambda: info.token_id in b.delegation_tokens.tokens())
        assert b.delegation_tokens.tokens()[info.token_id] == info
        assert _logs_in(on_b, info.token_id, token_hmac)
        assert not _logs_in(on_b, info.token_id, b"not the hmac")

        expiry = await on_b.renew(BOB, token_hmac, 1000, now)  # a renewer, on the other broker
        await _until(lambda: a.delegation_tokens.tokens()[info.token_id].expiry_ms == expiry)

        # notifications older than 15 minutes are purged at the next write (here: all)
        monkeypatch.setattr(zk_tokens, "NOTIFICATION_EXPIRY_MS", 0)
        await on_a.expire(ALICE, token_hmac, -1, now)
        await _until(lambda: info.token_id not in b.delegation_tokens.tokens())
        assert not _logs_in(on_b, info.token_id, token_hmac)
        assert a.session.zk.get_children("/delegation_token/token_changes") == []
    finally:
        await a.close()
        await b.close()
