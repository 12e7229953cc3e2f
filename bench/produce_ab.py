"""Samsa's ProducerPerformance phase under alternating source trees (or broker settings).

The produce-side twin of bench/consume_ab.py: each variant is a Samsa broker started from its
own source tree (NAME@PATH) with its own `--set` options; on each start one warm-up run, then
--runs measured runs of Kafka's ProducerPerformance (--records × --size, --acks, as
bench/run.py's produce phase) or, with `--client rdkafka`, of bench/run.py's librdkafka
producer (linger.ms 5, 1 MB batches, no idempotence), each to a fresh topic. Variants
alternate --rounds times so drift in the machine's load spreads over all of them. Prints each
run and, per variant, the median and range of the rate, the p99 latency ProducerPerformance
reports (librdkafka's is not measured) and the broker's CPU seconds per GB written
(/proc/<pid>/stat of the broker). No assertions: this measures.

ProducerPerformance sends --producer-warmup × --records more records first and reports
the rest (its --warmup-records), as bench/run.py does; the CPU per GB counts all it sent.

--kafka adds Apache Kafka as one more variant, started as bench/run.py starts it (from
.cache/bench/kafka-broker); its JIT warms faster on small records (--warmup-size 100).

--cluster N runs `samsa cluster` (ZooKeeper and N brokers) instead, the topics with N
replicas, so acks=all waits for the followers; the CPU is that of the N broker processes
(ZooKeeper's is left out).

    git worktree add /tmp/base-tree <old commit>
    .venv/bin/python bench/produce_ab.py --variant 'base@/tmp/base-tree=' --variant 'new='
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/ is a directory of scripts, not a package)
from ab import Variant, parse_variant  # noqa: E402
from confluent_kafka import KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def broker_pids(proc: subprocess.Popen[bytes], cluster: int) -> list[int]:
    """The broker processes: the one started, or the brokers `samsa cluster` started."""
    if not cluster:
        return [proc.pid]
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (d / "stat").read_text()
                cmdline = (d / "cmdline").read_bytes()
                if (int(stat[stat.rindex(")") + 2:].split()[1]) == proc.pid
                        and b"serve" in cmdline.split(b"\0")):
                    pids.append(int(d.name))
    return pids


def broker_cpu(pids: list[int]) -> float:
    return sum(bench.cpu_seconds(pid) for pid in pids)


def create_topic(bootstrap: str, topic: str, replicas: int) -> None:
    if replicas <= 1:
        bench.create_topic(bootstrap, topic)
        return
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:  # the brokers register one after the other after the first answers
        try:
            admin.create_topics([NewTopic(topic, 1, replicas)])[topic].result(60)
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    while time.monotonic() < deadline:  # every replica in the ISR before measuring
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and md.partitions and all(
                p.leader >= 0 and len(p.isrs) == replicas for p in md.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} did not get a full ISR in 60 s")


def tool_warmup(n: int, args: argparse.Namespace) -> int:
    """Records ProducerPerformance sends before the `n` it reports (librdkafka: none)."""
    return int(n * args.producer_warmup) if args.client == "java" else 0


def produce(tools: Path, bootstrap: str, topic: str, n: int,
            args: argparse.Namespace) -> bench.Outcome:
    if args.client == "rdkafka":
        return bench.rdkafka_produce(bootstrap, topic, n, args.size, args.acks)
    return bench.java_produce(tools, bootstrap, topic, n, args.size, args.acks,
                              warmup=tool_warmup(n, args))


def start(v: Variant, work: Path, args: argparse.Namespace
          ) -> tuple[subprocess.Popen[bytes], str]:
    """The variant's broker (or `samsa cluster`) started and answering; (process, bootstrap)."""
    if v.kafka:
        bench.write_log4j_configs(work)
        broker = bench.start_kafka(bench.KAFKA_DIR / "lib", work)
        return broker.proc, broker.bootstrap
    port = bench.free_port()
    if args.cluster:
        cmd = [v.python, "-m", "samsa", "cluster", "--brokers", str(args.cluster),
               "--data-dir", str(work / "data"), "--base-port", str(port),
               "--zk-port", str(bench.free_port())]
    else:
        cmd = [v.python, "-m", "samsa", "serve", "--listen", f"127.0.0.1:{port}",
               "--data-dir", str(work / "data")]
    for s in v.settings:
        cmd += ["--set", s]
    log = work / "samsa.log"
    # samsa is imported from the tree's samsa/: `python -m` looks in the working directory
    # first, the brokers `samsa cluster` starts (the console script) in PYTHONPATH
    os.environ["PYTHONPATH"] = str(v.tree)
    proc = bench.spawn(cmd, log, cwd=v.tree)
    bench.wait_first_answer(proc, port, time.monotonic(), log)
    return proc, f"127.0.0.1:{port}"


