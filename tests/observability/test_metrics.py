"""The Prometheus endpoint: counters move with the workload and carry the right values."""

from __future__ import annotations

import re
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import free_port


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def _value(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {labels} not found in scrape")


def test_metrics_follow_produce_and_fetch(broker_factory, unique_topic):
    port = free_port()
    b = broker_factory({"metrics.port": port})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    payload = b"x" * 100
    for _ in range(1000):
        p.produce(unique_topic, payload)
    assert p.flush(30) == 0

    text = _scrape(port)
    assert (
        _value(text, "kafka_server_brokertopicmetrics_messagesinpersec_total", topic=unique_topic)
        == 1000
    )
    assert _value(text, "kafka_log_log_logendoffset", topic=unique_topic, partition="0") == 1000
    assert _value(text, "kafka_log_log_size", topic=unique_topic, partition="0") > 100_000
    produces = _value(text, "kafka_network_requestmetrics_requestspersec_total", request="Produce")
    assert produces >= 1
    # counted on the event loop and added to the metrics before the scrape: all of them
    timed = ("kafka_network_requestmetrics_totaltimems_count",
             "kafka_network_requestmetrics_totaltimems_bucket")
    assert _value(text, timed[0], request="Produce") == produces
    assert _value(text, timed[1], request="Produce", le="+Inf") == produces
    assert _value(text, timed[1], request="Produce", le="0.5") <= produces
    assert _value(text, "kafka_server_replicamanager_partitioncount") >= 1

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "m", "enable.auto.commit": False})
    c.assign([TopicPartition(unique_topic, 0, 0)])
    seen = 0
    for _ in range(30):
        seen += len([m for m in c.consume(1000, timeout=1) if m.error() is None])
        if seen >= 1000:
            break
    c.close()
    assert seen == 1000
    out = _value(
        _scrape(port), "kafka_server_brokertopicmetrics_bytesoutpersec_total", topic=unique_topic
    )
    assert out >= 100_000
    assert re.search(r"samsa_event_loop_lag_seconds_count \d", _scrape(port))


def test_under_min_isr_partition_count(broker_factory, unique_topic):
    """Kafka's UnderMinIsrPartitionCount: led partitions whose ISR is smaller than the topic's
    min.insync.replicas (here one replica each, two wanted)."""
    port = free_port()
    b = broker_factory({"metrics.port": port})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    new = NewTopic(unique_topic, 2, 1, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[unique_topic].result(30)
    name = "kafka_server_replicamanager_underminisrpartitioncount"
    deadline = time.monotonic() + 10
    while _value(_scrape(port), name) != 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _value(_scrape(port), name) == 2
    assert _value(_scrape(port), "kafka_server_replicamanager_underreplicatedpartitions") == 0


def test_cordoned_log_directories(broker_factory, tmp_path):
    """KIP-1066's LogManager gauges: CordonedLogDirectoryCount and LogDirectoryCordoned."""
    port = free_port()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    broker_factory({"metrics.port": port, "log.dirs": f"{a},{b}", "cordoned.log.dirs": b})
    text = _scrape(port)
    assert _value(text, "kafka_log_logmanager_cordonedlogdirectorycount") == 1
    assert _value(text, "kafka_log_logmanager_logdirectorycordoned", logdirectory=b) == 1
    assert _value(text, "kafka_log_logmanager_logdirectorycordoned", logdirectory=a) == 0
