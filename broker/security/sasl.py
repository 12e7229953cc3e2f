"""The SASL authentication of one connection on a SASL_PLAINTEXT or SASL_SSL listener, in the
states of Kafka's SaslServerAuthenticator: before it succeeds only ApiVersions, SaslHandshake
and then SaslAuthenticate are served (or, after SaslHandshake v0, raw SASL tokens); anything
else closes the connection. A failed authentication is answered with
SASL_AUTHENTICATION_FAILED and the connection closed after
connection.failed.authentication.delay.ms.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from protocol.errors import ErrorCode, KafkaError
from protocol.framing import API_VERSIONS_KEY

from ..context import KafkaPrincipal
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import CredentialLookup, ScramError, ScramServer

log = logging.getLogger(__name__)

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)

_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def plain_users(jaas_config: str | None) -> dict[str, str]:
    """The `user_<name>="<password>"` options of a PlainLoginModule JAAS configuration."""
    if not jaas_config:
        return {}
    return {k[len("user_"):]: v.replace('\\"', '"').replace("\\\\", "\\")
            for k, v in _JAAS_OPTION.findall(jaas_config) if k.startswith("user_")}


@dataclass(frozen=True)
class SaslConfig:
    """One SASL listener's settings."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]
    scram: CredentialLookup
    failed_delay_ms: int
    max_receive_size: int = 524288  # sasl.server.max.receive.size: before authentication


class AuthenticationFailed(KafkaError):
    """The client failed authentication: answer with this message, then close."""

    error_code = ErrorCode.sasl_authentication_failed


class PlainServer:
    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        # RFC 4616: [authzid] NUL authcid NUL passwd (Kafka's PlainSaslServer).
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got "
                                       f"{len(parts)}")
        authzid, username, password = parts
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or expected != password:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        self.username = username
        self.complete = True
        return b""


class SaslSession:
    """Per connection: the handshake, then the mechanism's exchange."""

    def __init__(self, config: SaslConfig, peer: str) -> None:
        self.config = config
        self.peer = peer
        self.state = "handshake"  # -> authenticate -> complete | failed
        self.raw_tokens = False  # after SaslHandshake v0: tokens come without Kafka headers
        self.mechanism: str | None = None
        self._server: PlainServer | ScramServer | None = None
        self.principal: KafkaPrincipal | None = None
        self.failure: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    @property
    def failed(self) -> bool:
        return self.state == "failed"

    def allows(self, api_key: int) -> bool:
        """May this request be served now (before authentication completed)?"""
        if self.state == "handshake":
            return api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY)
        if self.state == "authenticate":
            return api_key == SASL_AUTHENTICATE_KEY
        return False

    def handshake(self, mechanism: str, version: int) -> dict[str, Any]:
        enabled = list(self.config.mechanisms)
        if mechanism not in enabled:
            self.state = "failed"
            self.failure = f"Unsupported SASL mechanism {mechanism}"
            return {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": enabled}
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainServer(self.config.plain_users)
        else:
            self._server = ScramServer(mechanism, self.config.scram)
        self.state = "authenticate"
        self.raw_tokens = version == 0
        return {"error_code": ErrorCode.none, "mechanisms": enabled}

    def evaluate(self, token: bytes) -> bytes:
        """The mechanism's answer to a client token; AuthenticationFailed when it fails."""
        assert self._server is not None and self.mechanism is not None
        try:
            answer = self._server.evaluate(token)
        except AuthenticationFailed as exc:
            self._fail(str(exc))
            raise
        except ScramError as exc:
            log.info("Failed authentication with %s (%s: %s)", self.peer, self.mechanism, exc)
            # Kafka names neither the user nor the reason to the client.
            message = ("Authentication failed during authentication due to invalid "
                       f"credentials with SASL mechanism {self.mechanism}")
            self._fail(message, logged=True)
            raise AuthenticationFailed(message) from None
        if self._server.complete:
            self.state = "complete"
            self.principal = KafkaPrincipal("User", self._server.username or "")
            log.info("SASL client %s on listener %s authenticated as %s (%s)", self.peer,
                     self.config.listener, self.principal, self.mechanism)
        return answer

    def authenticate(self, token: bytes, version: int) -> dict[str, Any]:
        """A SaslAuthenticate request's answer."""
        try:
            answer = self.evaluate(token)
        except AuthenticationFailed as exc:
            return {"error_code": ErrorCode.sasl_authentication_failed,
                    "error_message": str(exc), "auth_bytes": b"", "session_lifetime": 0}
        return {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": answer,
                "session_lifetime": 0}

    def _fail(self, message: str, logged: bool = False) -> None:
        self.state = "failed"
        self.failure = message
        if not logged:
            log.info("Failed authentication with %s (%s)", self.peer, message)
