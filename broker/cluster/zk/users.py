"""The ZooKeeper metadata store's users: SCRAM credentials in /config/users/<user>."""

from __future__ import annotations

import asyncio
import json
import logging
from urllib.parse import unquote

from kazoo.exceptions import NoNodeError

from ...security.scram import MECHANISMS as SCRAM_MECHANISMS
from ...security.scram import ScramCredential
from .common import ChildWatches
from .common import dumps as _dumps
from .common import sanitize as _sanitize
from .session import ZkSession

# The store's own logger, as before the store was split in parts (samsa.log.loggers).
log = logging.getLogger("samsa.broker.cluster.zk.store")


def _parse(name: str, data: bytes) -> dict[str, str] | None:
    try:
        return {str(k): str(v) for k, v in json.loads(data)["config"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        log.warning("ignoring unreadable /config/users/%s", name)
        return None


class ZkUsers:
    """The users' configs (their SCRAM credentials, by mechanism), kept current by watches."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._zk = session.zk
        self._users: dict[str, dict[str, str]] = {}  # /config/users/<user> "config"s (SCRAM)
        self._children = ChildWatches(
            self._zk, "/config/users", session.call, _parse,
            lambda name, config: self._set_user(unquote(name), config))

    def start(self) -> None:
        """(worker thread) Follow /config/users."""
        self._children.start()

    def _set_user(self, name: str, config: dict[str, str] | None) -> None:
        if config:
            self._users[name] = config
        else:
            self._users.pop(name, None)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._users.get(user, {}).get(mechanism)
        try:
            return ScramCredential.from_config(text) if text else None
        except (ValueError, KeyError):
            log.warning("ignoring the unreadable %s credential of user %s", mechanism, user)
            return None

    def scram_users(self) -> dict[str, dict[str, str]]:
        return {u: {m: c for m, c in cfg.items() if m in SCRAM_MECHANISMS}
                for u, cfg in self._users.items()
                if any(m in SCRAM_MECHANISMS for m in cfg)}

    async def alter_scram_credentials(
        self, changes: list[tuple[str, str, ScramCredential | None]]
    ) -> None:
        """(user, mechanism, credential or None to delete), written as Kafka writes them:
        /config/users/<user> {"version":1,"config":{"SCRAM-SHA-512":"salt=...,..."}} and a
        /config/changes notification."""
        users = await asyncio.to_thread(self._alter_scram, changes)
        for user, config in users.items():
            self._set_user(user, config)

    def _alter_scram(
        self, changes: list[tuple[str, str, ScramCredential | None]]
    ) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for user in dict.fromkeys(u for u, _, _ in changes):
            path = f"/config/users/{_sanitize(user)}"  # Kafka's Sanitizer, as for quotas
            try:
                data, _ = self._zk.get(path)
                config = {str(k): str(v) for k, v in json.loads(data)["config"].items()}
            except NoNodeError:
                config = {}
            for u, mechanism, credential in changes:
                if u != user:
                    continue
                if credential is None:
                    config.pop(mechanism, None)
                else:
                    config[mechanism] = credential.to_config()
            doc = _dumps({"version": 1, "config": config})
            if self._zk.exists(path):
                self._zk.set(path, doc)
            else:
                self._zk.create(path, doc, makepath=True)
            self._zk.create("/config/changes/config_change_",
                            _dumps({"version": 2, "entity_path": f"users/{_sanitize(user)}"}),
                            sequence=True, makepath=True)
            out[user] = config
        return out
