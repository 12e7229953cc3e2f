"""Produce and consume throughput against a Samsa broker with librdkafka (confluent-kafka).

Starts its own broker on a free loopback port with a temporary data dir (or uses --bootstrap),
then for each record size: produces N records (acks=1 and acks=all) and consumes them back.
Prints a table; numbers are medians over --runs. Not a test: no assertions on speed.

    .venv/bin/python bench/throughput.py --records 200000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    samsa = Path(sys.executable).parent / "samsa"
    log = open(data_dir / "broker.log", "wb")
    proc = subprocess.Popen(
        [str(samsa), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data_dir / "d")],
        stderr=log,
        stdout=log,
    )
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("broker did not start; see " + str(data_dir / "broker.log"))


def produce(bootstrap: str, topic: str, count: int, size: int, acks: str) -> float:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": False,
        }
    )
    payload = os.urandom(size)
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.01)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - started
    if remaining:
        raise SystemExit(f"{remaining} records not delivered")
    return elapsed


def consume(bootstrap: str, topic: str, count: int) -> float:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    started = time.perf_counter()
    while seen < count:
        for m in c.consume(10000, timeout=5):
            if m.error() is None:
                seen += 1
        if time.perf_counter() - started > 300:
            raise SystemExit("consume timed out")
    elapsed = time.perf_counter() - started
    c.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--bootstrap", default=None, help="use a running broker instead")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            proc, bootstrap = start_broker(Path(tmp))
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            rows = []
            for size in (int(s) for s in args.sizes.split(",")):
                for acks in ("1", "all"):
                    prod, cons = [], []
                    for run in range(args.runs):
                        topic = f"bench-{size}-{acks}-{run}-{time.time_ns()}"
                        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                        prod.append(produce(bootstrap, topic, args.records, size, acks))
                        cons.append(consume(bootstrap, topic, args.records))
                    rows.append((size, acks, statistics.median(prod), statistics.median(cons)))
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)
    print(f"# Samsa throughput, librdkafka client, {args.records} records, median of {args.runs}")
    print(f"# {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("| record size | acks | produce rec/s | produce MB/s | consume rec/s | consume MB/s |")
    print("|---|---|---|---|---|---|")
    for size, acks, p, c in rows:
        n = args.records
        print(
            f"| {size} B | {acks} | {n / p:,.0f} | {n * size / p / 1e6:.1f} "
            f"| {n / c:,.0f} | {n * size / c / 1e6:.1f} |"
        )


if __name__ == "__main__":
    main()
