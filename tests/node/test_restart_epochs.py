"""After kill -9 of a whole node and its restart (issue 51), no Metadata answer names a
partition's leader at a leader epoch that leader then fences.

A restarted process does not take up a leadership its partition state names from before its
new registration: the controller writes it again at the next leader epoch (Kafka's controller
handles a broker that registered again as failed, then started). Until then Kafka answers
Metadata as for a leader that is gone (LEADER_NOT_AVAILABLE, no leader); naming the old
leadership sent clients its old epoch, which the leader fenced moments later, and librdkafka's
admin ListOffsets, which drops its cached metadata only on NOT_LEADER_OR_FOLLOWER and
LEADER_NOT_AVAILABLE, kept sending the fenced epoch.

Each process's Metadata is read over the wire from its first answer after the restart until
every process names the same leader and epoch for each partition and each leader serves that
epoch (ListOffsets with it as the current leader epoch); every answer in which a process named
itself leader must have named that epoch. A librdkafka admin client whose metadata was read
as soon as the node answered then lists every partition's end offset (the records
acknowledged before the kill).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

import samsa.testing
from samsa.protocol.errors import ErrorCode
from samsa.testing._node import SamsaNode
from tests.node.test_node import NODE_SETTINGS
from tests.protocol.wire import WireClient

pytestmark = pytest.mark.timeout(420)

TOPIC = "restarted"
PARTITIONS = 300
RECORDS = 2  # a partition, acks=all
METADATA, LIST_OFFSETS = 3, 2
LATEST = -1  # ListOffsets' latest timestamp

# (partition, leader, leader epoch) as one Metadata answer named them
Named = tuple[int, int, int]


@pytest.fixture(params=[
    pytest.param(True, id="zookeeper", marks=pytest.mark.skipif(
        not samsa.testing.zookeeper_available(), reason="needs ZooKeeper")),
    pytest.param(False, id="shared-file"),
])
def node(request: pytest.FixtureRequest) -> Iterator[SamsaNode]:
    with samsa.testing.node(2, NODE_SETTINGS, zookeeper=request.param) as n:
        yield n


def produce(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """`records` records to every partition, each acknowledged by acks=all."""
    failed: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True})
    for i in range(partitions * records):
        p.produce(topic, b"r", partition=i % partitions,
                  on_delivery=lambda err, _m: failed.append(err) if err else None)
        p.poll(0)
    assert p.flush(60) == 0 and not failed, failed[:3]


def metadata(address: str, topic: str) -> tuple[dict[int, str], list[Named]]:
    """Metadata v12 of `topic` from the broker at `address`: (each live broker's address,
    (partition, leader or -1, leader epoch) of each partition)."""
    with WireClient(address, timeout=10) as c:
        r = c.call(METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                  "allow_auto_topic_creation": False,
                                  "include_topic_authorized_operations": False})
    brokers = {b.node_id: f"{b.host}:{b.port}" for b in r.brokers}
    return brokers, [(p.partition_index, p.leader_id, p.leader_epoch)
                     for t in r.topics for p in t.partitions]


def served(address: str, topic: str, epochs: dict[int, int]) -> dict[int, int]:
    """ListOffsets v7 (latest) to the broker at `address` for each partition with its epoch as
    the current leader epoch: partition -> its error code."""
    with WireClient(address, timeout=10) as c:
        r = c.call(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [
                {"partition_index": p, "current_leader_epoch": e, "timestamp": LATEST}
                for p, e in epochs.items()]}]})
    return {p.partition_index: p.error_code for t in r.topics for p in t.partitions}


def watch_restart(addresses: list[str], topic: str, partitions: int,
                  timeout: float) -> tuple[list[tuple[str, Named]], dict[int, int]]:
    """Every process's Metadata of `topic` from its first answer until all of them name the
    same leader and epoch for every partition and each leader serves its partitions at that
    epoch: (each answer in which a process named itself leader, with its address; each
    partition's settled epoch). A process knows its own life; another may name it leader
    while the registration of its previous life is still to expire in ZooKeeper, as Kafka
    names a broker whose session has not expired."""
    named: list[tuple[str, Named]] = []
    deadline = time.monotonic() + timeout
    last: dict[str, list[Named]] = {}
    while time.monotonic() < deadline:
        brokers: dict[int, str] = {}
        for address in addresses:
            try:
                brokers, last[address] = metadata(address, topic)
            except OSError:  # not answering yet
                continue
            named += [(address, n) for n in last[address] if brokers.get(n[1]) == address]
        views = [sorted(last.get(a, [])) for a in addresses]
        if (len(views[0]) == partitions and all(v == views[0] for v in views)
                and all(leader >= 0 for _, leader, _ in views[0])):
            by_leader: dict[int, dict[int, int]] = defaultdict(dict)
            for p, leader, epoch in views[0]:
                by_leader[leader][p] = epoch
            codes = {}
            for leader, epochs in by_leader.items():
                if leader in brokers:
                    codes.update(served(brokers[leader], topic, epochs))
            if len(codes) == partitions and set(codes.values()) == {ErrorCode.none}:
                return named, {p: epoch for p, _, epoch in views[0]}
        time.sleep(0.05)
    raise AssertionError(f"{topic}: not every partition led at one epoch {timeout} s after the "
                         f"restart; last answers {({a: v[:5] for a, v in last.items()})}")


def end_offsets(admin: AdminClient, topic: str, partitions: int,
                timeout: float) -> dict[int, int]:
    """ListOffsets (latest) of every partition through `admin`, asking again for those that
    failed until `timeout`: partition -> end offset; the errors of the last round raised."""
    got: dict[int, int] = {}
    errors: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    while len(got) < partitions and time.monotonic() < deadline:
        wanted = {TopicPartition(topic, p): OffsetSpec.latest()
                  for p in range(partitions) if p not in got}
        errors = {}
        for tp, f in admin.list_offsets(wanted, request_timeout=30).items():
            try:
                got[tp.partition] = f.result().offset
            except KafkaException as exc:
                errors[tp.partition] = exc.args[0].name()
        if errors:
            time.sleep(0.5)
    assert not errors, (f"{len(errors)} partitions' end offsets not listed in {timeout} s, "
                        f"e.g. {sorted(errors.items())[:3]}")
    return got


def stale_answers(named: list[tuple[str, Named]], settled: dict[int, int]) -> list[str]:
    """The answers that named a leader at an epoch below the one the partition settled at."""
    return [f"{address}: partition {p} leader {leader} epoch {epoch} (settled at {settled[p]})"
            for address, (p, leader, epoch) in named if epoch < settled[p]]


def check_restart(bootstrap: str, addresses: list[str], kill: Callable[[], None],
                  start: Callable[[], object]) -> None:
    """A topic of one replica a partition, acknowledged records in each; kill -9 and start
    again: no answer names a fenced epoch, and an admin client that read the metadata as soon
    as the brokers answered lists every end offset."""
    samsa.testing.create_topic(bootstrap, TOPIC, PARTITIONS, 1, timeout=120)
    produce(bootstrap, TOPIC, PARTITIONS, RECORDS)
    kill()
    # asking from before the brokers answer: their first answers are read
    with ThreadPoolExecutor(1) as pool:
        watched = pool.submit(watch_restart, addresses, TOPIC, PARTITIONS, 180)
        start()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.list_topics(TOPIC, timeout=10)  # its metadata cache as the restart answers it
        named, settled = watched.result()
    stale = stale_answers(named, settled)
    assert not stale, (f"{len(stale)} Metadata answers named a leader at an epoch it then "
                       f"fenced, e.g. {stale[:3]}")
    offsets = end_offsets(admin, TOPIC, PARTITIONS, 30)
    assert offsets == {p: RECORDS for p in range(PARTITIONS)}


def test_no_metadata_names_a_leader_epoch_fenced_after_the_whole_node_restarts(
        node: SamsaNode) -> None:
    check_restart(node.bootstrap, [f"127.0.0.1:{port}" for port in node.ports], node.kill,
                  node.start)
