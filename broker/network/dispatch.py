"""Thin dispatch: decode the header and body with kio, call the API's handler with a
`RequestContext` (broker/context.py), encode the answer. What differs by API is data of its
registration (broker/network/policy.py): the quota kind its requests are charged as, and a raw
lane that reads its usual request and writes its answer without kio (Produce, issue 47)."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import struct
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

from samsa.protocol.codec import build, encode, reader, request_type, response_type
from samsa.protocol.encoder import encode_response
from samsa.protocol.errors import ErrorCode
from samsa.protocol.framing import (
    API_VERSIONS_KEY,
    FrameError,
    Region,
    frame_parts,
    peek_key_version,
    read_request_header,
    response_header,
)
from samsa.protocol.guard import MalformedRequest
from samsa.protocol.lenient import decode_request
from samsa.protocol.registry import ApiRegistry, ApiSpec
from samsa.storage.file_region import FileRegion

from .. import metrics
from ..context import BrokerServices, RequestContext
from ..security.sasl import SASL_HANDSHAKE_KEY, AuthenticationFailed, SaslSession
from .connection import Frame
from .policy import DEFAULT_POLICY, ApiPolicy, RawLane, Served, Written
from .quotas import ClientQuotas, Encoded, QuotaManager, RequestTime, TimedCoroutine
from .server import CloseConnection, ConnectionInfo, Response

log = logging.getLogger(__name__)

CHECK_ENCODER = os.environ.get("SAMSA_CHECK_ENCODER") == "1"


@dataclass(frozen=True, slots=True)
class Route:
    """An API's entry in the dispatcher's table: its spec and what its registration says."""

    spec: ApiSpec[RequestContext]
    quota: RequestTime | None  # None: exempt from client quotas
    raw: RawLane | None
    mutes_for_answer: bool  # muted for its answer's throttle_time (controller mutations)


class Dispatcher:
    def __init__(self, registry: ApiRegistry[RequestContext], services: BrokerServices,
                 policies: Mapping[int, ApiPolicy]) -> None:
        self.registry = registry
        self.services = services
        self._routes: dict[int, Route] = {}
        for spec in registry.all():
            policy = policies.get(spec.key, DEFAULT_POLICY)
            self._routes[spec.key] = Route(
                spec, policy.quota, policy.raw,
                policy.quota is not None and policy.quota.mutes_for_answer)
        # the APIs whose answers the socket layer writes at once (policy.answer_at_once)
        self.answer_at_once = frozenset(
            key for key, policy in policies.items() if policy.answer_at_once)

    async def __call__(self, raw: Frame, conn: ConnectionInfo) -> Response | None:
        auth = conn.authenticator
        if auth is not None and not auth.complete and auth.raw_tokens:
            return await self._raw_sasl_token(raw, conn, auth)
        api_key, version, correlation_id = peek_key_version(raw)
        route = self._routes.get(api_key)
        if route is None:
            raise CloseConnection(f"unknown api key {api_key}")
        spec = route.spec
        if auth is not None:
            _check_session(auth, api_key, spec.name, conn)
        if not spec.accepts(version):
            if api_key == API_VERSIONS_KEY:
                return _api_versions_unsupported(correlation_id, spec.max_version)
            raise CloseConnection(f"{spec.name} v{version} is not supported")
        req_type, req_flexible, read, resp_type, resp_flexible = _codec(api_key, version)
        quotas = self.services.quotas
        if quotas is not None and not quotas.active:
            quotas = None  # none configured: `active` is all client quotas cost
        lane = route.raw
        # the usual request of an API with a raw lane (Produce) is read without kio
        request = (lane.read(raw) if lane is not None and auth is None and quotas is None
                   else None)
        if request is not None:
            assert lane is not None
            if lane.serve is not None:  # its usual request served without a context
                started = time.perf_counter()
                served = self._serve(lane, request, version, spec.name, conn)
                if served is not None:
                    written: Written | None = None
                    result: dict[str, Any] | None = None
                    if isinstance(served, tuple):
                        written = served
                    else:
                        result = await self._guarded(served, spec.name, version, conn)
                    return self._answer(spec.name, version, correlation_id, resp_type,
                                        resp_flexible, started, lane, result, written)
            client_id = request.client_id
        else:
            client_id, request = _decode(raw, req_type, req_flexible, read, spec.name, version)
        ctx = RequestContext(
            api_key,
            version,
            correlation_id,
            client_id,
            conn.listener,
            conn.peer,
            int(time.time() * 1000),
            self.services,
            conn.principal,
            auth,
            conn.zero_copy,
        )
        started = time.perf_counter()
        # Client quotas (broker/network/quotas.py), as the API's quota kind says
        client: ClientQuotas | None = None
        kind = route.quota
        if (quotas is not None and kind is not None and (auth is None or auth.complete)
                and quotas.applies(conn.listener) and kind.holds(request)):
            client = quotas.for_client(conn.principal.name, client_id or "")
        timed: TimedCoroutine | None = None
        try:
            if client is not None and client.request is not None:
                timed = TimedCoroutine(spec.handler(ctx, request))
                result = await timed
            else:
                result = await spec.handler(ctx, request)
        except CloseConnection:
            raise
        except Exception:
            log.exception("%s v%d from %s failed", spec.name, version, conn.peer)
            result = {"error_code": ErrorCode.unknown_server_error}
            if not _has_top_level_error(resp_type):
                raise CloseConnection("internal error") from None
        metrics.record_request(spec.name, version, started)
        encoded: Encoded | None = None
        if client is not None:
            assert quotas is not None and kind is not None
            result, encoded, throttle = _throttle(quotas, kind, client, timed, len(raw),
                                                  result, resp_type)
            if throttle > 0:
                conn.throttle_ms = throttle
                log.debug("%s v%d from %s (client %s, %s) throttled for %d ms", spec.name,
                          version, conn.peer, client_id, conn.principal, throttle)
        if route.mutes_for_answer and result is not None:
            # the controller mutation quota's throttle (topic admin): the channel muted too
            conn.throttle_ms = max(conn.throttle_ms, result.get("throttle_time") or 0)
        if result is None:
            if auth is not None and auth.failed:  # a failure Kafka answers by closing
                raise CloseConnection(auth.failure or "authentication failed", None,
                                      auth.config.failed_delay_ms / 1000)
            return None
        if encoded is None:
            encoded = _encoded(lane, version, resp_type, result)
        body, error_codes = encoded
        metrics.count_errors(spec.name, error_codes)
        if CHECK_ENCODER:
            _check_encoder(resp_type, _read_regions(result),
                           b"".join(p if isinstance(p, (bytes, memoryview)) else _read(p)
                                    for p in body))
        framed = frame_parts([response_header(correlation_id, resp_flexible), *body])
        if auth is not None:
            return self._after_sasl_request(auth, conn, framed)
        return framed

    def _serve(self, lane: RawLane, request: Any, version: int, name: str,
               conn: ConnectionInfo) -> Served | None:
        """The lane's `serve` of a request it read, its failure handled as a handler's."""
        assert lane.serve is not None
        try:
            return lane.serve(self.services, request, version)
        except Exception as exc:
            raise _closing(exc, name, version, conn) from None

    @staticmethod
    async def _guarded(served: Awaitable[dict[str, Any] | None], name: str, version: int,
                       conn: ConnectionInfo) -> dict[str, Any] | None:
        try:
            return await served
        except Exception as exc:
            raise _closing(exc, name, version, conn) from None

    @staticmethod
    def _answer(name: str, version: int, correlation_id: int, resp_type: type,
                resp_flexible: bool, started: float, lane: RawLane,
                result: dict[str, Any] | None, written: Written | None) -> Response | None:
        """A served request's answer (a connection without SASL or client quotas): framed
        as the general path frames its handler's; the lane's writer or kio encodes `result`
        when the lane did not write it."""
        metrics.record_request(name, version, started)
        if written is not None:
            body, error_codes = [written[0]], written[1]
        elif result is None:
            return None
        else:
            body, error_codes = _encoded(lane, version, resp_type, result)
        if error_codes:  # (most answers have none: no call)
            metrics.count_errors(name, error_codes)
        if CHECK_ENCODER:
            if result is not None:
                _check_encoder(resp_type, result, b"".join(body))
            else:
                _check_written(resp_type, body[0])
        return frame_parts([response_header(correlation_id, resp_flexible), *body])

    def _after_sasl_request(self, auth: SaslSession, conn: ConnectionInfo,
                            framed: Response) -> Response:
        if auth.failed:
            raise CloseConnection(auth.failure or "authentication failed", framed,
                                  auth.config.failed_delay_ms / 1000)
        if auth.complete and auth.principal is not None:
            conn.principal = auth.principal
        return framed

    async def _raw_sasl_token(self, raw: Frame, conn: ConnectionInfo, auth: SaslSession
                              ) -> Response:
        """After SaslHandshake v0 the client sends the mechanism's tokens in bare size-prefixed
        frames and gets the answers so; a failure just closes the connection."""
        try:
            answer = await auth.evaluate(bytes(raw))
        except AuthenticationFailed as exc:
            raise CloseConnection(str(exc), None, auth.config.failed_delay_ms / 1000) from None
        if auth.complete and auth.principal is not None:
            auth.session_lifetime_ms()  # not sent, but the session expires all the same
            conn.principal = auth.principal
        return frame_parts([answer])


def _decode(raw: Frame, req_type: type, req_flexible: bool, read: Any, name: str,
            version: int) -> tuple[str | None, Any]:
    """The request's client id and its body, read by kio."""
    try:
        header, offset = read_request_header(raw, req_flexible)
        # lengths and nulls checked before kio allocates from them; read as Kafka reads
        return header.client_id, decode_request(req_type, read, raw, offset)
    except Exception as exc:
        # Kafka's SocketServer closes the connection on a request it cannot parse
        reason = exc if isinstance(exc, MalformedRequest | FrameError) else repr(exc)
        raise CloseConnection(f"malformed {name} v{version} request: {reason}") from None


