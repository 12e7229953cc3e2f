"""Transactions v2 and v1 clients on one cluster under a coordinator kill: three exactly-once
copiers (read_committed consume -> produce -> sendOffsetsToTransaction -> commit), one per
input partition, on a 3-broker cluster with transaction.version 2 finalized:

    partition 0  Java KafkaProducer 4.x     (transactions v2: EndTxn v5 bumps the epoch)
    partition 1  Java KafkaProducer 3.9     (transactions v1 on the same cluster)
    partition 2  confluent-kafka

Their transactional ids share one __transaction_state partition, whose leader (the
coordinator of all three) is killed with SIGKILL while they copy, and started again later.
Each copier aborts every fourth transaction on purpose. A read_committed consumer reads the
output while they copy and a fresh one reads it at the end; the copiers' and the consumers'
histories go through tests/chaos/checker.py (no duplicate, nothing of an aborted transaction
read, no committed write lost, no partial transaction, offsets monotonic), and the output of
each partition must be its input, copied once, in order.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.coordinator.internal_log import partition_for
from tests.chaos.checker import Read, Recorder, Write, check
from tests.cluster.cluster import (
    TRANSACTION_KEY,
    Cluster,
    create_topic,
    find_coordinators,
    wait_until,
)
from tests.support.java import JAVA_SRC, JVM_ARGS, classpath_dir, compile_java, java_executable
from tests.support.supervised import Supervised
from tests.transactions.txnwire import TxnWire, marker_batches

pytestmark = pytest.mark.timeout(300)

RECORDS = 300  # per partition
ABORT_EVERY = 4
PACE_MS = 60
TXN_PARTITIONS = 6  # transaction.state.log.num.partitions of the test cluster


def _txn_ids(suffix: str, names: list[str]) -> list[str]:
    """Transactional ids for `names` that all hash to the same __transaction_state partition."""
    first = f"mix-{suffix}-{names[0]}"
    target = partition_for(first, TXN_PARTITIONS)
    out = [first]
    for name in names[1:]:
        out.append(next(t for i in range(1000)
                        if partition_for(t := f"mix-{suffix}-{name}-{i}", TXN_PARTITIONS)
                        == target))
    return out


def _fill(bootstrap: str, topic: str) -> dict[int, list[str]]:
    values = {p: [f"p{p}-{i:04d}" for i in range(RECORDS)] for p in range(3)}
    prod = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for p, vs in values.items():
        for v in vs:
            prod.produce(topic, v.encode(), partition=p)
    assert prod.flush(60) == 0
    return values


class Reader(threading.Thread):
    """A read_committed consumer of every output partition from the start, recording each
    poll in the history; it never seeks."""

    def __init__(self, name: str, bootstrap: str, topic: str, rec: Recorder) -> None:
        super().__init__(daemon=True)
        self.process, self.bootstrap, self.topic, self.rec = name, bootstrap, topic, rec
        self.halt = threading.Event()
        self.count = 0

    def run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"r-{uuid.uuid4().hex}",
                      "isolation.level": "read_committed", "enable.auto.commit": False,
                      "fetch.wait.max.ms": 100})
        try:
            c.assign([TopicPartition(self.topic, p, -2) for p in range(3)])
            while not self.halt.is_set():
                reads = [Read(self.topic, m.partition(), m.offset(), m.value().decode())
                         for m in c.consume(500, 0.3) if m.error() is None]
                self.count += len(reads)
                self.rec.poll(self.process, reads)
        finally:
            c.close()


def _history(copier: Supervised, rec: Recorder, topic: str) -> None:
    """Each run's transactions into the history: committed, aborted on purpose, or (no
    outcome printed: the run failed or was killed) of unknown outcome."""
    for run in range(1, copier.runs + 1):
        txns: dict[int, dict] = {}
        path = copier.out_dir / f"{copier.worker}.run{run}.stdout"
        for line in path.read_text().splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill
            if "txn" in msg:
                txns.setdefault(msg["txn"], {}).update(msg)
        for n, t in sorted(txns.items()):
            writes = [Write(topic, p, v, off) for p, off, v in t.get("writes", [])]
            rec.send(f"{copier.worker}.run{run}", t.get("outcome", "info"), writes, f"txn {n}")


def test_tv2_tv1_and_librdkafka_copiers_survive_coordinator_kill9(cluster: Cluster,
                                                                   tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:6]
    src, dst = f"in-{suffix}", f"out-{suffix}"
    for t in (src, dst):
        create_topic(cluster, t, 3, **{"min.insync.replicas": "2"})
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers)
    values = _fill(bootstrap, src)
    classes = compile_java([JAVA_SRC / "TxnCopier.java"], classpath="clients39")

    names = ["java4", "java39", "librdkafka"]
    txn_ids = _txn_ids(suffix, names)
    copiers = []
    for p, (name, txn_id) in enumerate(zip(names, txn_ids, strict=True)):
        args = [bootstrap, src, dst, str(p), f"g-{suffix}-{p}", txn_id, str(RECORDS),
                str(ABORT_EVERY), str(PACE_MS)]
        if name == "librdkafka":
            cmd = [sys.executable, "-m", "tests.cluster.history_copier", *args]
        else:
            cp = f"{classes}:{classpath_dir('kafka4' if name == 'java4' else 'clients39')}/*"
            cmd = [java_executable(), *JVM_ARGS, "-cp", cp, "TxnCopier", *args]
        copiers.append(Supervised(name, cmd, tmp_path, stall_s=25))
    rec = Recorder()
    reader = Reader("reader", bootstrap, dst, rec)
    reader.start()
    victim = -1
    try:
        # The JVMs first: started together on two loaded cores, the librdkafka copier could
        # finish its copy while they were still starting, before the kill.
        *jvms, python_copier = copiers
        for c in jvms:
            c.start()
        wait_until(lambda: all(c.progress > 0 for c in jvms), 60, "the Java copiers copying")
        python_copier.start()
        wait_until(lambda: all(c.progress >= RECORDS // 6 for c in copiers), 60,
                   "every copier a sixth of the way")
        victim = cluster.leaders("__transaction_state")[partition_for(txn_ids[0],
                                                                      TXN_PARTITIONS)]
        assert not any(c.done.is_set() for c in copiers), "a copy finished before the kill"
        cluster.broker(victim).kill9()
        at_kill = [c.progress for c in copiers]
        wait_until(lambda: victim not in find_coordinators(cluster, TRANSACTION_KEY,
                                                           txn_ids).values(),
                   30, "the coordinator moved")
        wait_until(lambda: all(c.progress >= RECORDS * 2 // 3 or c.done.is_set()
                               for c in copiers), 90, "the copy going on")
        cluster.broker(victim).start()
        wait_until(lambda: all(c.done.is_set() for c in copiers), 90, "every copy finished")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: killed broker {victim}; " + "; ".join(
            f"{c.worker} {c.progress} copied, {c.crashes[-2:]} {c.stalls[-2:]}\n"
            f"{c.stderr_tail(5)}" for c in copiers)) from None
    finally:
        for c in copiers:
            c.stop()
        time.sleep(1)
        reader.halt.set()
        reader.join(30)
    assert all(n < RECORDS for n in at_kill), at_kill  # every copier was mid-copy

    final = Reader("final", bootstrap, dst, rec)
    final.start()
    wait_until(lambda: final.count >= 3 * RECORDS, 60, "the final read")
    time.sleep(2)  # anything beyond (duplicates) arrives meanwhile
    final.halt.set()
    final.join(30)

    for c in copiers:
        _history(c, rec, dst)
    rec.dump(str(tmp_path / "history.jsonl"))
    report = check(rec.history())
    restarts = {c.worker: (len(c.crashes), len(c.stalls)) for c in copiers}
    print(f"killed broker {victim} at {at_kill} of {RECORDS} copied; copier restarts "
          f"(exited, stalled): {restarts}\n" + report.text())
    assert report.ok, report.text()
    assert report.sends.get("aborted", 0) >= 3 * 3, report.text()
    finals = [op for op in rec.history() if op.process == "final"]
    for p in range(3):
        got = [r.value for op in finals for r in op.records if r.partition == p]
        assert got == [f"copy:{v}" for v in values[p]], f"partition {p}: {got[:5]}..."

    # The Java 4.x producer used transactions v2: each of its transactions ended with the
    # epoch bumped (markers with ever new epochs); the 3.9 producer v1: one epoch per run.
    # A marker may be written twice where the kill cut its write's answer or the coordinator's
    # completion record: the next coordinator (or leader) sends it again, and the partition
    # appends it again, as Kafka's does (it refuses a marker only for a lower producer or
    # coordinator epoch). Such a repeat follows its original directly, same epoch and kind.
    def marker_epochs(p: int) -> tuple[list[int], int]:
        with TxnWire(cluster.broker(cluster.leaders(dst)[p]).bootstrap) as w:
            found = marker_batches(w.fetch(dst, p, 0, isolation=0).records)
        epochs, repeats = [], 0
        for prev, m in zip([None, *found], found, strict=False):
            if (prev is not None and m.offset == prev.offset + 1
                    and (m.producer_epoch, m.commit) == (prev.producer_epoch, prev.commit)
                    and m.coordinator_epoch >= prev.coordinator_epoch):
                repeats += 1
            else:
                epochs.append(m.producer_epoch)
        return epochs, repeats

    (tv2, tv2_repeats), (tv1, _) = marker_epochs(0), marker_epochs(1)
    print(f"transactions v2 markers: {len(tv2)} epochs, {tv2_repeats} written again")
    assert len(set(tv2)) == len(tv2) > 20 and tv2_repeats <= 2, (tv2_repeats, tv2)
    assert len(tv1) > 20 and len(set(tv1)) < len(tv1) / 3, tv1
