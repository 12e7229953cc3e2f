"""A log directory that runs out of space (a real 2 MiB tmpfs as the second of two log.dirs):
the producer gets KAFKA_STORAGE_ERROR, the broker takes that directory offline and goes on
serving the other one, and every acknowledged record is there after a restart with room.
A broker whose only log directory fails halts, as Kafka's does, and loses nothing either."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster import wait_until
from tests.protocol.wire import WireClient
from tests.support.broker import BrokerProcess, free_port
from tests.support.tmpfs import grow, small_tmpfs

TOPIC = "disk-full"
KAFKA_STORAGE_ERROR = 56


def _produce_until_error(bootstrap: str, partition: int) -> tuple[dict[int, bytes], set[int]]:
    """Produce 1 KiB records (no retries) until one fails: ({offset: value} acked, error codes)."""
    acked: dict[int, bytes] = {}
    errors: set[int] = set()

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            errors.add(err.code())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": False, "retries": 0, "message.timeout.ms": 20000})
    i = 0
    deadline = time.monotonic() + 90
    while not errors and time.monotonic() < deadline:
        for _ in range(50):
            p.produce(TOPIC, partition=partition, value=(f"{i:08d}" * 128).encode(),
                      on_delivery=on_delivery)
            i += 1
        assert p.flush(30) == 0
    return acked, errors


def _consume(bootstrap: str, partition: int, until_offset: int) -> dict[int, bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, partition, 0)])
    out: dict[int, bytes] = {}
    deadline = time.monotonic() + 30
    while (not out or max(out) < until_offset) and time.monotonic() < deadline:
        for m in c.consume(500, timeout=1.0):
            assert m.error() is None, m.error()
            out[m.offset()] = m.value()
    c.close()
    return out


def _produce_some(bootstrap: str, partition: int, count: int) -> list[int]:
    offsets: list[int] = []

    def on_delivery(err, msg) -> None:  # noqa: ANN001
        assert err is None, err
        offsets.append(msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        p.produce(TOPIC, partition=partition, value=f"more-{i}".encode(), on_delivery=on_delivery)
    assert p.flush(30) == 0
    return offsets


def test_full_log_dir_goes_offline_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with small_tmpfs(tmp_path / "small", "2m") as small:
        metrics_port = free_port()
        b = BrokerProcess(data, settings={"log.dirs": f"{data},{small}",
                                          "metrics.port": metrics_port})
        b.start()
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(20)
            # The logs are created after CreateTopics answers (as Kafka's are).
            wait_until(lambda: all((data / f"{TOPIC}-{p}").is_dir()
                                   or (small / f"{TOPIC}-{p}").is_dir() for p in (0, 1)),
                       20, "both partitions' logs")
            # A new partition goes to the dir with the fewest: one lands in each.
            (on_small,) = [p for p in (0, 1) if (small / f"{TOPIC}-{p}").is_dir()]
            on_data = 1 - on_small
            assert (data / f"{TOPIC}-{on_data}").is_dir()

            acked, errors = _produce_until_error(b.bootstrap, on_small)
            assert KafkaError.KAFKA_STORAGE_ERROR in errors, errors
            assert len(acked) > 100  # the disk did take ~2 MiB first
            assert b.is_running()
            assert f"in dir {small}" in b.log_text()

            # The partition is offline here; the other directory is served as before.
            with WireClient(b.bootstrap) as w:
                dirs = {r.log_dir: r for r in w.call(35, 1, {"topics": None}).results}
            assert dirs[str(small)].error_code == KAFKA_STORAGE_ERROR
            assert dirs[str(data)].error_code == 0
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as r:
                scraped = r.read().decode()
            assert "kafka_log_logmanager_offlinelogdirectorycount 1.0" in scraped
            offsets = _produce_some(b.bootstrap, on_data, 20)
            assert len(_consume(b.bootstrap, on_data, max(offsets))) == 20

            assert b.stop() == 0  # a clean shutdown, leaving the failed directory alone
            grow(small, "16m")
            b.start()
            read = _consume(b.bootstrap, on_small, max(acked))
            missing = [o for o in acked if read.get(o) != acked[o]]
            assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:5]}"
            # With room again the partition takes writes after the last acknowledged one.
            assert min(_produce_some(b.bootstrap, on_small, 10)) > max(acked)
        finally:
            b.close()


def test_broker_whose_only_log_dir_fails_halts_and_loses_nothing(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "small", "2m") as small:
        b = BrokerProcess(small / "data", log_path=tmp_path / "broker.log")
        b.start()
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(20)
            acked, errors = _produce_until_error(b.bootstrap, 0)
            # The answer to the failed produce may or may not leave before the halt.
            assert errors & {KafkaError.KAFKA_STORAGE_ERROR, KafkaError._TRANSPORT}, errors
            assert b.proc is not None and b.proc.wait(20) == 1
            assert "have failed" in b.log_text()

            grow(small, "16m")
            b.start()
            read = _consume(b.bootstrap, 0, max(acked))
            missing = [o for o in acked if read.get(o) != acked[o]]
            assert not missing, f"{len(missing)} acknowledged records lost, first {missing[:5]}"
        finally:
            b.close()
