"""What a node of N broker processes costs (`samsa serve --processes N`, issue 51's measuring).

Two phases, each with the same load: librdkafka producers (bench/load_worker.py, acks=all,
records spread evenly over the topic's partitions) writing RECORDS records of SIZE bytes to a
topic of --per-process partitions per process, whose leaders go round the processes.

- split: a node of 1, 2 and 4 processes (no ZooKeeper: the processes share
  samsa.metadata.shared.file). For each N: the node's broker CPU per GB (every process and
  the supervisor), that over the 1-process node's (the split overhead), and each process's
  share of the node's CPU (an even split is 1/N), its CPU idle, and the Produce requests
  per GB it answered (its /metrics).
- pinned: the load generator on core 0 (`taskset -c 0`) and the node on core 1, then the node
  on both cores; the produce rate for N = 1 and N = 2.

From those it prints a projection of one node's produce rate on 8, 16 and 32 cores (a
process per core; see project()). Not a test: nothing asserts on speed.

    .venv/bin/python bench/cores.py                       # both phases
    .venv/bin/python bench/cores.py --phases split --processes 1,2 --records 200000
    .venv/bin/python bench/cores.py --phases split --size 100 --records 4000000 --linger-ms 50
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from run import (
    LIVE_GROUPS,
    MIB,
    _read_stat,
    _stat_fields,
    api_versions_answered,
    cleanup,
    create_topic,
    free_base,
    spawn,
    stop,
)

BENCH = Path(__file__).resolve().parent
SAMSA = Path(sys.executable).parent / "samsa"
GB = 1e9
REQUESTS = "kafka_network_requestmetrics_requestspersec_total{"


@dataclass
class Node:
    proc: subprocess.Popen[bytes]
    ports: list[int]
    log: Path
    metrics_port: int

    def produce_requests(self) -> float:
        """Produce requests the node has answered so far (its /metrics, all processes)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                    timeout=30) as r:
            text = r.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(REQUESTS) and 'request="Produce"' in line)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def broker_pids(self) -> list[int]:
        """The supervisor's children: one broker process each (each in a session of its own)."""
        return sorted(
            int(d.name) for d in Path("/proc").iterdir()
            if d.name.isdigit() and _parent(int(d.name)) == self.proc.pid
        )  # fmt: skip

    def cpu(self) -> dict[int, float]:
        """CPU seconds so far of each broker process, and of the supervisor under key 0."""
        out = {pid: _pid_cpu(pid) for pid in self.broker_pids()}
        # --processes 1 runs the broker in the supervisor's place: then it is the process
        out[0 if out else self.proc.pid] = _pid_cpu(self.proc.pid)
        return out


    def cpu_by_kind(self) -> dict[str, float]:
        """CPU seconds so far of the brokers' event loops (each process's main thread), of
        their other threads (the shared store's poller, executors), and of the supervisor
        (none for --processes 1, where the broker is the process itself)."""
        brokers = self.broker_pids() or [self.proc.pid]
        out = {"loop": 0.0, "threads": 0.0,
               "supervisor": _pid_cpu(self.proc.pid) if brokers != [self.proc.pid] else 0.0}
        for pid in brokers:
            for tid, cpu in _thread_cpu(pid).items():
                out["loop" if tid == pid else "threads"] += cpu
        return out


def _thread_cpu(pid: int) -> dict[int, float]:
    """utime+stime of each live thread of a process."""
    out = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                f = _read_stat(Path(f"/proc/{pid}/task/{tid}/stat"))[1]
                out[int(tid)] = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return out


def _parent(pid: int) -> int:
    with contextlib.suppress(OSError, IndexError):
        return int(_stat_fields(pid)[1])
    return -1


def _pid_cpu(pid: int) -> float:
    """utime+stime of a process and of its children it has waited for."""
    with contextlib.suppress(OSError, IndexError):
        f = _stat_fields(pid)
        return sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")
    return 0.0


@contextlib.contextmanager
def node(processes: int, cpus: str | None = None,
         settings: tuple[str, ...] = ()) -> Iterator[Node]:
    """A node of `processes` brokers without ZooKeeper, pinned to `cpus` (taskset) if given."""
    work = Path(tempfile.mkdtemp(prefix=f"samsa-bench-node{processes}-"))
    base = free_base(processes)
    metrics = free_base(processes + 1)  # the node's /metrics, then each process's
    cmd = [str(SAMSA), "serve", "--processes", str(processes), "--broker-id", "0",
           "--listen", f"127.0.0.1:{base}", "--data-dir", str(work / "data"),
           "--set", f"metrics.port={metrics}",
           *(arg for s in settings for arg in ("--set", s))]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    log = work / "node.log"
    proc = spawn(cmd, log)
    n = Node(proc, [base + i for i in range(processes)], log, metrics)
    try:
        deadline = time.monotonic() + 180
        while not all(api_versions_answered(p) for p in n.ports):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"node of {processes} did not start; see {log}")
            time.sleep(0.2)
        yield n
    finally:
        stop(proc, grace=60)
        with contextlib.suppress(OSError):
            shutil.copyfile(log, BENCH.parent / ".cache" / "bench" / f"last-node{processes}.log")
        shutil.rmtree(work, ignore_errors=True)


