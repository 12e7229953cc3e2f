"""MirrorMaker 2 (Kafka 4.x connect-mirror, the dedicated driver
org.apache.kafka.connect.mirror.MirrorMaker) from one Samsa broker (cluster A) to another (B).

Both brokers run Kafka's ACL authorizer (the PLAINTEXT principal ANONYMOUS is a super user), so
MM2's ACL sync has ACLs to read. With A->B enabled, MM2 runs three connectors in one group per
direction on B (its config, offset and status topics are compacted topics on B):

* MirrorSourceConnector copies the topic to "A.<topic>" on B, partition by partition (same
  keys, values, headers), creates it with A's partition count and copies its configs; it
  syncs the topic's LITERAL ALLOW ACLs, ALL turned into READ and WRITE left out (Kafka's
  MirrorSourceConnector.shouldReplicateAcl / targetAclBinding), and writes offset syncs.
* MirrorCheckpointConnector translates the consumer group's committed offsets on A through
  the offset syncs into checkpoints (A.checkpoints.internal on B) and, with
  sync.group.offsets.enabled, commits them to the same group on B: a translated offset is
  never past the upstream one (MM2 may re-deliver, never skip); a group at the end of
  the topic on A is at the end of its copy on B.
* MirrorHeartbeatConnector writes heartbeats.

And with exactly-once source support for the writes to B (KIP-618 in dedicated mode,
B.exactly.once.source.support=enabled with the internal REST server): MirrorMaker killed with
-9 mid-copy and restarted leaves B's read_committed copy equal to A's topic (the same run
without it doubles a third of the records).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.support.broker import free_port
from tests.support.connect import (
    EOS_TASK_TRANSACTION_TIMEOUT_MS,
    connect_process,
    write_properties,
)
from tests.support.java import JavaProcess

pytestmark = pytest.mark.timeout(240)

ACLS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
PARTITIONS, RECORDS = 3, 300


def _acl(topic: str, user: str, op: AclOperation) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}",
                      "*", op, AclPermissionType.ALLOW)


def _acls(admin: AdminClient, topic: str) -> set[tuple[str, str, str]]:
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    return {(b.principal, b.operation.name, b.permission_type.name)
            for b in admin.describe_acls(flt).result(timeout=20)}


def _records(bootstrap: str, topic: str, isolation: str = "read_committed",
             ) -> dict[int, list[tuple[bytes, bytes, list]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[tuple[bytes, bytes, list]]] = {p: [] for p in range(PARTITIONS)}
        while (msg := c.poll(2)) is not None:
            assert msg.error() is None, msg.error()
            out[msg.partition()].append((msg.key(), msg.value(), msg.headers() or []))
        return out
    finally:
        c.close()


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)]
    finally:
        c.close()


def _mm2_properties(tmp_path: Path, a: str, b: str, topic: str,
                    extra: dict[str, object]) -> Path:
    return write_properties(tmp_path / "mm2.properties", {
        "clusters": "A, B",
        "A.bootstrap.servers": a,
        "B.bootstrap.servers": b,
        "A->B.enabled": "true",
        "A->B.topics": topic,
        "B->A.enabled": "false",
        "replication.factor": 1,
        "checkpoints.topic.replication.factor": 1,
        "heartbeats.topic.replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1,
        "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1,
        "config.storage.replication.factor": 1,
        "emit.heartbeats.interval.seconds": 1,
        "refresh.topics.interval.seconds": 2,
        # No reflective scan of the class path (its jars all have ServiceLoader manifests):
        # the driver's own Plugins read the top-level setting, each herder its cluster's.
        "plugin.discovery": "service_load",
        "A.plugin.discovery": "service_load",
        "B.plugin.discovery": "service_load",
        **extra,
    })


def _mirror_maker(tmp_path: Path, props: Path) -> JavaProcess:
    return connect_process(
        "org.apache.kafka.connect.mirror.MirrorMaker", [str(props)],
        log_path=tmp_path / "mm2.log", name="mirror-maker").start()


def test_mirror_maker_topics_offsets_and_acls(broker_factory, tmp_path: Path) -> None:
    started = time.monotonic()
    a, b = broker_factory(ACLS), broker_factory(ACLS)
    suffix = uuid.uuid4().hex[:6]
    topic, group = f"orders-{suffix}", f"billing-{suffix}"
    remote = f"A.{topic}"
    admin_a = AdminClient({"bootstrap.servers": a.bootstrap})
    admin_b = AdminClient({"bootstrap.servers": b.bootstrap})

    for f in admin_a.create_topics([NewTopic(topic, PARTITIONS, 1,
                                             config={"retention.ms": "7200000"})]).values():
        f.result(timeout=20)
    p = Producer({"bootstrap.servers": a.bootstrap})
    for i in range(RECORDS):
        p.produce(topic, key=f"k{i % 7}", value=f"order {i}", partition=i % PARTITIONS,
                  headers=[("seq", str(i).encode())])
    assert p.flush(20) == 0
    # The group has consumed every partition on A to its end (committed offsets, no members):
    # a failover to B must resume it exactly there.
    upstream = [RECORDS // PARTITIONS] * PARTITIONS
    c = Consumer({"bootstrap.servers": a.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, q, upstream[q]) for q in range(PARTITIONS)],
             asynchronous=False)
    c.close()
    for f in admin_a.create_acls([
        _acl(topic, "alice", AclOperation.READ),
        _acl(topic, "alice", AclOperation.WRITE),  # not mirrored: only MM2 writes the copy
        _acl(topic, "carol", AclOperation.ALL),  # mirrored as READ
    ]).values():
        f.result(timeout=20)

    props = _mm2_properties(tmp_path, a.bootstrap, b.bootstrap, topic, {
        "A->B.groups": group,
        # An offset sync for every record (default: every 100), so that the last record's is
        # written. (A group behind the latest sync that the checkpoint task reads at start-up
        # is not translated at all: Kafka's OffsetSyncStore keeps only that one then.)
        "offset.lag.max": 0,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": 1,
        "emit.checkpoints.interval.seconds": 1,
        "sync.topic.acls.enabled": "true",
        "sync.topic.acls.interval.seconds": 1,
        "sync.topic.configs.interval.seconds": 1,
        "refresh.groups.interval.seconds": 2,
    })
    mm2 = _mirror_maker(tmp_path, props)

    def wait(what: str, done: Callable[[], Any], timeout: float = 90) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            assert mm2.is_running(), f"MirrorMaker exited\n{mm2.log_tail()}"
            result = done()
            if result:
                return result
            assert time.monotonic() < deadline, (
                f"no {what} within {timeout} s{note()}\n{mm2.log_tail()}")
            time.sleep(1)

    def note() -> str:
        return f" (group offsets seen on B: {seen[-3:]})" if seen else ""

    seen: list[list[int]] = []

    try:
        source = _records(a.bootstrap, topic)
        wait(f"{remote} with {RECORDS} records on B", lambda: (
            remote in admin_b.list_topics(timeout=10).topics
            and sum(map(len, _records(b.bootstrap, remote).values())) >= RECORDS))
        assert _records(b.bootstrap, remote) == source

        # Translated through the last record's offset sync (upstream 99 -> downstream 99,
        # so 100 -> 100); on the way there an older sync may give a smaller offset, never a
        # larger one (MM2 may re-deliver, never skip).
        def synced() -> list[int] | None:
            offsets = _committed(b.bootstrap, group, remote)
            if all(o >= 0 for o in offsets):
                seen.append(offsets)
            return offsets if offsets == upstream else None

        translated = wait(f"{group}'s offsets {upstream} on B", synced)
        assert all(0 < t <= u for offsets in seen for t, u in zip(offsets, upstream,
                                                                  strict=True)), seen
        assert "A.checkpoints.internal" in admin_b.list_topics(timeout=10).topics

        expected_acls = {("User:alice", "READ", "ALLOW"), ("User:carol", "READ", "ALLOW")}
        wait(f"ACLs of {remote} on B", lambda: _acls(admin_b, remote) == expected_acls)

        res = ConfigResource(ConfigResource.Type.TOPIC, remote)
        configs = admin_b.describe_configs([res])[res].result(timeout=20)
        assert configs["retention.ms"].value == "7200000"
        assert len(admin_b.list_topics(remote, timeout=10).topics[remote].partitions) == PARTITIONS
    finally:
        rc = mm2.stop()
    assert rc is not None, f"MirrorMaker hung on SIGTERM\n{mm2.log_tail()}"
    print(f"{RECORDS} records, {group}'s offsets {upstream} -> {translated} and topic ACLs "
          f"mirrored in {time.monotonic() - started:.1f} s")


def test_mirror_maker_exactly_once_across_kill(broker_factory, tmp_path: Path) -> None:
    """KIP-618 for MM2's writes to B (B.exactly.once.source.support=enabled): the source task
    produces its records and its source offsets in one transaction. MirrorMaker is killed
    with -9 while records flow, and restarted: B's copy, read_committed, equals A's topic
    partition by partition (no record lost or doubled; the interrupted transaction aborted)."""
    started = time.monotonic()
    a, b = broker_factory(), broker_factory()
    suffix = uuid.uuid4().hex[:6]
    topic = f"payments-{suffix}"
    remote = f"A.{topic}"
    total, first, step = 6000, 1000, 100
    admin_a = AdminClient({"bootstrap.servers": a.bootstrap})
    for f in admin_a.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(timeout=20)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})

    def feed(start: int, stop: int) -> None:
        for i in range(start, stop):
            producer.produce(topic, key=f"k{i % 11}", value=f"payment {i}",
                             partition=i % PARTITIONS)
        assert producer.flush(20) == 0

    feed(0, first)
    stop_feeding = threading.Event()

    def keep_feeding() -> None:  # the rest while MirrorMaker copies, is killed and restarted
        for start in range(first, total, step):
            if stop_feeding.wait(0.1):
                return
            feed(start, start + step)

    props = _mm2_properties(tmp_path, a.bootstrap, b.bootstrap, topic, {
        # Exactly-once for the writes to B; dedicated mode needs the workers' internal REST
        # server for it (zombie fencing goes through the leader).
        "B.exactly.once.source.support": "enabled",
        "dedicated.mode.enable.internal.rest": "true",
        "listeners": f"http://127.0.0.1:{free_port()}",
        # The killed worker's tasks go to its successor as soon as the group drops it.
        "B.session.timeout.ms": 6000,
        "B.heartbeat.interval.ms": 2000,
        "B.scheduled.rebalance.max.delay.ms": 0,
        # The restarted worker waits out what the kill left open (EOS_TASK_TRANSACTION_TIMEOUT_MS)
        "B.producer.transaction.timeout.ms": EOS_TASK_TRANSACTION_TIMEOUT_MS,
    })
    mm2 = _mirror_maker(tmp_path, props)
    copy = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"check-{suffix}",
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
    copy.subscribe([remote])
    copied: list[str] = []
    feeder = threading.Thread(target=keep_feeding, name="feed", daemon=True)

    def copied_at_least(n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(copied) < n:
            assert time.monotonic() < deadline, (
                f"{len(copied)} of {n} records on B after {timeout} s\n{mm2.log_tail()}")
            assert mm2.is_running(), f"MirrorMaker exited\n{mm2.log_tail()}"
            msg = copy.poll(0.5)
            if msg is not None and msg.error() is None:
                copied.append(msg.value().decode())

    try:
        copied_at_least(first // 2, 120)
        feeder.start()
        copied_at_least(total // 2, 90)
        mm2.kill9()
        killed_at = len(copied)
        assert killed_at < total, "MirrorMaker had copied everything before the kill"
        mm2.start()
        copied_at_least(total, 120)
    finally:
        stop_feeding.set()
        if feeder.ident is not None:
            feeder.join(20)
        copy.close()
        rc = mm2.stop()
    assert rc is not None, f"MirrorMaker hung on SIGTERM\n{mm2.log_tail()}"
    assert "transactionalId=A-mm2-MirrorSourceConnector-0" in mm2.log_text(), mm2.log_tail()

    source, mirrored = _records(a.bootstrap, topic), _records(b.bootstrap, remote)
    dupes = sum(len(rs) - len({v for _, v, _ in rs}) for rs in mirrored.values())
    assert mirrored == source, (
        f"{sum(map(len, mirrored.values()))} records read_committed on B for {total} on A, "
        f"{dupes} duplicates")
    everything = sum(map(len, _records(b.bootstrap, remote, "read_uncommitted").values()))
    print(f"{total} records mirrored exactly once across a kill -9 at {killed_at} "
          f"({everything - total} aborted) in {time.monotonic() - started:.1f} s")
