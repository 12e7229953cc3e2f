"""Prometheus metrics, named the way the Prometheus JMX exporter names Kafka's JMX beans.

kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9 becomes
kafka_network_requestmetrics_requestspersec_total{request="Produce",version="9"}, so existing
Kafka dashboards work with few edits. Per-partition log gauges are computed at scrape time
from the replica manager (no bookkeeping on the hot path).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

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
LOOP_LAG = Histogram(
    "samsa_event_loop_lag_seconds",
    "How late the event loop runs a timer scheduled every 0.5 s.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


class LogCollector(Collector):
    """kafka.log:type=Log (Size, NumLogSegments, LogEndOffset, LogStartOffset) and
    kafka.server:type=ReplicaManager partition counts, read when scraped."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Log size in bytes.", labels=labels)
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments", "Number of segments.", labels=labels
        )
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset.", labels=labels)
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "Log start offset.", labels=labels
        )
        lso_lag = GaugeMetricFamily(
            "samsa_partition_last_stable_offset_lag",
            "High watermark minus last stable offset (records held back by open transactions).",
            labels=labels,
        )
        partitions = list(self.broker.replicas.partitions())
        for p in partitions:
            key = [p.topic, str(p.index)]
            plog = p.log
            size.add_metric(key, plog.size_in_bytes)
            segments.add_metric(key, plog.num_segments)
            end.add_metric(key, plog.log_end_offset)
            start.add_metric(key, plog.log_start_offset)
            lso_lag.add_metric(key, plog.high_watermark - plog.last_stable_offset)
        count = GaugeMetricFamily(
            "kafka_server_replicamanager_partitioncount", "Partitions hosted by this broker."
        )
        count.add_metric([], len(partitions))
        leaders = GaugeMetricFamily(
            "kafka_server_replicamanager_leadercount", "Partitions this broker leads."
        )
        leaders.add_metric([], sum(1 for p in partitions if p.is_leader))
        under = GaugeMetricFamily(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Led partitions whose ISR is smaller than their replica set.",
        )
        under.add_metric(
            [], sum(1 for p in partitions if p.is_leader and len(p.isr) < len(p.replicas))
        )
        yield from (size, segments, end, start, lso_lag, count, leaders, under)


def record_request(api: str, version: int, started: float) -> None:
    REQUESTS.labels(api, str(version)).inc()
    REQUEST_TIME.labels(api).observe((time.perf_counter() - started) * 1000)


def count_errors(api: str, result: Any) -> None:
    """Count every non-zero error_code in a response dict (top level and per partition)."""
    stack = [result]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            code = item.get("error_code")
            if code:
                ERRORS.labels(api, str(int(code))).inc()
            stack.extend(v for v in item.values() if isinstance(v, list | dict))
        elif isinstance(item, list):
            stack.extend(v for v in item if isinstance(v, list | dict))


async def watch_loop_lag(interval: float = 0.5) -> None:
    loop = asyncio.get_running_loop()
    while True:
        scheduled = loop.time() + interval
        await asyncio.sleep(interval)
        LOOP_LAG.observe(max(0.0, loop.time() - scheduled))


def start_endpoint(
    broker: Any, host: str, port: int, registry: CollectorRegistry = REGISTRY
) -> None:
    registry.register(LogCollector(broker))
    start_http_server(port, addr=host, registry=registry)
    log.info("Prometheus metrics on http://%s:%d/metrics", host, port)
