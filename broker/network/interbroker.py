"""Requests from this broker to another one (follower fetches, WriteTxnMarkers).

One `BrokerConnection` is one TCP connection with one request in flight at a time, which is
all a fetcher loop or a marker sender needs. Addresses come from the metadata store, so a
broker that re-registers on a new port is found again on the next connect. The connection
goes to the other broker's inter-broker listener with its security (TLS, SASL login: see
security/client.py), set once for the process by `set_client_security`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import struct
import time
from typing import TYPE_CHECKING, Any

from samsa.protocol.codec import build, encode, reader, request_type, response_type
from samsa.protocol.encoder import encode_entity

from ..security.client import AuthenticationError, ClientSecurity

if TYPE_CHECKING:
    from samsa.protocol.kio_adapter import Entity

    from ..cluster.metadata_store import MetadataStore

log = logging.getLogger(__name__)

# Kafka clients' connections.max.idle.ms: below the brokers' 10 minutes, so that we close an
# idle connection before the peer does and never send into one it has just closed.
CLIENT_IDLE_CLOSE_S = 540.0


# Re-connect (and so log in again) once this share of a SASL session's lifetime has passed.
_SESSION_SHARE = 0.8

_security = ClientSecurity.plaintext()


def set_client_security(security: ClientSecurity) -> None:
    """How this broker connects to the others (from its configuration, at start-up)."""
    global _security
    _security = security


class BrokerUnavailable(Exception):
    """The target broker is not registered, not reachable, or the connection broke."""


class BrokerConnection:
    def __init__(self, store: MetadataStore, target_id: int, client_id: str,
                 timeout_s: float = 30.0) -> None:
        self.store = store
        self.target_id = target_id
        self.client_id = client_id.encode()
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0
        self._lock = asyncio.Lock()
        self._last_used = 0.0
        self._session_ends = 0.0  # monotonic; 0: the session has no lifetime

    async def _connect(self) -> None:
        target = next((b for b in self.store.brokers() if b.broker_id == self.target_id), None)
        if target is None:
            raise BrokerUnavailable(f"broker {self.target_id} is not registered")
        security = _security
        endpoint = target.endpoint(security.listener)
        host, port = (endpoint.host, endpoint.port) if endpoint else (target.host, target.port)
        tls = security.tls
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host, port, ssl=tls,
                    server_hostname=(host if tls is not None and tls.check_hostname else
                                     "" if tls is not None else None)), 10.0
            )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            self.close()
            raise BrokerUnavailable(f"broker {self.target_id}: {exc}") from None
        self._session_ends = 0.0
        if security.mechanism is None:
            return
        try:
            lifetime_ms = await security.authenticate(self._roundtrip)
        except AuthenticationError as exc:
            self.close()
            log.warning("broker %d refused this broker's login: %s", self.target_id, exc)
            raise BrokerUnavailable(f"broker {self.target_id}: {exc}") from None
        if lifetime_ms > 0:
            self._session_ends = time.monotonic() + lifetime_ms / 1000 * _SESSION_SHARE

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send one request and return the decoded response entity."""
        async with self._lock:
            return await self._request(api_key, version, body)

    async def _request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        now = time.monotonic()
        if self._writer is not None and (now - self._last_used > CLIENT_IDLE_CLOSE_S or
                                         0 < self._session_ends < now):
            self.close()
        if self._writer is None:
            await self._connect()
        return await self._roundtrip(api_key, version, body)

    async def _roundtrip(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        assert self._reader is not None and self._writer is not None
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        req_type = request_type(api_key, version)
        header = struct.pack(">hhih", api_key, version, self._correlation, len(self.client_id))
        header += self.client_id + (b"\x00" if _flexible(req_type) else b"")
        payload = header + _encode_request(api_key, req_type, body)
        try:
            self._writer.write(struct.pack(">i", len(payload)) + payload)
            # One timer for the answer, not asyncio.wait_for around each read: that wraps
            # each read in a task of its own, with a timer and two more event-loop passes,
            # and a follower makes one such round trip per produce it copies.
            async with asyncio.timeout(self.timeout_s):
                await self._writer.drain()
                size_bytes = await self._reader.readexactly(4)
                frame = await self._reader.readexactly(struct.unpack(">i", size_bytes)[0])
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            self.close()
            raise BrokerUnavailable(f"broker {self.target_id}: {exc!r}") from None
        self._last_used = time.monotonic()
        (correlation,) = struct.unpack_from(">i", frame, 0)
        if correlation != self._correlation:
            self.close()
            raise BrokerUnavailable(f"broker {self.target_id}: correlation id mismatch")
        resp_type = response_type(api_key, version)
        offset = 5 if _flexible(resp_type) else 4  # response header v1 has empty tags
        value, _ = reader(resp_type)(frame, offset)
        return value

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


# Fetch, which a follower sends once per produce it copies: written straight from the dict by
# the responses' encoder (protocol/encoder.py; a fifth of kio's build and write for a
# one-partition Fetch). The rare other requests go through kio.
_FETCH_KEY = 1
CHECK_ENCODER = os.environ.get("SAMSA_CHECK_ENCODER") == "1"


def _encode_request(api_key: int, req_type: type[Entity], body: dict[str, Any]) -> bytes:
    if api_key != _FETCH_KEY:
        return encode(build(req_type, body))
    data = encode_entity(req_type, body).data
    if CHECK_ENCODER:  # the test suite: byte for byte what kio writes, as for responses
        expected = encode(build(req_type, body))
        if data != expected:
            raise RuntimeError(f"encoder mismatch for {req_type.__qualname__}: "
                               f"{data[:200]!r} != kio {expected[:200]!r}")
    return data


def _flexible(schema: type) -> bool:
    """Whether a kio request/response class uses the flexible (tagged fields) encoding."""
    return bool(getattr(schema, "__flexible__", False))
