"""Exactly-once copy (consume-transform-produce with send_offsets_to_transaction) on a
3-broker cluster while a broker is killed with SIGKILL: the leader of an output partition,
the transaction coordinator, or the controller. The copy must finish and the read_committed
output must hold every input record exactly once. The killed broker comes back, catches up
and rejoins the ISR.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
import uuid
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from coordinator.internal_log import partition_for
from tests.cluster.cluster import Cluster, wait_until

pytestmark = pytest.mark.timeout(300)
log = logging.getLogger(__name__)

RECORDS = 1500
STALL_S = 30.0
PARTITIONS = 3


class Copier(threading.Thread):
    """A TransactionalMessageCopier: restarts from the committed offsets after any error."""

    def __init__(self, bootstrap: str, src: str, dst: str, group: str, txn_id: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.src, self.dst, self.group, self.txn_id = (
            bootstrap, src, dst, group, txn_id)
        self.committed = 0
        self.restarts = 0
        self.stalls = 0
        self.errors: list[str] = []
        self.done = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and not self.done.is_set():
            try:
                self._session()
            except Exception as exc:  # any failure: start over from the committed offsets
                self.restarts += 1
                self.errors.append(repr(exc))
                time.sleep(0.5)

    def _session(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
        })
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
            "transaction.timeout.ms": 20000, "linger.ms": 5, "message.timeout.ms": 20000,
        })
        try:
            producer.init_transactions(30)
            tps = [TopicPartition(self.src, p) for p in range(PARTITIONS)]
            committed = consumer.committed(tps, timeout=20)
            consumer.assign([TopicPartition(self.src, tp.partition,
                                            tp.offset if tp.offset >= 0 else -2)
                             for tp in committed])
            idle_since = time.monotonic()
            while not self.stop.is_set():
                msgs = [m for m in consumer.consume(200, 0.5) if m.error() is None]
                if not msgs:
                    positions = consumer.position(consumer.assignment())
                    if all(tp.offset >= RECORDS // PARTITIONS for tp in positions):
                        self.done.set()
                        return
                    if time.monotonic() - idle_since > STALL_S:
                        # What an application's liveness check would do: start over from
                        # the committed offsets (counted, so the test can report it).
                        self.stalls += 1
                        raise RuntimeError(f"no input for {STALL_S} s at {positions}")
                    continue
                idle_since = time.monotonic()
                producer.begin_transaction()
                try:
                    for m in msgs:
                        producer.produce(self.dst, m.value(), key=m.key(),
                                         partition=m.partition())
                    producer.send_offsets_to_transaction(
                        consumer.position(consumer.assignment()),
                        consumer.consumer_group_metadata(), 30)
                    producer.commit_transaction(30)
                except KafkaException:
                    try:
                        producer.abort_transaction(10)
                    except KafkaException:
                        pass
                    raise
                self.committed += len(msgs)
        finally:
            consumer.close()
            producer.flush(5)


def _create(cluster: Cluster, *topics: str) -> None:
    admin = cluster.admin()
    fs = admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in topics], operation_timeout=10)
    for f in fs.values():
        f.result(timeout=20)
    for t in topics:
        wait_until(lambda t=t: cluster.has_leaders(t, PARTITIONS), 20, "leaders")


def _fill(bootstrap: str, topic: str) -> list[bytes]:
    values = [f"rec-{i}".encode() for i in range(RECORDS)]
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % PARTITIONS)
    assert p.flush(60) == 0
    return values


def _read_committed(bootstrap: str, topic: str, expect: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"v-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, p, -2) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(out) < expect:
            out += [m.value() for m in c.consume(1000, 0.5) if m.error() is None]
        out += [m.value() for m in c.consume(1000, 2.0) if m.error() is None]  # no extras
    finally:
        c.close()
    return out


def _victim(cluster: Cluster, role: str, dst: str, txn_id: str) -> int:
    if role == "data-leader":
        return cluster.leaders(dst)[0]
    if role == "txn-coordinator":
        return cluster.leaders("__transaction_state")[partition_for(txn_id, 6)]
    md = cluster.admin().list_topics(timeout=10)
    return md.controller_id


@pytest.mark.parametrize("role", ["data-leader", "txn-coordinator", "controller"])
def test_exactly_once_copy_survives_kill9(cluster, role):
    suffix = uuid.uuid4().hex[:6]
    src, dst, group, txn_id = f"in-{suffix}", f"out-{suffix}", f"g-{suffix}", f"copy-{suffix}"
    _create(cluster, src, dst)
    values = _fill(cluster.bootstrap, src)
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers)
    copier = Copier(bootstrap, src, dst, group, txn_id)
    copier.start()
    try:
        # The coordinator exists once the copier initialized its producer.
        wait_until(lambda: copier.committed >= RECORDS // 5, 60, "a fifth of the copy")
        victim = _victim(cluster, role, dst, txn_id)
        cluster.broker(victim).kill9()
        try:
            wait_until(lambda: copier.committed >= RECORDS // 2, 90, "the copy going on")
            cluster.broker(victim).start()
            assert copier.done.wait(120), "copy unfinished"
        except AssertionError as exc:
            frame = sys._current_frames().get(copier.ident or -1)
            stack = "".join(traceback.format_stack(frame)) if frame else "?"
            raise AssertionError(
                f"{exc}: broker {victim} killed, {copier.committed} copied, "
                f"{copier.restarts} restarts, errors {copier.errors[-5:]}\ncopier at:\n{stack}\n"
                f"{cluster.logs_tail()}"
            ) from None
    finally:
        copier.stop.set()
        copier.join(30)
    log.info("%s: killed broker %d; copier restarted %d times: %s", role, victim,
             copier.restarts, copier.errors[:3])
    assert copier.stalls <= 1, copier.errors
    out = _read_committed(bootstrap, dst, RECORDS)
    dupes = [v for v, n in Counter(out).items() if n > 1]
    assert not dupes, f"{len(dupes)} duplicated, e.g. {dupes[:5]}"
    missing = set(values) - set(out)
    assert not missing, f"{len(missing)} lost, e.g. {sorted(missing)[:5]}"
    assert len(out) == RECORDS
    # The killed broker caught up and is back in every ISR of the output topic.
    wait_until(lambda: all(victim in isr for isr in cluster.isr(dst).values()), 60,
               "the restarted broker back in the ISR")
