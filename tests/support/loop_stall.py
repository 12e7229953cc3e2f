"""How long a broker's event loop stalls while it compacts a large log, seen from a client:
ApiVersions round trips back to back during the compaction, compared with how long the
compaction took (from the broker's own log line). Used by tests/observability and bench."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from tests.protocol.wire import WireClient
from tests.support.broker import BrokerProcess

API_VERSIONS = 18
# "2026-11-23 21:40:00,123 INFO samsa.storage.log_manager: compacted T-0 offsets 0..N: A -> B bytes,
# R records removed, in D ms (thread X)"; the thread part is absent in older brokers.
_COMPACTED = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+ compacted (\S+)-0 offsets \d+\.\.\d+: "
    r"(\d+) -> (\d+) bytes, (\d+) records removed, in (\d+) ms(?: \(thread ([^)]+)\))?",
    re.M)


class Pinger(threading.Thread):
    """ApiVersions v0 round trips one after the other: (wall-clock send time, seconds)."""

    def __init__(self, bootstrap: str, pause: float = 0.005) -> None:
        super().__init__(name="pinger", daemon=True)
        self.bootstrap = bootstrap
        self.pause = pause
        self.samples: list[tuple[float, float]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        with WireClient(self.bootstrap, timeout=120) as client:
            while not self._halt.is_set():
                sent, started = time.time(), time.perf_counter()
                client.call(API_VERSIONS, 0, {})
                self.samples.append((sent, time.perf_counter() - started))
                time.sleep(self.pause)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)


@dataclass
class StallReport:
    log_bytes: int
    records_removed: int
    compaction_ms: int
    thread: str | None  # where the broker says it compacted (None: it does not say)
    pings: int  # round trips sent while the compaction ran
    max_rtt_ms: float
    p99_rtt_ms: float
    median_rtt_ms: float
    idle_max_rtt_ms: float  # the same client before the compaction started


def fill_compacted_topic(bootstrap: str, topic: str, mib: int, keys: int = 2000) -> int:
    """`mib` MiB of 200-byte values over `keys` keys, in 1 MiB segments; record i has key
    `key-<i % keys>` and a value starting with i (9 digits). The topic is created with
    cleanup.policy=delete and switched to compact afterwards, so that the cleaner sees the
    whole log at once. Returns the number of records (all acknowledged)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"cleanup.policy": "delete", "segment.bytes": str(1 << 20),
               "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 18, "acks": 1})
    pad = b"v" * 191
    count = mib * (1 << 20) // 230
    for i in range(count):
        while True:
            try:
                p.produce(topic, key=b"key-%06d" % (i % keys), value=b"%09d" % i + pad)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return count


def enable_compaction(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def measure_compaction_stall(broker: BrokerProcess, topic: str, mib: int,
                             timeout: float = 120) -> StallReport:
    fill_compacted_topic(broker.bootstrap, topic, mib)
    pinger = Pinger(broker.bootstrap)
    pinger.start()
    time.sleep(1)
    idle = [rtt for _t, rtt in pinger.samples]
    enable_compaction(broker.bootstrap, topic)
    deadline = time.monotonic() + timeout
    found = None
    while found is None and time.monotonic() < deadline:
        time.sleep(0.2)
        found = next((m for m in _COMPACTED.finditer(broker.log_text()) if m[2] == topic), None)
    pinger.stop()
    assert found is not None, f"no compaction of {topic} within {timeout} s"
    ended = datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    duration_ms = int(found[6])
    # Round trips that started while the compaction ran (or were in flight when it began).
    during = sorted(rtt for sent, rtt in pinger.samples
                    if ended - duration_ms / 1000 <= sent + rtt and sent <= ended)
    if not during:
        during = [0.0]
    return StallReport(
        log_bytes=int(found[3]), records_removed=int(found[5]), compaction_ms=duration_ms,
        thread=found[7], pings=len(during), max_rtt_ms=during[-1] * 1000,
        p99_rtt_ms=during[int(len(during) * 0.99)] * 1000,
        median_rtt_ms=during[len(during) // 2] * 1000,
        idle_max_rtt_ms=max(idle, default=0.0) * 1000)
