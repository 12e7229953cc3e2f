"""Workload 2: a Jepsen-style transactional queue under a nemesis.

Producer threads (confluent-kafka, one transactional.id each) send transactions of 1..N unique
values to random partitions; some are aborted on purpose. Consumer threads read every partition
with read_committed (assign from the beginning, no seeks) and record every poll. The nemesis
kills, pauses and restarts brokers meanwhile (and partitions the network, given a NetLab). At
the end everything is healed, a final consumer reads the topic, and `checker.check` judges the
history.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.chaos.checker import Read, Recorder, Report, Write, check
from tests.chaos.nemesis import (
    Nemesis,
    all_bootstrap,
    create_topics,
    fully_replicated,
    start_cluster,
    throughput_chart,
    timeline_svg,
)
from tests.chaos.netns import NetLab
from tests.cluster.cluster import Cluster, wait_until


@dataclass
class QueueParams:
    duration: float = 20.0  # seconds of load under faults
    producers: int = 3
    consumers: int = 2
    partitions: int = 3
    max_txn_size: int = 4
    abort_rate: float = 0.2  # transactions aborted on purpose
    fault_interval: float = 4.0  # mean seconds between faults
    faults: tuple[str, ...] = ("kill", "pause", "stop")
    seed: int = 0
    consumer_lifetime: tuple[float, float] | None = (5.0, 30.0)  # then reopen from the start
    final_idle: float = 8.0  # the final read stops after this long without a new record
    # read_uncommitted only to show the checker failing on a real history (aborted reads)
    isolation: str = "read_committed"
    client_debug: str = ""  # librdkafka `debug` contexts for the consumers, e.g. "consumer,fetch"


@dataclass
class QueueResult:
    params: QueueParams
    report: Report
    faults: dict[str, int]
    nemesis_errors: list[str]
    client_errors: dict[str, int]
    text: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    def summary(self) -> str:
        c = self.report.counts()
        acked = self.report.writes.get("ok", 0)
        hung = sum("did not exit" in e for e in self.nemesis_errors)
        partitions = (f", {self.extra['partitions']}" if "partition" in self.params.faults
                      else "")
        if "coordinator" in self.params.faults:
            partitions += f", {self.extra['coordinator']}"
        return (f"queue: {self.faults['kill']} kills, {self.faults['pause']} pauses, "
                f"{self.faults['stop']} clean restarts ({hung} hung past 30 s and were "
                f"killed){partitions}; {self.report.sends.get('ok', 0)} "
                f"committed txns ({acked} values), {self.report.sends.get('aborted', 0)} "
                f"aborted, {self.report.sends.get('info', 0)} indeterminate; "
                f"{c['lost']} lost, {c['duplicate']} duplicated, {c['aborted_read']} aborted "
                f"reads, {sum(c.values())} anomalies in all")


class Errors:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, what: str) -> None:
        with self._lock:
            self.counts[what] = self.counts.get(what, 0) + 1


def _error_name(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].name()
    return type(exc).__name__


class ProducerWorker(threading.Thread):
    def __init__(self, idx: int, bootstrap: str, topic: str, p: QueueParams, rec: Recorder,
                 errors: Errors, stop: threading.Event, run_id: str) -> None:
        super().__init__(name=f"producer-{idx}", daemon=True)
        self.idx, self.bootstrap, self.topic, self.p = idx, bootstrap, topic, p
        self.rec, self.errors, self.stop_event = rec, errors, stop
        self.rng = random.Random(p.seed * 1000 + idx)
        self.txn_id = f"jqp-{run_id}-{idx}"  # not jq-...-N: that is how partitions are named
        self.seq = 0
        self.ack_times: list[float] = []

    def run(self) -> None:
        while not self.stop_event.is_set():
            producer = Producer({
                "bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                "transaction.timeout.ms": 20000, "message.timeout.ms": 15000,
                "linger.ms": 2, "socket.timeout.ms": 10000,
            })
            try:
                producer.init_transactions(30)
            except KafkaException as exc:
                self.errors.add(f"init:{_error_name(exc)}")
                time.sleep(1)
                continue
            try:
                while not self.stop_event.is_set():
                    self._transaction(producer)
            except _Recreate:
                continue
            finally:
                try:
                    producer.flush(1)
                except KafkaException as exc:  # a fatal producer raises here too
                    self.errors.add(f"flush:{_error_name(exc)}")

    def _transaction(self, producer: Producer) -> None:
        n = self.rng.randint(1, self.p.max_txn_size)
        values = []
        for _ in range(n):
            values.append((self.rng.randrange(self.p.partitions), f"{self.idx}-{self.seq}"))
            self.seq += 1
        deliberate_abort = self.rng.random() < self.p.abort_rate
        acked: dict[str, int | None] = {v: None for _, v in values}
        failed: list[str] = []

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            value = msg.value().decode()
            if err is None:
                acked[value] = msg.offset()
            else:
                failed.append(f"{value}:{err.name()}")

        def writes() -> list[Write]:
            return [Write(self.topic, part, v, acked[v]) for part, v in values]

        try:
            producer.begin_transaction()
            for part, v in values:
                producer.produce(self.topic, v.encode(), partition=part, on_delivery=on_delivery)
            producer.flush(30)
        except KafkaException as exc:
            self.errors.add(f"produce:{_error_name(exc)}")
            failed.append(_error_name(exc))
        if failed or deliberate_abort:
            # No EndTxn(commit) was ever sent: if the abort returns, the txn is aborted.
            try:
                producer.abort_transaction(30)
            except KafkaException as exc:
                self.errors.add(f"abort:{_error_name(exc)}")
                self.rec.send(self.txn_id, "info", writes(), note=f"abort raised {exc}")
                raise _Recreate() from exc
            self.rec.send(self.txn_id, "aborted", writes(),
                          note="deliberate" if not failed else f"after {failed[:3]}")
            return
        for attempt in range(5):
            try:
                producer.commit_transaction(30)
                self.rec.send(self.txn_id, "ok", writes(),
                              note=f"commit retried {attempt}" if attempt else "")
                now = time.monotonic() - self.rec.t0
                self.ack_times.extend([now] * len(values))
                return
            except KafkaException as exc:
                err = exc.args[0]
                self.errors.add(f"commit:{_error_name(exc)}")
                if err.retriable() and attempt < 4:
                    continue
                # Indeterminate: EndTxn(commit) may have been written.
                self.rec.send(self.txn_id, "info", writes(), note=f"commit raised {err.name()}")
                if err.txn_requires_abort():
                    try:
                        producer.abort_transaction(30)
                        return
                    except KafkaException as exc2:
                        self.errors.add(f"abort:{_error_name(exc2)}")
                raise _Recreate() from exc


class _Recreate(Exception):
    """The producer is in an unknown or fatal state: make a new one (same transactional.id)."""


class ConsumerWorker(threading.Thread):
    """Reads every partition from the beginning with read_committed, never seeking. With a
    `lifetime` range it closes its consumer after that long and starts over from the
    beginning as a new process (`c0/1`, `c0/2`, ...), as Jepsen's clients crash and reopen."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, rec: Recorder,
                 errors: Errors, stop: threading.Event,
                 lifetime: tuple[float, float] | None = None, seed: int = 0,
                 isolation: str = "read_committed", debug: str = "",
                 debug_log: Path | None = None) -> None:
        super().__init__(name=f"consumer-{name}", daemon=True)
        self.name_, self.bootstrap, self.topic = name, bootstrap, topic
        self.partitions, self.lifetime = partitions, lifetime
        self.rec, self.errors, self.stop_event = rec, errors, stop
        self.rng = random.Random(seed)
        self.isolation = isolation
        self.debug, self.debug_log = debug, debug_log
        self.last_record = time.monotonic()
        self.read = 0
        self.incarnations = 0

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.incarnations += 1
            process = (f"{self.name_}/{self.incarnations}" if self.lifetime else self.name_)
            until = (time.monotonic() + self.rng.uniform(*self.lifetime) if self.lifetime
                     else float("inf"))
            self._session(process, until)

    def _session(self, process: str, until: float) -> None:
        conf: dict[str, object] = {
            "bootstrap.servers": self.bootstrap, "group.id": f"jq-{uuid.uuid4().hex[:8]}",
            "isolation.level": self.isolation, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
            "socket.timeout.ms": 10000, "client.id": process,
        }
        if self.debug and self.debug_log is not None:  # librdkafka's own account, to a file
            logger = logging.getLogger(f"rdkafka.{process}")
            if not logger.handlers:
                h = logging.FileHandler(self.debug_log)
                h.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
                logger.addHandler(h)
                logger.propagate = False
                logger.setLevel(logging.DEBUG)
            conf.update(debug=self.debug, logger=logger)
        c = Consumer(conf)
        try:
            c.assign([TopicPartition(self.topic, p, -2) for p in range(self.partitions)])
            while not self.stop_event.is_set() and time.monotonic() < until:
                reads = []
                for m in c.consume(500, 0.5):
                    if m.error() is not None:
                        self.errors.add(f"consume:{m.error().name()}")
                        continue
                    reads.append(Read(self.topic, m.partition(), m.offset(), m.value().decode()))
                if reads:
                    self.rec.poll(process, reads)
                    self.read += len(reads)
                    self.last_record = time.monotonic()
        finally:
            c.close()


