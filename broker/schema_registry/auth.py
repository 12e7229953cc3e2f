"""HTTP basic authentication of the registry's requests (`schema.registry.authentication.method`
BASIC, Confluent's `authentication.method`) against the broker's SASL users: the SCRAM
credentials of the cluster (SCRAM-SHA-256 or -512) and the PLAIN users of its SASL listeners'
JAAS configurations. A password checked against a SCRAM credential is remembered for a minute
(the PBKDF2 of each request would cost milliseconds of the event loop)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from typing import TYPE_CHECKING, Any

from ..security.sasl import plain_users
from ..security.scram import MECHANISMS, credential_from_salted
from .errors import RegistryError

if TYPE_CHECKING:
    from ..cluster.metadata_store import MetadataStore

REMEMBER_S = 60.0


def unauthorized() -> RegistryError:
    return RegistryError(401, 401, "Unauthorized")


def basic_header(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def _credentials(header: str | None) -> tuple[str, str]:
    if not header or not header.lower().startswith("basic "):
        raise unauthorized()
    try:
        user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode(
        ).partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise unauthorized() from None
    if not sep:
        raise unauthorized()
    return user, password


class BasicAuth:
    def __init__(self, config: Any, metadata: MetadataStore) -> None:
        self.metadata = metadata
        self.plain: dict[str, str] = {}
        for li in config.listeners:
            opts = config.for_listener(li.name)
            if li.security_protocol.startswith("SASL_") and "PLAIN" in opts[
                    "sasl.enabled.mechanisms"]:
                self.plain.update(plain_users(opts["plain.sasl.jaas.config"]))
        self._checked: dict[tuple[str, bytes], float] = {}

    def check(self, header: str | None) -> str:
        """The user the Authorization header names, if its password is right; else 401."""
        user, password = _credentials(header)
        known = self.plain.get(user)
        if known is not None and hmac.compare_digest(known.encode(), password.encode()):
            return user
        key = (user, hashlib.sha256(password.encode()).digest())
        if self._checked.get(key, 0.0) > time.monotonic():
            return user
        if self._scram_matches(user, password):
            self._checked[key] = time.monotonic() + REMEMBER_S
            return user
        raise unauthorized()

    def _scram_matches(self, user: str, password: str) -> bool:
        for mechanism, algo in MECHANISMS.items():
            stored = self.metadata.scram_credential(user, mechanism)
            if stored is None:
                continue
            salted = hashlib.pbkdf2_hmac(algo, password.encode(), stored.salt, stored.iterations)
            mine = credential_from_salted(mechanism, salted, stored.salt, stored.iterations)
            if hmac.compare_digest(mine.stored_key, stored.stored_key):
                return True
        return False
