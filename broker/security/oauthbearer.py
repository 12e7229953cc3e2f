"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer does it.

The client's first message is `n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[key=value\\x01]...
\\x01`. The token is handed to the listener's validator:

* by default Kafka's unsecured-JWT validator (OAuthBearerUnsecuredValidatorCallbackHandler):
  a JWS with `"alg":"none"` and no signature, the principal from the `sub` claim (JAAS option
  `unsecuredValidatorPrincipalClaimName`), a required `exp` claim checked against the clock
  with `unsecuredValidatorAllowableClockSkewMs`, `iat` if present not in the future and before
  `exp`, and `unsecuredValidatorRequiredScope` (space separated) all in the `scope` claim
  (`unsecuredValidatorScopeClaimName`). The options come from
  `listener.name.<listener>.oauthbearer.sasl.jaas.config`. It trusts any token: for tests and
  development only, as in Kafka.
* or a Python callable named by `listener.name.<listener>.oauthbearer.sasl.server.callback
  .handler.class` (or `sasl.server.callback.handler.class`) as `package.module:callable`,
  called as `callable(token, options)` (options: the JAAS options as a dict) and returning an
  `OAuthBearerToken` (or a `(principal, expiry_ms)` pair), or an awaitable of one; it raises
  `OAuthBearerValidationError` to refuse the token. It runs on the broker's event loop: it
  must not block (fetch signing keys ahead of time, or return an awaitable).

A refused token is answered with the JSON error `{"status":"invalid_token"}` (RFC 7628
3.2.2); the client then sends `\\x01` and gets SASL_AUTHENTICATION_FAILED with that JSON as
the message, and the connection is closed.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import inspect
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MECHANISM = "OAUTHBEARER"

_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x7f](?<![=,])|=2C|=3D)+"
_KVPAIRS = rf"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+{_SEP})*"
_INITIAL = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}(?P<kvpairs>{_KVPAIRS}){_SEP}",
                      re.DOTALL)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


class OAuthBearerError(KafkaError):
    """The exchange is malformed or the validator failed: Kafka answers with its generic
    message, not this one."""

    error_code = ErrorCode.sasl_authentication_failed


class OAuthBearerValidationError(Exception):
    """A validator refuses the token: the client is answered with RFC 7628's JSON error
    (`status`, and `scope` / `openid-configuration` when given)."""

    def __init__(self, message: str, status: str = "invalid_token", scope: str | None = None,
                 openid_configuration: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration


@dataclass(frozen=True)
class OAuthBearerToken:
    """A validated token (Kafka's OAuthBearerToken): whose it is and until when (ms since the
    epoch) it is valid."""

    value: str
    principal_name: str
    lifetime_ms: int
    scope: frozenset[str] = frozenset()
    start_time_ms: int | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)


ValidatorResult = OAuthBearerToken | tuple[str, int]
Validator = Callable[[str, Mapping[str, str]],
                     ValidatorResult | Awaitable[ValidatorResult]]


def load_validator(spec: str) -> Validator:
    """`package.module:callable` (or `package.module.callable`); ValueError if it cannot be
    loaded."""
    module_name, sep, attr = spec.strip().partition(":")
    if not sep:
        module_name, _, attr = spec.strip().rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"expected package.module:callable, got {spec!r}")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot load {spec!r}: {exc}") from None
    if not callable(target):
        raise ValueError(f"{spec!r} is not callable")
    validator: Validator = target
    return validator


# ---- Kafka's unsecured JWS validator ------------------------------------------------------------
def _b64_json(part: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(part.replace("-", "+").replace("_", "/") + "=" * (-len(part) % 4),
                               validate=True)
    except (binascii.Error, ValueError):
        raise OAuthBearerValidationError("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise OAuthBearerValidationError("malformed JSON") from None
    if not isinstance(value, dict):
        raise OAuthBearerValidationError("malformed JSON")
    return value


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OAuthBearerValidationError(f"The '{name}' claim was not of type Number: "
                                         f"{type(value).__name__}")
    return float(value)


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if isinstance(value, str):  # one scope value (Kafka does not split a string claim)
        return frozenset({value.strip()}) if value.strip() else frozenset()
    if isinstance(value, list):
        return frozenset(str(v).strip() for v in value if str(v).strip())
    if value is None:
        return frozenset()
    raise OAuthBearerValidationError(f"The '{name}' claim was not of type List: "
                                     f"{type(value).__name__}")


def unsecured_validator(token: str, options: Mapping[str, str],
                        now_ms: int | None = None) -> OAuthBearerToken:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler."""
    principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() or "sub"
    scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip() or "scope"
    required = (options.get("unsecuredValidatorRequiredScope") or "").split()
    skew_text = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip()
    try:
        skew = int(skew_text) if skew_text else 0
    except ValueError:
        skew = -1
    if skew < 0:
        raise OAuthBearerError(f"invalid unsecuredValidatorAllowableClockSkewMs {skew_text!r}")
    if ".." in token:
        raise OAuthBearerValidationError("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise OAuthBearerValidationError("Unsecured JWS compact serializations must have 3 "
                                         "dot-separated Base64URL-encoded values")
    header, claims = _b64_json(parts[0]), _b64_json(parts[1])
    if str(header.get("alg")) != "none":
        raise OAuthBearerValidationError("Unsecured JWS must have 'none' for an algorithm")
    if parts[2]:
        raise OAuthBearerValidationError("Unsecured JWS must not contain a digital signature")
    scope = _scope(claims, scope_claim)
    exp = _number(claims, "exp")
    if exp is None:
        raise OAuthBearerValidationError("No expiration time in JWT")
    principal = claims.get(principal_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise OAuthBearerValidationError(f"No principal name in JWT claim: {principal_claim}")
    iat = _number(claims, "iat")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if iat is not None and 1000 * iat > now + skew:
        raise OAuthBearerValidationError(f"The Issued At value ({iat:f} seconds) was after the "
                                         f"indicated time ({now} ms) plus allowable clock skew "
                                         f"({skew} ms)")
    if now - skew >= 1000 * exp:
        raise OAuthBearerValidationError(f"The indicated time ({now} ms) minus allowable clock "
                                         f"skew ({skew} ms) was on or after the Expiration Time "
                                         f"value ({exp:f} seconds)")
    if iat is not None and exp <= iat:
        raise OAuthBearerValidationError(f"The Expiration Time time ({exp:f} seconds) was not "
                                         f"after the Issued At time ({iat:f} seconds)")
    for element in required:
        if element not in scope:
            raise OAuthBearerValidationError(
                f"The provided scope ({sorted(scope)}) was missing a required scope "
                f"({element}).  All required scope elements: {required}",
                status="insufficient_scope", scope="[" + ", ".join(required) + "]")
    log.info("Successfully validated token with principal %s: %s", principal, claims)
    return OAuthBearerToken(token, principal, round(exp * 1000), scope,
                            round(iat * 1000) if iat is not None else None, claims)


def unsecured_token(options: Mapping[str, str], now_ms: int | None = None) -> str:
    """The token Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes from the JAAS options
    `unsecuredLoginStringClaim_<name>`, `unsecuredLoginNumberClaim_<name>`,
    `unsecuredLoginListClaim_<name>` and `unsecuredLoginLifetimeSeconds` (default 3600): what
    a broker presents when it logs in to another with OAUTHBEARER."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    claims: dict[str, Any] = {}
    for key, value in options.items():
        if key.startswith("unsecuredLoginStringClaim_"):
            claims[key[len("unsecuredLoginStringClaim_"):]] = value
        elif key.startswith("unsecuredLoginNumberClaim_"):
            number = float(value)
            claims[key[len("unsecuredLoginNumberClaim_"):]] = \
                int(number) if number.is_integer() else number
        elif key.startswith("unsecuredLoginListClaim_") and value:
            claims[key[len("unsecuredLoginListClaim_"):]] = [v for v in value[1:].split(value[0])
                                                             if v]
    claims.setdefault("sub", "")
    lifetime_s = int(options.get("unsecuredLoginLifetimeSeconds") or 3600)
    claims["iat"] = now / 1000
    claims["exp"] = now / 1000 + lifetime_s

    def b64(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{b64({'alg': 'none'})}.{b64(claims)}."


def client_initial_response(token: str, authzid: str = "") -> bytes:
    """The client's first message (OAuthBearerClientInitialResponse.toBytes)."""
    a = f"a={authzid}" if authzid else ""
    return f"n,{a},{_SEP}auth=Bearer {token}{_SEP}{_SEP}".encode()


def _json_error(exc: OAuthBearerValidationError) -> str:
    out = f'{{"status":"{exc.status}"'
    if exc.scope is not None:
        out += f', "scope":"{exc.scope}"'
    if exc.openid_configuration is not None:
        out += f', "openid-configuration":"{exc.openid_configuration}"'
    return out + "}"


class OAuthBearerServer:
    """One exchange: client-first -> empty answer (valid token) or JSON error; after the
    error the client's `\\x01` fails the authentication with that JSON as message."""

    def __init__(self, validator: Validator, options: Mapping[str, str]) -> None:
        self._validator = validator
        self._options = options
        self._error: str | None = None
        self.username: str | None = None
        self.lifetime_ms: int | None = None  # the token's expiry (ms since the epoch)
        self.complete = False

    async def evaluate(self, response: bytes) -> bytes:
        from .sasl import AuthenticationFailed

        if response == b"\x01" and self._error is not None:
            raise AuthenticationFailed(self._error)
        self._error = None
        token, authzid = self._parse(response)
        try:
            result: Any = self._validator(token, self._options)
            if inspect.isawaitable(result):
                result = await result
        except OAuthBearerValidationError as exc:
            log.debug("OAUTHBEARER token refused: %s", exc)
            self._error = _json_error(exc)
            return self._error.encode()
        except OAuthBearerError:
            raise
        except Exception as exc:  # the validator's own failure: Kafka's internal error
            log.warning("OAUTHBEARER validator failed: %r", exc)
            raise OAuthBearerError(f"Internal error on server: {exc!r}") from None
        if isinstance(result, tuple):
            principal, lifetime_ms = result
            result = OAuthBearerToken(token, str(principal), int(lifetime_ms))
        if not isinstance(result, OAuthBearerToken) or not result.principal_name:
            raise OAuthBearerError(f"the validator returned {result!r}, not a token")
        if authzid and authzid != result.principal_name:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({result.principal_name})")
        self.username = result.principal_name
        self.lifetime_ms = result.lifetime_ms
        self.complete = True
        return b""

    @staticmethod
    def _parse(response: bytes) -> tuple[str, str]:
        try:
            message = response.decode()
        except UnicodeDecodeError:
            raise OAuthBearerError("Invalid OAUTHBEARER client first message") from None
        m = _INITIAL.fullmatch(message)
        if m is None:
            raise OAuthBearerError("Invalid OAUTHBEARER client first message")
        pairs = dict(kv.split("=", 1) for kv in m.group("kvpairs").split(_SEP) if kv)
        auth = pairs.get("auth")
        if auth is None:
            raise OAuthBearerError("Invalid OAUTHBEARER client first message: 'auth' not "
                                   "specified")
        a = _AUTH.fullmatch(auth)
        if a is None:
            raise OAuthBearerError("Invalid OAUTHBEARER client first message: invalid 'auth' "
                                   "format")
        if a.group("scheme").lower() != "bearer":
            raise OAuthBearerError(f"Invalid scheme in OAUTHBEARER client first message: "
                                   f"{a.group('scheme')}")
        authzid = (m.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
        return a.group("token"), authzid