def load(bootstrap: str, topic: str, records: int, size: int, partitions: int,
         producers: int, cpus: str | None, linger_ms: int = 5,
         batch_size: int = 1_000_000) -> float:
    """`producers` bench/load_worker.py producers started together, each writing
    records/producers records over every partition; the rate in MB/s (MiB) from the first
    start to the last end."""
    cmd = [sys.executable, str(BENCH / "load_worker.py"), "produce", bootstrap, topic,
           str(records // producers), str(size), str(partitions), str(linger_ms),
           str(batch_size)]
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    procs = [subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              stderr=subprocess.DEVNULL, start_new_session=True)
             for _ in range(producers)]
    for p in procs:
        LIVE_GROUPS.add(p.pid)
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a load worker failed to start")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [json.loads(p.communicate(timeout=900)[0].strip().splitlines()[-1])
                   for p in procs]
    finally:
        for p in procs:
            LIVE_GROUPS.discard(p.pid)
            with contextlib.suppress(ProcessLookupError):
                p.kill()
    done = sum(r["records"] for r in results)
    errors = [e for r in results for e in r["errors"]]
    if done < records // producers * producers or errors:
        raise RuntimeError(f"{done}/{records} delivered; errors: {errors[:3]}")
    elapsed = max(r["end"] for r in results) - min(r["start"] for r in results)
    return done * size / elapsed / MIB


@dataclass
class Split:
    processes: int
    mbps: float
    cpu_per_gb: float  # the node's broker CPU seconds per GB (10^9 bytes) produced
    shares: list[float] = field(default_factory=list)  # each process's share, largest first
    idle_cores: float = 0.0  # what the node used idle, before the load (cores)
    partitions: int = 0
    requests_per_gb: float = 0.0  # Produce requests the node answered per GB
    # the node's CPU per GB by kind (Node.cpu_by_kind), and idle by kind (cores)
    kinds_per_gb: dict[str, float] = field(default_factory=dict)
    idle_kinds: dict[str, float] = field(default_factory=dict)

    @property
    def imbalance(self) -> float:
        """The busiest process's share over an even split's (1.0: perfectly even)."""
        return max(self.shares) * self.processes


def measure(n: Node, topic: str, records: int, size: int, partitions: int, producers: int,
            load_cpus: str | None, linger_ms: int = 5, batch_size: int = 1_000_000) -> Split:
    # the /metrics scrapes (the supervisor asks every process) fall outside the CPU window
    requests = n.produce_requests()
    before, kinds = n.cpu(), n.cpu_by_kind()
    mbps = load(n.bootstrap, topic, records, size, partitions, producers, load_cpus, linger_ms,
                batch_size)
    after, kinds_after = n.cpu(), n.cpu_by_kind()
    requests = n.produce_requests() - requests
    used = {pid: after[pid] - before.get(pid, 0.0) for pid in after}
    total, gb = sum(used.values()), records * size / GB
    brokers = sorted((v for pid, v in used.items() if pid), reverse=True)
    return Split(len(n.ports), mbps, total / gb, [v / total for v in brokers],
                 requests_per_gb=requests / gb,
                 kinds_per_gb={k: (v - kinds[k]) / gb for k, v in kinds_after.items()})


def idle_cores(n: Node, seconds: float) -> tuple[float, dict[str, float]]:
    """The node's CPU idle, in cores: in all, and by kind (Node.cpu_by_kind)."""
    before, kinds = sum(n.cpu().values()), n.cpu_by_kind()
    time.sleep(seconds)
    by_kind = {k: (v - kinds[k]) / seconds for k, v in n.cpu_by_kind().items()}
    return (sum(n.cpu().values()) - before) / seconds, by_kind


