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
"""

from __future__ import annotations

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

from tests.support.connect import CONNECT_JVM_ARGS, write_properties
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


def _records(bootstrap: str, topic: str) -> dict[int, list[tuple[bytes, bytes, list]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})
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

    props = write_properties(tmp_path / "mm2.properties", {
        "clusters": "A, B",
        "A.bootstrap.servers": a.bootstrap,
        "B.bootstrap.servers": b.bootstrap,
        "A->B.enabled": "true",
        "A->B.topics": topic,
        "A->B.groups": group,
        "B->A.enabled": "false",
        "replication.factor": 1,
        "checkpoints.topic.replication.factor": 1,
        "heartbeats.topic.replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1,
        "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1,
        "config.storage.replication.factor": 1,
        # An offset sync for every record (default: every 100), so that the last record's is
        # written. (A group behind the latest sync that the checkpoint task reads at start-up
        # is not translated at all: Kafka's OffsetSyncStore keeps only that one then.)
        "offset.lag.max": 0,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": 1,
        "emit.checkpoints.interval.seconds": 1,
        "emit.heartbeats.interval.seconds": 1,
        "sync.topic.acls.enabled": "true",
        "sync.topic.acls.interval.seconds": 1,
        "sync.topic.configs.interval.seconds": 1,
        "refresh.topics.interval.seconds": 2,
        "refresh.groups.interval.seconds": 2,
        "plugin.discovery": "service_load",
    })
    mm2 = JavaProcess("org.apache.kafka.connect.mirror.MirrorMaker", [str(props)],
                      log_path=tmp_path / "mm2.log", classpath="connect4",
                      jvm_args=[*CONNECT_JVM_ARGS, "-Dorg.slf4j.simpleLogger.defaultLogLevel=info"],
                      name="mirror-maker").start()

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
