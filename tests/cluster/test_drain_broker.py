"""Drain a broker, then stop it: kafka-reassign-partitions --generate/--execute/--verify moves
every replica (the internal topics' too) off one of four brokers while an idempotent producer
(acks=all) and a consumer group run; then the broker is stopped (SIGTERM), its controlled
shutdown going through the controller (ControlledShutdown). The clients see only retriable
errors, every acknowledged record is read, and the broker's shutdown was answered by the
controller."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster, create_topic, wait_until
from tests.support.java import run_java_tool

TOPIC = "drained"
PARTITIONS = 4
DRAINED = 1  # not broker 0, the first up and so the controller
TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
# librdkafka's errors that it retries itself or that only say a connection went away
TRANSIENT = {"_TRANSPORT", "_PARTITION_EOF", "_ALL_BROKERS_DOWN", "NOT_LEADER_OR_FOLLOWER",
             "LEADER_NOT_AVAILABLE", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
             "COORDINATOR_LOAD_IN_PROGRESS", "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS"}


def _replicas_on(cluster: Cluster, broker_id: int, topics: list[str]) -> list[str]:
    md = cluster.admin().list_topics(timeout=10)
    return [f"{t}-{p}" for t in topics for p, pm in md.topics[t].partitions.items()
            if broker_id in pm.replicas]


def test_drain_a_broker_then_stop_it(zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    cluster = Cluster(zookeeper, tmp_path, size=4)
    stop = threading.Event()
    produced = threading.Event()
    acked: list[str] = []
    failed: list[str] = []
    seen: set[str] = set()
    errors: list[str] = []
    try:
        cluster.start()
        create_topic(cluster, TOPIC, PARTITIONS, rf=3, **{"min.insync.replicas": "2"})
        bootstrap = ",".join(b.bootstrap for b in cluster.brokers)

        def produce() -> None:
            p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                          "linger.ms": 5})

            def on_delivery(err: KafkaError | None, msg: Message) -> None:
                if err is None:
                    acked.append(msg.value().decode())
                else:
                    failed.append(f"{msg.value().decode()}: {err.name()}")

            n = 0
            try:
                while not stop.is_set():
                    p.produce(TOPIC, str(n).encode(), partition=n % PARTITIONS,
                              on_delivery=on_delivery)
                    p.poll(0.01)
                    n += 1
                if p.flush(60):
                    failed.append("records still unacknowledged after 60 s")
            finally:
                produced.set()  # `acked` is final: the consumer may compare against it now

        def consume() -> None:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "drain-readers",
                          "auto.offset.reset": "earliest", "enable.auto.commit": True,
                          "auto.commit.interval.ms": 500})
            c.subscribe([TOPIC])
            try:
                # Until the producer has flushed: records in flight at `stop` are acknowledged
                # later, and an `acked` read before then is no proof that nothing is missing.
                while not produced.is_set() or not set(acked) <= seen:
                    for m in c.consume(500, 0.2):
                        if m.error() is not None:
                            if m.error().fatal() or m.error().name() not in TRANSIENT:
                                errors.append(m.error().name())
                        else:
                            seen.add(m.value().decode())
                    if produced.is_set() and time.monotonic() > deadline[0]:
                        break
            finally:
                c.close()

        deadline = [float("inf")]
        threads = [threading.Thread(target=produce, daemon=True),
                   threading.Thread(target=consume, daemon=True)]
        for t in threads:
            t.start()
        wait_until(lambda: len(seen) > 200, 30, "records read by the group")

        topics = [TOPIC, "__consumer_offsets"]
        assert _replicas_on(cluster, DRAINED, topics)
        (tmp_path / "topics.json").write_text(json.dumps(
            {"version": 1, "topics": [{"topic": t} for t in topics]}))
        bootstrap_arg = ["--bootstrap-server", cluster.bootstrap]
        out = run_java_tool(TOOL, [*bootstrap_arg, "--generate", "--topics-to-move-json-file",
                                   str(tmp_path / "topics.json"), "--broker-list",
                                   ",".join(str(b) for b in range(4) if b != DRAINED)]
                            ).check().stdout
        proposed = [line for line in out.splitlines() if line.startswith("{")][-1]
        plan = tmp_path / "plan.json"
        plan.write_text(proposed)
        args = [*bootstrap_arg, "--reassignment-json-file", str(plan)]
        run_java_tool(TOOL, [*args, "--execute"]).check()
        wait_until(lambda: "is still in progress" not in
                   run_java_tool(TOOL, [*args, "--verify"]).check().stdout, 60,
                   "--verify reporting every reassignment complete")
        assert _replicas_on(cluster, DRAINED, topics) == []

        at = len(acked)
        started = time.monotonic()
        assert cluster.broker(DRAINED).stop() == 0
        took = time.monotonic() - started
        log_text = cluster.broker(DRAINED).log_text()
        assert "Controlled shutdown request returned successfully" in log_text, log_text[-3000:]
        assert took < 10, f"the drained broker took {took:.1f} s to stop"
        wait_until(lambda: len(acked) > at + 200, 30, "records acknowledged after the stop")

        stop.set()
        threads[0].join(90)  # its flush may take up to 60 s
        deadline[0] = time.monotonic() + 30
        threads[1].join(60)
        assert not any(t.is_alive() for t in threads), "the clients did not finish"
        assert not failed, failed[:10]
        assert not errors, errors[:10]
        missing = set(acked) - seen
        assert not missing, f"{len(missing)} acknowledged records never read"
    finally:
        stop.set()
        cluster.close()


def test_the_last_broker_retries_its_controlled_shutdown_then_goes(cluster: Cluster) -> None:
    """The last broker leads partitions no one can take over: the controller answers them as
    remaining, the broker asks again `controlled.shutdown.max.retries` times, every
    `controlled.shutdown.retry.backoff.ms` (0.5 s in the test clusters), then shuts down
    anyway, as Kafka's does."""
    create_topic(cluster, "last", 2, rf=3)
    for b in cluster.brokers[:2]:
        assert b.stop() == 0
    last = cluster.brokers[2]
    started = time.monotonic()
    assert last.stop() == 0
    took = time.monotonic() - started
    log_text = last.log_text()
    assert log_text.count("Remaining partitions to move: ") == 3, log_text[-3000:]
    assert "Proceeding to do an unclean shutdown as all the controlled shutdown attempts " \
           "failed" in log_text
    assert 1.0 <= took < 10, took