def _encoded(lane: RawLane | None, version: int, resp_type: type,
             result: dict[str, Any]) -> Encoded:
    """A handler's answer as body parts and error codes: the lane's writer's, else kio's."""
    written = lane.write(version, result) if lane is not None else None
    return encode_response(resp_type, result) if written is None else ([written[0]], written[1])


def _closing(exc: Exception, name: str, version: int, conn: ConnectionInfo) -> CloseConnection:
    """What a served request's failure raises: a CloseConnection as it is; anything else is
    logged and closes the connection, as a handler's failure does for an API whose answer has
    no top-level error code (Produce's)."""
    if isinstance(exc, CloseConnection):
        return exc
    log.error("%s v%d from %s failed", name, version, conn.peer, exc_info=exc)
    return CloseConnection("internal error")


def _check_session(auth: SaslSession, api_key: int, name: str, conn: ConnectionInfo) -> None:
    """A request on a SASL listener: the session's state allows it, else the connection
    closes."""
    if auth.complete:
        if api_key == SASL_HANDSHAKE_KEY and auth.begin_reauthentication():
            log.debug("re-authentication of %s (%s) begins", conn.peer, conn.principal)
        elif auth.expired():
            # Kafka's KafkaChannel.serverAuthenticationSessionExpired: closed, no answer.
            raise CloseConnection(f"the SASL session of {conn.principal} on listener "
                                  f"{conn.listener} expired")
    if not auth.complete and not auth.allows(api_key):
        # Kafka's SaslServerAuthenticator: nothing else before authentication.
        phase = "handshake" if auth.state == "handshake" else "authentication"
        raise CloseConnection(f"Unexpected Kafka request of type {name} during SASL "
                              f"{phase} (listener {conn.listener})")


