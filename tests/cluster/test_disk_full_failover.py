"""A partition leader's log directory fills up (a real 2 MiB tmpfs, the second of its two
log.dirs): the broker takes the directory offline and tells the controller, which moves the
leadership to a follower in the ISR; the idempotent producer carries on there without losing
or duplicating an acknowledged record, and the broker goes on leading its other directory."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster, wait_until
from tests.support.tmpfs import small_tmpfs

pytestmark = pytest.mark.timeout(240)


def _read(bootstrap: str, topic: str, partition: int, expect: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 60
        while len(out) < expect and time.monotonic() < deadline:
            out += [m.value() for m in c.consume(1000, 0.5) if m.error() is None]
        out += [m.value() for m in c.consume(1000, 1.0) if m.error() is None]  # nothing more
    finally:
        c.close()
    return out


def test_full_leader_log_dir_moves_leadership_and_loses_nothing(
    zookeeper: ZooKeeperProcess, tmp_path: Path
) -> None:
    topic = "full-" + uuid.uuid4().hex[:6]
    with small_tmpfs(tmp_path / "small", "2m") as small:
        cluster = Cluster(zookeeper, tmp_path, size=3)
        b0 = cluster.broker(0)
        b0.settings["log.dirs"] = f"{b0.data_dir},{small}"
        try:
            cluster.start()
            admin = cluster.admin()
            both_led_by_0 = NewTopic(topic, 2, replica_assignment=[[0, 1, 2], [0, 1, 2]])
            fs = admin.create_topics([both_led_by_0], operation_timeout=10)
            fs[topic].result(timeout=20)
            wait_until(lambda: cluster.leaders(topic) == {0: 0, 1: 0}, 20, "broker 0 leading")
            # (the leaders are in the metadata before broker 0 has made their logs)
            wait_until(lambda: all((small / f"{topic}-{p}").is_dir()
                                   or (b0.data_dir / f"{topic}-{p}").is_dir() for p in (0, 1)),
                       20, "both logs made on broker 0")
            (on_small,) = [p for p in (0, 1) if (small / f"{topic}-{p}").is_dir()]
            on_data = 1 - on_small

            acked: list[bytes] = []
            errors: list[object] = []

            def on_delivery(err, msg) -> None:  # noqa: ANN001
                (errors.append(err) if err else acked.append(msg.value()))

            p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                          "enable.idempotence": True, "linger.ms": 5,
                          "message.timeout.ms": 60000})
            i, chunks_after_move = 0, 0
            deadline = time.monotonic() + 120
            while chunks_after_move < 5 and time.monotonic() < deadline:
                for _ in range(50):
                    p.produce(topic, (f"{i:08d}" * 128).encode(), partition=on_small,
                              on_delivery=on_delivery)
                    i += 1
                assert p.flush(90) == 0
                if cluster.leaders(topic)[on_small] not in (0, -1):
                    chunks_after_move += 1
            assert not errors, errors[:3]
            assert chunks_after_move == 5, "leadership never left the full directory"
            assert len(acked) == i

            assert b0.is_running()
            assert f"in dir {small}" in b0.log_text()
            assert cluster.leaders(topic)[on_data] == 0  # its other directory is still led
            wait_until(lambda: 0 not in cluster.isr(topic)[on_small], 20, "0 out of the ISR")

            read = _read(cluster.bootstrap, topic, on_small, len(acked))
            assert len(read) == len(acked), "acknowledged records lost or duplicated"
            assert sorted(read) == sorted(acked)
            p.produce(topic, b"still-led-by-0", partition=on_data)
            assert p.flush(30) == 0
            assert _read(cluster.bootstrap, topic, on_data, 1) == [b"still-led-by-0"]
        finally:
            cluster.close()
