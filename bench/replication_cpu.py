"""CPU per GB written in a 3-broker cluster (replication factor 3, acks=all): leader vs followers.

Starts ZooKeeper and three Samsa brokers as the cluster tests do, creates a one-partition topic
(RF 3, min.insync.replicas 2), produces N records of SIZE bytes with librdkafka (acks=all,
linger 5 ms, batch.size 16 KiB as Java's producer) and prints the CPU seconds (utime+stime,
/proc) per GB written of the partition's leader and of each follower. --brokers 1: the same
load on one broker. With --profile DIR, py-spy samples the leader and a follower (collapsed
stacks in DIR).

With --many N: a topic of N partitions, replicated to every broker, fed by one librdkafka
producer paced at --rate records/s (200 B, acks=all, a record to each partition in turn) for
--seconds after a warm-up of a fifth as long; printed: each broker's CPU seconds a second
(leaders and followers alike: leadership is spread over the brokers) and in all, and the
records' produce latency (produce() to delivery report: acks=all waits for the follower). Many idle
partitions with a few records each is the load where what a follower's fetch names and is
answered (every partition, or only the ones that moved) shows.

    PYTHONPATH=$PWD .venv/bin/python bench/replication_cpu.py --records 300000 --runs 3
    PYTHONPATH=$PWD .venv/bin/python bench/replication_cpu.py --brokers 2 --many 500 --rate 1000
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

from samsa.broker.cluster.zk.process import ZooKeeperProcess  # noqa: E402
from tests.cluster.cluster import Cluster, wait_until  # noqa: E402
from tests.support.broker import free_port  # noqa: E402


def cpu_seconds(pid: int, which: slice = slice(11, 13)) -> float:
    """utime+stime (or one of them) of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[which]) / os.sysconf("SC_CLK_TCK")


