"""Exactly-once copy (consume-transform-produce with send_offsets_to_transaction) on a
3-broker cluster while a broker is killed with SIGKILL: the leader of an output partition,
the transaction coordinator, or the controller. The copy must finish and the read_committed
output must hold every input record exactly once. The killed broker comes back, catches up
and rejoins the ISR.

The copier is a process (tests/cluster/eos_copier.py) supervised as deployments do: restarted
when it exits, killed and restarted when it commits nothing for STALL_S seconds; it resumes
from the committed offsets, so exactly-once must hold across restarts. How often that
happened is reported (a client that stalls is not the broker's fault); the verdict is about
the output.
"""

from __future__ import annotations

import logging
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from samsa.coordinator.internal_log import partition_for
from tests.cluster.cluster import Cluster, wait_until
from tests.support.supervised import Supervised

pytestmark = pytest.mark.timeout(300)
log = logging.getLogger(__name__)

RECORDS = 1500
STALL_S = 30.0
PARTITIONS = 3


def _copier(bootstrap: str, src: str, dst: str, group: str, txn_id: str,
            out_dir: Path) -> Supervised:
    """The copier as a supervised process: restarted after it exits, killed and restarted
    after STALL_S seconds without a committed transaction (librdkafka can hang inside
    send_offsets_to_transaction after a broker dies: confluentinc/librdkafka#5456, #5511)."""
    cmd = [sys.executable, "-m", "tests.cluster.eos_copier", "--bootstrap", bootstrap,
           "--src", src, "--dst", dst, "--group", group, "--txn-id", txn_id,
           "--partitions", str(PARTITIONS), "--records-per-partition",
           str(RECORDS // PARTITIONS)]
    return Supervised("copier", cmd, out_dir, stall_s=STALL_S)


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
def test_exactly_once_copy_survives_kill9(cluster, role, tmp_path, record_property):
    suffix = uuid.uuid4().hex[:6]
    src, dst, group, txn_id = f"in-{suffix}", f"out-{suffix}", f"g-{suffix}", f"copy-{suffix}"
    _create(cluster, src, dst)
    values = _fill(cluster.bootstrap, src)
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers)
    copier = _copier(bootstrap, src, dst, group, txn_id, tmp_path).start()
    try:
        # The coordinator exists once the copier initialized its producer.
        wait_until(lambda: copier.progress >= RECORDS // 5, 60, "a fifth of the copy")
        victim = _victim(cluster, role, dst, txn_id)
        cluster.broker(victim).kill9()
        try:
            wait_until(lambda: copier.progress >= RECORDS // 2, 90, "the copy going on")
            cluster.broker(victim).start()
            assert copier.done.wait(120), "copy unfinished"
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}: broker {victim} killed, {copier.progress} copied, restarts after "
                f"exiting {copier.crashes[-3:]}, after stalling {copier.stalls[-3:]}\n"
                f"copier's stderr:\n{copier.stderr_tail()}\n{cluster.logs_tail()}"
            ) from None
    finally:
        copier.stop()
    # Reported, not judged: a stalled client is restarted as a supervisor would.
    record_property("copier_restarts", f"{len(copier.crashes)} exited, "
                                       f"{len(copier.stalls)} stalled")
    log.info("%s: killed broker %d; copier restarted %d times after exiting, %d after "
             "stalling: %s", role, victim, len(copier.crashes), len(copier.stalls),
             (copier.crashes + copier.stalls)[:3])
    print(f"{role}: copier restarts: {len(copier.crashes)} after exiting, "
          f"{len(copier.stalls)} after stalling for {STALL_S:.0f} s")
    out = _read_committed(bootstrap, dst, RECORDS)
    dupes = [v for v, n in Counter(out).items() if n > 1]
    assert not dupes, f"{len(dupes)} duplicated, e.g. {dupes[:5]}"
    missing = set(values) - set(out)
    assert not missing, f"{len(missing)} lost, e.g. {sorted(missing)[:5]}"
    assert len(out) == RECORDS
    # The killed broker caught up and is back in every ISR of the output topic.
    wait_until(lambda: all(victim in isr for isr in cluster.isr(dst).values()), 60,
               "the restarted broker back in the ISR")
