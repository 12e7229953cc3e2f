"""Small batches over many partitions: paced producers and low-rate consumers (issue 47).

At a fraction of its capacity a producer of keyed records over hundreds of partitions sends
requests of one-record batches for many partitions each, and the broker's cost per
partition-batch, not per byte, sets its latency. This runs that shape against one broker:

- produce: WORKERS librdkafka producer processes (acks=all, idempotent, linger.ms 5, keyed
  records of SIZE bytes) paced at RATE records/s in all (the records due are sent once a
  millisecond, TICK_S), over a topic of PARTITIONS partitions;
  each record's latency is the time from produce() to its delivery report. Printed: p50, p99,
  p99.9, the broker's CPU (utime+stime of its process group) per produce request and per
  partition-batch (librdkafka's own counts, from its statistics), and the rate reached.
- consume: the same paced producers, plus CONSUMERS consumer processes that each assign() a
  share of the partitions and read at the producers' rate: end-to-end latency (record's send
  time in its value, to its arrival) and the broker's CPU per fetch request. The consumers
  are librdkafka's, or with --consumer kafka-python kafka-python's, which fetch in incremental
  fetch sessions (KIP-227) where librdkafka sends every partition in each fetch.

    .venv/bin/python bench/many_partitions.py --partitions 500 --rate 20000
    .venv/bin/python bench/many_partitions.py --partitions 100,500,2000 --rate 2000,10000 --kafka
    .venv/bin/python bench/many_partitions.py --consume --partitions 500 --rate 2000
    .venv/bin/python bench/many_partitions.py --consume --consumer kafka-python --rate 2000
    .venv/bin/python bench/many_partitions.py --processes 2   # a node of two processes

Each broker first runs the first shape unmeasured until its CPU per request settles (Kafka's
JIT needed two 20 s runs of it on 2 cores): --warmup-runs.

The worker processes are this script run as `many_partitions.py worker ...`. No assertions:
this measures. Figures from a loaded machine are wall-clock figures of that machine; the CPU
per request is the one to compare between runs there.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/ is a directory of scripts, not a package)

WORKERS = 8
CONSUMERS = 4
SIZE = 200
TICK_S = 0.001  # the producers' pacing: records due are sent together, once a millisecond
IDLE_S = 3.0  # a consumer is done when no record came for this long (the producers ended)
HEADER = struct.Struct(">q")  # the value starts with its send time (CLOCK_MONOTONIC, ns)


# ------------------------------------------------------------------ worker processes


def _ready() -> None:
    print("ready", flush=True)
    sys.stdin.readline()


def produce_worker(bootstrap: str, topic: str, rate: float, seconds: float, size: int,
                   seed: int) -> dict[str, object]:
    from confluent_kafka import Producer

    stats: list[dict[str, Any]] = []
    batches = [0]  # partition-batches sent: librdkafka's batchcnt window resets per report
    # per report and broker connection: the request round trip and the time a batch waited
    # in librdkafka's queue (linger, and a free slot of the 5 requests in flight), p50 in µs
    rtt_us: list[int] = []
    queued_us: list[int] = []

    def on_stats(text: str) -> None:
        s = json.loads(text)
        stats.append(s)
        batches[0] += sum(t["batchcnt"]["cnt"] for t in s["topics"].values())
        for b in s["brokers"].values():
            if b.get("nodeid", -1) >= 0 and b["rtt"]["cnt"]:
                rtt_us.append(b["rtt"]["p50"])
                queued_us.append(b["int_latency"]["p50"])

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "queue.buffering.max.messages": 2_000_000,
                  "statistics.interval.ms": 1000, "stats_cb": on_stats})
    p.list_topics(topic, timeout=30)
    lat_us: list[int] = []
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            if len(errors) < 5:
                errors.append(str(err))
            return
        sent = HEADER.unpack_from(msg.value())[0]  # type: ignore[attr-defined]
        lat_us.append((time.monotonic_ns() - sent) // 1000)

    pad = os.urandom(max(0, size - HEADER.size))
    n = int(rate * seconds)
    _ready()
    base = _counters(p, stats), batches[0]
    rtt_us.clear()
    queued_us.clear()
    t0 = time.monotonic()
    i = 0
    while i < n:
        # the records due by now, then a wait of at least a tick: a wake-up a record would
        # cost this process more CPU than the broker spends on the record
        due = min(n, int((time.monotonic() - t0) * rate) + 1)
        while i < due:
            key = b"k%d-%d" % (seed, i)  # keyed: the default partitioner spreads them
            try:
                p.produce(topic, HEADER.pack(time.monotonic_ns()) + pad, key,
                          on_delivery=on_delivery)
            except BufferError:
                p.poll(0.01)
                continue
            i += 1
        p.poll(0)
        if i < n:
            p.poll(max(TICK_S, t0 + i / rate - time.monotonic()))
    sent_s = time.monotonic() - t0
    p.flush(120)
    end = _counters(p, stats), batches[0]
    return {"lat_us": lat_us, "sent_rps": n / sent_s, "errors": errors,
            "requests": end[0] - base[0], "batches": end[1] - base[1],
            "rtt_us": rtt_us, "queued_us": queued_us}


def _counters(p: Any, stats: list[dict[str, Any]]) -> int:
    """Produce requests sent, from librdkafka's next statistics report."""
    stats.clear()
    deadline = time.monotonic() + 5
    while not stats and time.monotonic() < deadline:
        p.poll(0.1)
    if not stats:
        return 0
    return sum(b.get("req", {}).get("Produce", 0) for b in stats[-1]["brokers"].values())


