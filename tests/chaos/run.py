"""Long forms of the chaos workloads (`make chaos`): each on its own ZooKeeper and 3-broker
cluster, reports under --out (default build/chaos/<time>/), exit status 1 on any anomaly.

    .venv/bin/python -m tests.chaos.run [--workload queue|copy|cutoff|fuzz|all] [--duration 300]
        [--fault-interval 4] [--faults kill,pause,stop,coordinator[,partition]] [--seed 7]
        [--records 30000]
        [--copy-mode hard,clean] [--copy-partitions 1] [--cutoff-rounds 0]
        [--cutoff-hold 12,20] [--out DIR]

Every option also reads an environment variable (CHAOS_WORKLOAD, CHAOS_DURATION,
CHAOS_FAULT_INTERVAL, CHAOS_FAULTS, CHAOS_SEED, CHAOS_RECORDS, CHAOS_COPY_MODE,
CHAOS_COPY_PARTITIONS, CHAOS_CUTOFF_ROUNDS, CHAOS_CUTOFF_HOLD, CHAOS_OUT), so
`make chaos CHAOS_DURATION=600` works;
the `coordinator` fault (a default) strikes the broker coordinating one of the producers'
transactional ids, caught with a transaction in PrepareCommit/PrepareAbort where possible
(the copy workload strikes its copiers' transaction and group coordinators in every round);
`CHAOS_FAULTS=kill,pause,stop,coordinator,partition` adds network partitions to the queue
workload (its brokers then run in network namespaces: root and iproute2 needed, else it says
so and runs without them; the coordinator fault then also isolates its victim);
CHAOS_CLIENT_DEBUG=consumer,fetch logs the queue consumers' librdkafka debug output to
rdkafka-consumers.log next to the report.

The cutoff workload (tests/chaos/cutoff.py, network namespaces: root and iproute2 needed,
else it says so and is skipped) cuts one broker at a time from ZooKeeper and both peers while
clients still reach it, for --cutoff-rounds rounds (0: as many as start within --duration),
each held --cutoff-hold seconds (a range), on brokers with zookeeper.session.timeout.ms=6000
as in issue 45: e.g. `make chaos CHAOS_WORKLOAD=cutoff CHAOS_DURATION=1800`.

The fuzz workload (tests/protocol/frame_fuzz.py) sends one broker mutated requests of every
API and version for --fuzz-duration seconds (CHAOS_FUZZ_DURATION, default --duration) from
--seed: no traceback or error in its log, never down, always answering, no acked record lost;
e.g. `make chaos CHAOS_WORKLOAD=fuzz CHAOS_FUZZ_DURATION=900 CHAOS_SEED=7`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.chaos.nemesis import ALL_FAULTS, partitionable_cluster, start_cluster
from tests.chaos.netns import NetLab, unavailable_reason
from tests.cluster.cluster import Cluster
from tests.support.broker import free_port

R = TypeVar("R")
# Issue 45's brokers: ZooKeeper sessions of 6 s (the tests' clusters use 3 s).
CUTOFF_SETTINGS = {"zookeeper.session.timeout.ms": 6000,
                   # every produce refusal with its producer id, epoch and sequences
                   "samsa.log.loggers": "broker.replication.produce_appends=DEBUG"}


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="tests.chaos.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=["queue", "copy", "cutoff", "fuzz", "all"],
                    default=_env("CHAOS_WORKLOAD", "all"))
    ap.add_argument("--duration", type=float, default=float(_env("CHAOS_DURATION", "300")),
                    help="queue: seconds of load under faults")
    ap.add_argument("--fault-interval", type=float,
                    default=float(_env("CHAOS_FAULT_INTERVAL", "4")),
                    help="queue: mean seconds between faults (the fault rate)")
    ap.add_argument("--faults", default=_env("CHAOS_FAULTS", "kill,pause,stop,coordinator"),
                    help="queue: comma-separated subset of kill,pause,stop,coordinator,"
                         "partition (partition: network namespaces, root only)")
    ap.add_argument("--seed", type=int, default=int(_env("CHAOS_SEED", str(int(time.time())))))
    ap.add_argument("--producers", type=int, default=int(_env("CHAOS_PRODUCERS", "4")))
    ap.add_argument("--consumers", type=int, default=int(_env("CHAOS_CONSUMERS", "2")))
    ap.add_argument("--records", type=int, default=int(_env("CHAOS_RECORDS", "100000")),
                    help="copy: records seeded by VerifiableProducer")
    ap.add_argument("--copy-mode", default=_env("CHAOS_COPY_MODE", "hard,clean"),
                    help="copy: hard (kill -9) and/or clean (SIGTERM) bounces of brokers and "
                         "copiers; one run per mode, comma-separated")
    ap.add_argument("--copy-partitions", type=int,
                    default=int(_env("CHAOS_COPY_PARTITIONS", "1")),
                    help="copy: input partitions = copiers (1 also checks order)")
    ap.add_argument("--cutoff-rounds", type=int,
                    default=int(_env("CHAOS_CUTOFF_ROUNDS", "0")),
                    help="cutoff: rounds (0: as many as start within --duration)")
    ap.add_argument("--cutoff-hold", default=_env("CHAOS_CUTOFF_HOLD", "12,20"),
                    help="cutoff: seconds a broker stays cut off, a range lo,hi")
    ap.add_argument("--fuzz-duration", type=float,
                    default=float(_env("CHAOS_FUZZ_DURATION", "0")),
                    help="fuzz: seconds of mutated requests (0: --duration)")
    ap.add_argument("--out", type=Path, default=Path(_env(
        "CHAOS_OUT", f"build/chaos/{time.strftime('%Y%m%d-%H%M%S')}")))
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"chaos: seed {args.seed}, reports in {out}", flush=True)
    summaries: list[str] = []
    ok = True
    if args.workload in ("copy", "all"):
        from tests.chaos.txn_copy import CopyParams, run_copy

        for mode in args.copy_mode.split(","):
            if mode not in ("hard", "clean"):
                raise SystemExit(f"--copy-mode: {mode!r} is neither hard nor clean")
            cp = CopyParams(records=args.records, partitions=args.copy_partitions,
                            hard=mode == "hard", seed=args.seed, bounce_rounds=3)
            res = _with_cluster(out / f"copy-{mode}",
                                lambda c, d, n, cp=cp: run_copy(c, cp, d))
            summaries.append(f"[{mode}] {res.summary()}")
            ok &= res.ok
    if args.workload in ("queue", "all"):
        from tests.chaos.queue_workload import QueueParams, run_queue

        faults = queue_faults(args.faults)
        qp = QueueParams(duration=args.duration, fault_interval=args.fault_interval,
                         faults=faults, seed=args.seed, producers=args.producers,
                         consumers=args.consumers,
                         client_debug=os.environ.get("CHAOS_CLIENT_DEBUG", ""))
        res2 = _with_cluster(out / "queue", lambda c, d, n: run_queue(c, qp, d, n),
                             partitions="partition" in faults)
        summaries.append(res2.summary())
        ok &= res2.report.ok
    if args.workload in ("cutoff", "all"):
        ok &= _cutoff(args, out, summaries)
    if args.workload in ("fuzz", "all"):
        ok &= _fuzz(args, out, summaries)
    text = "\n".join(summaries)
    (out / "summary.txt").write_text(text + "\n")
    print("\n" + text)
    print(f"reports: {out}/*/report.txt; {'OK' if ok else 'ANOMALIES FOUND'}")
    return 0 if ok else 1


def _cutoff(args: argparse.Namespace, out: Path, summaries: list[str]) -> bool:
    from tests.chaos.cutoff import CutoffParams, run_cutoff

    reason = unavailable_reason()
    if reason:
        summaries.append(f"cutoff: skipped: {reason}")
        return True
    lo, hi = (float(x) for x in args.cutoff_hold.split(","))
    cp = CutoffParams(rounds=args.cutoff_rounds, hold=(lo, hi), seed=args.seed,
                      duration=0.0 if args.cutoff_rounds else args.duration)
    base = out / "cutoff"
    base.mkdir(parents=True, exist_ok=True)
    with partitionable_cluster(base, **CUTOFF_SETTINGS) as (cluster, lab):
        res = run_cutoff(cluster, lab, cp, base / "run")
    print(res.text, flush=True)
    summaries.append(res.summary())
    return res.ok


def _fuzz(args: argparse.Namespace, out: Path, summaries: list[str]) -> bool:
    from tests.protocol.frame_fuzz import fuzz_broker
    from tests.support.broker import BrokerProcess

    base = out / "fuzz"
    base.mkdir(parents=True, exist_ok=True)
    with BrokerProcess(base / "data", name="broker") as broker:
        report = fuzz_broker(broker, args.fuzz_duration or args.duration, args.seed)
    (base / "report.txt").write_text(report.text() + "\n")
    print(report.text(), flush=True)
    summaries.append(report.text().splitlines()[0])
    return report.ok


def queue_faults(spec: str) -> tuple[str, ...]:
    """The --faults list, checked; partitions dropped (with a word why) where network
    namespaces cannot be made."""
    faults = tuple(f for f in spec.split(",") if f)
    unknown = set(faults) - set(ALL_FAULTS)
    if unknown:
        raise SystemExit(f"--faults: unknown {sorted(unknown)}; known: {', '.join(ALL_FAULTS)}")
    if "partition" in faults:
        reason = unavailable_reason()
        if reason:
            faults = tuple(f for f in faults if f != "partition")
            rest = f"with {', '.join(faults)} only" if faults else "without faults"
            print(f"chaos: NO network partitions: {reason}; running {rest}", flush=True)
    return faults


@contextlib.contextmanager
def _cluster(out: Path, partitions: bool) -> Iterator[tuple[Cluster, NetLab | None]]:
    if partitions:
        with partitionable_cluster(out) as (cluster, lab):
            yield cluster, lab
        if lab.leaked_pids:
            print(f"chaos: processes left in the namespaces: {lab.leaked_pids}", flush=True)
        return
    zk = ZooKeeperProcess(out / "zookeeper", free_port()).start()
    try:
        cluster = start_cluster(zk, out / "cluster")
        try:
            yield cluster, None
        finally:
            cluster.close()
    finally:
        zk.stop()


def _with_cluster(out: Path, body: Callable[[Cluster, Path, NetLab | None], R],
                  partitions: bool = False) -> R:
    out.mkdir(parents=True, exist_ok=True)
    with _cluster(out, partitions) as (cluster, lab):
        res = body(cluster, out, lab)
    print(getattr(res, "text", res), flush=True)
    return res


if __name__ == "__main__":
    sys.exit(main())
