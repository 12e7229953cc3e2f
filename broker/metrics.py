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
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from .app import Broker
    from .cluster.metadata_store import MetadataStore, TopicState

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
                _call_on_loop(self.loop, self.loop_thread, flush_pending, self.timeout_s)
        except concurrent.futures.TimeoutError:
            log.warning("metrics scrape: the event loop did not flush its counts in %.0f s",
                        self.timeout_s)
        except RuntimeError:  # the loop is closed: shutting down
            pass
        return iter(())


def _call_on_loop(loop: asyncio.AbstractEventLoop, loop_thread: int, fn: Callable[[], T],
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
_GROUP_STATE_GAUGES = {
    "PreparingRebalance": "numgroupspreparingrebalance",
    "CompletingRebalance": "numgroupscompletingrebalance",
    "Stable": "numgroupsstable",
    "Dead": "numgroupsdead",
    "Empty": "numgroupsempty",
}
_TXN_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
    "Dead",
)


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


def transaction_timed_out(abort_started: bool) -> None:
    if abort_started:
        TXN_TIMED_OUT_ABORTS.inc()


async def watch_loop_lag(interval: float = 0.5) -> None:
    loop = asyncio.get_running_loop()
    while True:
        scheduled = loop.time() + interval
        await asyncio.sleep(interval)
        LOOP_LAG.observe(max(0.0, loop.time() - scheduled))


# ---- scrape-time gauges -----------------------------------------------------------------------
def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def broker_gauges(broker: Broker) -> list[Metric]:
    """Every state gauge, read from the broker's structures. Runs on the event loop."""
    out: list[Metric] = []
    out += _log_gauges(broker)
    out += _controller_gauges(broker)
    out += _group_gauges(broker)
    out += _share_gauges(broker)
    out += _transaction_gauges(broker)
    out += _quota_gauges(broker)
    out += _socket_server_gauges(broker)
    out += client_telemetry(broker)
    return out


# The client's identity on each of its pushed metrics (KIP-714's resource attributes).
_CLIENT_LABELS = ("client_instance_id", "client_id", "client_software_name",
                  "client_software_version", "client_source_address", "client_source_port")


def client_telemetry(broker: Broker) -> list[Metric]:
    """The metrics clients push (PushTelemetry), each named as its OTLP name with '_' for
    '.', labelled with the client's identity and the point's attributes; an instance's go
    when it expires or its connection closes."""
    telemetry = getattr(broker, "telemetry", None)
    if telemetry is None:
        return []
    telemetry.expire(int(time.time() * 1000))
    families: dict[str, Metric] = {}
    for instance in telemetry.instances.values():
        client = {k: instance.client.get(k, "") for k in _CLIENT_LABELS}
        for name, kind, labels, value in instance.exported.samples():
            family = families.get(name)
            if family is None:  # the first client's kind is the family's
                family = families[name] = Metric(name, "Pushed by clients (KIP-714)", kind)
            sample_labels = {k: v for k, v in labels if k not in client} | client
            family.add_sample(name + "_total" if family.type == "counter" else name,
                              sample_labels, value)
    return list(families.values())


def _socket_server_gauges(broker: Broker) -> list[GaugeMetricFamily]:
    """kafka.network:type=SocketServer MemoryPoolAvailable and MemoryPoolUsed, the
    socket-server-metrics MemoryPoolDepletedTimeTotal (as seconds), how often the pool ran
    dry and the connections waiting for it, and the open connections."""
    server = getattr(broker, "_server", None)
    if server is None:
        return []
    pool = server.memory_pool
    values = [
        ("kafka_network_socketserver_memorypoolavailable", "Bytes the memory pool for requests "
         "(queued.max.request.bytes) has left; -1 when unbounded.", pool.available),
        ("kafka_network_socketserver_memorypoolused", "Bytes of requests in flight.",
         pool.used),
        ("kafka_server_socket_server_metrics_memorypooldepletedtime_seconds", "Total time "
         "the memory pool for requests refused memory.", pool.depleted_seconds()),
        ("samsa_network_memorypool_depletions", "Times the memory pool for requests started "
         "refusing memory.", pool.depletions),
        ("samsa_network_memorypool_waiting_connections", "Connections not read until the "
         "memory pool for requests has memory again.", pool.waiting),
        ("kafka_server_socket_server_metrics_connection_count", "Connections open (accepted "
         "and not yet closed).", server.connection_count),
    ]
    out = []
    for name, doc, value in values:
        gauge = _gauge(name, doc)
        gauge.add_metric([], value)
        out.append(gauge)
    return out


