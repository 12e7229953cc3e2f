"""Faults for the chaos workloads: a 3-broker cluster, and a nemesis thread that kills (-9),
pauses (SIGSTOP, then SIGCONT) and cleanly restarts its brokers, one broker at a time, and
records a timeline of what it did. Everything that starts a process runs in the main thread
(see Nemesis.run).

With a NetLab (tests/chaos/netns.py: each broker in its own network namespace) it also
partitions the network: one broker isolated from everyone, cut from one peer, cut from both
peers (clients and ZooKeeper still reach it), or cut from ZooKeeper only; held for a while,
then healed.

The coordinator fault strikes where a transactional workload is most fragile: its victim is the
broker that coordinates one of the workload's live transactional ids (preferably caught with a
transaction in PrepareCommit/PrepareAbort, i.e. between EndTxn and the end of its markers:
tests/chaos/coordinators.py) or the group coordinator of its consumer group; it kills (-9),
pauses or (with a NetLab) isolates it."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import NewTopic

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.chaos.coordinators import Target, coordinator_of, hunt_prepared
from tests.chaos.netns import NetLab
from tests.cluster.cluster import Cluster, wait_until
from tests.support.broker import BrokerProcess, free_port

FAULTS = ("kill", "pause", "stop")  # the default: no network namespaces needed
ALL_FAULTS = (*FAULTS, "partition", "coordinator")
COORDINATOR_KINDS = ("kill", "pause", "isolate")  # isolate: with a NetLab only
PARTITION_KINDS = ("isolate", "peer", "peers", "zookeeper")
MARKS = {"kill": "K", "pause": "P", "stop": "S", "partition": "N"}  # in the text chart

# Topic settings of both workloads: every replica on every broker, acks=all needs two.
TOPIC_CONFIG = {"min.insync.replicas": "2"}


def start_cluster(zookeeper: ZooKeeperProcess, base: Path, size: int = 3) -> Cluster:
    return Cluster(zookeeper, base, size=size).start()


@contextlib.contextmanager
def partitionable_cluster(base: Path, size: int = 3, **settings: object
                          ) -> Iterator[tuple[Cluster, NetLab]]:
    """A NetLab, a ZooKeeper on its bridge and a cluster in its namespaces; all torn down
    in reverse order, whatever happens. Afterwards `lab.leaked_pids` lists processes that
    were still in the namespaces once the cluster was closed (there should be none)."""
    with NetLab(size) as lab, contextlib.ExitStack() as stack:
        zk = ZooKeeperProcess(base / "zookeeper", free_port(lab.zookeeper_host),
                              host=lab.zookeeper_host).start()
        stack.callback(zk.stop)
        cluster = Cluster(zk, base / "cluster", size=size, placement=lab.placement,
                          **settings)
        stack.callback(lambda: lab.leaked_pids.extend(lab.pids()))
        stack.callback(cluster.close)
        cluster.start()
        yield cluster, lab


def all_bootstrap(cluster: Cluster) -> str:
    """Every broker's address, running or not (clients must find the ones that come back)."""
    return ",".join(b.bootstrap for b in cluster.brokers)


def create_topics(cluster: Cluster, partitions: dict[str, int], rf: int = 3) -> None:
    admin = cluster.admin()
    fs = admin.create_topics(
        [NewTopic(t, n, rf, config=dict(TOPIC_CONFIG)) for t, n in partitions.items()],
        operation_timeout=30)
    for f in fs.values():
        f.result(timeout=60)
    for t in partitions:
        wait_until(lambda t=t: all(v >= 0 for v in cluster.leaders(t).values()), 60,
                   f"leaders of {t}")


def fully_replicated(cluster: Cluster, topics: list[str]) -> bool:
    n = len(cluster.brokers)
    try:
        return all(len(isr) == n for t in topics for isr in cluster.isr(t).values())
    except Exception:
        return False


@dataclass
class Event:
    t: float  # seconds since the run started
    kind: str  # kill | pause | stop | partition | start | resume | heal | note
    broker: int
    detail: str = ""