def run_queue(cluster: Cluster, p: QueueParams, out_dir: Path,
              net: NetLab | None = None) -> QueueResult:
    """Run the workload on a started cluster; writes history.jsonl and report.txt to out_dir.
    "partition" faults need `net`, the lab the cluster's brokers run in."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:6]
    topic = f"jq-{run_id}"
    create_topics(cluster, {topic: p.partitions})
    bootstrap = all_bootstrap(cluster)
    rec, errors, stop = Recorder(), Errors(), threading.Event()
    producers = [ProducerWorker(i, bootstrap, topic, p, rec, errors, stop, run_id)
                 for i in range(p.producers)]
    consumers = [ConsumerWorker(f"c{i}", bootstrap, topic, p.partitions, rec, errors, stop,
                                lifetime=p.consumer_lifetime, seed=p.seed * 1000 + 100 + i,
                                isolation=p.isolation, debug=p.client_debug,
                                debug_log=out_dir / "rdkafka-consumers.log")
                 for i in range(p.consumers)]
    nemesis = Nemesis(cluster, seed=p.seed, interval=p.fault_interval, faults=p.faults,
                      topics=[topic], t0=rec.t0, net=net,
                      txn_ids=[w.txn_id for w in producers])
    for w in (*consumers, *producers):
        w.start()
    started = time.monotonic()
    try:
        if p.faults:
            nemesis.run(p.duration)  # in this (main) thread; heals at the end
        else:
            time.sleep(p.duration)
    finally:
        stop.set()
        for w in producers:
            w.join(120)
    load_end = time.monotonic() - rec.t0
    # Healed: wait for full replication, then let the consumers catch up and read once more
    # with a fresh consumer from the beginning.
    healthy = True
    try:
        wait_until(lambda: fully_replicated(cluster, [topic]), 120, "full ISR after healing")
    except AssertionError:
        healthy = False
    for w in consumers:
        w.join(30)
    final = ConsumerWorker("final", bootstrap, topic, p.partitions, rec, errors,
                           threading.Event())
    final.start()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and (
            time.monotonic() - final.last_record < p.final_idle):
        time.sleep(0.5)
    final.stop_event.set()
    final.join(30)
    report = check(rec.history())
    rec.dump(str(out_dir / "history.jsonl"))
    result = QueueResult(p, report, dict(nemesis.counts), nemesis.errors, dict(errors.counts),
                         extra={"partitions": nemesis.partition_summary(),
                                "coordinator": nemesis.coordinator_summary()})
    acks = sorted(t for w in producers for t in w.ack_times)
    result.text = "\n".join([
        "Samsa chaos: Jepsen-style transactional queue",
        f"params: {asdict(p)}",
        f"topic {topic}, {len(cluster.brokers)} brokers, RF 3, min.insync.replicas 2",
        f"load {time.monotonic() - started:.1f}s; cluster fully replicated after healing: "
        f"{healthy}",
        result.summary(),
        "",
        "checker:",
        report.text(),
        "",
        "client errors (retried or recorded as indeterminate): "
        f"{dict(sorted(errors.counts.items()))}",
        f"nemesis errors: {nemesis.errors or 'none'}",
        f"consumer processes: {[w.incarnations for w in consumers]} incarnations, "
        f"{[w.read for w in consumers]} records read",
        "",
        "nemesis timeline:",
        nemesis.timeline(),
        "",
        "committed values per time slice (K=kill, P=pause, S=clean stop, N=network "
        "partition, C before one: of a coordinator; then broker id):",
        throughput_chart(acks, load_end, events=nemesis.events),
    ])
    (out_dir / "report.txt").write_text(result.text + "\n")
    (out_dir / "timeline.svg").write_text(timeline_svg(
        acks, load_end, nemesis.events, f"queue: committed values per slice; faults "
        f"(seed {p.seed})"))
    return result


def main_standalone(zk_dir: Path, out_dir: Path, p: QueueParams) -> QueueResult:
    """Own ZooKeeper and cluster (for `make chaos`)."""
    from tests.support.broker import free_port

    zk = ZooKeeperProcess(zk_dir, free_port()).start()
    cluster = start_cluster(zk, out_dir / "cluster")
    try:
        return run_queue(cluster, p, out_dir)
    finally:
        cluster.close()
        zk.stop()
