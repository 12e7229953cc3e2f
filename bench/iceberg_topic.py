"""Iceberg topics (docs/lakehouse.md). Measures, does not judge:

1. catch-up: `--records` records (`--size` B values, 3 partitions) are produced with the topic's
   samsa.iceberg.mode disabled, then it is set to key_value: the time until the table holds
   them all (records/s into the table) and the broker's CPU seconds in that time, per GB of
   record values;
2. visibility: one-record transactions, one every 0.5 s: the delay from commit_transaction's
   return to the record in the table's current snapshot (what pyiceberg, and Spark with
   cache-enabled=false, read), for each `--intervals` iceberg.catalog.commit.interval.ms.

    .venv/bin/python bench/iceberg_topic.py
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402

from tests.lakehouse.helpers import table_keys  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def iceberg_broker(interval_ms: int, topic: NewTopic
                   ) -> Iterator[tuple[BrokerProcess, Path, AdminClient]]:
    """A throw-away broker with `topic` created."""
    with tempfile.TemporaryDirectory(prefix="samsa-iceberg-") as tmp:
        data = Path(tmp) / "data"
        broker = BrokerProcess(data, settings={"iceberg.catalog.commit.interval.ms": interval_ms})
        broker.start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([topic])[topic.topic].result(30)
            yield broker, data, admin
        finally:
            broker.stop()


def catch_up(records: int, size: int, interval_ms: int) -> None:
    with iceberg_broker(interval_ms, NewTopic("bench", 3, 1)) as (broker, data, admin):
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                      "batch.size": 1 << 20, "compression.type": "none"})
        value = b"x" * size
        for i in range(records):
            p.produce("bench", key=str(i).encode(), value=value)
            if i % 10000 == 0:
                p.poll(0)
        assert p.flush(120) == 0
        assert broker.pid is not None
        cpu0, t0 = cpu_seconds(broker.pid), time.monotonic()
        resource = ConfigResource("topic", "bench", set_config={
            "samsa.iceberg.mode": "key_value"})
        admin.alter_configs([resource])[resource].result(30)
        n = 0
        while n < records:
            time.sleep(0.2)
            n = len(table_keys(data, "bench"))
        secs, cpu = time.monotonic() - t0, cpu_seconds(broker.pid) - cpu0
        gb = records * size / 1e9
        print(f"catch-up: {records} records of {size} B in {secs:.1f} s = "
              f"{records / secs:,.0f} records/s ({gb * 1000 / secs:.1f} MB/s of values); "
              f"broker CPU {cpu:.1f} s = {cpu / gb:.0f} CPU s/GB "
              f"(interval {interval_ms} ms; includes the first pyiceberg import)")


def visibility(interval_ms: int, count: int) -> None:
    topic = NewTopic("vis", 1, 1, config={"samsa.iceberg.mode": "key_value"})
    with iceberg_broker(interval_ms, topic) as (broker, data, _):
        p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "vis"})
        p.init_transactions(30)
        delays: list[float] = []
        for i in range(count + 1):
            p.begin_transaction()
            p.produce("vis", key=f"k{i}".encode(), value=b"v")
            p.commit_transaction(30)
            committed = time.monotonic()
            while f"k{i}".encode() not in table_keys(data, "vis"):
                time.sleep(0.02)
            if i:  # the first waits for the table's creation
                delays.append(time.monotonic() - committed)
            time.sleep(0.5)
        print(f"visibility at interval {interval_ms} ms: median "
              f"{statistics.median(delays) * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms "
              f"over {len(delays)} transactions")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--transactions", type=int, default=20)
    ap.add_argument("--intervals", type=int, nargs="+", default=[1000, 200])
    args = ap.parse_args()
    catch_up(args.records, args.size, 1000)
    for interval in args.intervals:
        visibility(interval, args.transactions)


if __name__ == "__main__":
    main()