@dataclass
class Nemesis:
    """Every `interval` seconds (exponentially distributed, seeded) one fault on one random
    broker, healed after `down` seconds (uniform in the range; partitions, which need `net`,
    after `partition_hold`); never two at once. Between faults it waits (up to `settle`
    seconds) for `topics` to be fully replicated again, as Kafka's system tests await no
    under-replicated partitions."""

    cluster: Cluster
    seed: int = 0
    interval: float = 4.0
    down: tuple[float, float] = (0.5, 4.0)
    faults: tuple[str, ...] = FAULTS
    topics: list[str] = field(default_factory=list)
    settle: float = 30.0
    t0: float = field(default_factory=time.monotonic)
    events: list[Event] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {f: 0 for f in ALL_FAULTS})
    errors: list[str] = field(default_factory=list)
    net: NetLab | None = None
    # Long enough to outlast ZooKeeper sessions (3 s) and replica.lag.time.max.ms (4 s).
    partition_hold: tuple[float, float] = (3.0, 10.0)
    partition_kinds: dict[str, int] = field(
        default_factory=lambda: {k: 0 for k in PARTITION_KINDS})
    # The coordinator fault's candidates: the workload's transactional ids and groups.
    txn_ids: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    hunt: float = 5.0  # seconds to look for a prepared transaction before striking anyway
    coordinator_kinds: dict[str, int] = field(
        default_factory=lambda: {k: 0 for k in COORDINATOR_KINDS})
    coordinator_roles: dict[str, int] = field(
        default_factory=lambda: {"txn": 0, "prepared": 0, "group": 0})

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._paused: set[int] = set()
        if "partition" in self.faults and self.net is None:
            raise ValueError("partition faults need a NetLab (Nemesis(net=...))")
        if "coordinator" in self.faults and not (self.txn_ids or self.groups):
            raise ValueError("coordinator faults need transactional ids or groups")

    # ------------------------------------------------------------------ control
    def run(self, duration: float) -> None:
        """Inject faults for `duration` seconds, then heal everything.

        Runs in the calling thread, which must be the main one: the test harness starts
        brokers with PR_SET_PDEATHSIG, which kills a child when the *thread* that forked it
        exits, so a broker restarted from a short-lived thread would die with it."""
        deadline = time.monotonic() + duration
        try:
            while True:
                pause = self.rng.expovariate(1.0 / self.interval)
                if time.monotonic() + pause >= deadline:
                    time.sleep(max(0.0, deadline - time.monotonic()))
                    break
                time.sleep(pause)
                broker = self.rng.choice(self.cluster.brokers)
                fault = self.rng.choice(self.faults)
                try:
                    self.inject(fault, broker, self.rng.uniform(*self.down))
                except Exception as exc:  # noted in the report; heal() below retries
                    self.errors.append(f"{self._now()}s {fault} broker {broker.broker_id}: "
                                       f"{exc!r}")
                self.heal()
                settle_until = min(deadline, time.monotonic() + self.settle)
                while (time.monotonic() < settle_until and self.topics
                       and not fully_replicated(self.cluster, self.topics)):
                    time.sleep(0.5)
        finally:
            self.note("faults end; healing")
            self.heal()

    def note(self, text: str) -> None:
        self.events.append(Event(self._now(), "note", -1, text))

    def _now(self) -> float:
        return round(time.monotonic() - self.t0, 2)

    # ------------------------------------------------------------------ faults
    def inject(self, fault: str, broker: BrokerProcess, down: float) -> None:
        bid = broker.broker_id
        if fault == "coordinator":
            self.strike_coordinator(down)
        elif fault == "kill":
            self.counts["kill"] += 1
            self._kill(broker, down)
        elif fault == "stop":
            self.counts["stop"] += 1
            self.events.append(Event(self._now(), "stop", bid))
            try:
                broker.stop()  # SIGTERM; the harness raises if it does not exit in 30 s
            except AssertionError as exc:
                self.errors.append(f"{self._now()}s clean stop of broker {bid}: "
                                   f"{str(exc).splitlines()[0]}")
            time.sleep(down)
            self._start(broker)
        elif fault == "partition":
            self._partition(broker)
        elif fault == "pause":
            if broker.pid is not None:
                self.counts["pause"] += 1
                self._pause(broker, down)
        else:
            raise ValueError(f"unknown fault {fault!r}")

    def _kill(self, broker: BrokerProcess, down: float, detail: str = "") -> None:
        self.events.append(Event(self._now(), "kill", broker.broker_id, detail))
        broker.kill9()
        time.sleep(down)
        self._start(broker)

    def _pause(self, broker: BrokerProcess, down: float, detail: str = "") -> None:
        bid, pid = broker.broker_id, broker.pid
        if pid is None:
            return
        self.events.append(Event(self._now(), "pause", bid, f"{detail} {down:.1f}s".strip()))
        self._paused.add(bid)
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(down)
        finally:
            os.kill(pid, signal.SIGCONT)
            self._paused.discard(bid)
            self.events.append(Event(self._now(), "resume", bid))

    def find_coordinator_target(self) -> Target:
        """A transaction coordinator (caught with a prepared transaction if one shows up
        within `hunt` seconds) or a group coordinator of the workload."""
        role = self.rng.choice(["txn"] * bool(self.txn_ids) + ["group"] * bool(self.groups))
        if role == "txn":
            found = hunt_prepared(self.cluster, self.txn_ids, self.hunt)
            if found is not None:
                return found
        key = self.rng.choice(self.txn_ids if role == "txn" else self.groups)
        return Target(coordinator_of(self.cluster, role, key), role, key)

    def strike_coordinator(self, down: float) -> Target:
        target = self.find_coordinator_target()
        broker = self.cluster.broker(target.broker_id)
        kind = self.rng.choice(COORDINATOR_KINDS if self.net is not None
                               else COORDINATOR_KINDS[:2])
        self.counts["coordinator"] += 1
        self.coordinator_kinds[kind] += 1
        self.coordinator_roles[target.role] += 1
        self.coordinator_roles["prepared"] += bool(target.state)
        detail = target.describe()
        if kind == "kill":
            self._kill(broker, down, detail)
        elif kind == "pause":
            self._pause(broker, down, detail)
        else:
            assert self.net is not None
            hold = self.rng.uniform(*self.partition_hold)
            self.net.isolate(self.cluster.brokers.index(broker))
            self.events.append(Event(self._now(), "partition", target.broker_id,
                                     f"{detail}, isolated, {hold:.1f}s"))
            time.sleep(hold)
            self._heal_net()
        return target

    def _partition(self, broker: BrokerProcess) -> None:
        assert self.net is not None
        i = self.cluster.brokers.index(broker)  # the lab's numbering is the cluster's
        others = [j for j in range(len(self.cluster.brokers)) if j != i]
        kind = self.rng.choice(PARTITION_KINDS)
        hold = self.rng.uniform(*self.partition_hold)
        self.counts["partition"] += 1
        self.partition_kinds[kind] += 1
        self.events.append(Event(self._now(), "partition", broker.broker_id, f"{hold:.1f}s"))
        if kind == "isolate":
            self.net.isolate(i)
        elif kind == "peer":
            self.net.cut_brokers(i, [self.rng.choice(others)])
        elif kind == "peers":
            self.net.cut_brokers(i, others)
        else:
            self.net.cut_zookeeper(i)
        self.events[-1].detail = f"{self.net.cuts[-1].what}, {hold:.1f}s"
        time.sleep(hold)
        self._heal_net()

    def _heal_net(self) -> None:
        if self.net is not None and self.net.cuts:
            cut = {c.broker for c in self.net.cuts}
            self.net.heal()
            for i in sorted(cut):
                self.events.append(Event(self._now(), "heal", self.cluster.brokers[i].broker_id))

    def _start(self, broker: BrokerProcess) -> None:
        for attempt in range(5):
            try:
                broker.start(timeout=60)
                self.events.append(Event(self._now(), "start", broker.broker_id))
                return
            except Exception as exc:
                self.errors.append(f"{self._now()}s start of broker {broker.broker_id} "
                                   f"(attempt {attempt + 1}): {str(exc).splitlines()[0]}")
                time.sleep(2)

    def heal(self) -> None:
        try:
            self._heal_net()
        except Exception as exc:
            self.errors.append(f"{self._now()}s healing the network: {exc!r}")
        for b in self.cluster.brokers:
            if b.broker_id in self._paused and b.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(b.pid, signal.SIGCONT)
                self._paused.discard(b.broker_id)
            if not b.is_running():
                self._start(b)

    def summary(self) -> str:
        text = (f"{self.counts['kill']} kills, {self.counts['pause']} pauses, "
                f"{self.counts['stop']} clean restarts")
        if "partition" in self.faults:
            text += f", {self.partition_summary()}"
        if "coordinator" in self.faults:
            text += f", {self.coordinator_summary()}"
        return text

    def coordinator_summary(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in self.coordinator_kinds.items() if n)
        r = self.coordinator_roles
        return (f"{self.counts['coordinator']} coordinator strikes ({kinds or 'none'}; "
                f"{r['txn']} on a transaction coordinator, {r['prepared']} of them with a "
                f"transaction in PrepareCommit/PrepareAbort; {r['group']} on a group "
                f"coordinator)")

    def partition_summary(self) -> str:
        kinds = ", ".join(f"{n} {k}" for k, n in self.partition_kinds.items() if n)
        return f"{self.counts['partition']} partitions" + (f" ({kinds})" if kinds else "")

    def timeline(self) -> str:
        return "\n".join(f"  {e.t:8.2f}s  {e.kind:<6} "
                         f"{'broker ' + str(e.broker) if e.broker >= 0 else ''} {e.detail}"
                         for e in self.events)