_QUOTA_METRIC_TYPES = {"producer_byte_rate": "produce", "consumer_byte_rate": "fetch",
                       "request_percentage": "request"}


def _quota_gauges(broker: Broker) -> list[GaugeMetricFamily]:
    """kafka.server:type=Produce|Fetch|Request,user=..,client-id=.. throttle-time: per quota
    sensor, the average throttle time (ms) of its requests throttled in the quota window."""
    quotas = getattr(broker, "quotas", None)
    if quotas is None:
        return []
    gauges = {kind: _gauge(f"kafka_server_{kind}_throttle_time",
                           f"Average throttle time (ms) of the {kind} requests throttled in "
                           "the quota window, per quota sensor (user, client id).",
                           ["user", "client_id"])
              for kind in _QUOTA_METRIC_TYPES.values()}
    for quota_type, user, client_id, value in quotas.throttle_times():
        gauges[_QUOTA_METRIC_TYPES[quota_type]].add_metric([user, client_id], value)
    return list(gauges.values())


def _log_gauges(broker: Broker) -> list[GaugeMetricFamily]:
    """kafka.log:type=Log (Size, NumLogSegments, LogEndOffset, LogStartOffset), the last
    stable offset lag, and kafka.server:type=ReplicaManager partition counts."""
    labels = ["topic", "partition"]
    size = _gauge("kafka_log_log_size", "Log size in bytes.", labels)
    segments = _gauge("kafka_log_log_numlogsegments", "Number of segments.", labels)
    end = _gauge("kafka_log_log_logendoffset", "Log end offset.", labels)
    start = _gauge("kafka_log_log_logstartoffset", "Log start offset.", labels)
    lso_lag = _gauge(
        "samsa_partition_last_stable_offset_lag",
        "High watermark minus last stable offset (records held back by open transactions).",
        labels,
    )
    partitions = list(broker.replicas.partitions())
    under = under_min = 0
    for p in partitions:
        key = [p.topic, str(p.index)]
        plog = p.log
        size.add_metric(key, plog.size_in_bytes)
        segments.add_metric(key, plog.num_segments)
        end.add_metric(key, plog.log_end_offset)
        start.add_metric(key, plog.log_start_offset)
        lso_lag.add_metric(key, plog.high_watermark - plog.last_stable_offset)
        if p.is_leader:
            under += len(p.isr) < len(p.replicas)
            under_min += len(p.isr) < p.min_insync_replicas
    count = _gauge(
        "kafka_server_replicamanager_partitioncount", "Partitions hosted by this broker."
    )
    count.add_metric([], len(partitions))
    leaders = _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads.")
    leaders.add_metric([], sum(1 for p in partitions if p.is_leader))
    under_g = _gauge(
        "kafka_server_replicamanager_underreplicatedpartitions",
        "Led partitions whose ISR is smaller than their replica set.",
    )
    under_g.add_metric([], under)
    under_min_g = _gauge(
        "kafka_server_replicamanager_underminisrpartitioncount",
        "Led partitions whose ISR is smaller than their min.insync.replicas.",
    )
    under_min_g.add_metric([], under_min)
    return [size, segments, end, start, lso_lag, count, leaders, under_g, under_min_g,
            *_log_dir_gauges(broker)]


def _log_dir_gauges(broker: Broker) -> list[GaugeMetricFamily]:
    """kafka.log:type=LogManager (OfflineLogDirectoryCount, LogDirectoryOffline per dir, and
    KIP-1066's CordonedLogDirectoryCount and LogDirectoryCordoned) and
    kafka.server:type=ReplicaManager,name=OfflineReplicaCount."""
    dirs = broker.log_manager
    offline_dirs = set(dirs.offline_dirs)
    count = _gauge("kafka_log_logmanager_offlinelogdirectorycount",
                   "Log directories offline after an I/O error (until the broker restarts).")
    count.add_metric([], len(offline_dirs))
    per_dir = _gauge("kafka_log_logmanager_logdirectoryoffline",
                     "1 if the log directory is offline, else 0.", ["logdirectory"])
    cordoned = _gauge("kafka_log_logmanager_cordonedlogdirectorycount",
                      "Log directories cordoned (cordoned.log.dirs): they take no new partitions.")
    cordoned.add_metric([], len(dirs.cordoned))
    per_dir_cordoned = _gauge("kafka_log_logmanager_logdirectorycordoned",
                              "1 if the log directory is cordoned, else 0.", ["logdirectory"])
    for d in dirs.dirs:
        per_dir.add_metric([d], int(d in offline_dirs))
        per_dir_cordoned.add_metric([d], int(d in dirs.cordoned))
    replicas = _gauge("kafka_server_replicamanager_offlinereplicacount",
                      "Partitions assigned here whose log directory has failed.")
    replicas.add_metric([], len(broker.replicas.offline))
    return [count, per_dir, cordoned, per_dir_cordoned, replicas]


