"""One /metrics endpoint for a node (`samsa serve --processes N` with metrics.port M).

Process i serves its own /metrics on M+1+i; the supervisor serves M, where each scrape reads
every process's endpoint at once and answers with their series merged, each labelled
`process="<broker id>"` (one family, one HELP and TYPE, per metric name), and
`samsa_node_process_up{process}` 1 for a process that answered, 0 for one that did not (down,
or starting again after a crash): its series are then absent from that scrape.
"""

from __future__ import annotations

import concurrent.futures
import logging
import urllib.request
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

log = logging.getLogger("samsa.node")

SCRAPE_TIMEOUT = 5.0
LABEL = "process"


def _read(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT) as resp:
            return bytes(resp.read()).decode()
    except OSError:
        return None


class NodeCollector(Collector):
    """The node's processes' metrics, `urls` by broker id."""

    def __init__(self, urls: Mapping[int, str]) -> None:
        self.urls = dict(urls)

    def collect(self) -> Iterator[Metric]:
        with concurrent.futures.ThreadPoolExecutor(len(self.urls)) as pool:
            texts = dict(zip(self.urls, pool.map(_read, self.urls.values()), strict=True))
        up = GaugeMetricFamily("samsa_node_process_up", "Whether the process answered this "
                               "scrape of the node's /metrics.", labels=[LABEL])
        families: dict[str, Metric] = {}
        for broker_id, text in texts.items():
            up.add_metric([str(broker_id)], 0.0 if text is None else 1.0)
            for family in text_string_to_metric_families(text or ""):
                merged = families.setdefault(family.name, Metric(
                    family.name, family.documentation, family.type, family.unit))
                for s in family.samples:
                    merged.add_sample(s.name, {**s.labels, LABEL: str(broker_id)}, s.value,
                                      s.timestamp, s.exemplar)
        yield up
        yield from families.values()


def serve_node_metrics(host: str, port: int, urls: Mapping[int, str]) -> None:
    """The node's /metrics on host:port, on a thread of the supervisor."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeCollector(urls))
    start_http_server(port, addr=host, registry=registry)
    log.info("the node's Prometheus metrics on http://%s:%d/metrics", host, port)
