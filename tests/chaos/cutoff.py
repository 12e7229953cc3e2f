"""Workload 3: exactly-once under a broker cut off from ZooKeeper and from its peers while
clients still reach it (the split brain of Samsa issue 45).

A 3-broker cluster in network namespaces (tests/chaos/netns.py), one topic of 6 partitions,
replication factor 3, min.insync.replicas=2. Two producer processes run under
tests/support/supervised.py (tests/chaos/eos_producer.py): an idempotent one (acks=all, each
value sent once, ~150 a second) and a transactional one (small transactions, ~1/4 aborted).
Then, round after round, one broker is cut from ZooKeeper and both peers, the victim taken in
turn as the controller, the transaction coordinator of the producer's transactional id and
the broker leading most partitions, every other round one way only (what the victim sends is
dropped, what they send it arrives: issue 45's iptables OUTPUT rules); held, healed; then the
round waits for full ISRs, asks for a preferred leader election (ElectLeaders) and waits for
the preferred leaders.

At the end the producers stop, and the checks are:

    lost / duplicate / moved   every acknowledged value exactly once, at its acknowledged
                               (partition, offset), in a read_uncommitted and in a
                               read_committed read (and unacknowledged values at most once)
    aborted_read               no value of an aborted transaction read read_committed
    partial_txn                an indeterminate transaction read in part (read_committed)
    phantom                    a value read that no producer sent
    replica_divergence         the three replicas of a partition differ (their batches,
                               byte for byte, read from each broker's segment files)
    unrecovered                a round after which the brokers did not all say full ISRs
                               within 120 s and preferred leaders within 30 s more

An acknowledgement without an offset is librdkafka's implicit one (rd_kafka_dr_implicit_ack):
a batch whose request failed in a way that may have written it (a time-out, a broken
connection, NOT_ENOUGH_REPLICAS_AFTER_APPEND) is acknowledged, with offset -1, once a later
batch of its partition is, its sequence then known written; the broker never answers -1 without
an error. Such a value is checked exactly once like the others and listed in the notes (where
it was written is not known to the client), not as an anomaly.

Each anomaly names the partition and offsets, the batch's producer id, epoch, sequence and
partition leader epoch, and which broker led at that epoch as the brokers' Metadata said.
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from samsa.protocol.records import BatchHeader, decode_records, iter_batches
from tests.chaos.coordinators import coordinator_of
from tests.chaos.nemesis import all_bootstrap, create_topics
from tests.chaos.netns import NetLab
from tests.cluster.cluster import Cluster, wait_until
from tests.protocol.wire import WireClient
from tests.support.supervised import Supervised

TARGETS = ("controller", "txn_coordinator", "most_leaders")
METADATA, ELECT_LEADERS = 3, 43
PREFERRED = 0
ANOMALIES = ("lost", "duplicate", "moved", "aborted_read", "partial_txn",
             "phantom", "replica_divergence", "unrecovered")
NO_OFFSET = "no_offset"  # checked by check(), reported apart (implicit_acks)


@dataclass
class CutoffParams:
    rounds: int = 8
    duration: float = 0.0  # > 0: start no round after this many seconds (rounds ignored)
    hold: tuple[float, float] = (12.0, 20.0)  # seconds a broker stays cut off
    partitions: int = 6
    rate: float = 150.0  # idempotent values a second
    seed: int = 0
    recover_timeout: float = 120.0  # full ISRs, preferred leaders after a round
    stall_s: float = 60.0  # a producer run without progress this long is killed
    one_way: bool = True  # every other round cuts only what the victim sends


@dataclass
class Round:
    target: str
    broker: int
    start: float
    hold: float
    recovered: float = 0.0  # seconds from healing to full ISRs and preferred leaders
    moved: int = 0  # partitions the victim led that had a new leader by the end of the cut
    outbound_only: bool = False  # only what the victim sent was dropped
    note: str = ""


@dataclass
class CutoffResult:
    params: CutoffParams
    rounds: list[Round]
    anomalies: dict[str, list[str]]
    counts: dict[str, int]
    notes: list[str]
    text: str = ""

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def summary(self) -> str:
        c = self.counts
        found = ", ".join(f"{len(v)} {k}" for k, v in self.anomalies.items() if v) or "none"
        kinds = ", ".join(r.target + " one way" * r.outbound_only for r in self.rounds)
        return (f"cutoff: {len(self.rounds)} rounds ({kinds}); "
                f"{c.get('acked', 0)} idempotent values acknowledged, {c.get('txn_ok', 0)} "
                f"committed / {c.get('txn_aborted', 0)} aborted / {c.get('txn_info', 0)} "
                f"indeterminate transactions, {c.get('restarts', 0)} producer restarts; "
                f"anomalies: {found}")


# --------------------------------------------------------------------------- leadership log
class LeaderLog(threading.Thread):
    """Asks every broker for the topic's Metadata twice a second and keeps each change of
    (leader, leader epoch, ISR) as that broker saw it: the chain of leaders an anomaly's
    epochs are looked up in. A cut-off broker still answers (clients reach it)."""

    def __init__(self, cluster: Cluster, topic: str, t0: float) -> None:
        super().__init__(name="leader-log", daemon=True)
        self.cluster, self.topic, self.t0 = cluster, topic, t0
        self.last: dict[tuple[int, int], tuple[int, int, tuple[int, ...]]] = {}
        self.changes: list[str] = []
        self.epoch_leaders: dict[tuple[int, int], set[int]] = defaultdict(set)
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.5):
            for b in self.cluster.brokers:
                with contextlib.suppress(Exception):
                    self._sample(b.broker_id, b.bootstrap)

    def _sample(self, seen_by: int, bootstrap: str) -> None:
        with WireClient(bootstrap, timeout=1) as w:
            md = w.call(METADATA, 12, {"topics": [{"name": self.topic}],
                                       "allow_auto_topic_creation": False})
        now = time.monotonic() - self.t0
        for t in md.topics:
            for p in t.partitions if t.name == self.topic else []:
                state = (p.leader_id, p.leader_epoch, tuple(sorted(p.isr_nodes)))
                self.epoch_leaders[(p.partition_index, p.leader_epoch)].add(p.leader_id)
                if self.last.get((seen_by, p.partition_index)) != state:
                    self.last[(seen_by, p.partition_index)] = state
                    self.changes.append(f"{now:8.2f}s broker {seen_by} says p{p.partition_index}"
                                        f": leader {state[0]} epoch {state[1]} isr "
                                        f"{list(state[2])}")

    def led(self, partition: int, epoch: int) -> str:
        who = sorted(self.epoch_leaders.get((partition, epoch), set()))
        return f"broker {','.join(map(str, who))}" if who else "a leader not seen"


# --------------------------------------------------------------------------- the rounds
def _metadata(cluster: Cluster, topic: str) -> object:
    for b in cluster.brokers:
        with contextlib.suppress(Exception), WireClient(b.bootstrap, timeout=5) as w:
            return w.call(METADATA, 12, {"topics": [{"name": topic}],
                                         "allow_auto_topic_creation": False})
    raise AssertionError("no broker answered Metadata")


def find_target(cluster: Cluster, kind: str, topic: str, txn_id: str,
                rng: random.Random) -> int:
    if kind == "controller":
        return int(_metadata(cluster, topic).controller_id)  # type: ignore[attr-defined]
    if kind == "txn_coordinator":
        return coordinator_of(cluster, "txn", txn_id)
    counts: dict[int, int] = defaultdict(int)
    for leader in cluster.leaders(topic).values():
        counts[leader] += 1
    most = max(counts.values())
    return rng.choice(sorted(b for b, n in counts.items() if n == most))  # preferred: a tie


def elect_preferred(cluster: Cluster) -> None:
    """ElectLeaders (preferred, every partition) through any broker; it forwards to the
    controller. Errors per partition (ELECTION_NOT_NEEDED, ...) are the normal answers."""
    for b in cluster.brokers:
        with contextlib.suppress(Exception), WireClient(b.bootstrap, timeout=30) as w:
            w.call(ELECT_LEADERS, 2, {"timeout": 20000, "election_type": PREFERRED,
                                      "topic_partitions": None})
            return


def views(cluster: Cluster, topic: str, brokers: list[int] | None = None
          ) -> dict[int, dict[int, tuple[int, list[int], list[int]]]]:
    """{broker: {partition: (leader, replicas, isr)}} as each broker's own Metadata says (a
    broker cut off from ZooKeeper has a stale view: never ask just one)."""
    out = {}
    for b in cluster.brokers:
        if brokers is not None and b.broker_id not in brokers:
            continue
        with WireClient(b.bootstrap, timeout=5) as w:
            md = w.call(METADATA, 12, {"topics": [{"name": topic}],
                                       "allow_auto_topic_creation": False})
        out[b.broker_id] = {p.partition_index: (p.leader_id, list(p.replica_nodes),
                                                sorted(p.isr_nodes))
                            for t in md.topics if t.name == topic for p in t.partitions}
    return out


def _everyone_says(cluster: Cluster, topic: str, preferred: bool) -> bool:
    n = len(cluster.brokers)
    return all(len(isr) == n and (not preferred or leader == replicas[0])
               for view in views(cluster, topic).values()
               for leader, replicas, isr in view.values())


def _recover(cluster: Cluster, topic: str, timeout: float) -> str:
    """Full ISRs, then preferred leaders, as every broker says; '' or what did not happen in
    time."""
    try:
        wait_until(lambda: _everyone_says(cluster, topic, False), timeout, "full ISRs")
    except AssertionError as exc:
        return f"{exc}: {_disagreements(cluster, topic, False)}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        elect_preferred(cluster)
        with contextlib.suppress(Exception):
            if _everyone_says(cluster, topic, True):
                return ""
        time.sleep(1)
    return (f"leaders not back on their preferred replicas within 30 s: "
            f"{_disagreements(cluster, topic, True)}")


def _disagreements(cluster: Cluster, topic: str, preferred: bool) -> str:
    """Which broker says what about the partitions not fully replicated (or not led by their
    preferred replica) in its view."""
    n, out = len(cluster.brokers), []
    try:
        for bid, view in sorted(views(cluster, topic).items()):
            out += [f"broker {bid} says p{part} leader {leader} isr {isr}"
                    for part, (leader, replicas, isr) in sorted(view.items())
                    if len(isr) != n or (preferred and leader != replicas[0])]
    except Exception as exc:
        out.append(f"Metadata failed: {exc!r}")
    return "; ".join(out) or "(all agree now)"


def _moved(cluster: Cluster, topic: str, victim: int, led: list[int]) -> int:
    """How many of the partitions `victim` led the other brokers now say someone else leads."""
    others = [b.broker_id for b in cluster.brokers if b.broker_id != victim]
    try:
        seen = views(cluster, topic, others)
    except Exception:
        return -1
    return sum(all(v[p][0] not in (victim, -1) for v in seen.values()) for p in led)


def run_rounds(cluster: Cluster, lab: NetLab, p: CutoffParams, topic: str, txn_id: str,
               t0: float, log: list[str]) -> list[Round]:
    rng = random.Random(p.seed)
    rounds: list[Round] = []
    while (len(rounds) < p.rounds if p.duration <= 0
           else time.monotonic() - t0 < p.duration):
        kind = TARGETS[len(rounds) % len(TARGETS)]
        bid = find_target(cluster, kind, topic, txn_id, rng)
        i = [b.broker_id for b in cluster.brokers].index(bid)
        hold = rng.uniform(*p.hold)
        r = Round(kind, bid, time.monotonic() - t0, hold)
        led = [q for q, b in cluster.leaders(topic).items() if b == bid]
        # every other round one way only: with 3 targets, each target gets both kinds
        r.outbound_only = p.one_way and len(rounds) % 2 == 1
        lab.cut_off(i, r.outbound_only)
        log.append(f"{r.start:8.2f}s round {len(rounds) + 1}: broker {bid} ({kind}) cut from "
                   f"ZooKeeper and peers{' (outbound only)' if r.outbound_only else ''} for "
                   f"{hold:.1f}s")
        try:
            time.sleep(hold)
            r.moved = _moved(cluster, topic, bid, led)
        finally:
            lab.heal()
        healed = time.monotonic()
        log.append(f"{healed - t0:8.2f}s healed; {r.moved} of the {len(led)} partitions it "
                   f"led had a new leader elsewhere")
        r.note = _recover(cluster, topic, p.recover_timeout)
        r.recovered = time.monotonic() - healed
        log.append(f"{time.monotonic() - t0:8.2f}s recovered in {r.recovered:.1f}s "
                   f"{r.note}".rstrip())
        rounds.append(r)
    return rounds


# --------------------------------------------------------------------------- history
@dataclass
class History:
    acked: dict[str, tuple[int, int | None]] = field(default_factory=dict)  # value -> (p, o)
    sent: set[str] = field(default_factory=set)
    aborted: set[str] = field(default_factory=set)
    info_txns: list[list[str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def read_history(out_dir: Path) -> History:
    h = History()
    for path in sorted(out_dir.glob("*.run*.stdout")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            h.sent.update(msg.get("sent", []))
            if "ack" in msg:
                part, off, v = msg["ack"]
                h.acked[v] = (part, off)
                h.counts["acked"] += 1
            elif "nack" in msg:
                h.counts["nacked"] += 1
            elif "txn" in msg:
                h.counts[f"txn_{msg['txn']}"] += 1
                if msg["txn"] == "ok":
                    h.acked.update({v: (part, off) for part, off, v in msg["acks"]})
                elif msg["txn"] == "aborted":
                    h.aborted.update(msg["values"])
                else:
                    h.info_txns.append(msg["values"])
    return h


Reads = dict[str, list[tuple[int, int]]]  # value -> where it was read


def _ends(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    """Each partition's end as ListOffsets(latest) answers it: the high watermark, or the
    last stable offset for read_committed."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cut-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)[1]
                for part in range(partitions)]
    finally:
        c.close()


