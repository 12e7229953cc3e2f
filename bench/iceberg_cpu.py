"""The broker's CPU per GB written, with and without an Iceberg table behind the topic.

The same load, a transactional librdkafka producer (`--per-txn` records of `--sizes` bytes per
transaction, one partition), goes into three brokers started side by side with bench/run.py's
helpers: Samsa into a topic with samsa.iceberg.mode disabled ("samsa plain"), Samsa into a topic
with key_value ("samsa iceberg"), and Apache Kafka 4.3.1 from bench/pom.xml ("kafka plain";
Kafka has no Iceberg topics). The runs alternate between the three, in a rotating order, and
each run writes a new topic. A broker's CPU (utime+stime of its process group, /proc) is
counted from the first record until the producer's last commit returned and, for the Iceberg
topic, until the table's snapshot covers the partition's whole log (its
samsa.next-offset.0 reaches the log end offset): the Iceberg commits' own work included.
Per GB of record values. Prints every run and the medians; measures, does not judge.

    .venv/bin/python bench/iceberg_cpu.py --runs 3
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import run as bench  # noqa: E402  (bench/ is a directory of scripts, not a package)
from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from samsa.broker.lakehouse.table import TopicTable, open_catalog  # noqa: E402

VARIANTS = ("samsa plain", "samsa iceberg", "kafka plain")


def produce_transactions(bootstrap: str, topic: str, n: int, size: int, per_txn: int) -> float:
    """`n` records in transactions of `per_txn`, all committed; the seconds it took."""
    t0 = time.monotonic()
    out = bench.rdkafka_transactional_data(bootstrap, topic, n, size, per_txn,
                                           abort_every=n // per_txn + 1)
    if out.error:
        raise RuntimeError(out.error)
    return time.monotonic() - t0


def log_end(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "log_level": 4})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        c.close()


def wait_for_table(data_dir: Path, topic: str, end: int, timeout: float = 600) -> None:
    """Until the table's snapshot says partition 0 is committed up to `end`."""
    root = data_dir / "iceberg"
    table = TopicTable(open_catalog("sql", f"sqlite:///{root / 'catalog.db'}",
                                    (root / "warehouse").as_uri()), topic, 0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):  # the catalog may not exist yet
            if table.offsets()[1].get(0, -1) >= end:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the table of {topic} did not reach offset {end} in {timeout:.0f} s")


def one_run(variant: str, broker: bench.Broker, topic: str, n: int, size: int,
            per_txn: int) -> float:
    """The broker's CPU seconds per GB of values for one run of the load."""
    iceberg = variant == "samsa iceberg"
    config = {"samsa.iceberg.mode": "key_value"} if iceberg else {}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(60)
    time.sleep(1)  # the leader settles (Kafka answers create before it leads)
    cpu0, t0 = bench.cpu_seconds(broker.proc.pid), time.monotonic()
    secs = produce_transactions(broker.bootstrap, topic, n, size, per_txn)
    into_table = ""
    if iceberg:
        wait_for_table(data_dir(broker), topic, log_end(broker.bootstrap, topic))
        into_table = f", into the table {n / (time.monotonic() - t0):,.0f} records/s"
    cpu = bench.cpu_seconds(broker.proc.pid) - cpu0
    print(f"  {variant:14} {topic:18} broker CPU {cpu:6.2f} s = "
          f"{cpu / (n * size / 1e9):6.1f} s/GB; produce {n / secs:,.0f} records/s{into_table}",
          flush=True)
    return cpu / (n * size / 1e9)


def data_dir(broker: bench.Broker) -> Path:
    return Path(broker.cmd[broker.cmd.index("--data-dir") + 1])


@contextlib.contextmanager
def brokers(kafka: bool, interval_ms: int) -> Iterator[dict[str, bench.Broker]]:
    with contextlib.ExitStack() as stack:
        settings = (f"iceberg.catalog.commit.interval.ms={interval_ms}",)
        out = {v: stack.enter_context(bench.running(v.replace(" ", "-"), None, settings))
               for v in VARIANTS[:2]}
        if kafka:
            lib, why = bench.ensure_kafka_lib()
            if lib is None:
                print(f"no Kafka row: {why}")
            else:
                out["kafka plain"] = stack.enter_context(bench.running("kafka", lib))
        yield out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1024])
    ap.add_argument("--mb", type=float, default=100, help="MB of values per run")
    ap.add_argument("--warmup-mb", type=float, default=100,
                    help="MB of 100 B records into each broker before the measured runs")
    ap.add_argument("--per-txn", type=int, default=1000)
    ap.add_argument("--interval-ms", type=int, default=1000,
                    help="iceberg.catalog.commit.interval.ms of the Samsa brokers")
    ap.add_argument("--no-kafka", action="store_true")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}")
    with brokers(not args.no_kafka, args.interval_ms) as running:
        names = list(running)
        for v in names:  # warm-up: the first table (pyiceberg's imports), Kafka's JIT
            one_run(v, running[v], f"warmup-{v.split()[1]}",
                    int(args.warmup_mb * 1e4) // args.per_txn * args.per_txn, 100, args.per_txn)
        results: dict[tuple[str, int], list[float]] = {}
        for size in args.sizes:
            n = int(args.mb * 1e6 / size) // args.per_txn * args.per_txn
            for r in range(args.runs):
                order = names[r % len(names):] + names[:r % len(names)]
                for v in order:
                    topic = f"t{size}-{r}-{v.split()[1]}"
                    results.setdefault((v, size), []).append(
                        one_run(v, running[v], topic, n, size, args.per_txn))
    print(f"load average {os.getloadavg()}")
    print(f"broker CPU s per GB of values, median of {args.runs} (transactions of "
          f"{args.per_txn} records, commit interval {args.interval_ms} ms):")
    for size in args.sizes:
        print(f"  {size:>5} B  " + "  ".join(
            f"{v}: {statistics.median(results[v, size]):.1f} "
            f"({min(results[v, size]):.1f}-{max(results[v, size]):.1f})"
            for v in names))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, bench._on_sigterm)  # the brokers are stopped on the way out
    try:
        main()
    finally:
        bench.cleanup()
