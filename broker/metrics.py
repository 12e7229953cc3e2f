"""Prometheus metrics, named the way the Prometheus JMX exporter names Kafka's JMX beans.

kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9 becomes
kafka_network_requestmetrics_requestspersec_total{request="Produce",version="9"}, so existing
Kafka dashboards work with few edits. Counters added later follow the exporter's example Kafka
config, which drops "PerSec": IsrShrinksPerSec is kafka_server_replicamanager_isrshrinks_total.
Gauges of broker state (partitions, ISR, controller, groups, transactions) are computed at scrape
time from the broker's own structures, on the event loop (no bookkeeping on the hot path, no
reads racing the loop's writes); the few event counters are bumped by one-line hooks.
Consumer lag uses kafka_exporter's names (kafka_consumergroup_lag{consumergroup,topic,
partition}), which Kafka has no JMX bean for and lag dashboards already read. Process memory,
CPU and open fds come from prometheus_client's default process collector (process_*).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)
T = TypeVar("T")


class _FlushBeforeScrape(Collector):
    """Adds the counts pending on the broker's event loop (`_Pending`) to their metrics before
    a scrape reads them: registered first, so the registry collects it before them. It runs
    the flush on the loop (the scrape is in the HTTP server's thread) and reports nothing."""

    loop: asyncio.AbstractEventLoop | None = None
    loop_thread = 0
    timeout_s = 5.0

    def describe(self) -> list[GaugeMetricFamily]:
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            if self.loop is None:
                flush_pending()
            else:
                call_on_loop(self.loop, self.loop_thread, flush_pending, self.timeout_s)
        except concurrent.futures.TimeoutError:
            log.warning("metrics scrape: the event loop did not flush its counts in %.0f s",
                        self.timeout_s)
        except RuntimeError:  # the loop is closed: shutting down
            pass
        return iter(())


def call_on_loop(loop: asyncio.AbstractEventLoop, loop_thread: int, fn: Callable[[], T],
                 timeout_s: float) -> T:
    """`fn()` run on the event loop (whose thread is `loop_thread`), from a scrape's thread:
    its result or its exception; TimeoutError if the loop does not run it in `timeout_s`,
    RuntimeError if the loop is closed."""
    if threading.get_ident() == loop_thread:
        return fn()
    result: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            result.set_result(fn())
        except BaseException as exc:  # handed to the scraping thread
            result.set_exception(exc)

    loop.call_soon_threadsafe(run)
    return result.result(timeout_s)


_FLUSHER = _FlushBeforeScrape()
REGISTRY.register(_FLUSHER)


def flush_from_this_loop() -> None:
    """A scrape (in the HTTP server's thread) first adds the counts pending on the running
    event loop, asking the loop for them."""
    _FLUSHER.loop, _FLUSHER.loop_thread = asyncio.get_running_loop(), threading.get_ident()

REQUESTS = Counter(
    "kafka_network_requestmetrics_requestspersec",
    "Requests received, by API and version.",
    ["request", "version"],
)
ERRORS = Counter(
    "kafka_network_requestmetrics_errorspersec",
    "Error codes returned at the top level or per partition, by API and error code.",
    ["request", "error"],
)
REQUEST_TIME = Histogram(
    "kafka_network_requestmetrics_totaltimems",
    "Time from receiving a request to having its response ready, in milliseconds.",
    ["request"],
    buckets=(0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000),
)
BYTES_IN = Counter(
    "kafka_server_brokertopicmetrics_bytesinpersec",
    "Bytes appended by producers, by topic.",
    ["topic"],
)
MESSAGES_IN = Counter(
    "kafka_server_brokertopicmetrics_messagesinpersec",
    "Records appended by producers, by topic.",
    ["topic"],
)
BYTES_OUT = Counter(
    "kafka_server_brokertopicmetrics_bytesoutpersec",
    "Bytes returned to fetchers, by topic.",
    ["topic"],
)
SENDFILE_BYTES = Counter(
    "samsa_network_sendfile_bytes",
    "Fetch record bytes sent from segment files with sendfile (zero-copy), by listener.",
    ["listener"],
)
LOOP_LAG = Histogram(
    "samsa_event_loop_lag_seconds",
    "How late the event loop runs a timer scheduled every 0.5 s.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
LOG_FLUSH_TIME = Histogram(
    "kafka_log_logflushstats_logflushrateandtimems",
    "Scheduled log flushes (fsync of flush.ms-old data or of rolled segments), in milliseconds.",
    buckets=(0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000),
)
ISR_SHRINKS = Counter(
    "kafka_server_replicamanager_isrshrinks",
    "ISR changes written by this broker (as leader) that removed replicas.",
)
ISR_EXPANDS = Counter(
    "kafka_server_replicamanager_isrexpands",
    "ISR changes written by this broker (as leader) that added replicas.",
)
TXN_COMMITS = Counter(
    "kafka_coordinator_transaction_transactioncoordinator_commits",
    "Transactions this coordinator completed as committed (markers written, CompleteCommit "
    "logged).",
)
TXN_ABORTS = Counter(
    "kafka_coordinator_transaction_transactioncoordinator_aborts",
    "Transactions this coordinator completed as aborted (client aborts, fencing and "
    "timeouts; markers written, CompleteAbort logged).",
)
TXN_TIMED_OUT_ABORTS = Counter(
    "kafka_coordinator_transaction_transactioncoordinator_timedoutaborts",
    "Ongoing transactions this coordinator started aborting because they outlived their "
    "transaction.timeout.ms.",
)
TXN_MARKER_TIME = Histogram(
    "kafka_coordinator_transaction_transactionmarkerchannelmanager_markerlatencyms",
    "Time from PrepareCommit/PrepareAbort being logged to every partition's marker written "
    "and the completion logged, in milliseconds.",
    ["result"],
    buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000),
)
VERIFICATION_TIME = Histogram(
    "kafka_server_addpartitionstotxnmanager_verificationtimems",
    "KIP-890: time from a partition leader starting to ask the transaction coordinator about "
    "partitions of a transaction (a producer's first append to them, or TxnOffsetCommit's "
    "offsets partition) to the answer, in milliseconds.",
    buckets=(0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000),
)
VERIFICATION_FAILURES = Counter(
    "kafka_server_addpartitionstotxnmanager_verificationfailurerate",
    "KIP-890: partitions whose verification was refused, by the transaction coordinator or at "
    "once by the leader's queue (a fenced epoch, or a retry that took a waiting one's place).",
)
AUTHENTICATIONS = Counter(
    "kafka_server_socket_server_metrics_successful_authentication",
    "Connections that completed authentication (a TLS handshake or a SASL exchange), by "
    "listener (Kafka's successful-authentication-total).",
    ["listener"],
)
FAILED_AUTHENTICATIONS = Counter(
    "kafka_server_socket_server_metrics_failed_authentication",
    "Connections that failed authentication (a failed TLS handshake or SASL exchange), by "
    "listener (Kafka's failed-authentication-total).",
    ["listener"],
)
REAUTHENTICATIONS = Counter(
    "kafka_server_socket_server_metrics_successful_reauthentication",
    "Successful SASL re-authentications (KIP-368), by listener.",
    ["listener"],
)
FAILED_REAUTHENTICATIONS = Counter(
    "kafka_server_socket_server_metrics_failed_reauthentication",
    "Failed SASL re-authentications (KIP-368), by listener.",
    ["listener"],
)
CONNECTIONS_CREATED = Counter(
    "kafka_server_socket_server_metrics_connection_creation",
    "Connections accepted, by listener (Kafka's connection-creation-total).",
    ["listener"],
)
ACCEPT_THROTTLE_TIME = Counter(
    "kafka_server_socket_server_metrics_connection_accept_throttle_time",
    "Milliseconds the acceptor waited for max.connection.creation.rate, by listener (Kafka "
    "reports their average as connection-accept-throttle-time).",
    ["listener"],
)
_SHARE_PARTITION = ["group", "topic", "partition"]
SHARE_ACQUIRED_RECORDS = Counter(
    "samsa_share_records_acquired",
    "Records this share-partition leader handed to share-group members (every delivery).",
    _SHARE_PARTITION,
)
SHARE_ACQUIRED_BATCHES = Counter(
    "samsa_share_batches_acquired",
    "Acquired-record ranges (first offset, last offset, delivery count) this share-partition "
    "leader returned in ShareFetch responses.",
    _SHARE_PARTITION,
)
SHARE_REDELIVERED = Counter(
    "samsa_share_records_redelivered",
    "Records acquired again after a release, a lock timeout or a member leaving (delivery "
    "count above 1).",
    _SHARE_PARTITION,
)
SHARE_ARCHIVED_AT_LIMIT = Counter(
    "samsa_share_records_archived_delivery_limit",
    "Records archived instead of made available again because they reached "
    "group.share.delivery.count.limit.",
    _SHARE_PARTITION,
)
SHARE_LOCK_TIMEOUTS = Counter(
    "kafka_server_sharepartitionmetrics_acquisitionlocktimeout",
    "Acquired records whose acquisition lock expired before they were acknowledged "
    "(Kafka's SharePartitionMetrics AcquisitionLockTimeoutPerSec).",
    _SHARE_PARTITION,
)
SHARE_ACKNOWLEDGEMENTS = Counter(
    "kafka_server_sharegroupmetrics_recordacknowledgements",
    "Records acknowledged by share-group members on the partitions led here, by type "
    "(Kafka's ShareGroupMetrics RecordAcknowledgementsPerSec).",
    ["group", "ackType"],
)
_ACK_TYPES = {1: "Accept", 2: "Release", 3: "Reject"}

# Kafka's GroupState names, in the order of Kafka's NumGroups<State> gauges.
# ---- hooks called from the broker ------------------------------------------------------------
@functools.cache
def _request_metrics(api: str, version: int) -> tuple[Any, Any]:
    # labels() hashes and locks on every call; a request's children never change.
    return REQUESTS.labels(api, str(version)), REQUEST_TIME.labels(api)


@functools.cache
def _error_counter(api: str, code: int) -> Any:
    return ERRORS.labels(api, str(code))


@functools.cache
def _topic_counters(topic: str) -> tuple[Any, Any, Any]:
    return BYTES_IN.labels(topic), MESSAGES_IN.labels(topic), BYTES_OUT.labels(topic)


# Requests and the bytes they produce and fetch are counted on the event loop in plain ints
# and added to their metrics in one go: before a scrape, and every _FLUSH_EVERY requests.
# prometheus_client takes a lock and makes several calls per count, which cost ~5 us of the
# ~55 us of broker CPU that a 16 KiB Produce takes (docs/performance.md).
_FLUSH_EVERY = 1024
_LATENCY_BOUNDS = (*REQUEST_TIME._upper_bounds,)  # the histogram's buckets, +Inf last


class _Pending(threading.local):
    """This thread's counts not yet in the metrics (each event loop has its own)."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        # per API: the count of each latency bucket, then the sum of the latencies
        self.latency: dict[str, list[float]] = {}
        self.topics: dict[str, list[int]] = {}  # per topic: bytes in, messages in, bytes out
        self.calls = 0


_PENDING = _Pending()


def flush_pending() -> None:
    """Add this thread's pending counts to their metrics."""
    p = _PENDING
    requests, latency, topics = p.requests, p.latency, p.topics
    p.requests, p.latency, p.topics, p.calls = {}, {}, {}, 0
    for (api, version), n in requests.items():
        _request_metrics(api, version)[0].inc(n)
    for api, counts in latency.items():
        child = REQUEST_TIME.labels(api)
        # prometheus_client's Histogram has no call to add many observations at once
        for bucket, count in zip(child._buckets, counts, strict=False):
            if count:
                bucket.inc(count)
        child._sum.inc(counts[-1])
    for topic, (bytes_in, messages_in, bytes_out) in topics.items():
        counters = _topic_counters(topic)
        for counter, n in zip(counters, (bytes_in, messages_in, bytes_out), strict=True):
            if n:
                counter.inc(n)


def _topic_pending(topic: str) -> list[int]:
    counts = _PENDING.topics.get(topic)
    if counts is None:
        counts = _PENDING.topics[topic] = [0, 0, 0]
    return counts


def produced(topic: str, nbytes: int, records: int) -> None:
    counts = _topic_pending(topic)
    counts[0] += nbytes
    counts[1] += records


def sent_from_file(listener: str, nbytes: int) -> None:
    SENDFILE_BYTES.labels(listener).inc(nbytes)


def fetched(topic: str, nbytes: int) -> None:
    _topic_pending(topic)[2] += nbytes


def authentication(listener: str, succeeded: bool, reauthentication: bool = False) -> None:
    """A connection's authentication (or KIP-368 re-authentication) ended."""
    if reauthentication:
        counter = REAUTHENTICATIONS if succeeded else FAILED_REAUTHENTICATIONS
    else:
        counter = AUTHENTICATIONS if succeeded else FAILED_AUTHENTICATIONS
    counter.labels(listener).inc()


def connection_created(listener: str) -> None:
    CONNECTIONS_CREATED.labels(listener).inc()


def accept_throttled(listener: str, delay_s: float) -> None:
    ACCEPT_THROTTLE_TIME.labels(listener).inc(delay_s * 1000)


def record_request(api: str, version: int, started: float) -> None:
    p = _PENDING
    key = (api, version)
    p.requests[key] = p.requests.get(key, 0) + 1
    ms = (time.perf_counter() - started) * 1000
    counts = p.latency.get(api)
    if counts is None:
        counts = p.latency[api] = [0.0] * (len(_LATENCY_BOUNDS) + 1)
    counts[bisect_left(_LATENCY_BOUNDS, ms)] += 1  # Histogram.observe's bucket: le >= ms
    counts[-1] += ms
    p.calls += 1
    if p.calls >= _FLUSH_EVERY:
        flush_pending()


def count_errors(api: str, codes: Iterable[int]) -> None:
    """Count the non-zero error codes of one response (top level and per partition)."""
    for code in codes:
        _error_counter(api, code).inc()


def share_acquired(group: str, topic: str, partition: int,
                   ranges: list[dict[str, int]]) -> None:
    """A ShareFetch acquired `ranges` (AcquiredRecords) of one share-partition."""
    labels = (group, topic, str(partition))
    records = redelivered = 0
    for r in ranges:
        n = r["last_offset"] - r["first_offset"] + 1
        records += n
        if r["delivery_count"] > 1:
            redelivered += n
    SHARE_ACQUIRED_RECORDS.labels(*labels).inc(records)
    SHARE_ACQUIRED_BATCHES.labels(*labels).inc(len(ranges))
    if redelivered:
        SHARE_REDELIVERED.labels(*labels).inc(redelivered)


def share_acknowledged(group: str, ack_type: int, records: int) -> None:
    """`records` records acknowledged with AcknowledgeType `ack_type` (gaps and lock renewals
    are not counted, as in Kafka)."""
    name = _ACK_TYPES.get(ack_type)
    if name is not None:
        SHARE_ACKNOWLEDGEMENTS.labels(group, name).inc(records)


def share_released(group: str, topic: str, partition: int, lock_timeouts: int,
                   archived_at_limit: int) -> None:
    labels = (group, topic, str(partition))
    if lock_timeouts:
        SHARE_LOCK_TIMEOUTS.labels(*labels).inc(lock_timeouts)
    if archived_at_limit:
        SHARE_ARCHIVED_AT_LIMIT.labels(*labels).inc(archived_at_limit)


def isr_changed(old: Iterable[int], new: Iterable[int]) -> None:
    """A leader's ISR change was written: count it as a shrink and/or an expand."""
    before, after = set(old), set(new)
    if before - after:
        ISR_SHRINKS.inc()
    if after - before:
        ISR_EXPANDS.inc()


def transaction_completed(committed: bool, markers_started_ms: int) -> None:
    """CompleteCommit/CompleteAbort logged; `markers_started_ms` (wall clock) is when the
    coordinator began writing the markers (the completion's last-update timestamp)."""
    (TXN_COMMITS if committed else TXN_ABORTS).inc()
    elapsed = time.time() * 1000 - markers_started_ms
    TXN_MARKER_TIME.labels("commit" if committed else "abort").observe(max(0.0, elapsed))


def transaction_verified(started: float, codes: Iterable[int]) -> None:
    """A verification answered (Kafka's AddPartitionsToTxnManager.sendCallback): `started`
    is time.monotonic() when the leader began to ask, `codes` the answer per partition."""
    VERIFICATION_TIME.observe((time.monotonic() - started) * 1000)
    failed = sum(1 for code in codes if code)
    if failed:
        VERIFICATION_FAILURES.inc(failed)


def transaction_timed_out(abort_started: bool) -> None:
    if abort_started:
        TXN_TIMED_OUT_ABORTS.inc()


async def watch_loop_lag(interval: float = 0.5) -> None:
    loop = asyncio.get_running_loop()
    while True:
        scheduled = loop.time() + interval
        await asyncio.sleep(interval)
        LOOP_LAG.observe(max(0.0, loop.time() - scheduled))