def no_open_transactions(bootstrap: str, topic: str, partitions: int) -> bool:
    """Every partition's last stable offset is its high watermark: a transaction left open
    (its producer killed) would hide later committed values from a read_committed read until
    the coordinator aborts it (transaction.timeout.ms)."""
    return (_ends(bootstrap, topic, partitions, "read_committed")
            == _ends(bootstrap, topic, partitions, "read_uncommitted"))


def read_topic(bootstrap: str, topic: str, partitions: int, isolation: str,
               timeout: float = 90.0) -> Reads:
    """Every record from the beginning up to each partition's end (high watermark; LSO for
    read_committed, which no open transaction holds back once the producers stopped)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cut-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    reads: Reads = defaultdict(list)
    try:
        tps = [TopicPartition(topic, part, OFFSET_BEGINNING) for part in range(partitions)]
        c.assign(tps)
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < partitions and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                err, part, off = m.error(), m.partition() or 0, m.offset() or 0
                if err is None:
                    reads[(m.value() or b"").decode()].append((part, off))
                    eof.discard(part)
                elif err.code() == KafkaError._PARTITION_EOF:
                    eof.add(part)
        if len(eof) < partitions:
            raise AssertionError(f"{isolation} read did not reach the end of partitions "
                                 f"{sorted(set(range(partitions)) - eof)} in {timeout:.0f}s")
    finally:
        c.close()
    return reads


@dataclass
class Batch:
    header: BatchHeader
    raw: bytes


def replica_logs(cluster: Cluster, topic: str, partition: int) -> dict[int, list[Batch]]:
    out: dict[int, list[Batch]] = {}
    for b in cluster.brokers:
        batches: list[Batch] = []
        for seg in sorted((b.data_dir / f"{topic}-{partition}").glob("*.log")):
            buf = seg.read_bytes()
            batches += [Batch(h, buf[pos:pos + h.size]) for pos, h in iter_batches(buf)]
        out[b.broker_id] = batches
    return out


def describe_offset(logs: dict[int, list[Batch]], offset: int | None, leaders: LeaderLog,
                    partition: int) -> str:
    """The batch holding `offset`, from the first replica that has it."""
    if offset is None:
        return "no offset"
    for bid, batches in sorted(logs.items()):
        for bt in batches:
            h = bt.header
            if h.base_offset <= offset <= h.last_offset:
                seq = h.base_sequence + (offset - h.base_offset) if h.base_sequence >= 0 else -1
                return (f"offset {offset}: pid {h.producer_id} epoch {h.producer_epoch} seq "
                        f"{seq} (batch {h.base_offset}-{h.last_offset}, base seq "
                        f"{h.base_sequence}), leader epoch {h.partition_leader_epoch} led by "
                        f"{leaders.led(partition, h.partition_leader_epoch)} (from broker "
                        f"{bid}'s log)")
    return f"offset {offset}: in no replica's log"


def _show_batch(bs: list[Batch], k: int, partition: int, leaders: LeaderLog) -> str:
    if k >= len(bs):
        return f"ends at offset {bs[-1].header.next_offset if bs else 0}"
    h = bs[k].header
    values = [r.value for r in decode_records(bs[k].raw)][:3]
    return (f"batch {h.base_offset}-{h.last_offset} pid {h.producer_id} epoch "
            f"{h.producer_epoch} seq {h.base_sequence} leader epoch {h.partition_leader_epoch} "
            f"({leaders.led(partition, h.partition_leader_epoch)}) values {values}")


def compare_replicas(logs: dict[int, list[Batch]], partition: int, leaders: LeaderLog
                     ) -> list[str]:
    """Each replica's batches against the lowest broker id's, byte for byte."""
    ref_id = min(logs)
    ref = logs[ref_id]
    problems = []
    for bid, batches in sorted(logs.items()):
        if bid == ref_id or [b.raw for b in batches] == [b.raw for b in ref]:
            continue
        k = next((j for j, (x, y) in enumerate(zip(batches, ref, strict=False))
                  if x.raw != y.raw), min(len(batches), len(ref)))
        problems.append(f"p{partition}: broker {bid} differs from broker {ref_id} at batch "
                        f"{k}: {_show_batch(batches, k, partition, leaders)} vs "
                        f"{_show_batch(ref, k, partition, leaders)}")
    return problems


def implicit_acks(found: dict[str, list[str]]) -> list[str]:
    """Take the acknowledgements without an offset out of `found`, as notes."""
    return [f"acknowledged without an offset (librdkafka's implicit acknowledgement), read "
            f"once: {x}" for x in found.pop(NO_OFFSET, [])]


def check(h: History, reads: dict[str, Reads], logs: dict[int, dict[int, list[Batch]]],
          leaders: LeaderLog) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {a: [] for a in (*ANOMALIES, NO_OFFSET)}
    for iso, rd in reads.items():
        for v, (part, off) in h.acked.items():
            where = rd.get(v, [])
            if not where:
                found["lost"].append(f"{iso}: {v} acked at p{part}@{off}, never read; "
                                     + describe_offset(logs[part], off, leaders, part))
            elif len(where) > 1:
                found["duplicate"].append(
                    f"{iso}: {v} acked at p{part}@{off}, read at {where}; " + "; ".join(
                        describe_offset(logs[q], o, leaders, q) for q, o in where))
            elif off is None or off < 0:  # an ack must name its offset
                found[NO_OFFSET].append(f"{iso}: {v} acked at p{part} without an offset, "
                                          f"read at {where[0]}; " + describe_offset(
                                              logs[where[0][0]], where[0][1], leaders, part))
            elif where[0] != (part, off):
                found["moved"].append(f"{iso}: {v} acked at p{part}@{off}, read at {where[0]}; "
                                      + describe_offset(logs[part], off, leaders, part))
        for v, where in rd.items():
            if v not in h.sent:
                found["phantom"].append(f"{iso}: {v} read at {where}, never sent")
            elif v not in h.acked and len(where) > 1:
                found["duplicate"].append(f"{iso}: unacknowledged {v} read at {where}; " +
                                          "; ".join(describe_offset(logs[q], o, leaders, q)
                                                    for q, o in where))
    rc = reads.get("read_committed", {})
    for v in sorted(h.aborted & set(rc)):
        found["aborted_read"].append(f"{v} of an aborted transaction read at {rc[v]}")
    for values in h.info_txns:
        seen = [v for v in values if v in rc]
        if seen and len(seen) != len(values):
            found["partial_txn"].append(f"read {seen} of {values}")
    for part, by_broker in sorted(logs.items()):
        found["replica_divergence"] += compare_replicas(by_broker, part, leaders)
    return found


# --------------------------------------------------------------------------- the run
def _producer(name: str, cluster: Cluster, topic: str, p: CutoffParams, out_dir: Path,
              stop_file: Path, *extra: str) -> Supervised:
    cmd = [sys.executable, "-m", "tests.chaos.eos_producer", "--bootstrap", all_bootstrap(cluster),
           "--topic", topic, "--partitions", str(p.partitions), "--stop-file", str(stop_file),
           "--rate", str(p.rate), *extra]
    return Supervised(name, cmd, out_dir, stall_s=p.stall_s).start()


def _replicas_agree_on_ends(cluster: Cluster, topic: str, partitions: int) -> bool:
    for part in range(partitions):
        ends = {bid: (bs[-1].header.next_offset if bs else 0)
                for bid, bs in replica_logs(cluster, topic, part).items()}
        if len(set(ends.values())) != 1:
            return False
    return True


def run_cutoff(cluster: Cluster, lab: NetLab, p: CutoffParams, out_dir: Path) -> CutoffResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    topic, txn_id = f"cut-{uuid.uuid4().hex[:6]}", f"cut-txn-{uuid.uuid4().hex[:6]}"
    create_topics(cluster, {topic: p.partitions})
    wait_until(lambda: cluster.has_leaders(topic, p.partitions), 30, "leaders everywhere")
    t0 = time.monotonic()
    leaders = LeaderLog(cluster, topic, t0)
    leaders.start()
    stop_file = out_dir / "stop"
    idem = _producer("idem", cluster, topic, p, out_dir, stop_file, "--mode", "idempotent")
    txn = _producer("txn", cluster, topic, p, out_dir, stop_file, "--mode", "transactional",
                    "--txn-id", txn_id)
    log: list[str] = []
    notes: list[str] = []
    rounds: list[Round] = []
    try:
        wait_until(lambda: idem.progress > 100 and txn.progress > 2, 60, "producers started")
        coordinator_of(cluster, "txn", txn_id)  # the producer found one: it is there
        rounds = run_rounds(cluster, lab, p, topic, txn_id, t0, log)
        time.sleep(2)  # some writes after the last round
    finally:
        lab.heal()
        stop_file.touch()
        for w in (idem, txn):
            if not w.done.wait(120):
                notes.append(f"{w.worker} did not finish within 120 s after the stop")
            w.stop()
        leaders.halt.set()
    try:
        wait_until(lambda: _everyone_says(cluster, topic, False)
                   and _replicas_agree_on_ends(cluster, topic, p.partitions), 90,
                   "full ISRs and equal log ends")
    except AssertionError as exc:  # the replica comparison below says how they differ
        notes.append(str(exc))
    h = read_history(out_dir)
    h.counts["restarts"] = idem.restarts + txn.restarts
    notes += [f"{w.worker}: {s}" for w in (idem, txn) for s in w.crashes + w.stalls]
    try:
        wait_until(lambda: no_open_transactions(cluster.bootstrap, topic, p.partitions), 60,
                   "no open transaction")
    except AssertionError as exc:
        notes.append(str(exc))
    reads = {iso: read_topic(cluster.bootstrap, topic, p.partitions, iso)
             for iso in ("read_uncommitted", "read_committed")}
    logs = {part: replica_logs(cluster, topic, part) for part in range(p.partitions)}
    anomalies = check(h, reads, logs, leaders)
    notes += implicit_acks(anomalies)
    anomalies["unrecovered"] = [f"round {k + 1} ({r.target}, broker {r.broker}): {r.note}"
                                for k, r in enumerate(rounds) if r.note]
    res = CutoffResult(p, rounds, anomalies, dict(h.counts), notes)
    res.text = _report(res, log, leaders, topic, txn_id)
    (out_dir / "report.txt").write_text(res.text + "\n")
    (out_dir / "leaders.txt").write_text("\n".join(leaders.changes) + "\n")
    return res


def _code_version() -> str:
    """The commit the brokers ran (and whether the tree differed from it): the tree may
    change while a long run goes on."""
    import subprocess

    from tests.support.broker import REPO_ROOT

    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO_ROOT, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc!r})"
    return head + (" with uncommitted changes" if dirty else "")


def _report(res: CutoffResult, log: list[str], leaders: LeaderLog, topic: str,
            txn_id: str) -> str:
    lines = [res.summary(), f"topic {topic}, transactional id {txn_id}, code {_code_version()} "
             f"at the end", "rounds:", *log]
    for kind, items in res.anomalies.items():
        if items:
            lines.append(f"{kind} ({len(items)}):")
            lines += [f"  {x}" for x in items[:20]]
    if res.notes:
        lines += ["notes:", *(f"  {n}" for n in res.notes)]
    if not res.ok:
        lines += ["leadership as each broker's Metadata said:", *leaders.changes]
    return "\n".join(lines)
