"""The /metrics endpoint: Prometheus's HTTP server, and the gauges of broker state (partitions,
ISR, controller, log sizes, groups, share groups, transactions, quotas, connections, client
telemetry) computed at scrape time from the broker's own structures, on its event loop. The
counters and histograms the request path bumps are metrics.py's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .metrics import LOG_FLUSH_TIME, call_on_loop, flush_from_this_loop

if TYPE_CHECKING:
    from .app import Broker
    from .cluster.metadata_store import MetadataStore, TopicState

log = logging.getLogger(__name__)

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
    out += _fetch_session_metrics(broker)
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


def _fetch_session_metrics(broker: Broker) -> list[Metric]:
    """kafka.server:type=FetchSessionCache: the incremental fetch sessions cached, their
    partitions and the evictions (IncrementalFetchSessionEvictionsPerSec, as a total)."""
    cache = getattr(broker, "fetch_sessions", None)
    if cache is None:
        return []
    sessions = _gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                      "Incremental fetch sessions (KIP-227) this broker keeps.")
    sessions.add_metric([], len(cache))
    partitions = _gauge("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                        "Partitions of the incremental fetch sessions this broker keeps.")
    partitions.add_metric([], cache.partitions_cached())
    evictions = CounterMetricFamily(
        "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
        "Incremental fetch sessions evicted to make room for new ones.")
    evictions.add_metric([], cache.evictions)
    return [sessions, partitions, evictions]


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
            yield from call_on_loop(self.loop, self._loop_thread,
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
    flush_from_this_loop()
    registry.register(BrokerCollector(broker, asyncio.get_running_loop()))
    broker.log_manager.flush_observer = LOG_FLUSH_TIME.observe
    start_http_server(port, addr=host, registry=registry)
    log.info("Prometheus metrics on http://%s:%d/metrics", host, port)