def _controller_gauges(broker: Broker) -> list[GaugeMetricFamily]:
    """kafka.controller:type=KafkaController gauges. Like Kafka, only the active controller
    reports non-zero counts; a broker without ZooKeeper is its own controller."""
    controller = getattr(broker, "controller", None)
    active = controller is None or bool(controller.active)
    topics = list(broker.store.topics().values()) if active else []
    offline, total = offline_partitions(broker.store, topics)
    active_g = _gauge(
        "kafka_controller_kafkacontroller_activecontrollercount",
        "1 on the active controller, 0 elsewhere.",
    )
    active_g.add_metric([], 1 if active else 0)
    offline_g = _gauge(
        "kafka_controller_kafkacontroller_offlinepartitionscount",
        "Partitions without a live leader (reported by the active controller).",
    )
    offline_g.add_metric([], offline)
    topics_g = _gauge(
        "kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster."
    )
    topics_g.add_metric([], len(topics))
    parts_g = _gauge(
        "kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster."
    )
    parts_g.add_metric([], total)
    return [active_g, offline_g, topics_g, parts_g]


def offline_partitions(store: MetadataStore, topics: Iterable[TopicState]) -> tuple[int, int]:
    """(partitions of `topics` without a live leader, all of them): none named, one not
    registered, or a leadership of its leader's previous life (the broker restarted and leads
    again only once the controller writes it at the next epoch: Kafka's controller takes it
    as failed first, its partitions offline meanwhile)."""
    live = {b.broker_id for b in store.brokers()}
    offline = total = 0
    for topic in topics:
        for state in list(topic.partitions.values()):
            total += 1
            offline += (state.leader == -1 or state.leader not in live
                        or store.leader_in_previous_life(state))
    return offline, total


def _group_gauges(broker: Broker) -> list[GaugeMetricFamily]:
    """kafka.coordinator.group:type=GroupMetadataManager NumGroups* and NumOffsets for the
    groups this broker coordinates, plus each group's lag on the partitions hosted here."""
    coordinator = getattr(broker, "groups", None)
    groups = [
        g for g in list(coordinator.groups.values()) if g.partition in coordinator.loaded
    ] if coordinator is not None else []
    by_state = dict.fromkeys(_GROUP_STATE_GAUGES, 0)
    offsets = 0
    lag = _gauge(
        "kafka_consumergroup_lag",
        "High watermark minus the group's committed offset (partitions hosted here).",
        ["consumergroup", "topic", "partition"],
    )
    current = _gauge(
        "kafka_consumergroup_current_offset",
        "The group's committed offset.",
        ["consumergroup", "topic", "partition"],
    )
    lag_sum = _gauge(
        "kafka_consumergroup_lag_sum",
        "Lag of the group summed over the partitions hosted here.",
        ["consumergroup", "topic"],
    )
    for group in groups:
        state = group.state.value
        by_state[state] = by_state.get(state, 0) + 1
        offsets += len(group.offsets)
        sums: dict[str, int] = {}
        for (topic, index), committed in list(group.offsets.items()):
            key = [group.group_id, topic, str(index)]
            current.add_metric(key, committed.value.offset)
            partition = broker.replicas.get(topic, index)
            if partition is None:
                continue
            behind = max(0, partition.high_watermark - committed.value.offset)
            lag.add_metric(key, behind)
            sums[topic] = sums.get(topic, 0) + behind
        for topic, total in sums.items():
            lag_sum.add_metric([group.group_id, topic], total)
    out = []
    num = _gauge(
        "kafka_coordinator_group_groupmetadatamanager_numgroups",
        "Consumer groups this broker coordinates.",
    )
    num.add_metric([], len(groups))
    out.append(num)
    for state, suffix in _GROUP_STATE_GAUGES.items():
        g = _gauge(
            f"kafka_coordinator_group_groupmetadatamanager_{suffix}",
            f"Groups this broker coordinates in state {state}.",
        )
        g.add_metric([], by_state.get(state, 0))
        out.append(g)
    num_offsets = _gauge(
        "kafka_coordinator_group_groupmetadatamanager_numoffsets",
        "Committed offsets held by this broker's group coordinator.",
    )
    num_offsets.add_metric([], offsets)
    out += [num_offsets, current, lag, lag_sum]
    return out


