"""The ZooKeeper metadata store's delegation tokens, laid out as Kafka 3.x keeps them:

    /delegation_token/tokens/<id>                {"version":3,"owner":"User%3Aalice",
                                                  "tokenRequester","renewers":[...],
                                                  "issueTimestamp","maxTimestamp",
                                                  "expiryTimestamp","tokenId"} (no HMAC: each
                                                  broker derives it from the secret key)
    /delegation_token/token_changes/token_change_<seq>   the token id that changed

Every broker follows /delegation_token/tokens with watches, so a token created on one broker
authenticates on every other at once; the change notifications are written for Kafka's brokers
(which follow those instead) during a migration, and purged after 15 minutes as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

from kazoo.exceptions import NoNodeError

from ...security.tokens import TokenInformation
from .common import ChildWatches, put_znode
from .session import ZkSession

log = logging.getLogger("samsa.broker.cluster.zk.store")

TOKENS = "/delegation_token/tokens"
TOKEN_CHANGES = "/delegation_token/token_changes"
NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000


def _parse(token_id: str, data: bytes) -> TokenInformation | None:
    try:
        return TokenInformation.from_json(data)
    except (ValueError, KeyError, TypeError):
        log.warning("ignoring unreadable %s/%s", TOKENS, token_id)
        return None


class ZkDelegationTokens:
    """The cluster's tokens, kept current by watches (the store's TokenStore)."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._zk = session.zk
        self._tokens: dict[str, TokenInformation] = {}
        self._children = ChildWatches(self._zk, TOKENS, session.call, _parse, self._set)

    def start(self) -> None:
        """(worker thread) Follow /delegation_token/tokens."""
        self._zk.ensure_path(TOKENS)
        self._zk.ensure_path(TOKEN_CHANGES)
        self._children.start()

    def _set(self, token_id: str, info: TokenInformation | None) -> None:
        if info is None:
            self._tokens.pop(token_id, None)
        else:
            self._tokens[token_id] = info

    def tokens(self) -> Mapping[str, TokenInformation]:
        return self._tokens

    async def put_token(self, info: TokenInformation) -> None:
        await asyncio.to_thread(self._write, info)
        self._set(info.token_id, info)

    async def remove_token(self, token_id: str) -> None:
        await asyncio.to_thread(self._delete, token_id)
        self._set(token_id, None)

    def _write(self, info: TokenInformation) -> None:
        put_znode(self._zk, f"{TOKENS}/{info.token_id}", info.to_json())
        self._notify(info.token_id)

    def _delete(self, token_id: str) -> None:
        try:
            self._zk.delete(f"{TOKENS}/{token_id}")
        except NoNodeError:
            return  # another broker's expiry check removed it first
        self._notify(token_id)

    def _notify(self, token_id: str) -> None:
        self._zk.create(f"{TOKEN_CHANGES}/token_change_", token_id.encode(), sequence=True,
                        makepath=True)
        self._purge_notifications()

    def _purge_notifications(self) -> None:
        """Drop notifications older than Kafka's 15 minutes (ZkNodeChangeNotificationListener's
        changeExpirationMs): every broker has read them by then."""
        cutoff_ms = time.time() * 1000 - NOTIFICATION_EXPIRY_MS
        for child in self._zk.get_children(TOKEN_CHANGES):
            path = f"{TOKEN_CHANGES}/{child}"
            try:
                if self._zk.exists(path).ctime < cutoff_ms:
                    self._zk.delete(path)
            except (NoNodeError, AttributeError):
                continue  # another broker purged it first