def _throttle(quotas: QuotaManager, kind: RequestTime, client: ClientQuotas,
              timed: TimedCoroutine | None, request_bytes: int, result: dict[str, Any] | None,
              resp_type: type) -> tuple[dict[str, Any] | None, Encoded | None, int]:
    """A request held to client quotas, handled: its quotas charged as its API's quota kind
    says. The result (a throttled one's throttle_time set), its encoding if the charge made
    it, and the throttle time (0: not throttled)."""
    request_throttle = 0
    if timed is not None and kind.charges_time(result):
        request_throttle = quotas.record_request_time(client, timed.seconds)
    bandwidth_throttle, bandwidth, result, encoded = kind.bandwidth(
        quotas, client, request_bytes, result, resp_type, request_throttle)
    throttle = max(bandwidth_throttle, request_throttle)
    if throttle > 0:
        # Kafka's throttle-time metric of the quota that throttled (the larger one)
        if bandwidth is not None and bandwidth_throttle > request_throttle:
            bandwidth.record_throttle(throttle)
        elif client.request is not None:
            client.request.record_throttle(throttle)
        if result is not None and "throttle_time" in result:
            result["throttle_time"] = max(throttle, result["throttle_time"] or 0)
    return result, encoded, throttle


def _check_encoder(resp_type: type, result: dict[str, Any], body: bytes) -> None:
    """SAMSA_CHECK_ENCODER=1 (the test suite sets it): every response must be byte for byte
    what kio writes from the same dict."""
    expected = encode(build(resp_type, result))
    if body != expected:
        log.error("encoder mismatch for %s: %r != kio %r (from %r)",
                  resp_type.__qualname__, body[:200], expected[:200], result)
        raise CloseConnection("encoder mismatch")


