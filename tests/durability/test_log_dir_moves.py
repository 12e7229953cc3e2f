"""Several log directories (JBOD): partitions spread over them, and AlterReplicaLogDirs moves a
replica to another of them while it keeps serving (a producer writing, transactions aborted
before and during the move still filtered after it), DescribeLogDirs shows the future replica
on its way, a restart finds the moved replica, and a broker killed in the middle of a move
resumes it and loses nothing. Kafka's own kafka-log-dirs and kafka-reassign-partitions (with
`log_dirs`) drive it too."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.cluster import wait_until
from tests.protocol.wire import WireClient
from tests.support.broker import BrokerProcess
from tests.support.java import run_java_tool
from tests.support.tmpfs import small_tmpfs

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS = 34, 35
NONE, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR, LOG_DIR_NOT_FOUND = 0, 3, 56, 57
TOPIC = "moving"
RATE = 300_000  # replica.alter.log.dirs.io.max.bytes.per.second: the move takes seconds


def _broker(tmp_path: Path, rate: int = RATE) -> tuple[BrokerProcess, list[str]]:
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    b = BrokerProcess(tmp_path / "meta", settings={
        "log.dirs": ",".join(dirs), "num.partitions": 1,
        "replica.alter.log.dirs.io.max.bytes.per.second": rate,
        "transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1})
    return b, dirs


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _describe(bootstrap: str) -> dict[str, dict[tuple[str, int, bool], Any]]:
    """log dir -> (topic, partition, is_future) -> its entry."""
    with WireClient(bootstrap) as w:
        res = w.call(DESCRIBE_LOG_DIRS, 4, {"topics": None})
    return {d.log_dir: {(t.name, p.partition_index, p.is_future_key): p
                        for t in d.topics for p in t.partitions} for d in res.results}


def _alter(bootstrap: str, path: str, topic: str, partition: int) -> int:
    with WireClient(bootstrap) as w:
        res = w.call(ALTER_REPLICA_LOG_DIRS, 2, {"dirs": [
            {"path": path, "topics": [{"name": topic, "partitions": [partition]}]}]})
    return int(res.results[0].partitions[0].error_code)


def _dir_of(bootstrap: str, topic: str, partition: int) -> tuple[str, str | None]:
    """(the dir of the current replica, that of the future one or None)."""
    current, future = "", None
    for d, parts in _describe(bootstrap).items():
        if (topic, partition, False) in parts:
            current = d
        if (topic, partition, True) in parts:
            future = d
    return current, future


def _preload(bootstrap: str, count: int) -> dict[str, None]:
    """`count` 1 KiB records, plus an aborted transaction; returns the values written."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                  "linger.ms": 20})
    values = {f"pre-{i:06d}".ljust(1024, "x"): None for i in range(count)}
    for v in values:
        p.produce(TOPIC, v.encode())
    assert p.flush(30) == 0
    _aborted_transaction(bootstrap, "pre")
    return values


def _aborted_transaction(bootstrap: str, tag: str) -> None:
    t = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{tag}"})
    t.init_transactions(30)
    t.begin_transaction()
    for i in range(20):
        t.produce(TOPIC, f"aborted-{tag}-{i}".encode())
    t.flush(30)
    t.abort_transaction(30)


