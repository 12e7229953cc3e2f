"""Workload 1: Kafka's transactions system test (tests/kafkatest/tests/core/transactions_test.py)
against Samsa, with Kafka's own Java tools from kafka-tools 4.x.

1. seed an input topic with `VerifiableProducer` (idempotent, acks=all);
2. copy it with one `TransactionalMessageCopier` per input partition (transactions of
   `transaction_size` records, random aborts on, offsets committed in the transaction) while a
   read_committed `VerifiableConsumer --verbose` reads the output topic concurrently;
3. bounce the brokers (one at a time: kill -9 or SIGTERM, then start again, waiting for full
   replication in between) and bounce the copiers (kill -9 or SIGTERM once a copier made 20%
   progress, three rounds), as the recipe does; and, beyond the recipe, strike the copiers'
   coordinators: the transaction coordinator of a copier, caught with a transaction in
   PrepareCommit/PrepareAbort where possible, and the group coordinator of their consumer
   group (kill -9 in hard mode, SIGSTOP for a few seconds in clean mode);
4. once every copier reported `ShutdownComplete` with 0 remaining, drain the concurrent
   consumer and read the output once more with a fresh read_committed consumer.

The copiers are supervised as deployments do: one that exits by itself is restarted, and one
that makes no progress for `copier_stall_s` seconds (a client stuck in a call after a broker
died, as the Java client and librdkafka can be) is killed and restarted; it resumes from the
committed offsets. Both are counted in the report; the checks are about the broker.

Checks (the recipe's): no duplicates in the output nor in what the concurrent consumer saw,
input = output = concurrently consumed (as sets), and with single-partition topics the same
order everywhere. One refinement: a record the concurrent consumer received twice *at the same
offset* (redelivered after a group rebalance, its commit having failed) is a re-read, not a
duplicate in the log; those are counted apart. A duplicate is a value at two offsets.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from tests.chaos.coordinators import Target, coordinator_of, hunt_prepared
from tests.chaos.nemesis import (
    Event,
    all_bootstrap,
    create_topics,
    fully_replicated,
    timeline_svg,
)
from tests.cluster.cluster import Cluster
from tests.support.broker import _PRCTL, BrokerProcess, _die_with_parent
from tests.support.java import JVM_ARGS, REPO_ROOT, classpath_dir, java_executable

TOOLS = "org.apache.kafka.tools."


@dataclass
class CopyParams:
    records: int = 3000
    partitions: int = 1  # input partitions = copiers; 1 also checks order
    output_partitions: int | None = None  # default: same as input (the recipe: 1 or 3)
    transaction_size: int = 100
    transaction_timeout_ms: int = 40000
    hard: bool = True  # kill -9 (else SIGTERM) for broker and copier bounces
    bounce_brokers: bool = True
    bounce_copiers: bool = True
    bounce_coordinators: bool = True  # strike the txn and the group coordinator each round
    bounce_rounds: int = 1  # rounds of (every copier, every broker once, the coordinators)
    copier_stall_s: float = 120.0  # no progress for this long: kill and restart the copier
    seed: int = 0
    copy_timeout: float = 600.0
    # The copier's client library: "kafka4" (kafka-clients 4.x: transactions v2 on a TV2
    # cluster) or "clients39" (kafka-tools 4.x's copier on kafka-clients 3.9: transactions v1).
    copier_clients: str = "kafka4"


def tools_classpath(clients: str = "kafka4") -> str:
    """kafka-tools 4.x's class path, its kafka-clients jar swapped for `clients`' (clients39:
    the tools' TransactionalMessageCopier calls only client APIs that 3.9 has, unchanged)."""
    tools = classpath_dir("kafka4")
    if clients == "kafka4":
        return str(tools / "*")
    jars = sorted(classpath_dir(clients).glob("*.jar"))
    jars += sorted(j for j in tools.glob("*.jar") if not j.name.startswith("kafka-clients-"))
    return os.pathsep.join(map(str, jars))


class JavaProcess:
    """A Kafka tool as a background process; each run's stdout/stderr in its own files."""

    def __init__(self, name: str, main_class: str, args: list[str], out_dir: Path,
                 clients: str = "kafka4") -> None:
        self.name, self.main_class, self.args, self.out_dir = name, main_class, args, out_dir
        self.clients = clients
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.exits: list[int] = []
        self._parsed: dict[int, tuple[int, list[dict]]] = {}

    @property
    def stdout(self) -> Path:
        return self.out_dir / f"{self.name}.run{self.runs}.stdout"

    @property
    def stderr(self) -> Path:
        return self.out_dir / f"{self.name}.run{self.runs}.stderr"

    def start(self) -> JavaProcess:
        self.runs += 1
        cmd = [java_executable(), *JVM_ARGS, "-cp", tools_classpath(self.clients),
               TOOLS + self.main_class, *self.args]
        with open(self.stdout, "wb") as out, open(self.stderr, "wb") as err:
            err.write(("$ " + " ".join(cmd[-len(self.args) - 1:]) + "\n").encode())
            err.flush()
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=REPO_ROOT,
                start_new_session=True,
                preexec_fn=_die_with_parent if _PRCTL is not None else None)
        return self

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, hard: bool, timeout: float = 60) -> int | None:
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.exits.append(proc.returncode)
        return proc.returncode

    def reap(self) -> int | None:
        """The exit code if the current run ended by itself (and forget the process)."""
        if self.proc is None or self.proc.poll() is None:
            return None
        rc = self.proc.returncode
        self.exits.append(rc)
        self.proc = None
        return rc

    def events(self, run: int | None = None) -> list[dict]:
        """The JSON lines of a run's stdout so far (read incrementally)."""
        run = run or self.runs
        pos, parsed = self._parsed.get(run, (0, []))
        path = self.out_dir / f"{self.name}.run{run}.stdout"
        try:
            with open(path, "rb") as f:
                f.seek(pos)
                chunk = f.read()
        except FileNotFoundError:
            return parsed
        end = chunk.rfind(b"\n") + 1  # whole lines only; a run killed mid-line keeps its tail
        if self.proc is None or run != self.runs:
            end = len(chunk)
        for line in chunk[:end].decode(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    parsed.append(json.loads(line))
                except ValueError:  # a line cut by kill -9
                    pass
        self._parsed[run] = (pos + end, parsed)
        return parsed

    def all_events(self) -> list[dict]:
        return [e for r in range(1, self.runs + 1) for e in self.events(r)]

    def stderr_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.stderr.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return ""


def _props(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class Copier(JavaProcess):
    def __init__(self, idx: int, bootstrap: str, src: str, dst: str, group: str,
                 p: CopyParams, out_dir: Path) -> None:
        self.transactional_id = f"copier-{group}-{idx}"
        super().__init__(f"copier{idx}", "TransactionalMessageCopier", [
            "--broker-list", bootstrap, "--transactional-id", self.transactional_id,
            "--consumer-group", group, "--input-topic", src, "--output-topic", dst,
            "--input-partition", str(idx), "--transaction-size", str(p.transaction_size),
            "--transaction-timeout", str(p.transaction_timeout_ms), "--enable-random-aborts",
            "--use-group-metadata",
        ], out_dir, clients=p.copier_clients)
        self.done = False
        self.crashes: list[str] = []
        self.stalls: list[str] = []
        self._progress_key: tuple[int, int, int] | None = None
        self._progress_at = time.monotonic()

    def start(self) -> JavaProcess:
        self._progress_at = time.monotonic()  # a new run gets the whole allowance
        return super().start()

    def status(self) -> dict | None:
        evs = [e for e in self.events() if "remaining" in e]
        return evs[-1] if evs else None

    def progress(self) -> float:
        """Percent of this run's work done (the ducktape service's progress_percent)."""
        s = self.status()
        if s is None or s["remaining"] < 0 or s["remaining"] > 1 << 60:
            return 0.0
        total = s["consumed"] + s["remaining"]
        return 100.0 if total == 0 else 100.0 * s["consumed"] / total

    def check(self, stall_s: float = float("inf")) -> None:
        """Notice a finished or crashed run; restart a crashed one (and remember why), and
        kill and restart one that made no progress for `stall_s` seconds."""
        if self.done:
            return
        if self.running():
            s = self.status()
            key = (self.runs, s["consumed"], s["remaining"]) if s else (self.runs, -1, -1)
            if key != self._progress_key:
                self._progress_key, self._progress_at = key, time.monotonic()
            elif time.monotonic() - self._progress_at > stall_s:
                self.stop(hard=True)
                self.stalls.append(f"run {self.runs}: no progress for {stall_s:.0f}s at {s}; "
                                   f"{self.stderr_tail(2)}")
                self.start()
            return
        rc = self.reap()
        if rc is None:
            return
        s = self.status()
        if rc == 0 and s is not None and s["stage"] == "ShutdownComplete" and s["remaining"] == 0:
            self.done = True
            return
        self.crashes.append(f"run {self.runs} exit {rc}: {self.stderr_tail(3)}")
        self.start()

    def bounce(self, hard: bool) -> bool:
        if self.done or not self.running():
            return False
        self.stop(hard)
        s = self.status()
        if s is not None and s["stage"] == "ShutdownComplete" and s["remaining"] == 0:
            self.done = True  # it had finished (SIGTERM: the hook printed remaining 0)
            return False
        self.start()
        return True


@dataclass
class CopyResult:
    params: CopyParams
    input: list[str]
    output: list[tuple[int, int, str]]
    concurrent: list[tuple[int, int, str]]
    faults: dict[str, int]
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    text: str = ""
    supervision: str = "no copier restarts"
    output_topic: str = ""

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        f = self.faults
        return (f"copy: {f['broker_kill']} broker kills, {f['broker_stop']} clean broker "
                f"restarts, {f['copier_kill']} copier kills, {f['copier_stop']} copier clean "
                f"restarts, {f['coordinator_kill']} coordinator kills and "
                f"{f['coordinator_pause']} pauses ({f['txn_coordinator']} of a transaction "
                f"coordinator, {f['prepared']} of them in PrepareCommit/PrepareAbort, "
                f"{f['group_coordinator']} of the group coordinator), {self.supervision}; "
                f"{len(self.input)} records in, {len(self.output)} out, "
                f"{len(self.concurrent)} read concurrently; "
                + ("0 anomalies" if self.ok else f"{len(self.failures)} FAILED checks"))


def _seed(bootstrap: str, topic: str, n: int, out_dir: Path) -> list[dict]:
    props = _props(out_dir / "producer.properties",
                   {"enable.idempotence": "true", "acks": "all", "retries": "2147483647",
                    "max.in.flight.requests.per.connection": "5", "linger.ms": "5"})
    vp = JavaProcess("verifiable-producer", "VerifiableProducer", [
        "--topic", topic, "--max-messages", str(n), "--bootstrap-server", bootstrap,
        "--command-config", str(props)], out_dir).start()
    assert vp.proc is not None
    try:
        vp.proc.wait(600)
    except subprocess.TimeoutExpired:
        vp.stop(hard=True)
        raise AssertionError(f"VerifiableProducer did not finish: {vp.stderr_tail()}") from None
    evs = vp.events()
    errors = [e for e in evs if e.get("name") == "producer_send_error"]
    acked = [e for e in evs if e.get("name") == "producer_send_success"]
    if errors or len(acked) != n:
        raise AssertionError(f"seeding: {len(acked)} acked, {len(errors)} errors "
                             f"(e.g. {errors[:2]}); {vp.stderr_tail()}")
    return acked


def _read_all(bootstrap: str, topic: str, partitions: int, expect: int,
              timeout: float = 180) -> list[tuple[int, int, str]]:
    """A fresh read_committed consumer (confluent-kafka) from the beginning: (p, offset, v)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    out: list[tuple[int, int, str]] = []
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(out) < expect:
            out += [(m.partition(), m.offset(), m.value().decode())
                    for m in c.consume(1000, 0.5) if m.error() is None]
        # Anything past the expected count (duplicates) shows up within a few seconds.
        end = time.monotonic() + 5
        while time.monotonic() < end:
            out += [(m.partition(), m.offset(), m.value().decode())
                    for m in c.consume(1000, 0.5) if m.error() is None]
    finally:
        c.close()
    return out


def _dupes(records: list[tuple[int, int, str]]) -> tuple[list[str], int]:
    """(values found at more than one offset, records re-read at an offset already seen)."""
    positions: dict[str, set[tuple[int, int]]] = {}
    rereads = 0
    for p, o, v in records:
        where = positions.setdefault(v, set())
        if (p, o) in where:
            rereads += 1
        where.add((p, o))
    return sorted(v for v, w in positions.items() if len(w) > 1), rereads


def _unique(records: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """First sighting of each (partition, offset), in consumption order."""
    seen: set[tuple[int, int]] = set()
    out = []
    for r in records:
        if (r[0], r[1]) not in seen:
            seen.add((r[0], r[1]))
            out.append(r)
    return out


def run_copy(cluster: Cluster, p: CopyParams, out_dir: Path) -> CopyResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(p.seed)
    t0, t0_wall = time.monotonic(), time.time()
    events: list[Event] = []
    faults = {"broker_kill": 0, "broker_stop": 0, "copier_kill": 0, "copier_stop": 0,
              "coordinator_kill": 0, "coordinator_pause": 0, "txn_coordinator": 0,
              "prepared": 0, "group_coordinator": 0}
    notes: list[str] = []

    def now() -> float:
        return round(time.monotonic() - t0, 2)

    uid = uuid.uuid4().hex[:6]
    src, dst, group = f"input-{uid}", f"output-{uid}", f"copy-{uid}"
    out_parts = p.output_partitions or p.partitions
    create_topics(cluster, {src: p.partitions, dst: out_parts})
    bootstrap = all_bootstrap(cluster)

    acked = _seed(bootstrap, src, p.records, out_dir)
    acked.sort(key=lambda e: (e["partition"], e["offset"]))
    input_values = [e["value"] for e in acked]
    events.append(Event(now(), "note", -1, f"seeded {len(acked)} records"))

    cc_props = _props(out_dir / "consumer.properties", {"isolation.level": "read_committed"})
    concurrent = JavaProcess("concurrent-consumer", "VerifiableConsumer", [
        "--topic", dst, "--group-id", f"concurrent-{uid}", "--verbose",
        "--reset-policy", "earliest", "--session-timeout", "10000",
        "--command-config", str(cc_props), "--bootstrap-server", bootstrap], out_dir).start()
    copiers = [Copier(i, bootstrap, src, dst, group, p, out_dir).start()
               for i in range(p.partitions)]
    events.append(Event(now(), "note", -1, f"{len(copiers)} copiers started"))

    def tick() -> None:
        """Notice finished copiers; restart crashed ones and a crashed concurrent consumer."""
        for c in copiers:
            c.check(p.copier_stall_s)
        if not concurrent.running():
            rc = concurrent.reap()
            notes.append(f"concurrent consumer exited ({rc}) and was restarted: "
                         f"{concurrent.stderr_tail(3)}")
            concurrent.start()

    def all_done() -> bool:
        return all(c.done for c in copiers)

    # Everything here runs in the main thread: processes are started with PR_SET_PDEATHSIG,
    # which would kill them when a short-lived thread that started them exits.
    def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            tick()
            if cond():
                return True
            time.sleep(0.5)
        notes.append(f"{now()}s: gave up waiting for {what} after {timeout:.0f}s")
        return False

    # The recipe bounces either the brokers or the copiers; here one schedule holds both, each
    # action due when the concurrent consumer has seen a given share of the input (visible,
    # committed progress that copier restarts do not reset), so they land during the copy.
    # Copiers go before brokers in each round: a replaced copier waits out its predecessor's
    # transaction, so the copy is still running when the broker bounces come due, however
    # fast the machine; and every action is due by 60 % of the copy.
    # The coordinator strikes come first: they need a copy in full swing (a transaction to
    # catch in PrepareCommit), which a copier bounce interrupts for a transaction timeout.
    actions: list[tuple[str, int]] = []
    for _ in range(p.bounce_rounds):
        if p.bounce_coordinators:
            actions += [("txn-coordinator", -1), ("group-coordinator", -1)]
        if p.bounce_copiers:
            actions.append(("copiers", -1))
        if p.bounce_brokers:
            actions += [("broker", b.broker_id) for b in cluster.brokers]
    shares = [0.05 + 0.55 * i / max(1, len(actions) - 1) for i in range(len(actions))]

    def progress() -> float:
        return len({(q, o) for q, o, _ in _records(concurrent)}) / max(1, len(input_values))

    def bounce() -> None:
        for (what, bid), share in zip(actions, shares, strict=True):
            wait_for(lambda share=share: all_done() or progress() >= share, 300,
                     f"{share:.0%} of the copy")
            if all_done():
                notes.append(f"the copy finished before a bounce of {what} {bid}: skipped")
                continue
            events.append(Event(now(), "note", -1, f"{progress():.0%} copied"))
            if what == "copiers":
                for c in copiers:
                    if c.bounce(p.hard):
                        faults["copier_kill" if p.hard else "copier_stop"] += 1
                        events.append(Event(now(), "kill" if p.hard else "stop", -1,
                                            f"copier {c.name}"))
                continue
            if what.endswith("coordinator"):
                strike_coordinator(what)
                continue
            bounce_broker(cluster.broker(bid))

    def strike_coordinator(what: str) -> None:
        target: Target | None = None
        if what == "txn-coordinator":
            live = [c.transactional_id for c in copiers if not c.done]
            target = hunt_prepared(cluster, live, 10.0)
            if target is None:
                key = rng.choice(live)
                target = Target(coordinator_of(cluster, "txn", key), "txn", key)
        else:
            target = Target(coordinator_of(cluster, "group", group), "group", group)
        faults["txn_coordinator" if target.role == "txn" else "group_coordinator"] += 1
        faults["prepared"] += bool(target.state)
        b = cluster.broker(target.broker_id)
        if p.hard:
            bounce_broker(b, target.describe())
            return
        # Clean mode: no crash, a stall long enough to lose the ZooKeeper session (3 s).
        faults["coordinator_pause"] += 1
        hold = rng.uniform(1.0, 6.0)
        events.append(Event(now(), "pause", b.broker_id, f"{target.describe()} {hold:.1f}s"))
        assert b.pid is not None
        os.kill(b.pid, signal.SIGSTOP)
        try:
            time.sleep(hold)
        finally:
            os.kill(b.pid, signal.SIGCONT)
        events.append(Event(now(), "resume", b.broker_id))
        wait_for(lambda: fully_replicated(cluster, [src, dst]), 120,
                 "no under-replicated partitions")

    def bounce_broker(b: BrokerProcess, detail: str = "") -> None:
        bid = b.broker_id
        if detail:
            faults["coordinator_kill"] += 1
        events.append(Event(now(), "kill" if p.hard else "stop", bid, detail))
        if p.hard:
            b.kill9()
            faults["broker_kill"] += not detail
            # The recipe waits for the dead broker to be deregistered from ZooKeeper.
            wait_for(lambda b=b: b.broker_id not in cluster.live_broker_ids(), 60,
                     f"broker {b.broker_id} deregistered")
        else:
            try:
                b.stop()
            except AssertionError as exc:
                notes.append(f"{now()}s: clean stop of broker {b.broker_id} timed out and "
                             f"it was killed: {str(exc).splitlines()[0]}")
            faults["broker_stop"] += not detail
        time.sleep(rng.uniform(0.5, 2.0))
        b.start(timeout=60)
        events.append(Event(now(), "start", bid))
        wait_for(lambda: fully_replicated(cluster, [src, dst]), 120,
                 "no under-replicated partitions")

    try:
        bounce()
        finished = wait_for(all_done, p.copy_timeout, "every copier to finish")
        events.append(Event(now(), "note", -1, f"copy finished: {finished}"))
        # Drain the concurrent consumer: at least as many distinct records as the input.
        wait_for(lambda: len(_unique(_records(concurrent))) >= len(input_values), 180,
                 "the concurrent consumer to read everything")
        time.sleep(3)
    finally:
        concurrent.stop(hard=False)
        for c in copiers:
            if c.running():
                c.stop(hard=True)
    concurrent_records = _records(concurrent)
    output = _read_all(bootstrap, dst, out_parts, len(input_values))
    res = CopyResult(p, input_values, output, concurrent_records, faults, notes=notes,
                     output_topic=dst)

    # ------------------------------------------------------------------ the recipe's checks
    fail = res.failures
    if not finished:
        fail.append("copiers did not finish: " + "; ".join(
            f"{c.name} {c.status()} crashes {c.crashes[-2:]}" for c in copiers))
    out_dupes, _ = _dupes(output)
    cc_dupes, rereads = _dupes(concurrent_records)
    in_set, out_set = set(input_values), {v for _, _, v in output}
    cc_set = {v for _, _, v in concurrent_records}
    if len(in_set) != len(input_values):
        fail.append("the seed itself has duplicates")
    if out_dupes:
        fail.append(f"{len(out_dupes)} duplicated in the output, e.g. {out_dupes[:5]}")
    if cc_dupes:
        fail.append(f"{len(cc_dupes)} duplicated in the concurrently consumed output, "
                    f"e.g. {cc_dupes[:5]}")
    for name, got in (("output", out_set), ("concurrently consumed", cc_set)):
        if got != in_set:
            fail.append(f"input != {name}: {len(in_set - got)} missing (e.g. "
                        f"{sorted(in_set - got)[:5]}), {len(got - in_set)} unexpected "
                        f"(e.g. {sorted(got - in_set)[:5]})")
    if p.partitions == 1 and out_parts == 1:
        out_order = [v for _, _, v in sorted(output, key=lambda r: r[1])]
        cc_order = [v for _, _, v in _unique(concurrent_records)]
        if input_values != sorted(input_values, key=int):
            fail.append("the seed itself is out of order")
        if out_order != input_values:
            fail.append(f"output out of order: first difference at index "
                        f"{_first_diff(out_order, input_values)}")
        if cc_order != out_order:
            fail.append(f"concurrently consumed out of order: first difference at index "
                        f"{_first_diff(cc_order, out_order)}")
    for c in copiers:
        if c.crashes:
            notes.append(f"{c.name} ({c.transactional_id}) exited by itself and was restarted "
                         f"{len(c.crashes)} times: {c.crashes[:3]}")
        if c.stalls:
            notes.append(f"{c.name} ({c.transactional_id}) made no progress for "
                         f"{p.copier_stall_s:.0f}s and was killed and restarted "
                         f"{len(c.stalls)} times: {c.stalls[:3]}")
    res.supervision = (f"copiers restarted by the supervisor: "
                       f"{sum(len(c.crashes) for c in copiers)} after exiting, "
                       f"{sum(len(c.stalls) for c in copiers)} after stalling")
    if rereads:
        notes.append(f"the concurrent consumer re-read {rereads} records at offsets it had "
                     f"already read (group rebalances after failed commits; not duplicates)")
    res.text = "\n".join([
        "Samsa chaos: Kafka's transactions system test (VerifiableProducer -> "
        "TransactionalMessageCopier -> read_committed VerifiableConsumer)",
        f"params: {asdict(p)}",
        f"topics {src} ({p.partitions} partitions) -> {dst} ({out_parts}), RF 3, "
        f"min.insync.replicas 2; {time.monotonic() - t0:.1f}s",
        res.summary(),
        f"copier runs (1 + bounces + restarts after crashes): {[c.runs for c in copiers]}",
        f"concurrent consumer: {len(concurrent_records)} records, {rereads} re-reads, "
        f"{len(cc_dupes)} duplicated values; runs {concurrent.runs}",
        f"output: {len(output)} records, {len(out_dupes)} duplicated values",
        "",
        "checks: " + ("all passed" if res.ok else "FAILED"),
        *[f"  FAIL {f}" for f in fail],
        *[f"  note {n}" for n in notes],
        "",
        "timeline:",
        *[f"  {e.t:8.2f}s  {e.kind:<6} {'broker ' + str(e.broker) if e.broker >= 0 else ''} "
          f"{e.detail}" for e in events],
    ])
    (out_dir / "report.txt").write_text(res.text + "\n")
    seen = [e["timestamp"] / 1000 - t0_wall for e in concurrent.all_events()
            if e.get("name") == "record_data"]
    (out_dir / "timeline.svg").write_text(timeline_svg(
        seen, now(), events, f"copy: records read by the concurrent consumer; broker faults "
        f"(seed {p.seed})"))
    return res


def _records(consumer: JavaProcess) -> list[tuple[int, int, str]]:
    return [(e["partition"], e["offset"], e["value"]) for e in consumer.all_events()
            if e.get("name") == "record_data"]


def _first_diff(a: list[str], b: list[str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))
