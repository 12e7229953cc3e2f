"""Client quotas as Kafka's ClientQuotaManager enforces them.

Three quota types: `producer_byte_rate` (Produce: the request's bytes, recorded once it is
appended), `consumer_byte_rate` (Fetch: the response's bytes) and `request_percentage` (the
time the broker spent on a client's requests, as a percentage of one thread). Quotas are set
for users, client ids and users' client ids, each by name or as the default (the store's
`client_quotas()`); a request is held to the most specific one that matches its principal
and client id, in Kafka's order (user+client-id, user+default client, user, default
user+client-id, default user+default client, default user, client-id, default client).

A quota is a rate measured as Kafka's `Rate` measures it: over `quota.window.num` samples of
`quota.window.size.seconds` each (at least `quota.window.num - 1` whole windows count as
elapsed). A request that takes the rate over its bound gets a throttle time (Kafka's
QuotaUtils.throttleTime: (observed - bound) / bound x window; the request quota's is capped
at one window), returned in the response's throttle_time; the server then stops reading the
connection for that long (KIP-219: the response goes out first). A fetch that would exceed
the consumer quota is answered without records (Kafka's throttled fetch response) and not
counted.

Clients sharing a quota share its sensor, keyed as Kafka keys them: a user quota is shared by
all of the user's clients, a default client-id quota applies to each client id separately.
Follower fetches and the cluster actions are exempt, as are requests on the inter-broker
listener when other listeners serve the clients. Which quotas an API's requests count against
is its registration's quota kind (`ApiPolicy.quota`, network/policy.py): RequestTime, or one of
its kinds below that adds a bandwidth quota, or None for an exempt API. With no quota
configured the dispatcher's cost is one attribute test.

`controller_mutation_rate` (partitions created, added or deleted per second) is Kafka's
ControllerMutationQuotaManager: a token bucket per sensor, checked by the topic admin handlers
(MutationQuota) rather than the dispatcher.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator
from typing import Any

from samsa.protocol.encoder import encode_response

from ..cluster.metadata_store import QUOTA_CLIENT_ID, QUOTA_USER, QuotaEntity

log = logging.getLogger(__name__)

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
CONTROLLER_MUTATION = "controller_mutation_rate"
ENFORCED = (PRODUCE, FETCH, REQUEST)
INT_MAX = 2**31 - 1
_SENSOR_EXPIRY_MS = 3_600_000  # Kafka's InactiveSensorExpirationTimeSeconds


class Sensor:
    """Kafka's Sensor with one Rate (over a WindowedSum) and an upper-bound quota."""

    __slots__ = ("bound", "window_ms", "num", "_samples", "_current", "last_record_ms",
                 "_throttles")

    def __init__(self, bound: float, window_ms: int, num: int) -> None:
        self.bound = bound
        self.window_ms = window_ms
        self.num = num
        # Kafka's throttle-time sensor of these tags: (when, ms) of each throttled request
        self._throttles: deque[tuple[float, int]] = deque()
        # each sample: [start ms, last event ms, value]; num + 1 kept (Kafka's extra one
        # for the sample overlapping the window's start)
        self._samples: list[list[float]] = []
        self._current = 0
        self.last_record_ms = 0.0

    def record(self, value: float, now_ms: float) -> None:
        self.last_record_ms = now_ms
        if not self._samples:
            self._samples.append([now_ms, now_ms, 0.0])
        sample = self._samples[self._current]
        if now_ms - sample[0] >= self.window_ms:
            self._current = (self._current + 1) % (self.num + 1)
            if self._current >= len(self._samples):
                sample = [now_ms, now_ms, 0.0]
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample[0], sample[1], sample[2] = now_ms, now_ms, 0.0
        sample[2] += value
        sample[1] = now_ms

    def _purge(self, now_ms: float) -> None:
        expire = self.num * self.window_ms
        for sample in self._samples:
            if now_ms - sample[1] >= expire:
                sample[0], sample[1], sample[2] = now_ms, now_ms, 0.0

    def record_throttle(self, throttle_ms: int, now_ms: float | None = None) -> None:
        """A request held to this quota was throttled for `throttle_ms`."""
        now_ms = time.monotonic() * 1000 if now_ms is None else now_ms
        self._throttles.append((now_ms, throttle_ms))
        self._expire_throttles(now_ms)

    def throttle_time_ms(self, now_ms: float) -> float:
        """Kafka's throttle-time: the average throttle time of the requests throttled in the
        quota's window (here 0 when none was)."""
        self._expire_throttles(now_ms)
        if not self._throttles:
            return 0.0
        return sum(ms for _, ms in self._throttles) / len(self._throttles)

    def _expire_throttles(self, now_ms: float) -> None:
        while self._throttles and now_ms - self._throttles[0][0] >= self.num * self.window_ms:
            self._throttles.popleft()

    def window_size_ms(self, now_ms: float) -> float:
        """Rate.windowSize: the time since the oldest sample, at least num - 1 windows."""
        self._purge(now_ms)
        oldest = min((s[0] for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def rate(self, now_ms: float) -> float:
        """Per second."""
        window = self.window_size_ms(now_ms)
        return sum(s[2] for s in self._samples) / (window / 1000)

    def record_and_throttle_ms(self, value: float, now_ms: float,
                               cap_ms: float | None = None) -> int:
        """Record, then check the quota: the throttle time if the rate is over it, else 0."""
        self.record(value, now_ms)
        observed = self.rate(now_ms)
        if observed <= self.bound:
            return 0
        throttle = (observed - self.bound) / self.bound * self.window_size_ms(now_ms)
        if cap_ms is not None:
            throttle = min(throttle, cap_ms)
        return min(round(throttle), INT_MAX)


class ClientQuotas:
    """The sensors one (user, client id) is held to, per quota type (None: no quota)."""

    __slots__ = ("produce", "fetch", "request")

    def __init__(self, produce: Sensor | None, fetch: Sensor | None,
                 request: Sensor | None) -> None:
        self.produce = produce
        self.fetch = fetch
        self.request = request


_NO_QUOTAS = ClientQuotas(None, None, None)
# A quota's key in one quota type's table: (user, client id), each None when absent from the
# entity, _DEFAULT_KEY for the default.
_DEFAULT_KEY = "\0<default>"
_Key = tuple[str | None, str | None]


class TokenBucket:
    """Kafka's TokenBucket stat, the controller mutation quota's: credits refill at `bound`
    per second up to a burst of `num` windows' worth; a mutation takes its partitions' worth,
    possibly going below zero. Starts full."""

    __slots__ = ("bound", "burst", "tokens", "last_ms")

    def __init__(self, bound: float, window_ms: int, num: int, now_ms: float) -> None:
        self.bound = bound
        self.burst = num * window_ms / 1000 * bound
        self.tokens = self.burst
        self.last_ms = now_ms

    def measure(self, now_ms: float) -> float:
        self.tokens = min(self.burst, self.tokens + self.bound * (now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms
        return self.tokens

    def record(self, value: float, now_ms: float) -> None:
        self.tokens = min(self.burst, self.measure(now_ms) - value)

    def throttle_ms(self, now_ms: float) -> int:
        """Kafka's ControllerMutationQuotaManager.throttleTimeMs: how long until the credits
        are back to zero (0 when not below)."""
        tokens = self.measure(now_ms)
        if tokens >= 0 or self.bound <= 0:
            return 0 if tokens >= 0 else INT_MAX
        return min(round(-tokens / self.bound * 1000), INT_MAX)


class MutationQuota:
    """One CreateTopics/CreatePartitions/DeleteTopics request's controller mutation quota
    (Kafka's Strict- and PermissiveControllerMutationQuota). Strict (CreateTopics v6+,
    CreatePartitions v3+, DeleteTopics v5+): a topic's mutation is refused with
    THROTTLING_QUOTA_EXCEEDED while the credits are below zero. Permissive (older versions,
    whose clients do not know that error): every mutation is done, the response is
    throttled."""

    __slots__ = ("_bucket", "strict", "_throttle_ms", "_throttled_at")

    def __init__(self, bucket: TokenBucket | None, strict: bool) -> None:
        self._bucket = bucket
        self.strict = strict
        self._throttle_ms = 0
        self._throttled_at = 0.0

    def exceeded(self) -> bool:
        """Before a strict mutation: is the quota already exceeded (then refuse it)?"""
        if self._bucket is None or not self.strict:
            return False
        now = time.monotonic() * 1000
        throttle = self._bucket.throttle_ms(now)
        if throttle > 0:
            self._throttle_ms, self._throttled_at = throttle, now
        return throttle > 0

    def record(self, partitions: int) -> None:
        """A mutation of this many partitions was done."""
        if self._bucket is not None and partitions > 0:
            self._bucket.record(partitions, time.monotonic() * 1000)

    def throttle_ms(self) -> int:
        """The request's throttle time: strict, that of its last refusal; permissive, how far
        the quota is over now."""
        if self._bucket is None:
            return 0
        now = time.monotonic() * 1000
        if self.strict:  # less the time since (Kafka's AbstractControllerMutationQuota)
            return max(0, round(self._throttle_ms - (now - self._throttled_at)))
        return self._bucket.throttle_ms(now)


_NO_MUTATION_QUOTA = MutationQuota(None, False)


class QuotaManager:
    def __init__(self, window_num: int, window_size_s: int,
                 exempt_listener: str | None = None,
                 controller_window: tuple[int, int] = (11, 1)) -> None:
        self.window_num = window_num
        self.window_ms = window_size_s * 1000
        # controller.quota.window.num and .size.seconds (in ms)
        self.controller_window = (controller_window[0], controller_window[1] * 1000)
        self._mutation_limits: dict[_Key, float] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        # the inter-broker listener, when it is not also a client listener
        self.exempt_listener = exempt_listener
        self.active = False  # any quota of an enforced type configured
        self._limits: dict[str, dict[_Key, float]] = {t: {} for t in ENFORCED}
        self._clients: dict[tuple[str, str], ClientQuotas] = {}
        self._sensors: dict[tuple[str, str, str], Sensor] = {}
        self._created = 0

    # ---- configuration ---------------------------------------------------------------------
    def update(self, quotas: dict[QuotaEntity, dict[str, float]]) -> None:
        """The store's quotas changed (called with all of them)."""
        limits: dict[str, dict[_Key, float]] = {t: {} for t in ENFORCED}
        for entity, config in quotas.items():
            names = dict(entity)
            key: _Key = (_key_name(names, QUOTA_USER), _key_name(names, QUOTA_CLIENT_ID))
            for quota_type in ENFORCED:
                if quota_type in config:
                    limits[quota_type][key] = config[quota_type]
        mutation_limits: dict[_Key, float] = {}
        for entity, config in quotas.items():
            if CONTROLLER_MUTATION in config:
                names = dict(entity)
                mutation_limits[(_key_name(names, QUOTA_USER),
                                 _key_name(names, QUOTA_CLIENT_ID))] = config[CONTROLLER_MUTATION]
        self._mutation_limits = mutation_limits
        was_active, self._limits = self.active, limits
        self.active = any(limits.values())
        self._clients.clear()
        # sensors keep their history; their bounds are set again as clients resolve
        if self.active or was_active:
            log.info("client quotas in force: %s",
                     ", ".join(f"{len(v)} {t}" for t, v in limits.items()))

    # ---- resolution (Kafka's DefaultQuotaCallback) -------------------------------------------
    def for_client(self, user: str, client_id: str) -> ClientQuotas:
        key = (user, client_id)
        found = self._clients.get(key)
        if found is None:
            now = time.monotonic() * 1000
            found = ClientQuotas(*(self._sensor(t, user, client_id, now) for t in ENFORCED))
            if len(self._clients) > 100_000:
                self._clients.clear()
            self._clients[key] = found
        return found

    def _sensor(self, quota_type: str, user: str, client_id: str, now: float) -> Sensor | None:
        limits = self._limits[quota_type]
        if not limits:
            return None
        tags = _metric_tags(limits, user, client_id)
        bound = _limit(limits, *tags)
        if bound is None:
            return None
        name = (quota_type, *tags)
        sensor = self._sensors.get(name)
        if sensor is None:
            sensor = self._sensors[name] = Sensor(bound, self.window_ms, self.window_num)
            self._created += 1
            if self._created % 1000 == 0:
                self._expire(now)
        sensor.bound = bound
        return sensor

    def _expire(self, now: float) -> None:
        idle = [n for n, s in self._sensors.items()
                if s.last_record_ms and now - s.last_record_ms > _SENSOR_EXPIRY_MS]
        for name in idle:
            del self._sensors[name]
        if idle:
            self._clients.clear()

    def mutation_quota(self, listener: str, user: str, client_id: str | None,
                       strict: bool) -> MutationQuota:
        """The controller mutation quota (controller_mutation_rate, partitions per second)
        one topic admin request is held to, resolved as the other quotas are."""
        limits = self._mutation_limits
        if not limits or listener == self.exempt_listener:
            return _NO_MUTATION_QUOTA
        tags = _metric_tags(limits, user, client_id or "")
        bound = _limit(limits, *tags)
        if bound is None:
            return _NO_MUTATION_QUOTA
        bucket = self._buckets.get(tags)
        num, window_ms = self.controller_window
        if bucket is None:
            if len(self._buckets) > 100_000:
                self._buckets.clear()
            bucket = self._buckets[tags] = TokenBucket(bound, window_ms, num,
                                                       time.monotonic() * 1000)
        elif bucket.bound != bound:  # the quota changed: the credits kept, within the burst
            bucket.measure(time.monotonic() * 1000)
            bucket.bound, bucket.burst = bound, num * window_ms / 1000 * bound
            bucket.tokens = min(bucket.tokens, bucket.burst)
        return MutationQuota(bucket, strict)

    def throttle_times(self) -> Iterator[tuple[str, str, str, float]]:
        """(quota type, user, client id, throttle-time) of every live sensor, as Kafka's
        kafka.server:type=Produce|Fetch|Request,user=..,client-id=.. throttle-time."""
        now = time.monotonic() * 1000
        for (quota_type, user, client_id), sensor in self._sensors.items():
            yield quota_type, user, client_id, sensor.throttle_time_ms(now)

    # ---- enforcement -----------------------------------------------------------------------
    def applies(self, listener: str) -> bool:
        """Are requests on this listener held to client quotas at all (those of an API its
        registration does not exempt)?"""
        return self.active and listener != self.exempt_listener

    def max_fetch_bytes(self, listener: str, user: str, client_id: str | None) -> int:
        """The most a consumer's fetch may return without being throttled whatever came before
        (Kafka's getMaxValueInQuotaWindow: bound x (num - 1) windows)."""
        if not self.applies(listener):
            return INT_MAX
        sensor = self.for_client(user, client_id or "").fetch
        if sensor is None:
            return INT_MAX
        return int(min(sensor.bound * (self.window_num - 1) * self.window_ms / 1000, INT_MAX))

    def record_produce(self, quotas: ClientQuotas, size: int) -> int:
        if quotas.produce is None:
            return 0
        return quotas.produce.record_and_throttle_ms(size, time.monotonic() * 1000)

    def record_fetch(self, quotas: ClientQuotas, size: int, request_throttle_ms: int) -> int:
        """A throttled fetch (by either quota) is not counted: Kafka unrecords it, its answer
        has no records."""
        sensor = quotas.fetch
        if sensor is None:
            return 0
        now = time.monotonic() * 1000
        throttle = sensor.record_and_throttle_ms(size, now)
        if throttle > 0 or request_throttle_ms > 0:
            sensor.record(-size, now)
        return throttle

    def record_request_time(self, quotas: ClientQuotas, seconds: float) -> int:
        sensor = quotas.request
        if sensor is None:
            return 0
        return sensor.record_and_throttle_ms(seconds * 100.0, time.monotonic() * 1000,
                                             cap_ms=self.window_ms)


def _key_name(names: dict[str, str | None], entity_type: str) -> str | None:
    if entity_type not in names:
        return None
    name = names[entity_type]
    return _DEFAULT_KEY if name is None else name


def _metric_tags(limits: dict[_Key, float], user: str, client_id: str) -> tuple[str, str]:
    """Kafka's quotaMetricTags: whose sensor a client's requests count against."""
    d = _DEFAULT_KEY
    if (user, client_id) in limits or (user, d) in limits:
        return user, client_id
    if (user, None) in limits:
        return user, ""
    if (d, client_id) in limits or (d, d) in limits:
        return user, client_id
    if (d, None) in limits:
        return user, ""
    return "", client_id


def _limit(limits: dict[_Key, float], user: str, client_id: str) -> float | None:
    """Kafka's quotaLimit for a sensor's tags."""
    d = _DEFAULT_KEY
    if user and client_id:
        keys: tuple[_Key, ...] = ((user, client_id), (user, d), (d, client_id), (d, d))
    elif user:
        keys = ((user, None), (d, None))
    elif client_id:
        keys = ((None, client_id), (None, d))
    else:
        return None
    for key in keys:
        if key in limits:
            return limits[key]
    return None


def is_follower_fetch(request: Any) -> bool:
    """A replica's Fetch (its id in replica_state from v15, in replica_id before)."""
    state = getattr(request, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(request, "replica_id", -1)
    return bool(replica_id >= 0)


class UndoableAnswer(dict[str, Any]):
    """A Fetch answer a fetch session counts as sent (what its fetcher is told, a session it
    opens): a quota that throttles it sends none of it and calls `undo`, which gives the
    session id the throttled answer carries."""

    __slots__ = ("undo",)

    def __init__(self, fields: dict[str, Any], undo: Callable[[], int]) -> None:
        super().__init__(fields)
        self.undo = undo


def throttled_fetch_response(result: dict[str, Any], throttle_ms: int) -> dict[str, Any]:
    """Kafka's FetchContext.getThrottledResponse: no partitions; an incremental fetch's session
    kept, none opened by a full one."""
    session_id = (result.undo() if isinstance(result, UndoableAnswer)
                  else result.get("session_id", 0))
    out = {"throttle_time": throttle_ms, "error_code": result.get("error_code", 0),
           "session_id": session_id, "responses": []}
    if "node_endpoints" in result:
        out["node_endpoints"] = []
    return out


# ---- what an API's registration says (`@api(..., policy=ApiPolicy(quota=...))`) ------------
Encoded = tuple[list[Any], list[int]]  # a response's encoded parts and its error codes


class RequestTime:
    """The quota kind of most APIs: held to request_percentage, the time spent handling."""

    __slots__ = ()
    # The handler throttles by the controller mutation quota itself and the connection is
    # muted for its response's throttle_time (CreateTopics, DeleteTopics, CreatePartitions).
    mutes_for_answer = False

    def holds(self, request: Any) -> bool:
        """Is this request held to client quotas (a follower's Fetch is not)?"""
        return True

    def charges_time(self, result: dict[str, Any] | None) -> bool:
        return True

    def bandwidth(self, quotas: QuotaManager, client: ClientQuotas, request_bytes: int,
                  result: dict[str, Any] | None, resp_type: type, request_throttle_ms: int
                  ) -> tuple[int, Sensor | None, dict[str, Any] | None, Encoded | None]:
        """The bandwidth quota's throttle and sensor, the result (a throttled one's
        replaced) and its encoding if made to count it."""
        return 0, None, result, None


class ProduceBytes(RequestTime):
    """Produce: producer_byte_rate counts the request's bytes."""

    __slots__ = ()

    def charges_time(self, result: dict[str, Any] | None) -> bool:
        return result is not None  # acks=0: no answer, no request time charged

    def bandwidth(self, quotas: QuotaManager, client: ClientQuotas, request_bytes: int,
                  result: dict[str, Any] | None, resp_type: type, request_throttle_ms: int
                  ) -> tuple[int, Sensor | None, dict[str, Any] | None, Encoded | None]:
        return quotas.record_produce(client, request_bytes), client.produce, result, None


class FetchBytes(RequestTime):
    """Fetch: consumer_byte_rate counts the response's bytes; a follower's is exempt."""

    __slots__ = ()

    def holds(self, request: Any) -> bool:
        return not is_follower_fetch(request)

    def bandwidth(self, quotas: QuotaManager, client: ClientQuotas, request_bytes: int,
                  result: dict[str, Any] | None, resp_type: type, request_throttle_ms: int
                  ) -> tuple[int, Sensor | None, dict[str, Any] | None, Encoded | None]:
        if result is None:
            return 0, None, None, None
        throttle, encoded = 0, None
        if client.fetch is not None:
            encoded = encode_response(resp_type, result)  # its size is what counts
            throttle = quotas.record_fetch(client, sum(len(b) for b in encoded[0]),
                                           request_throttle_ms)
        if max(throttle, request_throttle_ms) > 0:  # throttled by either: no records
            return throttle, client.fetch, throttled_fetch_response(
                result, max(throttle, request_throttle_ms)), None
        return throttle, client.fetch, result, encoded


class ControllerMutation(RequestTime):
    __slots__ = ()
    mutes_for_answer = True


REQUEST_TIME, PRODUCE_BYTES, FETCH_BYTES = RequestTime(), ProduceBytes(), FetchBytes()
CONTROLLER_MUTATION_TIME = ControllerMutation()


class TimedCoroutine:
    """Awaits a coroutine and adds up the time spent running it (not the time it waited):
    a handler's share of the broker for the request quota."""

    __slots__ = ("_coro", "seconds")

    def __init__(self, coro: Any) -> None:
        self._coro = coro
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        send: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter()
            try:
                if error is not None:
                    yielded = coro.throw(error)
                else:
                    yielded = coro.send(send)
            except StopIteration as stop:
                self.seconds += time.perf_counter() - started
                return stop.value
            finally:
                error = None
            self.seconds += time.perf_counter() - started
            try:
                send = yield yielded
            except BaseException as exc:  # a cancellation: hand it to the handler
                error = exc