def split_phase(args: argparse.Namespace) -> list[Split]:
    out = []
    for procs in args.processes:
        with node(procs) as n:
            parts = args.partitions or args.per_process * procs
            create_topic(n.bootstrap, "cores", parts)
            load(n.bootstrap, "cores", args.warmup, args.size, parts, args.producers, None,
                 args.linger_ms, args.batch_size)
            idle, idle_kinds = idle_cores(n, args.idle_seconds)
            s = measure(n, "cores", args.records, args.size, parts, args.producers, None,
                        args.linger_ms, args.batch_size)
            s.idle_cores, s.idle_kinds, s.partitions = idle, idle_kinds, parts
        print(f"split N={procs} ({parts} partitions): {s.mbps:.1f} MB/s, "
              f"{s.cpu_per_gb:.2f} CPU-s/GB, {s.requests_per_gb:,.0f} Produce requests/GB, "
              f"idle {idle:.3f} cores, shares "
              + " ".join(f"{x:.0%}" for x in s.shares), flush=True)
        print("  by kind, per GB: " + ", ".join(f"{k} {v:.2f} s" for k, v in
                                                 s.kinds_per_gb.items())
              + "; idle: " + ", ".join(f"{k} {v:.4f}" for k, v in idle_kinds.items())
              + " cores", flush=True)
        out.append(s)
    return out


def pinned_phase(args: argparse.Namespace) -> dict[str, float]:
    """MB/s with the load on core 0 and the node on core 1 ("1core") or on both ("2cores")."""
    out = {}
    for procs in (1, 2):
        for label, cpus in (("1core", "1"), ("2cores", "0,1")):
            with node(procs, cpus) as n:
                parts = args.per_process * procs
                create_topic(n.bootstrap, "cores", parts)
                load(n.bootstrap, "cores", args.warmup, args.size, parts, args.producers, "0",
                     args.linger_ms, args.batch_size)
                s = measure(n, "cores", args.records, args.size, parts, args.producers, "0",
                            args.linger_ms, args.batch_size)
            out[f"N{procs}-{label}"] = s.mbps
            print(f"pinned N={procs} node on {label}: {s.mbps:.1f} MB/s "
                  f"({s.cpu_per_gb:.2f} CPU-s/GB)", flush=True)
    return out


def project(splits: list[Split], cores: int) -> float:
    """Projected MB/s of one node of `cores` processes, one per core, with its clients
    elsewhere: each process saturates its core at most, so the busiest one caps the node.
    Uses the 1-process CPU per GB, and the worst split overhead and imbalance of the larger
    nodes measured (a projection: it assumes neither grows further with N, and that the
    network, disks and clients keep up)."""
    one, more = splits[0], splits[1:] or splits
    overhead = max(s.cpu_per_gb for s in more) / one.cpu_per_gb
    imbalance = max(s.imbalance for s in more)
    gb_per_s = cores / (one.cpu_per_gb * overhead * imbalance)
    return gb_per_s * GB / MIB


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phases", default="split,pinned", help="split, pinned or both")
    ap.add_argument("--processes", default="1,2,4",
                    type=lambda s: [int(x) for x in s.split(",")], help="node sizes (split)")
    ap.add_argument("--per-process", type=int, default=8, help="partitions per process")
    ap.add_argument("--partitions", type=int, default=0,
                    help="the topic's partitions for every N (0: --per-process x N)")
    ap.add_argument("--idle-seconds", type=float, default=10,
                    help="the node's CPU measured idle this long before the load")
    ap.add_argument("--records", type=int, default=1_000_000, help="records measured")
    ap.add_argument("--warmup", type=int, default=200_000, help="records before measuring")
    ap.add_argument("--size", type=int, default=1024, help="record size (B)")
    ap.add_argument("--producers", type=int, default=2, help="producer processes")
    ap.add_argument("--linger-ms", type=int, default=5, help="the producers' linger.ms")
    ap.add_argument("--batch-size", type=int, default=1_000_000,
                    help="the producers' batch.size: smaller, more Produce requests per GB "
                         "through one process (to tell a per-request cost from a per-process one)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    phases = set(args.phases.split(","))
    report: dict[str, object] = {"loadavg": os.getloadavg()}
    try:
        if "split" in phases:
            splits = split_phase(args)
            report["split"] = [s.__dict__ | {"imbalance": s.imbalance} for s in splits]
            if len(splits) > 1 and splits[0].processes == 1:
                report["projection_mbps"] = {c: project(splits, c) for c in (8, 16, 32)}
                for c, v in report["projection_mbps"].items():  # type: ignore[attr-defined]
                    print(f"projection: {c} cores {v:,.0f} MB/s", flush=True)
        if "pinned" in phases:
            report["pinned_mbps"] = pinned_phase(args)
    finally:
        cleanup()
    report["loadavg_end"] = os.getloadavg()
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
