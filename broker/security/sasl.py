"""The SASL authentication of one connection on a SASL_PLAINTEXT or SASL_SSL listener, in the
states of Kafka's SaslServerAuthenticator: before it succeeds only ApiVersions, SaslHandshake
and then SaslAuthenticate are served (or, after SaslHandshake v0, raw SASL tokens); anything
else closes the connection. A failed authentication is answered with
SASL_AUTHENTICATION_FAILED and the connection closed after
connection.failed.authentication.delay.ms.

Re-authentication (KIP-368): when `connections.max.reauth.ms` (per mechanism:
`listener.name.<listener>.<mechanism>.connections.max.reauth.ms`) is positive, or the credential
expires (an OAUTHBEARER token), SaslAuthenticate v1+ tells the client its session lifetime. The
client re-authenticates on the same connection (SaslHandshake and SaslAuthenticate again, same
mechanism, same principal, at most once a second); a connection whose session has expired is
closed when its next request other than that arrives (Kafka's
KafkaChannel.serverAuthenticationSessionExpired).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.framing import API_VERSIONS_KEY

from .. import metrics
from ..context import KafkaPrincipal
from .oauthbearer import MECHANISM as OAUTHBEARER
from .oauthbearer import OAuthBearerError, OAuthBearerServer, Validator, unsecured_validator
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import CredentialLookup, ScramError, ScramServer, TokenLookup

log = logging.getLogger(__name__)

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, OAUTHBEARER)
# Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
MIN_REAUTH_INTERVAL_S = 1.0

_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s";]+))')


def jaas_options(jaas_config: str | None) -> dict[str, str]:
    """The `name="value"` (or `name=value`) options of a JAAS configuration entry."""
    if not jaas_config:
        return {}
    return {k: (q.replace('\\"', '"').replace("\\\\", "\\") if q or not bare else bare)
            for k, q, bare in _JAAS_OPTION.findall(jaas_config)}


def plain_users(jaas_config: str | None) -> dict[str, str]:
    """The `user_<name>="<password>"` options of a PlainLoginModule JAAS configuration."""
    return {k[len("user_"):]: v for k, v in jaas_options(jaas_config).items()
            if k.startswith("user_")}


@dataclass(frozen=True)
class SaslConfig:
    """One SASL listener's settings."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]
    scram: CredentialLookup
    failed_delay_ms: int
    max_receive_size: int = 524288  # sasl.server.max.receive.size: before authentication
    # connections.max.reauth.ms per mechanism (0: no re-authentication asked for)
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    # OAUTHBEARER: the token validator and its JAAS options
    oauth_validator: Validator = unsecured_validator
    oauth_options: Mapping[str, str] = field(default_factory=dict)
    # SCRAM logins with a delegation token (`tokenauth=true`); None: refused
    tokens: TokenLookup | None = None


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
    """Per connection: the handshake, then the mechanism's exchange; once complete, possibly
    a re-authentication (the same states again)."""

    def __init__(self, config: SaslConfig, peer: str) -> None:
        self.config = config
        self.peer = peer
        self.state = "handshake"  # -> authenticate -> complete | failed
        self.raw_tokens = False  # after SaslHandshake v0: tokens come without Kafka headers
        self.mechanism: str | None = None
        self._server: PlainServer | ScramServer | OAuthBearerServer | None = None
        self.principal: KafkaPrincipal | None = None
        self.failure: str | None = None
        # KIP-368: when the session ends (time.monotonic()), None: never
        self.expires_at: float | None = None
        self._reauth_started: float | None = None  # the last re-authentication's start
        self._previous: tuple[str, KafkaPrincipal] | None = None  # while re-authenticating
        self._bad_mechanism: str | None = None

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    @property
    def failed(self) -> bool:
        return self.state == "failed"

    @property
    def token_authenticated(self) -> bool:
        """Did the client log in with a delegation token (Kafka's
        KafkaPrincipal.tokenAuthenticated)? Such a client may not create, renew or expire
        tokens."""
        return self.complete and isinstance(self._server, ScramServer) \
            and self._server.token_authenticated

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    def allows(self, api_key: int) -> bool:
        """May this request be served now (before authentication completed)?"""
        if self.state == "handshake":
            if self.reauthenticating:  # Kafka processes the re-authentication's handshake only
                return api_key == SASL_HANDSHAKE_KEY
            return api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY)
        if self.state == "authenticate":
            return api_key == SASL_AUTHENTICATE_KEY
        return False

    def expired(self, now: float | None = None) -> bool:
        """Has the authenticated session outlived its lifetime?"""
        if self.expires_at is None:
            return False
        return (time.monotonic() if now is None else now) > self.expires_at

    def begin_reauthentication(self, now: float | None = None) -> bool:
        """A SaslHandshake on an authenticated connection (Kafka's
        KafkaChannel.maybeBeginServerReauthentication): it starts a re-authentication when
        the session has a lifetime and the last one started at least a second ago; else it
        is an ordinary request (ILLEGAL_SASL_STATE)."""
        if not self.complete or self.expires_at is None or self.mechanism is None \
                or self.principal is None:
            return False
        now = time.monotonic() if now is None else now
        if self._reauth_started is not None and now - self._reauth_started < MIN_REAUTH_INTERVAL_S:
            return False
        self._reauth_started = now
        self._previous = (self.mechanism, self.principal)
        self.state = "handshake"
        self._server = None
        log.debug("%s begins re-authentication (%s)", self.peer, self.mechanism)
        return True

    def handshake(self, mechanism: str, version: int) -> dict[str, Any]:
        enabled = list(self.config.mechanisms)
        if mechanism not in enabled:
            self.state = "failed"
            self.failure = f"Unsupported SASL mechanism {mechanism}"
            self._count(succeeded=False)
            return {"error_code": ErrorCode.unsupported_sasl_mechanism, "mechanisms": enabled}
        self.raw_tokens = version == 0
        self.state = "authenticate"
        if self._previous is not None and self._previous[0] != mechanism:
            # Kafka answers the handshake, then fails the next token without an answer.
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not "
                                   "supported for re-authentication of mechanism "
                                   f"'{self._previous[0]}'")
            return {"error_code": ErrorCode.none, "mechanisms": enabled}
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainServer(self.config.plain_users)
        elif mechanism == OAUTHBEARER:
            self._server = OAuthBearerServer(self.config.oauth_validator,
                                             self.config.oauth_options)
        else:
            self._server = ScramServer(mechanism, self.config.scram, self.config.tokens)
        return {"error_code": ErrorCode.none, "mechanisms": enabled}

    async def evaluate(self, token: bytes) -> bytes:
        """The mechanism's answer to a client token; AuthenticationFailed when it fails."""
        if self._bad_mechanism is not None:
            self._fail(self._bad_mechanism)
            raise AuthenticationFailed(self._bad_mechanism)
        assert self._server is not None and self.mechanism is not None
        what = "re-authentication" if self.reauthenticating else "authentication"
        try:
            if isinstance(self._server, OAuthBearerServer):
                answer = await self._server.evaluate(token)
            else:
                answer = self._server.evaluate(token)
        except AuthenticationFailed as exc:
            self._fail(str(exc))
            raise
        except (ScramError, OAuthBearerError) as exc:
            log.info("Failed %s with %s (%s: %s)", what, self.peer, self.mechanism, exc)
            # Kafka names neither the user nor the reason to the client.
            message = (f"Authentication failed during {what} due to invalid "
                       f"credentials with SASL mechanism {self.mechanism}")
            self._fail(message, logged=True)
            raise AuthenticationFailed(message) from None
        if self._server.complete:
            principal = KafkaPrincipal("User", self._server.username or "")
            if self._previous is not None and self._previous[1] != principal:
                old = self._previous[1]
                message = (f"Cannot change principals during re-authentication from "
                           f"{old.principal_type}.{old.name}: "
                           f"{principal.principal_type}.{principal.name}")
                self._fail(message)
                raise AuthenticationFailed(message)
            self.state = "complete"
            self.principal = principal
            self._count(succeeded=True)
            log.info("SASL client %s on listener %s %s as %s (%s%s)", self.peer,
                     self.config.listener,
                     "re-authenticated" if self.reauthenticating else "authenticated",
                     self.principal, self.mechanism,
                     ", delegation token" if self.token_authenticated else "")
            self._previous = None
        return answer

    def session_lifetime_ms(self) -> int:
        """Once complete: the session's lifetime (Kafka's
        calcCompletionTimesAndReturnSessionLifetimeMs), which also sets when it expires; 0:
        no expiry."""
        assert self.mechanism is not None
        credential_expiry = getattr(self._server, "lifetime_ms", None)
        max_reauth = self.config.max_reauth_ms.get(self.mechanism, 0)
        now_ms = int(time.time() * 1000)
        if credential_expiry is None and max_reauth <= 0:
            self.expires_at = None
            return 0
        if credential_expiry is None:
            lifetime = max_reauth
        elif max_reauth <= 0:
            lifetime = credential_expiry - now_ms
        else:
            lifetime = min(credential_expiry - now_ms, max_reauth)
        lifetime = max(0, lifetime)
        self.expires_at = time.monotonic() + lifetime / 1000
        log.debug("session of %s (%s) expires in %d ms", self.peer, self.principal, lifetime)
        return lifetime

    async def authenticate(self, token: bytes, version: int) -> dict[str, Any] | None:
        """A SaslAuthenticate request's answer; None: fail without one (Kafka's
        REAUTH_BAD_MECHANISM state, a re-authentication asking for another mechanism)."""
        if self._bad_mechanism is not None:
            self._fail(self._bad_mechanism)
            return None
        try:
            answer = await self.evaluate(token)
        except AuthenticationFailed as exc:
            return {"error_code": ErrorCode.sasl_authentication_failed,
                    "error_message": str(exc), "auth_bytes": b"", "session_lifetime": 0}
        lifetime = self.session_lifetime_ms() if self.complete else 0
        return {"error_code": ErrorCode.none, "error_message": None, "auth_bytes": answer,
                "session_lifetime": lifetime}

    def _fail(self, message: str, logged: bool = False) -> None:
        self.state = "failed"
        self.failure = message
        self._count(succeeded=False)
        if not logged:
            log.info("Failed authentication with %s (%s)", self.peer, message)

    def _count(self, succeeded: bool) -> None:
        """Kafka's successful-/failed-(re)authentication-total of the listener."""
        metrics.authentication(self.config.listener, succeeded, self.reauthenticating)
