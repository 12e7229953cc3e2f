"""Thin dispatch: decode the header and body with kio, call the API's handler with a
`RequestContext` (broker/context.py), encode the answer."""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import struct
import time
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
from samsa.protocol.produce_wire import ProduceRequest, read_produce, write_produce_response
from samsa.protocol.registry import ApiRegistry, ApiSpec
from samsa.storage.file_region import FileRegion

from .. import metrics
from ..context import BrokerServices, RequestContext
from ..security.sasl import SASL_HANDSHAKE_KEY, AuthenticationFailed, SaslSession
from .connection import Frame
from .quotas import (
    CONTROLLER_MUTATION_APIS,
    FETCH_KEY,
    PRODUCE_KEY,
    ClientQuotas,
    TimedCoroutine,
    is_follower_fetch,
    throttled_fetch_response,
)
from .server import CloseConnection, ConnectionInfo, Response

log = logging.getLogger(__name__)

CHECK_ENCODER = os.environ.get("SAMSA_CHECK_ENCODER") == "1"


class Dispatcher:
    def __init__(self, registry: ApiRegistry[RequestContext], services: BrokerServices) -> None:
        self.registry = registry
        self.services = services

    async def __call__(self, raw: Frame, conn: ConnectionInfo) -> Response | None:
        auth = conn.authenticator
        if auth is not None and not auth.complete and auth.raw_tokens:
            return await self._raw_sasl_token(raw, conn, auth)
        api_key, version, correlation_id = peek_key_version(raw)
        spec = self.registry.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown api key {api_key}")
        if auth is not None and auth.complete:
            if api_key == SASL_HANDSHAKE_KEY and auth.begin_reauthentication():
                log.debug("re-authentication of %s (%s) begins", conn.peer, conn.principal)
            elif auth.expired():
                # Kafka's KafkaChannel.serverAuthenticationSessionExpired: closed, no answer.
                raise CloseConnection(f"the SASL session of {conn.principal} on listener "
                                      f"{conn.listener} expired")
        if auth is not None and not auth.complete and not auth.allows(api_key):
            # Kafka's SaslServerAuthenticator: nothing else before authentication.
            phase = "handshake" if auth.state == "handshake" else "authentication"
            raise CloseConnection(f"Unexpected Kafka request of type {spec.name} during SASL "
                                  f"{phase} (listener {conn.listener})")
        if not spec.accepts(version):
            if api_key == API_VERSIONS_KEY:
                return _api_versions_unsupported(correlation_id, spec.max_version)
            raise CloseConnection(f"{spec.name} v{version} is not supported")
        req_type, req_flexible, read, resp_type, resp_flexible = _codec(api_key, version)
        if api_key == PRODUCE_KEY and auth is None:
            quotas = self.services.quotas
            produce = None if quotas is not None and quotas.active else read_produce(raw)
            if produce is not None:  # the usual Produce: read and answered without kio
                return await self._produce(spec, produce, version, correlation_id, conn,
                                           resp_type, resp_flexible)
        try:
            header, offset = read_request_header(raw, req_flexible)
            # lengths and nulls checked before kio allocates from them; read as Kafka reads
            request = decode_request(req_type, read, raw, offset)
        except Exception as exc:
            # Kafka's SocketServer closes the connection on a request it cannot parse
            reason = exc if isinstance(exc, MalformedRequest | FrameError) else repr(exc)
            raise CloseConnection(f"malformed {spec.name} v{version} request: {reason}"
                                  ) from None
        ctx = RequestContext(
            api_key,
            version,
            correlation_id,
            header.client_id,
            conn.listener,
            conn.peer,
            int(time.time() * 1000),
            self.services,
            conn.principal,
            auth,
            conn.zero_copy,
        )
        started = time.perf_counter()
        # Client quotas (broker/network/quotas.py): with none configured, `active` is all it costs.
        client: ClientQuotas | None = None
        quotas = self.services.quotas
        if (quotas is not None and quotas.active and (auth is None or auth.complete)
                and quotas.applies(conn.listener, api_key)
                and not (api_key == FETCH_KEY and is_follower_fetch(request))):
            client = quotas.for_client(conn.principal.name, header.client_id or "")
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
        encoded: tuple[Any, Any] | None = None
        if client is not None:
            assert quotas is not None
            request_throttle = 0
            if timed is not None and not (api_key == PRODUCE_KEY and result is None):
                request_throttle = quotas.record_request_time(client, timed.seconds)
            # the bandwidth quota's throttle time, if any, and its sensor
            bandwidth_throttle, bandwidth = 0, None
            if api_key == PRODUCE_KEY:
                bandwidth_throttle = quotas.record_produce(client, len(raw))
                bandwidth = client.produce
            elif api_key == FETCH_KEY and result is not None:
                if client.fetch is not None:
                    encoded = encode_response(resp_type, result)  # its size is what counts
                    bandwidth_throttle = quotas.record_fetch(
                        client, sum(len(b) for b in encoded[0]), request_throttle)
                    bandwidth = client.fetch
                if max(bandwidth_throttle, request_throttle) > 0:
                    # throttled by either quota: no records (Kafka's answer)
                    result = throttled_fetch_response(
                        result, max(bandwidth_throttle, request_throttle))
                    encoded = None
            throttle = max(bandwidth_throttle, request_throttle)
            if throttle > 0:
                # Kafka's throttle-time metric of the quota that throttled (the larger one)
                if bandwidth is not None and bandwidth_throttle > request_throttle:
                    bandwidth.record_throttle(throttle)
                elif client.request is not None:
                    client.request.record_throttle(throttle)
                conn.throttle_ms = throttle
                if result is not None and "throttle_time" in result:
                    result["throttle_time"] = max(throttle, result["throttle_time"] or 0)
                log.debug("%s v%d from %s (client %s, %s) throttled for %d ms", spec.name,
                          version, conn.peer, header.client_id, conn.principal, throttle)
        if api_key in CONTROLLER_MUTATION_APIS and result is not None:
            # the controller mutation quota's throttle (topic admin): the channel muted too
            conn.throttle_ms = max(conn.throttle_ms, result.get("throttle_time") or 0)
        if result is None:
            if auth is not None and auth.failed:  # a failure Kafka answers by closing
                raise CloseConnection(auth.failure or "authentication failed", None,
                                      auth.config.failed_delay_ms / 1000)
            return None
        body, error_codes = encoded or encode_response(resp_type, result)
        metrics.count_errors(spec.name, error_codes)
        if CHECK_ENCODER:
            _check_encoder(resp_type, _read_regions(result),
                           b"".join(p if isinstance(p, (bytes, memoryview)) else _read(p)
                                    for p in body))
        framed = frame_parts([response_header(correlation_id, resp_flexible), *body])
        if auth is not None:
            return self._after_sasl_request(auth, conn, framed)
        return framed

    async def _produce(self, spec: ApiSpec[RequestContext], request: ProduceRequest,
                       version: int, correlation_id: int, conn: ConnectionInfo,
                       resp_type: type, resp_flexible: bool) -> Response | None:
        """`__call__` for a Produce request `read_produce` read (issue 47: thousands of small
        ones a second over many partitions), on a connection without SASL or client quotas:
        the same handler, the answer written by `write_produce_response` where it can."""
        ctx = RequestContext(PRODUCE_KEY, version, correlation_id, request.client_id,
                             conn.listener, conn.peer, int(time.time() * 1000), self.services,
                             conn.principal, None, conn.zero_copy)
        started = time.perf_counter()
        try:
            result = await spec.handler(ctx, request)
        except CloseConnection:
            raise
        except Exception:
            log.exception("%s v%d from %s failed", spec.name, version, conn.peer)
            raise CloseConnection("internal error") from None  # no top-level error code
        metrics.record_request(spec.name, version, started)
        if result is None:
            return None
        written = write_produce_response(version, result)
        body, error_codes = (encode_response(resp_type, result) if written is None
                             else ([written[0]], written[1]))
        metrics.count_errors(spec.name, error_codes)
        if CHECK_ENCODER:
            _check_encoder(resp_type, result, b"".join(body))  # type: ignore[arg-type]
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


def _check_encoder(resp_type: type, result: dict[str, Any], body: bytes) -> None:
    """SAMSA_CHECK_ENCODER=1 (the test suite sets it): every response must be byte for byte
    what kio writes from the same dict."""
    expected = encode(build(resp_type, result))
    if body != expected:
        log.error("encoder mismatch for %s: %r != kio %r (from %r)",
                  resp_type.__qualname__, body[:200], expected[:200], result)
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
