"""kafka-reassign-partitions --throttle end to end: a fourth broker joins a loaded three-broker
cluster and a topic's replicas move onto it while transactional producers commit and abort and a
read_committed consumer reads. The tool sets the throttle rates as dynamic broker configs, the
new broker fills at no more than that rate, --verify removes them, and the consumer sees every
committed record once and no aborted one."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, ConfigSource, NewTopic

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster, wait_until
from tests.support.java import run_java_tool

TOPIC = "orders"
THROTTLE = 400_000  # bytes per second
PRELOAD = 200  # records of 4000 bytes per partition: 1.6 MB to move
TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def _txn_producer(bootstrap: str, tid: str, stop: threading.Event, committed: list[str],
                  aborted: list[str], failures: list[BaseException]) -> None:
    """Transactions of 5 records over both partitions; every 4th one aborted."""
    try:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                      "transaction.timeout.ms": 30000})
        p.init_transactions(30)
        n = 0
        while not stop.is_set():
            values = [f"{tid}-{n}-{j}" for j in range(5)]
            p.begin_transaction()
            for j, v in enumerate(values):
                p.produce(TOPIC, v.encode(), partition=j % 2)
            if n % 4 == 3:
                p.abort_transaction(30)
                aborted.extend(values)
            else:
                for attempt in range(5):
                    try:
                        p.commit_transaction(30)
                        committed.extend(values)
                        break
                    except KafkaException as exc:
                        if exc.args[0].txn_requires_abort():
                            p.abort_transaction(30)
                            aborted.extend(values)
                            break
                        if not exc.args[0].retriable() or attempt == 4:
                            raise
            n += 1
            time.sleep(0.02)
    except BaseException as exc:
        failures.append(exc)


def _broker_rates(cluster: Cluster, broker_id: int) -> dict[str, tuple[str | None, int]]:
    admin = cluster.admin()  # must outlive its futures
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    entries = admin.describe_configs([resource])[resource].result(30)
    return {n: (entries[n].value, entries[n].source) for n in (
        "leader.replication.throttled.rate", "follower.replication.throttled.rate")}


def test_throttled_move_onto_a_new_broker_under_transactions(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    cluster = Cluster(zookeeper, tmp_path, size=4, **{
        "replica.fetch.max.bytes": 50_000,  # a follower fetch brings ~50 kB
        "replication.quota.window.num": 2,
        "replication.quota.window.size.seconds": 1,
    })
    stop = threading.Event()
    # Set once the producers have returned (infinite until then): only then is `committed`
    # final, as a commit in flight at `stop` is added to it only when it returns. The consumer
    # reads on until then, and after until it has every commit or this deadline passes.
    stop_deadline = [float("inf")]
    threads: list[threading.Thread] = []
    committed: list[str] = []
    aborted: list[str] = []
    failures: list[BaseException] = []
    seen: list[str] = []
    try:
        for b in cluster.brokers[:3]:
            b.start()
        wait_until(lambda: cluster.every_broker_sees({0, 1, 2}), 20, "three brokers")
        admin = cluster.admin()  # must outlive its futures
        admin.create_topics([NewTopic(TOPIC, 2, replica_assignment=[[0, 1, 2], [1, 2, 0]])])[
            TOPIC].result(30)
        wait_until(lambda: cluster.has_leaders(TOPIC, 2), 20, "leaders")
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "batch.size": 5000, "linger.ms": 5})
        blob = os.urandom(4000)
        for i in range(PRELOAD * 2):
            p.produce(TOPIC, blob, partition=i % 2)
        assert p.flush(60) == 0

        for tid in ("tx-a", "tx-b"):
            threads.append(threading.Thread(target=_txn_producer, args=(
                cluster.bootstrap, tid, stop, committed, aborted, failures), daemon=True))

        def consume() -> None:
            c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader",
                          "isolation.level": "read_committed", "enable.auto.commit": False})
            try:
                c.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
                while stop_deadline[0] == float("inf") or len(seen) < len(committed):
                    for m in c.consume(500, timeout=0.2):
                        if m.error() is None and m.value() != blob:
                            seen.append(m.value().decode())
                    if time.monotonic() > stop_deadline[0]:
                        break
            except BaseException as exc:
                failures.append(exc)
            finally:
                c.close()

        threads.append(threading.Thread(target=consume, daemon=True))
        for t in threads:
            t.start()
        wait_until(lambda: len(committed) >= 20 or bool(failures), 30, "transactions")

        cluster.broker(3).start()
        wait_until(lambda: cluster.every_broker_sees({0, 1, 2, 3}), 20, "the fourth broker")
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [3, 1, 2]},
            {"topic": TOPIC, "partition": 1, "replicas": [1, 2, 3]}]}))
        args = ["--bootstrap-server", cluster.bootstrap, "--reassignment-json-file", str(plan)]
        res = run_java_tool(TOOL, [*args, "--execute", "--throttle", str(THROTTLE)]).check()
        assert f"The inter-broker throttle limit was set to {THROTTLE} B/s" in res.stdout
        assert _broker_rates(cluster, 3)["follower.replication.throttled.rate"] == (
            str(THROTTLE), ConfigSource.DYNAMIC_BROKER_CONFIG.value)

        # broker 3's copies grow at the throttled rate
        samples: list[tuple[float, int]] = []

        def caught_up() -> bool:
            size = sum(cluster.log_sizes(TOPIC, p).get(3, 0) for p in (0, 1))
            samples.append((time.monotonic(), size))
            isr = cluster.isr(TOPIC)
            return all(3 in isr[p] for p in (0, 1))

        wait_until(caught_up, 60, "broker 3 in both ISRs")
        growing = [(t, s) for t, s in samples if s > 0]
        assert len(growing) >= 2, samples
        (t0, s0), (t1, s1) = growing[0], growing[-1]
        moved = s1 - s0
        assert moved > PRELOAD * 4000, samples
        rate = moved / (t1 - t0)
        assert rate < THROTTLE * 1.5, f"{moved} bytes in {t1 - t0:.1f} s: {rate:.0f} B/s"

        outputs: list[str] = []

        def verified() -> bool:
            out = run_java_tool(TOOL, [*args, "--verify"]).check().stdout
            outputs.append(out)
            return "Clearing broker-level throttles" in out

        wait_until(verified, 60, "--verify reporting the reassignment complete")
        for b in range(4):
            assert _broker_rates(cluster, b) == {
                n: (str(2**63 - 1), ConfigSource.DEFAULT_CONFIG.value) for n in (
                    "leader.replication.throttled.rate", "follower.replication.throttled.rate")}
        resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
        topic_configs = admin.describe_configs([resource])[resource].result(30)
        assert topic_configs["leader.replication.throttled.replicas"].value == ""
        assert topic_configs["follower.replication.throttled.replicas"].value == ""

        at = len(committed)
        wait_until(lambda: len(committed) >= at + 10 or bool(failures), 30,
                   "transactions after the move")
        stop.set()
        # The producers first: a commit in flight at `stop` may end well after it, and the
        # consumer compares against `committed` only once that list is final.
        *producers, consumer = threads
        for t in producers:
            t.join(160)  # a commit retried 5 times with a 30 s timeout each
        stop_deadline[0] = time.monotonic() + 30
        consumer.join(60)
        assert not any(t.is_alive() for t in threads), "a client thread did not finish"
        assert not failures, failures
        assert sorted(seen) == sorted(committed), (len(seen), len(committed))
        assert not set(seen) & set(aborted)
        assert aborted
    finally:
        stop.set()
        stop_deadline[0] = 0.0  # a test that failed early lets its consumer go at once
        cluster.close()
