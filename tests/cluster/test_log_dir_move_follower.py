"""A follower's replica moves to another of its broker's log directories while the leader
takes acks=all writes: the follower's fetcher appends to the current log as the move copies
it, the replica stays in the ISR, and once the leader is gone the moved replica leads with
every acknowledged record."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster, wait_until
from tests.protocol.wire import WireClient

pytestmark = pytest.mark.timeout(180)
ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35


def _where(bootstrap: str, topic: str) -> dict[str, set[bool]]:
    """log dir -> {is_future} of the topic's partition 0 replica there."""
    with WireClient(bootstrap) as w:
        res = w.call(DESCRIBE_LOG_DIRS, 4, {"topics": None})
    return {d.log_dir: {p.is_future_key for t in d.topics if t.name == topic
                        for p in t.partitions} for d in res.results}


def test_follower_replica_moves_between_log_dirs_under_acks_all_writes(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    topic = "jbod-" + uuid.uuid4().hex[:6]
    cluster = Cluster(zookeeper, tmp_path, size=2)
    b1 = cluster.broker(1)
    other = tmp_path / "b1-second"
    b1.settings["log.dirs"] = f"{b1.data_dir},{other}"
    b1.settings["replica.alter.log.dirs.io.max.bytes.per.second"] = 400_000
    try:
        cluster.start()
        admin = cluster.admin()
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0, 1]])],
                            operation_timeout=10)[topic].result(timeout=20)
        wait_until(lambda: cluster.isr(topic).get(0) == [0, 1], 20, "both replicas in sync")
        acked: set[bytes] = set()
        errors: list[Any] = []
        stop = threading.Event()

        def on_delivery(err: Any, msg: Any) -> None:
            (errors.append(err) if err else acked.add(msg.value()))

        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5})
        for i in range(1000):  # 1 MB first: the copy takes a few seconds at this rate
            p.produce(topic, f"pre-{i:06d}".ljust(1024, "x").encode(), on_delivery=on_delivery)
        assert p.flush(30) == 0

        def write() -> None:
            i = 0
            while not stop.is_set():
                p.produce(topic, f"live-{i:06d}".encode(), on_delivery=on_delivery)
                i += 1
                p.poll(0.005)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            source = next(d for d, kinds in _where(b1.bootstrap, topic).items() if kinds)
            target = next(d for d in _where(b1.bootstrap, topic) if d != source)
            with WireClient(b1.bootstrap) as w:
                res = w.call(ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
                    {"path": target, "topics": [{"name": topic, "partitions": [0]}]}]})
            assert res.results[0].partitions[0].error_code == 0
            assert _where(b1.bootstrap, topic)[target] == {True}  # the future replica
            wait_until(lambda: _where(b1.bootstrap, topic) == {source: set(), target: {False}},
                       60, "the follower's replica moved")
            time.sleep(0.5)
        finally:
            stop.set()
            writer.join(30)
        assert p.flush(30) == 0 and not errors, errors[:3]
        wait_until(lambda: cluster.isr(topic).get(0) == [0, 1], 20, "the moved replica in sync")
        cluster.broker(0).stop()
        wait_until(lambda: cluster.leaders(topic).get(0) == 1, 30, "broker 1 leads")
        c = Consumer({"bootstrap.servers": b1.bootstrap, "group.id": "unused",
                      "enable.auto.commit": False})
        got: list[bytes] = []
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            deadline = time.monotonic() + 30
            while len(got) < len(acked) and time.monotonic() < deadline:
                got += [m.value() for m in c.consume(1000, 0.5) if m.error() is None]
        finally:
            c.close()
        assert len(got) == len(set(got)) and set(got) == acked
    finally:
        cluster.close()