def throughput_chart(times: list[float], end: float, buckets: int = 40,
                     events: list[Event] | None = None, width: int = 50) -> str:
    """A text timeline: acknowledged writes per time slice, with the faults in each slice."""
    if end <= 0:
        return ""
    step = end / buckets
    counts = [0] * buckets
    for t in times:
        counts[min(int(t / step), buckets - 1)] += 1
    marks: list[list[str]] = [[] for _ in range(buckets)]
    for e in events or []:
        if e.kind in MARKS:
            coordinator = "C" if e.detail.startswith("coordinator") else ""
            marks[min(int(e.t / step), buckets - 1)].append(
                f"{coordinator}{MARKS[e.kind]}{e.broker}")
    top = max(counts) or 1
    rows = []
    for i, n in enumerate(counts):
        bar = "#" * round(width * n / top)
        rows.append(f"  {i * step:7.1f}s {n:6d} {bar:<{width}} {' '.join(marks[i])}")
    return "\n".join(rows)


FAULT_COLOURS = {"kill": "#d62728", "pause": "#ff7f0e", "stop": "#1f77b4",
                 "partition": "#9467bd"}


def timeline_svg(times: list[float], end: float, events: list[Event], title: str,
                 buckets: int = 100) -> str:
    """An SVG plot: committed values per time slice (grey bars) under the faults (a band per
    broker from the fault to its healing: red kill, orange pause, blue clean stop, purple
    partition)."""
    w, h, left, top, lane = 900, 300, 50, 30, 14
    brokers = sorted({e.broker for e in events if e.broker >= 0}) or [0]
    plot_h = h - top - 30 - lane * len(brokers)
    end = max(end, 1e-3)
    step = end / buckets
    counts = [0] * buckets
    for t in times:
        counts[min(int(t / step), buckets - 1)] += 1
    top_n = max(counts) or 1
    x = lambda t: left + (w - left - 10) * min(t, end) / end  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">{title}</text>']
    bw = (w - left - 10) / buckets
    for i, n in enumerate(counts):
        bh = plot_h * n / top_n
        out.append(f'<rect x="{left + i * bw:.1f}" y="{top + plot_h - bh:.1f}" '
                   f'width="{max(bw - 1, 1):.1f}" height="{bh:.1f}" fill="#999"/>')
    out.append(f'<text x="4" y="{top + 10}">{top_n}/{step:.1f}s</text>')
    open_at: dict[int, tuple[str, float]] = {}
    for e in events:
        if e.kind in FAULT_COLOURS:
            open_at[e.broker] = (e.kind, e.t)
        elif e.kind in ("start", "resume", "heal") and e.broker in open_at:
            kind, t = open_at.pop(e.broker)
            y = top + plot_h + 10 + lane * brokers.index(e.broker)
            out.append(f'<rect x="{x(t):.1f}" y="{y}" width="{max(x(e.t) - x(t), 2):.1f}" '
                       f'height="{lane - 3}" fill="{FAULT_COLOURS[kind]}"><title>{kind} broker '
                       f'{e.broker} {t:.1f}-{e.t:.1f}s</title></rect>')
    for i, b in enumerate(brokers):
        out.append(f'<text x="4" y="{top + plot_h + 20 + lane * i}">broker {b}</text>')
    ticks = 10
    for i in range(ticks + 1):
        t = end * i / ticks
        out.append(f'<text x="{x(t) - 8:.1f}" y="{h - 6}">{t:.0f}s</text>')
    legend = " ".join(f'<tspan fill="{c}">■ {k}</tspan>' for k, c in FAULT_COLOURS.items())
    out.append(f'<text x="{w - 330}" y="16">{legend}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