_SHARE_GROUP_STATES = ("Empty", "Stable", "Dead")


def _share_gauges(broker: Broker) -> list[GaugeMetricFamily]:
    """Kafka's SharePartitionMetrics InFlightMessageCount / InFlightBatchCount for the
    share-partitions led here, and group-coordinator-metrics share-group-count by state (with
    each share group's member count) for the share groups coordinated here."""
    labels = ["group", "topic", "partition"]
    messages = _gauge("kafka_server_sharepartitionmetrics_inflightmessagecount",
                      "Records in flight in the share-partition (share-partition start offset "
                      "to end offset, not yet past the start offset).", labels)
    batches = _gauge("kafka_server_sharepartitionmetrics_inflightbatchcount",
                     "In-flight batches of the share-partition (runs of consecutive records "
                     "in one state and delivery count).", labels)
    shares = getattr(broker, "shares", None)
    for (group, topic, index), led in list(shares.partitions.items()) if shares else []:
        key = [group, topic, str(index)]
        messages.add_metric(key, len(led.state.records))
        batches.add_metric(key, led.state.batch_count())
    coordinator = getattr(broker, "groups", None)
    groups = [g for g in list(coordinator.share_groups.values())
              if g.partition in coordinator.loaded] if coordinator is not None else []
    by_state = dict.fromkeys(_SHARE_GROUP_STATES, 0)
    members = _gauge("samsa_share_group_members", "Members of each share group coordinated "
                     "here.", ["group"])
    for g in groups:
        state = g.state().value
        by_state[state] = by_state.get(state, 0) + 1
        members.add_metric([g.group_id], len(g.members))
    count = _gauge("kafka_server_group_coordinator_metrics_share_group_count",
                   "Share groups this broker coordinates, by state.", ["state"])
    for state, n in by_state.items():
        count.add_metric([state], n)
    return [messages, batches, count, members]


def _transaction_gauges(broker: Broker) -> list[GaugeMetricFamily]:
    """Transactional ids this broker coordinates, by Kafka's TransactionState name."""
    coordinator = getattr(broker, "transactions", None)
    txns = coordinator.loaded_transactions() if coordinator is not None else []
    by_state = dict.fromkeys(_TXN_STATES, 0)
    for md in txns:
        name = md.state.kafka_name
        by_state[name] = by_state.get(name, 0) + 1
    g = _gauge(
        "kafka_coordinator_transaction_transactionstatemanager_numtransactions",
        "Transactional ids this broker coordinates, by state (Ongoing = open transactions).",
        ["state"],
    )
    for state, n in by_state.items():
        g.add_metric([state], n)
    return [g]


class BrokerCollector(Collector):
    """Reads `broker_gauges` on the broker's event loop (the scrape runs in the HTTP server's
    thread); a loop too busy to answer within `timeout_s` costs the scrape these gauges only."""

    def __init__(self, broker: Broker, loop: asyncio.AbstractEventLoop, timeout_s: float = 5.0):
        self.broker = broker
        self.loop = loop
        self.timeout_s = timeout_s
        self._loop_thread = threading.get_ident()

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # registering must not run a collection

    def collect(self) -> Iterator[Metric]:
        try:
            yield from _call_on_loop(self.loop, self._loop_thread,
                                     lambda: broker_gauges(self.broker), self.timeout_s)
        except concurrent.futures.TimeoutError:
            log.warning("metrics scrape: the event loop did not answer in %.0f s", self.timeout_s)
        except RuntimeError:  # the loop is closed: shutting down
            return
        except Exception:
            log.exception("metrics scrape: reading the broker's state failed")


def start_endpoint(
    broker: Broker, host: str, port: int, registry: CollectorRegistry = REGISTRY
) -> None:
    _FLUSHER.loop, _FLUSHER.loop_thread = asyncio.get_running_loop(), threading.get_ident()
    registry.register(BrokerCollector(broker, asyncio.get_running_loop()))
    broker.log_manager.flush_observer = LOG_FLUSH_TIME.observe
    start_http_server(port, addr=host, registry=registry)
    log.info("Prometheus metrics on http://%s:%d/metrics", host, port)
