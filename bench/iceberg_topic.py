"""Iceberg topics (docs/lakehouse.md). Measures, does not judge:

1. catch-up: `--records` records (`--size` B values, 3 partitions) are produced with the topic's
   samsa.iceberg.mode disabled, then it is set to key_value: the time until the table holds
   them all (records/s into the table) and the broker's CPU seconds in that time, per GB of
   record values;
2. visibility: one-record transactions, one every 0.5 s: the delay from commit_transaction's
   return to the record in the table's current snapshot (what pyiceberg, and Spark with
   cache-enabled=false, read), for each `--intervals` iceberg.catalog.commit.interval.ms;
3. spark: a producer commits a transaction of `--spark-records` records every `--spark-every`
   seconds while a PySpark session (local[1], the catalog of examples/spark_iceberg_topic.py,
   cache-enabled=false) queries count(*) and max(offset) of `spark.table(...)` back to back;
   per commit, the delay from commit_transaction's return to the end of the first query that
   saw its last record: p50/p99/max over `--spark-commits` commits, for each interval. Needs
   the jars of `make spark-deps`.

    .venv/bin/python bench/iceberg_topic.py [--phases catch-up visibility spark]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "examples"))

from confluent_kafka import KafkaException, Producer  # noqa: E402
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


class PacedTransactions(threading.Thread):
    """Transactions of `records` records, one begun every `every` seconds: for each, when its
    commit_transaction returned and the offset of its last record."""

    def __init__(self, bootstrap: str, topic: str, count: int, records: int,
                 every: float) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.count, self.records, self.every = count, records, every
        self.commits: list[tuple[float, int]] = []

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.topic,
                      "linger.ms": 0, "log_level": 4})
        p.init_transactions(30)
        offsets: list[int] = []

        def delivered(err: Any, msg: Any) -> None:
            offset = msg.offset()
            if err is not None or offset is None:
                raise KafkaException(err)
            offsets.append(offset)

        start = time.monotonic()
        for i in range(self.count):
            time.sleep(max(0.0, start + i * self.every - time.monotonic()))
            p.begin_transaction()
            for _ in range(self.records):
                p.produce(self.topic, value=b"v" * 100, on_delivery=delivered)
            p.flush(30)  # the delivery reports, with the offsets
            p.commit_transaction(30)
            self.commits.append((time.monotonic(), max(offsets)))


def spark_queries(spark: Any, table: str, producer: PacedTransactions
                  ) -> list[tuple[float, float, int]]:
    """count(*) and max(offset) of the table back to back until the producer's last commit is
    seen: (start, end, max offset) of each query."""
    queries: list[tuple[float, float, int]] = []
    while True:
        t0 = time.monotonic()
        row = spark.table(table).selectExpr("count(*) AS n", "max(offset) AS m").first()
        queries.append((t0, time.monotonic(), -1 if row["m"] is None else row["m"]))
        if not producer.is_alive() and queries[-1][2] >= producer.commits[-1][1]:
            return queries


def percentile(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, round(q * (len(values) - 1)))]


def spark_visibility(interval_ms: int, count: int, records: int, every: float) -> None:
    import spark_iceberg_topic as example  # examples/: the documented catalog settings

    topic = NewTopic("spark_vis", 1, 1, config={"samsa.iceberg.mode": "key_value"})
    with iceberg_broker(interval_ms, topic) as (broker, data, _):
        first = PacedTransactions(broker.bootstrap, "spark_vis", 1, 1, 0)
        first.run()  # the table exists before Spark reads it
        while not table_keys(data, "spark_vis"):
            time.sleep(0.1)
        spark = example.spark_session(None, master="local[1]")
        try:
            example.configure_catalog(spark, data)
            spark.conf.set(f"spark.sql.catalog.{example.CATALOG}.cache-enabled", "false")
            table = example.table_name("spark_vis")
            warm_until = time.monotonic() + 20  # the JVM's JIT: the first queries are slow
            while time.monotonic() < warm_until:
                spark.table(table).selectExpr("count(*)", "max(offset)").first()
            producer = PacedTransactions(broker.bootstrap, "spark_vis", count, records, every)
            producer.start()
            queries = spark_queries(spark, table, producer)
        finally:
            spark.stop()
    delays = [next(end for _, end, m in queries if m >= offset) - committed
              for committed, offset in producer.commits]
    took = [end - start for start, end, _ in queries]
    print(f"spark visibility at interval {interval_ms} ms ({count} transactions of {records} "
          f"records, one every {every} s): p50 {percentile(delays, 0.5) * 1000:.0f} ms, "
          f"p99 {percentile(delays, 0.99) * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms; "
          f"{len(queries)} Spark queries of median {statistics.median(took) * 1000:.0f} ms "
          f"(max {max(took) * 1000:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phases", nargs="+", default=["catch-up", "visibility", "spark"],
                    choices=["catch-up", "visibility", "spark"])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--transactions", type=int, default=20)
    ap.add_argument("--intervals", type=int, nargs="+", default=[1000, 200])
    ap.add_argument("--spark-commits", type=int, default=100)
    ap.add_argument("--spark-records", type=int, default=10)
    ap.add_argument("--spark-every", type=float, default=0.5)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}")
    if "catch-up" in args.phases:
        catch_up(args.records, args.size, 1000)
    for interval in args.intervals:
        if "visibility" in args.phases:
            visibility(interval, args.transactions)
        if "spark" in args.phases:
            spark_visibility(interval, args.spark_commits, args.spark_records, args.spark_every)
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