def one_run(zk: ZooKeeperProcess, base: Path, records: int, size: int, batch: int,
            profile: Path | None, tag: str, brokers: int = 3) -> dict[str, float]:
    cluster = Cluster(zk, base, size=brokers, **{"metrics.port": 0}).start()
    try:
        admin = cluster.admin()
        topic = "repl-cpu"
        fs = admin.create_topics([NewTopic(topic, 1, brokers,
                                          config={"min.insync.replicas": str(min(2, brokers))})],
                                 operation_timeout=10)
        fs[topic].result(timeout=20)
        wait_until(lambda: cluster.has_leaders(topic, 1), 20, "leader")
        md = admin.list_topics(topic, timeout=10)
        leader = md.topics[topic].partitions[0].leader
        pids = {b.broker_id: b.pid for b in cluster.brokers}
        follower = next((i for i in pids if i != leader), leader)
        print(f"leader pid {pids[leader]}, a follower's pid {pids[follower]}", flush=True)
        spies = []
        if profile is not None:
            for who, bid in (("leader", leader), ("follower", follower)):
                out = profile / f"{tag}-{who}.txt"
                spies.append(subprocess.Popen(
                    [str(REPO / ".venv/bin/py-spy"), "record", "--pid", str(pids[bid]),
                     "--rate", "200", "--format", "raw", "--output", str(out), "--nonblocking"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(1.0)
        value = os.urandom(size)
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                      "enable.idempotence": True, "queue.buffering.max.messages": 1000000,
                      "batch.size": batch})
        before = {bid: cpu_seconds(pid) for bid, pid in pids.items() if pid}
        sys_before = {bid: cpu_seconds(pid, slice(12, 13)) for bid, pid in pids.items() if pid}
        t0 = time.monotonic()
        for _ in range(records):
            while True:
                try:
                    p.produce(topic, value)
                    break
                except BufferError:
                    p.poll(0.01)
            p.poll(0)
        assert p.flush(120) == 0
        elapsed = time.monotonic() - t0
        time.sleep(0.5)  # followers take the last high watermark
        after = {bid: cpu_seconds(pid) for bid, pid in pids.items() if pid}
        sys_after = {bid: cpu_seconds(pid, slice(12, 13)) for bid, pid in pids.items() if pid}
        for s in spies:
            s.send_signal(signal.SIGINT)
            s.wait(60)
        gb = records * size / 1e9
        res = {"elapsed": elapsed, "leader": (after[leader] - before[leader]) / gb}
        fol = sorted((after[b] - before[b]) / gb for b in pids if b != leader)
        res["follower_a"], res["follower_b"] = (fol + [0.0, 0.0])[:2]
        res["total"] = res["leader"] + sum(fol)
        res["leader_sys"] = (sys_after[leader] - sys_before[leader]) / gb
        res["follower_sys"] = (sys_after[follower] - sys_before[follower]) / gb
        return res
    finally:
        cluster.close()


def many_run(zk: ZooKeeperProcess, base: Path, partitions: int, rate: int, seconds: float,
             brokers: int) -> tuple[dict[int, float], list[float]]:
    """Each broker's CPU seconds a second under the paced load over `partitions` partitions,
    and the measured records' produce latencies (produce() to delivery, seconds), sorted."""
    cluster = Cluster(zk, base, size=brokers, **{"metrics.port": 0}).start()
    try:
        admin = cluster.admin()
        topic = "repl-many"
        fs = admin.create_topics([NewTopic(topic, partitions, brokers)], operation_timeout=30)
        fs[topic].result(timeout=60)
        wait_until(lambda: cluster.has_leaders(topic, partitions), 60, "leaders")
        pids = {b.broker_id: b.pid for b in cluster.brokers if b.pid}
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                      "enable.idempotence": True})
        value = os.urandom(200)
        sent = 0
        latencies: list[float] = []
        measuring = False

        def delivered(err: object, msg: Any) -> None:
            if err is None and measuring:
                latencies.append(msg.latency())

        def paced(duration: float) -> None:
            nonlocal sent
            start = time.monotonic()
            while (now := time.monotonic()) - start < duration:
                due = int((now - start) * rate)
                for _ in range(due - (sent - base_sent)):
                    p.produce(topic, value, partition=sent % partitions,
                              on_delivery=delivered)
                    sent += 1
                p.poll(0.005)

        base_sent = 0
        paced(seconds / 5)  # warm-up: sessions opened, every partition written once or more
        base_sent = sent
        p.flush(30)
        measuring = True
        before = {bid: cpu_seconds(pid) for bid, pid in pids.items()}
        t0 = time.monotonic()
        paced(seconds)
        elapsed = time.monotonic() - t0
        after = {bid: cpu_seconds(pid) for bid, pid in pids.items()}
        assert p.flush(60) == 0
        return ({bid: (after[bid] - before[bid]) / elapsed for bid in pids}, sorted(latencies))
    finally:
        cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=16384,
                    help="librdkafka batch.size (16384: the Java producer's default)")
    ap.add_argument("--brokers", type=int, default=3,
                    help="1: the same load on a single broker (replication factor 1)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--profile", type=Path)
    ap.add_argument("--many", type=int, default=0, help="partitions (the paced load)")
    ap.add_argument("--rate", type=int, default=1000, help="records/s (with --many)")
    ap.add_argument("--seconds", type=float, default=20.0, help="measured (with --many)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperProcess(Path(tmp) / "zk", free_port()).start()
        try:
            for i in range(args.runs if args.many else 0):
                cpu, lat = many_run(zk, Path(tmp) / f"many{i}", args.many, args.rate,
                                    args.seconds, args.brokers)
                each = ", ".join(f"broker {b} {c:.3f}" for b, c in sorted(cpu.items()))
                p50, p99 = (lat[int(q * (len(lat) - 1))] * 1000 for q in (0.5, 0.99))
                print(f"run {i}: {args.many} partitions at {args.rate} rec/s: CPU s a second "
                      f"{each}, in all {sum(cpu.values()):.3f}; produce latency p50 "
                      f"{p50:.1f} ms, p99 {p99:.1f} ms", flush=True)
            for i in range(0 if args.many else args.runs):
                r = one_run(zk, Path(tmp) / f"run{i}", args.records, args.size,
                            args.batch_size, args.profile, f"run{i}", args.brokers)
                print(f"run {i}: {r['elapsed']:.1f} s, CPU s/GB leader {r['leader']:.1f}, "
                      f"followers {r['follower_a']:.1f} / {r['follower_b']:.1f}, "
                      f"total {r['total']:.1f} (system time: leader {r['leader_sys']:.1f}, "
                      f"a follower {r['follower_sys']:.1f})", flush=True)
        finally:
            zk.stop()


if __name__ == "__main__":
    main()