def consume_worker(bootstrap: str, topic: str, partitions: list[int], n: int,
                   seconds: float, client: str = "librdkafka") -> dict[str, object]:
    if client == "kafka-python":
        return kafka_python_consume_worker(bootstrap, topic, partitions, n, seconds)
    from confluent_kafka import Consumer, TopicPartition

    stats: list[dict[str, Any]] = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-mp-{topic}",
                  "enable.auto.commit": False, "statistics.interval.ms": 1000,
                  "stats_cb": lambda s: stats.append(json.loads(s))})
    c.list_topics(topic, timeout=30)
    c.assign([TopicPartition(topic, q, 0) for q in partitions])
    c.poll(0.5)  # connected, its first fetches parked before the producers start
    lat_us: list[int] = []
    _ready()
    stats.clear()
    deadline = time.monotonic() + seconds + 60  # hang guard
    last = time.monotonic() + 30  # the first record comes within 30 s of "go"
    # Done with `n` records, or when none came for IDLE_S once the producers' records stopped
    while len(lat_us) < n and time.monotonic() < min(deadline, last + IDLE_S):
        m = c.poll(0.5)  # not consume(n, timeout): it waits for n or the timeout
        if m is not None and m.error() is None and (value := m.value()) is not None:
            lat_us.append((time.monotonic_ns() - HEADER.unpack_from(value)[0]) // 1000)
            last = time.monotonic()
    fetches = 0
    with contextlib.suppress(Exception):
        c.poll(1.2)
        fetches = sum(b.get("req", {}).get("Fetch", 0) for b in stats[-1]["brokers"].values())
    c.close()
    return {"lat_us": lat_us, "fetches": fetches}


def kafka_python_consume_worker(bootstrap: str, topic: str, partitions: list[int], n: int,
                                seconds: float) -> dict[str, object]:
    """consume_worker with kafka-python's consumer (its fetches counted as they are answered:
    kafka-python keeps no total of them)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      fetch_max_wait_ms=500)
    fetches = [0]
    fetcher = c._fetcher  # noqa: SLF001  (counting its answered fetches)
    handle = fetcher._handle_fetch_response  # noqa: SLF001

    def counted(*args: Any) -> Any:
        fetches[0] += 1
        return handle(*args)

    fetcher._handle_fetch_response = counted  # noqa: SLF001
    c.assign([TopicPartition(topic, q) for q in partitions])
    c.seek_to_beginning()
    c.poll(timeout_ms=500)
    lat_us: list[int] = []
    _ready()
    fetches[0] = 0
    deadline = time.monotonic() + seconds + 60
    last = time.monotonic() + 30
    while len(lat_us) < n and time.monotonic() < min(deadline, last + IDLE_S):
        for records in c.poll(timeout_ms=500).values():
            now = time.monotonic_ns()
            for r in records:
                lat_us.append((now - HEADER.unpack_from(r.value)[0]) // 1000)
            last = time.monotonic()
    c.close()
    return {"lat_us": lat_us, "fetches": fetches[0]}


# ------------------------------------------------------------------ the runner


def pct(sorted_us: list[int], q: float) -> float:
    if not sorted_us:
        return float("nan")
    return sorted_us[min(len(sorted_us) - 1, int(q * len(sorted_us)))] / 1000


def spawn_worker(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, "worker", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_load(broker_pid: int, bootstrap: str, partitions: int, rate: int, seconds: float,
             consume: bool, consumer: str = "librdkafka") -> dict[str, float]:
    """One paced phase on a new topic; the figures of it."""
    topic = f"mp-{partitions}-{rate}-{time.time_ns()}"
    bench.create_topic(bootstrap, topic, partitions)
    share = rate / WORKERS
    procs = [spawn_worker(["produce", bootstrap, topic, str(share), str(seconds), str(SIZE),
                           str(k)]) for k in range(WORKERS)]
    n_consumers = CONSUMERS if consume else 0
    per = partitions // max(1, n_consumers)
    for k in range(n_consumers):
        owned = list(range(k * per, partitions if k == n_consumers - 1 else (k + 1) * per))
        expected = int(rate * seconds)  # at most: it stops when its partitions fall idle
        procs.append(spawn_worker(["consume", bootstrap, topic, ",".join(map(str, owned)),
                                   str(expected), str(seconds), consumer]))
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                err = p.stderr.read() if p.stderr is not None else ""
                raise RuntimeError(f"a worker did not start: {err[-2000:]}")
        cpu0 = bench.cpu_seconds(broker_pid)
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=seconds + 300)
            if p.returncode != 0:
                raise RuntimeError(f"worker exit {p.returncode}: {err[-2000:]}")
            outs.append(json.loads(out.strip().splitlines()[-1]))
        cpu = bench.cpu_seconds(broker_pid) - cpu0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    prod, cons = outs[:WORKERS], outs[WORKERS:]
    lat = sorted(v for o in prod for v in o["lat_us"])
    requests = sum(o["requests"] for o in prod)
    batches = sum(o["batches"] for o in prod)
    errors = [e for o in prod for e in o["errors"]]
    rtts = sorted(v for o in prod for v in o["rtt_us"])
    queued = sorted(v for o in prod for v in o["queued_us"])
    fig = {"p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99), "p999_ms": pct(lat, 0.999),
           "sent_rps": sum(o["sent_rps"] for o in prod), "records": float(len(lat)),
           "broker_cpu_s": cpu, "requests": float(requests), "batches": float(batches),
           "errors": float(len(errors)),
           # medians over the producers' one-second reports of their p50s
           "rtt_p50_ms": pct(rtts, 0.5), "queued_p50_ms": pct(queued, 0.5)}
    if consume:
        clat = sorted(v for o in cons for v in o["lat_us"])
        fetches = sum(o["fetches"] for o in cons)
        fig |= {"e2e_p50_ms": pct(clat, 0.5), "e2e_p99_ms": pct(clat, 0.99),
                "e2e_p999_ms": pct(clat, 0.999), "consumed": float(len(clat)),
                "fetches": float(fetches)}
        # the CPU is the producers' and the consumers': per request of either kind
        requests += fetches
    fig["cpu_us_per_request"] = 1e6 * cpu / requests if requests else float("nan")
    fig["cpu_us_per_batch"] = 1e6 * cpu / batches if batches else float("nan")
    if errors:
        print(f"    errors: {errors[:3]}")
    return fig


def show(name: str, partitions: int, rate: int, f: dict[str, float]) -> None:
    line = (f"  {name:5} {partitions:5} partitions {rate:7,} rec/s: produce p50 "
            f"{f['p50_ms']:8.1f} ms p99 {f['p99_ms']:8.1f} ms p99.9 {f['p999_ms']:8.1f} ms  "
            f"sent {f['sent_rps']:8,.0f}/s  cpu {f['broker_cpu_s']:.1f} s = "
            f"{f['cpu_us_per_request']:.0f} us/request, {f['cpu_us_per_batch']:.1f} us/batch "
            f"({f['requests']:,.0f} requests, {f['batches']:,.0f} batches); "
            f"request round trip p50 {f['rtt_p50_ms']:.2f} ms, queued in the client p50 "
            f"{f['queued_p50_ms']:.1f} ms")
    if "e2e_p50_ms" in f:
        line += (f"\n        end-to-end p50 {f['e2e_p50_ms']:.1f} ms p99 {f['e2e_p99_ms']:.1f}"
                 f" ms p99.9 {f['e2e_p999_ms']:.1f} ms ({f['consumed']:,.0f} consumed, "
                 f"{f['fetches']:,.0f} fetches)")
    print(line, flush=True)


@contextlib.contextmanager
def broker(kafka: bool, processes: int = 1) -> Iterator[bench.Broker]:
    if not kafka:
        with bench.running("samsa" if processes == 1 else f"samsa x{processes}", None) as b:
            yield b
        return
    lib, note = bench.ensure_kafka_lib()
    if lib is None:
        raise SystemExit(f"no Kafka broker: {note}")
    with bench.running("kafka", lib) as b:
        yield b


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        role, a = sys.argv[2], sys.argv[3:]
        if role == "produce":
            out = produce_worker(a[0], a[1], float(a[2]), float(a[3]), int(a[4]), int(a[5]))
        else:
            out = consume_worker(a[0], a[1], ints(a[2]), int(a[3]), float(a[4]), a[5])
        print(json.dumps(out), flush=True)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", default="500", help="comma-separated partition counts")
    ap.add_argument("--rate", default="20000", help="comma-separated records/s (all producers)")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--consume", action="store_true", help="add consumers of every partition")
    ap.add_argument("--consumer", choices=("librdkafka", "kafka-python"), default="librdkafka",
                    help="the consumers' client (kafka-python: in fetch sessions)")
    ap.add_argument("--kafka", action="store_true", help="Apache Kafka too, after Samsa")
    ap.add_argument("--only-kafka", action="store_true")
    ap.add_argument("--processes", type=int, default=1,
                    help="Samsa as a node of this many processes (samsa serve --processes)")
    ap.add_argument("--warmup-runs", type=int, default=5,
                    help="at most this many unmeasured runs of the first shape first, until "
                         "two in a row cost the broker alike a request (0: none)")
    ap.add_argument("--bootstrap", help="a broker already running (with --pid: its process)")
    ap.add_argument("--pid", type=int, help="the process (group) of --bootstrap's broker")
    args = ap.parse_args()
    if args.bootstrap:
        for partitions in ints(args.partitions):
            for rate in ints(args.rate):
                f = run_load(args.pid, args.bootstrap, partitions, rate, args.seconds,
                             args.consume, args.consumer)
                show("given", partitions, rate, f)
        return 0
    names = [] if args.only_kafka else [False]
    names += [True] if args.kafka or args.only_kafka else []
    for kafka in names:
        with broker(kafka, args.processes) as b:
            if args.warmup_runs:
                bench.warm_up_paced(b, ints(args.partitions)[0], ints(args.rate)[0],
                                    args.seconds, args.warmup_runs)
            for partitions in ints(args.partitions):
                for rate in ints(args.rate):
                    f = run_load(b.proc.pid, b.bootstrap, partitions, rate, args.seconds,
                                 args.consume, args.consumer)
                    show(b.name, partitions, rate, f)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
    bench.cleanup()
