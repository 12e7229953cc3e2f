"""The client's current leader epoch is checked before the leadership (issue 51), as Kafka's
Partition.getLocalLog: ListOffsets, OffsetForLeaderEpoch and Fetch sent over the wire to a
follower answer an epoch below its own FENCED_LEADER_EPOCH and one above it
UNKNOWN_LEADER_EPOCH (which a client retries where it is); NOT_LEADER_OR_FOLLOWER only at the
epoch it holds, or without one. A follower answered every one of them NOT_LEADER_OR_FOLLOWER
before. ListOffsets from Kafka's debugging replica id (-2) reads a follower's replica."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch
from tests.cluster.cluster import Cluster, wait_until
from tests.protocol.wire import WireClient

pytestmark = pytest.mark.timeout(240)

TOPIC = "epochs"
RECORDS = 3
METADATA, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH, FETCH, PRODUCE = 3, 2, 23, 1, 0
DESCRIBE_PRODUCERS, DELETE_RECORDS = 61, 21
LATEST = -1
CONSUMER, DEBUGGING = -1, -2  # ListOffsets' replica ids


def _own_view(address: str) -> tuple[int, int] | None:
    """(leader, leader epoch) of partition 0 in the Metadata of the broker at `address`."""
    with WireClient(address, timeout=5) as w:
        md = w.call(METADATA, 12, {"topics": [{"name": TOPIC, "topic_id": None}],
                                   "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
    return next(((p.leader_id, p.leader_epoch) for t in md.topics if t.name == TOPIC
                 for p in t.partitions if p.partition_index == 0), None)


def _list_offsets(w: WireClient, epoch: int, replica_id: int = CONSUMER) -> Any:
    r = w.call(LIST_OFFSETS, 7, {"replica_id": replica_id, "isolation_level": 0, "topics": [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "current_leader_epoch": epoch,
                                        "timestamp": LATEST}]}]})
    return r.topics[0].partitions[0]


def _end_offset(w: WireClient, epoch: int) -> Any:
    r = w.call(OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": CONSUMER, "topics": [
        {"topic": TOPIC, "partitions": [{"partition": 0, "current_leader_epoch": epoch,
                                         "leader_epoch": 0}]}]})
    return r.topics[0].partitions[0]


def _fetch(w: WireClient, epoch: int) -> Any:
    r = w.call(FETCH, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "forgotten_topics_data": [], "rack_id": "", "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": 1 << 20}]}]})
    return r.responses[0].partitions[0]


def _produce(address: str, version: int) -> Any:
    """A one-record Produce at `version` to the broker at `address`: the whole answer."""
    with WireClient(address) as w:
        return w.call(PRODUCE, version, {"acks": -1, "timeout": 5000, "transactional_id": None,
                                         "topic_data": [{"name": TOPIC, "partition_data": [
                                             {"index": 0, "records": build_batch(
                                                 [(None, b"x", [], 1000)])}]}]})


def _codes(address: str, epochs: list[int]) -> dict[int, tuple[int, int, int]]:
    """Each epoch sent as the current leader epoch to the broker at `address`: the error
    codes of ListOffsets, OffsetForLeaderEpoch and Fetch."""
    with WireClient(address) as w:
        return {e: (_list_offsets(w, e).error_code, _end_offset(w, e).error_code,
                    _fetch(w, e).error_code) for e in epochs}


def test_the_leader_epoch_is_checked_before_the_leadership(
        zookeeper: ZooKeeperProcess, tmp_path: Path) -> None:
    cluster = Cluster(zookeeper, tmp_path, size=2,
                      **{"auto.leader.rebalance.enable": False}).start()
    try:
        admin = cluster.admin()
        admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[0, 1]])])[TOPIC].result(20)
        wait_until(lambda: cluster.isr(TOPIC).get(0) == [0, 1], 30, "a full ISR")
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for _ in range(RECORDS):
            p.produce(TOPIC, b"r", partition=0)
        assert p.flush(20) == 0
        # broker 0's controlled shutdown moves the leadership to broker 1 at a higher epoch;
        # back, broker 0 follows at that epoch (no preferred-leader rebalance moves it back)
        cluster.broker(0).stop()
        cluster.broker(0).start()
        leader, follower = cluster.broker(1).bootstrap, cluster.broker(0).bootstrap
        wait_until(lambda: cluster.isr(TOPIC).get(0) == [0, 1]
                   and _own_view(follower) == _own_view(leader)
                   and (_own_view(leader) or (0, 0))[0] == 1, 30,
                   "broker 0 in the ISR, following broker 1")
        view = _own_view(leader)
        assert view is not None and view[1] >= 1, view
        epoch = view[1]

        fenced, unknown = ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch
        not_leader = ErrorCode.not_leader_or_follower
        assert _codes(follower, [epoch - 1, epoch, epoch + 1, -1]) == {
            epoch - 1: (fenced,) * 3, epoch: (not_leader,) * 3, epoch + 1: (unknown,) * 3,
            -1: (not_leader,) * 3}
        assert _codes(leader, [epoch - 1, epoch, epoch + 1, -1]) == {
            epoch - 1: (fenced,) * 3, epoch: (ErrorCode.none,) * 3, epoch + 1: (unknown,) * 3,
            -1: (ErrorCode.none,) * 3}
        # an error answer's offsets are unknown, as Kafka's (the follower has the records)
        with WireClient(follower) as w:
            refused = _fetch(w, epoch)
        assert (refused.high_watermark, refused.last_stable_offset,
                refused.log_start_offset) == (-1, -1, -1)
        with WireClient(follower) as w:
            debugging = _list_offsets(w, epoch, DEBUGGING)
            ahead = _list_offsets(w, epoch + 1, DEBUGGING)
        assert (debugging.error_code, debugging.offset, debugging.leader_epoch) == (
            ErrorCode.none, RECORDS, epoch)
        assert ahead.error_code == unknown
        # the APIs without an epoch answer a follower's NOT_LEADER_OR_FOLLOWER as before
        with WireClient(follower) as w:
            producers = w.call(DESCRIBE_PRODUCERS, 0, {"topics": [
                {"name": TOPIC, "partition_indexes": [0]}]})
            deleted = w.call(DELETE_RECORDS, 2, {"timeout": 5000, "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0, "offset": 1}]}]})
        assert producers.topics[0].partitions[0].error_code == not_leader
        assert deleted.topics[0].partitions[0].error_code == not_leader

        # Produce v10+ to the follower names the leader and its endpoint (KIP-951), by the
        # one-partition lane's request as by any; v9 has no such fields
        hinted = _produce(follower, 12)
        part = hinted.responses[0].partition_responses[0]
        assert part.error_code == not_leader
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, epoch)
        assert [(e.node_id, f"{e.host}:{e.port}") for e in hinted.node_endpoints] == [
            (1, leader)]
        old = _produce(follower, 9).responses[0].partition_responses[0]
        assert old.error_code == not_leader and not hasattr(old, "current_leader")
        appended = _produce(leader, 12)
        assert appended.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert list(appended.node_endpoints) == []
    except BaseException:
        print(cluster.logs_tail())
        raise
    finally:
        cluster.close()
