"""The broker's side of KIP-714 client telemetry (Kafka's ClientMetricsManager and
ClientMetricsInstance): GetTelemetrySubscriptions gives a client its instance id and the
metrics its matching subscriptions ask for, PushTelemetry takes its pushes no more often than
the push interval, and the pushed OTLP metrics are kept for /metrics (export.py) until the
client's instance expires or its connection closes.

Subscriptions live in the metadata store (CLIENT_METRICS config resources) and are re-read
from it every few seconds (another broker of the cluster may have changed them) or at once
after this broker changed them. Times are the requests' wall-clock milliseconds.
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from crc32c import crc32c

from samsa.protocol.compression import GZIP, LZ4, SNAPPY, ZSTD
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.uuids import random_kafka_uuid

from .export import ClientMetrics, PayloadError
from .subscriptions import ALL_METRICS, INTERVAL_MS_DEFAULT, Subscription, subscription

if TYPE_CHECKING:
    from .subscriptions import SubscriptionError  # noqa: F401

log = logging.getLogger(__name__)

# Kafka's order of preference: clients use the first they support.
ACCEPTED_COMPRESSION = (ZSTD, LZ4, GZIP, SNAPPY)
_KNOWN_COMPRESSION = frozenset({0, GZIP, SNAPPY, LZ4, ZSTD})
CACHE_EXPIRY_MS = 60_000  # an instance lives at least this long after its last request
CACHE_MAX_SIZE = 16384  # instances (and connections' software names) kept, least recent out
REFRESH_MS = 5_000  # how stale the subscriptions read from the store may be
SWEEP_MS = 1_000  # expired instances are looked for at most this often (a pass reads them all)


class SubscriptionSource(Protocol):
    async def client_metrics_configs(self) -> dict[str, dict[str, str]]: ...


class TelemetryError(KafkaError):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message, error_code)


@dataclass(slots=True)
class ClientInstance:
    """One client instance's subscription and the times of its last requests."""

    instance_id: uuid.UUID
    client: dict[str, str]  # its identity, what match patterns read
    connection: str  # "<listener> <peer>" of its last request
    subscription_id: int
    version: int  # the subscriptions' version it was computed from
    metrics: list[str]
    push_interval_ms: int
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_error: ErrorCode = ErrorCode.none
    terminating: bool = False
    closed: bool = False  # its connection closed: only its metrics are kept, until it expires
    expires_ms: int = 0
    exported: ClientMetrics = field(default_factory=ClientMetrics)

    def may_get(self, now_ms: int) -> bool:
        """A GetTelemetrySubscriptions no sooner than a push interval after the last request."""
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def may_push(self, now_ms: int) -> bool:
        """The first push after a get is taken at once (clients jitter the interval), later
        ones a push interval apart."""
        if self.last_get_ms > self.last_push_ms or now_ms - self.last_push_ms >= \
                self.push_interval_ms:
            self.last_push_ms = now_ms
            return True
        return False