class _Writer(threading.Thread):
    """Produces numbered records (idempotent, acks=all) until stopped; keeps the acked ones."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.acked: set[str] = set()
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "linger.ms": 5})

        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.add(msg.value().decode())
            else:
                self.errors.append(str(err))

        i = 0
        while not self.stopping.is_set():
            p.produce(TOPIC, f"live-{i:06d}".encode(), on_delivery=done)
            i += 1
            p.poll(0.005)
        p.flush(30)


def _read_committed(bootstrap: str, expect: int) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[str] = []
    deadline = time.monotonic() + 30
    while len(out) < expect and time.monotonic() < deadline:
        for m in c.consume(1000, timeout=0.5):
            assert m.error() is None, m.error()
            out.append(m.value().decode())
    # and nothing more (an aborted record would come after the expected ones)
    out.extend(m.value().decode() for m in c.consume(1000, timeout=1.0) if m.error() is None)
    c.close()
    return out


def test_replica_moves_to_another_log_dir_while_serving(tmp_path: Path) -> None:
    b, dirs = _broker(tmp_path)
    with b:
        _create(b.bootstrap, "spread", 6)
        _create(b.bootstrap, TOPIC, 1)
        wait_until(lambda: _dir_of(b.bootstrap, TOPIC, 0)[0], 10, "the log is created")
        # Partitions spread over the directories: the fewest partitions first.
        counts = {d: len([k for k in parts if k[0] != "__transaction_state"])
                  for d, parts in _describe(b.bootstrap).items()}
        assert sorted(counts) == sorted(dirs) and max(counts.values()) - min(counts.values()) <= 1
        values = _preload(b.bootstrap, 1500)  # 1.5 MB: some seconds at RATE
        source, _ = _dir_of(b.bootstrap, TOPIC, 0)
        target = next(d for d in dirs if d != source)
        # Kafka's errors: a directory not configured, a partition unknown.
        assert _alter(b.bootstrap, str(tmp_path / "elsewhere"), TOPIC, 0) == LOG_DIR_NOT_FOUND
        assert _alter(b.bootstrap, target, "no-such-topic", 0) == UNKNOWN_TOPIC_OR_PARTITION
        writer = _Writer(b.bootstrap)
        writer.start()
        try:
            assert _alter(b.bootstrap, target, TOPIC, 0) == NONE
            # On its way: DescribeLogDirs shows the future replica in the target, with a lag.
            current, future = _dir_of(b.bootstrap, TOPIC, 0)
            assert (current, future) == (source, target)
            entry = _describe(b.bootstrap)[target][(TOPIC, 0, True)]
            assert entry.offset_lag > 0
            _aborted_transaction(b.bootstrap, "during")
            wait_until(lambda: _dir_of(b.bootstrap, TOPIC, 0) == (target, None), 60,
                       "the move completes")
            time.sleep(0.5)  # writes go on after the swap
        finally:
            writer.stopping.set()
            writer.join(60)
        assert not writer.errors, writer.errors[:5]
        expected = set(values) | writer.acked
        got = _read_committed(b.bootstrap, len(expected))
        assert len(got) == len(set(got)) and set(got) == expected
        assert not os.path.exists(os.path.join(source, f"{TOPIC}-0"))
        assert os.path.exists(os.path.join(target, f"{TOPIC}-0"))
        # A restart finds it there, transactions' state intact.
        b.restart()
        assert _dir_of(b.bootstrap, TOPIC, 0) == (target, None)
        got = _read_committed(b.bootstrap, len(expected))
        assert len(got) == len(set(got)) and set(got) == expected


def test_move_cut_short_by_a_crash_resumes_after_restart(tmp_path: Path) -> None:
    b, dirs = _broker(tmp_path, rate=100_000)
    with b:
        _create(b.bootstrap, TOPIC, 1)
        wait_until(lambda: _dir_of(b.bootstrap, TOPIC, 0)[0], 10, "the log is created")
        values = _preload(b.bootstrap, 1000)  # 1 MB: ten seconds at this rate
        source, _ = _dir_of(b.bootstrap, TOPIC, 0)
        target = next(d for d in dirs if d != source)
        assert _alter(b.bootstrap, target, TOPIC, 0) == NONE
        wait_until(lambda: _describe(b.bootstrap)[target][(TOPIC, 0, True)].partition_size
                   > 100_000, 20, "part of the log is copied")
        b.kill9()
        assert [p.name for p in Path(target).iterdir() if p.name.endswith("-future")]
        b.settings["replica.alter.log.dirs.io.max.bytes.per.second"] = 50_000_000
        b.start()
        wait_until(lambda: _dir_of(b.bootstrap, TOPIC, 0) == (target, None), 30,
                   "the move resumes and completes")
        got = _read_committed(b.bootstrap, len(values))
        assert len(got) == len(set(got)) and set(got) == set(values)


def test_kafka_log_dirs_and_reassign_partitions_move_a_replica(tmp_path: Path) -> None:
    b, dirs = _broker(tmp_path, rate=50_000_000)
    with b:
        _create(b.bootstrap, TOPIC, 1)
        wait_until(lambda: _dir_of(b.bootstrap, TOPIC, 0)[0], 10, "the log is created")
        source, _ = _dir_of(b.bootstrap, TOPIC, 0)
        target = next(d for d in dirs if d != source)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [0], "log_dirs": [target]}]}))
        res = run_java_tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", [
            "--bootstrap-server", b.bootstrap, "--reassignment-json-file", str(plan),
            "--execute"]).check()
        wait_until(lambda: _dir_of(b.bootstrap, TOPIC, 0) == (target, None), 30,
                   f"the move completes: {res.stdout}")
        res = run_java_tool("org.apache.kafka.tools.LogDirsCommand", [
            "--bootstrap-server", b.bootstrap, "--describe", "--topic-list", TOPIC]).check()
        line = next(ln for ln in res.stdout.splitlines() if ln.startswith("{"))
        described = json.loads(line)
        where = {d["logDir"]: [p["partition"] for p in d["partitions"]]
                 for br in described["brokers"] for d in br["logDirs"]}
        assert where[target] == [f"{TOPIC}-0"] and where[source] == [], res.stdout


def test_move_into_a_failing_dir_takes_that_dir_offline_alone(tmp_path: Path) -> None:
    """The target directory fills up (a 1 MiB tmpfs) in the middle of a move: it goes
    offline with the partition that lived there (KAFKA_STORAGE_ERROR), the moved replica
    stays served from where it was, losing nothing, and a move to the offline directory is
    refused with KAFKA_STORAGE_ERROR."""
    data = tmp_path / "data"
    with small_tmpfs(tmp_path / "small", "1m") as small:
        b = BrokerProcess(data, settings={"log.dirs": f"{data},{small}"})
        with b:
            _create(b.bootstrap, TOPIC, 1)  # the first directory (both empty)
            wait_until(lambda: _dir_of(b.bootstrap, TOPIC, 0)[0], 10, "the log is created")
            _create(b.bootstrap, "other", 1)  # the one with fewer partitions: the tmpfs
            wait_until(lambda: _dir_of(b.bootstrap, "other", 0)[0] == str(small), 10,
                       "the other log is created in the small directory")
            assert _dir_of(b.bootstrap, TOPIC, 0)[0] == str(data)
            p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20})
            values = {f"rec-{i:06d}".ljust(1024, "x") for i in range(2000)}  # 2 MB
            for v in values:
                p.produce(TOPIC, v.encode())
            assert p.flush(30) == 0
            assert _alter(b.bootstrap, str(small), TOPIC, 0) == NONE
            wait_until(lambda: _describe_errors(b.bootstrap)[str(small)] == KAFKA_STORAGE_ERROR,
                       30, "the small directory goes offline")
            assert b.is_running()
            assert _describe_errors(b.bootstrap)[str(data)] == NONE
            assert _dir_of(b.bootstrap, TOPIC, 0) == (str(data), None)
            assert _alter(b.bootstrap, str(small), TOPIC, 0) == KAFKA_STORAGE_ERROR
            with WireClient(b.bootstrap) as w:  # the small directory's partition is offline
                res = w.call(2, 1, {"replica_id": -1, "topics": [
                    {"name": "other", "partitions": [{"partition_index": 0,
                                                      "timestamp": -1}]}]})
            assert res.topics[0].partitions[0].error_code == KAFKA_STORAGE_ERROR
            for i in range(10):  # the moved partition takes writes and reads them back
                p.produce(TOPIC, f"after-{i}".encode())
                values.add(f"after-{i}")
            assert p.flush(30) == 0
            got = _read_committed(b.bootstrap, len(values))
            assert len(got) == len(set(got)) and set(got) == values


def _describe_errors(bootstrap: str) -> dict[str, int]:
    with WireClient(bootstrap) as w:
        res = w.call(DESCRIBE_LOG_DIRS, 4, {"topics": None})
    return {d.log_dir: int(d.error_code) for d in res.results}