def one_round(v: Variant, tools: Path, args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix=f"samsa-pab-{v.name}-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        proc, b = start(v, work, args)
        create_topic(b, "warm", args.cluster)
        # the broker's warm-up is unmeasured as a whole: no steady-state split of its own
        warm = argparse.Namespace(**{**vars(args), "size": args.warmup_size or args.size,
                                     "producer_warmup": 0.0})
        out = produce(tools, b, "warm", args.warmup, warm)
        if out.error:
            raise RuntimeError(out.error)
        for i in range(args.runs):
            topic = f"ab-{i}"
            create_topic(b, topic, args.cluster)
            pids = broker_pids(proc, args.cluster)
            cpu0, busy0, own0, t0 = broker_cpu(pids), bench.machine_busy_seconds(), \
                bench.own_seconds(), time.monotonic()
            out = produce(tools, b, topic, args.records, args)
            cpu = broker_cpu(pids) - cpu0
            # the machine's cores busy over the run, and the load generator's CPU per GB:
            # a pipeline that stalls leaves cores idle
            # all the run sent: with ProducerPerformance, its warm-up records too
            sent = args.records + tool_warmup(args.records, args)
            wall, gb = time.monotonic() - t0, sent * args.size / 1e9
            busy = (bench.machine_busy_seconds() - busy0) / wall / (os.cpu_count() or 1)
            client = (bench.own_seconds() - own0) / gb
            if out.error:
                raise RuntimeError(out.error)
            v.mbps.append(out.figures["mbps"])
            v.p99.append(out.figures.get("p99_ms", float("nan")))
            v.cpu_per_gb.append(cpu / gb)
            p50 = out.figures.get("p50_ms", float("nan"))
            print(f"  {v.name:12} {out.figures['mbps']:8.1f} MB/s  p50 {p50:4.0f} ms  "
                  f"p99 {v.p99[-1]:6.0f} ms  "
                  f"{v.cpu_per_gb[-1]:.2f} s CPU/GB  (client {client:.2f} s/GB, cores busy "
                  f"{busy:.0%})", flush=True)
    finally:
        if proc is not None:
            bench.stop(proc)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", required=True, type=parse_variant,
                    help="NAME[@TREE][:PYTHON]=K=V,K=V: source tree (interpreter, --set options)")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--warmup", type=int, default=100_000, help="records before measuring")
    ap.add_argument("--warmup-size", type=int, default=0,
                    help="their size (default --size); small records warm Kafka's JIT faster")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--producer-warmup", type=float, default=0.5, metavar="SHARE",
                    help="ProducerPerformance sends this share of --records more first, "
                         "outside its figures (--warmup-records), as bench/run.py")
    ap.add_argument("--acks", default="all")
    ap.add_argument("--runs", type=int, default=2, help="measured runs per broker start")
    ap.add_argument("--rounds", type=int, default=3, help="times the variants alternate")
    ap.add_argument("--client", choices=("java", "rdkafka"), default="java",
                    help="ProducerPerformance, or the librdkafka producer of bench/run.py")
    ap.add_argument("--cluster", type=int, default=0, metavar="N",
                    help="a ZooKeeper cluster of N brokers, topics with N replicas")
    ap.add_argument("--kafka", action="store_true",
                    help="alternate Apache Kafka too (from .cache/bench/kafka-broker; one broker)")
    args = ap.parse_args()
    if args.kafka:
        if args.cluster:
            ap.error("--kafka runs one broker: not with --cluster")
        if not (bench.KAFKA_DIR / "lib").is_dir():
            ap.error(f"--kafka: no Kafka broker in {bench.KAFKA_DIR} (bench/run.py fetches it)")
        args.variant.append(Variant("kafka", bench.REPO, [], kafka=True))
    tools, why = bench.ensure_kafka_lib()
    if tools is None:
        sys.exit(f"Kafka's tools are unavailable: {why}")
    bench.CACHE.mkdir(parents=True, exist_ok=True)
    (bench.CACHE / "log4j2-tools.properties").write_text(
        bench.LOG4J2.format(target="SYSTEM_ERR", level="warn"))
    bench.touch_free_memory()
    try:
        for _ in range(args.rounds):
            for v in args.variant:
                one_round(v, tools, args)
    finally:
        bench.cleanup()
    print(f"\n{args.records:,} x {args.size} B acks={args.acks}, "
          f"{f'{args.cluster} brokers, ' if args.cluster else ''}"
          f"{args.rounds} rounds x {args.runs} runs")
    for v in args.variant:
        print(f"  {v.name:12} {statistics.median(v.mbps):8.1f} MB/s "
              f"({min(v.mbps):.0f}-{max(v.mbps):.0f})  "
              f"p99 {statistics.median(v.p99):.0f} ms ({min(v.p99):.0f}-{max(v.p99):.0f})  "
              f"{statistics.median(v.cpu_per_gb):.2f} s CPU/GB "
              f"({min(v.cpu_per_gb):.2f}-{max(v.cpu_per_gb):.2f})")


if __name__ == "__main__":
    main()