def _check_written(resp_type: type, body: bytes) -> None:
    """SAMSA_CHECK_ENCODER=1: an answer a raw lane wrote without a result dict must be what
    kio writes again from what kio reads of it."""
    try:
        again = encode(reader(resp_type)(body, 0)[0])
    except Exception as exc:
        log.error("%s not read by kio: %r (%r)", resp_type.__qualname__, body[:200], exc)
        raise CloseConnection("encoder mismatch") from None
    if again != body:
        log.error("encoder mismatch for %s: %r != kio %r", resp_type.__qualname__, body[:200],
                  again[:200])
        raise CloseConnection("encoder mismatch")


def _read(region: Region) -> bytes:
    assert isinstance(region, FileRegion)
    return region.read()


def _read_regions(value: Any) -> Any:
    """`value` with every FileRegion (zero-copy Fetch records) replaced by its bytes, for
    kio, which knows only bytes (the regions themselves stay as they are, to be sent)."""
    if isinstance(value, FileRegion):
        return value.read()
    if isinstance(value, dict):
        return {k: _read_regions(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_read_regions(v) for v in value]
    return value


@functools.cache
def _codec(api_key: int, version: int) -> tuple[type, bool, Any, type, bool]:
    """What a request of this API and version is read and answered with: its kio type,
    whether its header is flexible, kio's reader, the response's kio type, whether the
    response header is flexible (never for ApiVersions, KIP-511)."""
    req_type, resp_type = request_type(api_key, version), response_type(api_key, version)
    return (req_type, _flexible(req_type), reader(req_type), resp_type,
            _flexible(resp_type) and api_key != API_VERSIONS_KEY)


def _flexible(schema: type) -> bool:
    """Does this kio request/response class use the flexible (tagged fields) encoding?"""
    return getattr(schema, "__flexible__", False) is True


def _has_top_level_error(resp_type: type) -> bool:
    return any(f.name == "error_code" for f in dataclasses.fields(resp_type))


def _api_versions_unsupported(correlation_id: int, max_version: int) -> Response:
    # v0 body: error_code, [api_key, min, max] holding only ApiVersions itself (KIP-511).
    body = struct.pack(
        ">hihhh", ErrorCode.unsupported_version, 1, API_VERSIONS_KEY, 0, max_version
    )
    return frame_parts([response_header(correlation_id, False), body])