def java_uuid_hash(u: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode(): the two halves XORed, folded to an int."""
    bits = (u.int >> 64) ^ (u.int & 0xFFFF_FFFF_FFFF_FFFF)
    return ((bits >> 32) ^ bits) & 0xFFFF_FFFF


def subscription_id(metrics: list[str], push_interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: CRC32C of the metrics and the push interval, XORed with
    the instance id's hash, as a signed int32."""
    text = "[" + ", ".join(metrics) + "]" + str(push_interval_ms)
    value = crc32c(text.encode()) ^ java_uuid_hash(instance_id)
    return value - (1 << 32) if value >= 1 << 31 else value


class TelemetryManager:
    def __init__(self, source: SubscriptionSource, max_bytes: int) -> None:
        self.source = source
        self.max_bytes = max_bytes
        self.subscriptions: dict[str, Subscription] = {}
        self.version = 0
        self._configs: dict[str, dict[str, str]] = {}
        self._read_ms: int | None = None
        self._swept_ms = 0
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        # A connection's client software, from its ApiVersions request: "<listener> <peer>".
        self.software: OrderedDict[str, tuple[str, str]] = OrderedDict()

    # ---- subscriptions ---------------------------------------------------------------------
    async def refresh(self, now_ms: int, force: bool = False) -> None:
        """Re-read the subscriptions when stale (or `force`); a change bumps the version, so
        each instance's subscription is computed again at its next request."""
        if not force and self._read_ms is not None and now_ms - self._read_ms < REFRESH_MS:
            return
        configs = await self.source.client_metrics_configs()
        self._read_ms = now_ms
        if configs == self._configs:
            return
        parsed: dict[str, Subscription] = {}
        for name, c in configs.items():
            try:
                parsed[name] = subscription(name, c)
            except Exception as exc:  # stored by an older or foreign writer: left out
                log.warning("client metrics subscription %s is invalid, ignored: %s", name, exc)
        self._configs, self.subscriptions = configs, parsed
        self.version += 1

    def names(self) -> list[str]:
        return sorted(self._configs)

    # ---- connections ------------------------------------------------------------------------
    def client_software(self, connection: str, name: str | None, version: str | None) -> None:
        """ApiVersions v3+ names the client's software (what match patterns may read)."""
        self.software[connection] = (name or "", version or "")
        self.software.move_to_end(connection)
        while len(self.software) > CACHE_MAX_SIZE:
            self.software.popitem(last=False)

    def connection_closed(self, listener: str, peer: str) -> None:
        """As Kafka, a client's instance ends with the connection it last used (a request
        after makes a new one); its metrics stay on /metrics until it would have expired, so
        a scrape still sees what a closing client pushed last."""
        connection = f"{listener} {peer}"
        self.software.pop(connection, None)
        for instance in self.instances.values():
            if instance.connection == connection:
                instance.closed = True

    def expire(self, now_ms: int, at_once: bool = True) -> None:
        """Instances without a request for max(60 s, 3 push intervals) end, their metrics
        with them (a request's pass only once a SWEEP_MS, not at each request)."""
        if not at_once and now_ms - self._swept_ms < SWEEP_MS:
            return
        self._swept_ms = now_ms
        for instance_id, instance in list(self.instances.items()):
            if instance.expires_ms <= now_ms:
                del self.instances[instance_id]

    # ---- requests -----------------------------------------------------------------------------
    def _identity(self, instance_id: uuid.UUID, client_id: str | None, listener: str,
                  peer: str) -> dict[str, str]:
        name, version = self.software.get(f"{listener} {peer}", ("", ""))
        host, _, port = peer.rpartition(":")
        return {"client_instance_id": str(instance_id), "client_id": client_id or "",
                "client_software_name": name, "client_software_version": version,
                "client_source_address": host.strip("[]"), "client_source_port": port}

    def _computed(self, instance_id: uuid.UUID, client: dict[str, str],
                  connection: str) -> ClientInstance:
        """The instance's subscription from the subscriptions that match it: the union of
        their metrics (just `*` when one asks for all), the shortest interval."""
        interval = INTERVAL_MS_DEFAULT
        metrics: set[str] = set()
        for s in self.subscriptions.values():
            if s.matches(client):
                metrics |= s.metrics
                interval = min(interval, s.interval_ms)
        listed = [ALL_METRICS] if ALL_METRICS in metrics else sorted(metrics)
        return ClientInstance(instance_id, client, connection,
                              subscription_id(listed, interval, instance_id), self.version,
                              listed, interval)

    def instance(self, instance_id: uuid.UUID, client_id: str | None, listener: str,
                 peer: str, now_ms: int) -> ClientInstance:
        """The cached instance (made again when the subscriptions changed since), or a new
        one; its expiry pushed back."""
        self.expire(now_ms, at_once=False)
        connection = f"{listener} {peer}"
        found = self.instances.get(instance_id)
        if found is not None and found.expires_ms <= now_ms:  # not swept yet: gone all the same
            del self.instances[instance_id]
            found = None
        if found is None or found.closed:
            kept = found
            found = self._computed(instance_id, self._identity(instance_id, client_id,
                                                               listener, peer), connection)
            if kept is not None:
                found.exported = kept.exported
        elif found.version < self.version:
            # as Kafka, a new instance (its request times start over); its metrics stay
            fresh = self._computed(instance_id, found.client, connection)
            fresh.exported = found.exported
            found = fresh
        found.connection = connection
        found.expires_ms = now_ms + max(CACHE_EXPIRY_MS, 3 * found.push_interval_ms)
        self.instances[instance_id] = found
        self.instances.move_to_end(instance_id)
        while len(self.instances) > CACHE_MAX_SIZE:
            self.instances.popitem(last=False)
        return found

    def new_instance_id(self) -> uuid.UUID:
        while True:
            candidate = random_kafka_uuid()
            if candidate not in self.instances:
                return candidate

    def get_subscriptions(self, instance: ClientInstance, now_ms: int) -> None:
        """Kafka's validateGetRequest: THROTTLING_QUOTA_EXCEEDED for a request sooner than
        the push interval, unless the last push failed on the subscription or compression."""
        if not instance.may_get(now_ms) and instance.last_error not in (
                ErrorCode.unknown_subscription_id, ErrorCode.unsupported_compression_type):
            raise TelemetryError(ErrorCode.throttling_quota_exceeded,
                                 f"Request from the client [{instance.instance_id}] arrived "
                                 "before the next push interval time")
        instance.last_error = ErrorCode.none

    def push(self, instance: ClientInstance, subscription: int, terminating: bool,
             compression: int, payload: bytes, now_ms: int) -> None:
        """Kafka's validatePushRequest, then the payload decoded and kept; raises
        TelemetryError (the instance remembers it)."""
        try:
            self._check_push(instance, subscription, terminating, compression, payload, now_ms)
        except TelemetryError as exc:
            instance.last_error = exc.error_code
            raise
        finally:
            instance.terminating = terminating
        if payload:
            try:
                instance.exported.update(compression, payload, self.max_bytes)
            except PayloadError as exc:
                instance.last_error = exc.error_code
                raise TelemetryError(exc.error_code, str(exc)) from exc
        instance.last_error = ErrorCode.none

    def _check_push(self, instance: ClientInstance, subscription: int, terminating: bool,
                    compression: int, payload: bytes, now_ms: int) -> None:
        who = instance.instance_id
        if instance.terminating:
            raise TelemetryError(ErrorCode.invalid_request,
                                 f"Client [{who}] sent the previous request with state "
                                 "terminating to TRUE, can not accept any requests after that")
        if not instance.may_push(now_ms) and not terminating:
            raise TelemetryError(ErrorCode.throttling_quota_exceeded,
                                 f"Request from the client [{who}] arrived before the next "
                                 "push interval time")
        if subscription != instance.subscription_id:
            raise TelemetryError(ErrorCode.unknown_subscription_id,
                                 f"Unknown client subscription id for the client [{who}]")
        if compression not in _KNOWN_COMPRESSION:
            raise TelemetryError(ErrorCode.unsupported_compression_type,
                                 f"Unknown compression type [{compression}] is received in "
                                 f"telemetry request from [{who}]")
        if len(payload) > self.max_bytes:
            raise TelemetryError(ErrorCode.telemetry_too_large,
                                 f"Telemetry request from [{who}] is larger than the maximum "
                                 f"allowed size [{self.max_bytes}]")
