"""Partition: what request handlers read and change of a partition's log goes through it."""

import uuid
from pathlib import Path

import pytest

from samsa.broker.replication.partition import (
    EARLIEST_TIMESTAMP,
    HIGH_WATERMARK,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NOT_FOUND,
    READ_COMMITTED,
    FencedLeaderEpoch,
    OffsetNotAvailable,
    Partition,
    UnknownLeaderEpoch,
)
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch
from samsa.storage.config import LogConfig
from samsa.storage.errors import OffsetOutOfRange
from samsa.storage.log import Log


def batch(n: int, ts: int) -> bytes:
    return build_batch([(b"k%d" % i, b"v", [], ts + i) for i in range(n)])


@pytest.fixture
def partition(tmp_path: Path):
    log = Log.open(tmp_path / "t-0", LogConfig(), recover=False)
    p = Partition("t", 0, uuid.uuid4(), log, leader_epoch=0, replicas=[1], broker_id=1)
    p.make_leader(0, [1], [1])
    yield p
    log.close()


def test_offsets_follow_appends(partition: Partition) -> None:
    partition.append_as_leader(batch(3, 1000))
    assert (partition.log_start_offset, partition.high_watermark, partition.log_end_offset) == (
        0, 3, 3)
    assert partition.last_stable_offset == 3


def test_leader_epoch_check(partition: Partition) -> None:
    partition.make_leader(2, [1], [1])
    partition.check_leader_epoch(-1)
    partition.check_leader_epoch(2)
    with pytest.raises(FencedLeaderEpoch) as fenced:
        partition.check_leader_epoch(1)
    assert fenced.value.error_code == ErrorCode.fenced_leader_epoch
    with pytest.raises(UnknownLeaderEpoch) as unknown:
        partition.check_leader_epoch(3)
    assert unknown.value.error_code == ErrorCode.unknown_leader_epoch


def test_offset_for_timestamp(partition: Partition) -> None:
    partition.append_as_leader(batch(3, 1000))  # offsets 0-2 at 1000-1002
    assert partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, READ_COMMITTED) == (3, -1, 0)
    assert partition.fetch_offset_for_timestamp(EARLIEST_TIMESTAMP, None) == (0, -1, 0)
    assert partition.fetch_offset_for_timestamp(1001, None) == (1, 1001, 0)
    assert partition.fetch_offset_for_timestamp(MAX_TIMESTAMP, None) == (2, 1002, 0)
    assert partition.fetch_offset_for_timestamp(5000, None) == NOT_FOUND
    assert partition.fetch_offset_for_timestamp(LATEST_TIERED_TIMESTAMP, None) == NOT_FOUND


def test_new_leader_below_its_epoch_start_has_no_committed_end(partition: Partition) -> None:
    partition.append_as_leader(batch(2, 1000))
    partition.leader_epoch_start_offset = partition.high_watermark + 1  # HW not yet there
    with pytest.raises(OffsetNotAvailable):
        partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, READ_COMMITTED)
    assert partition.fetch_offset_for_timestamp(LATEST_TIMESTAMP, None) == (2, -1, 0)


def test_delete_records(partition: Partition) -> None:
    partition.append_as_leader(batch(4, 1000))
    assert partition.delete_records_before(2) == 2
    assert partition.delete_records_before(HIGH_WATERMARK) == 4
    with pytest.raises(OffsetOutOfRange):
        partition.delete_records_before(5)


def test_diverging_epoch(partition: Partition) -> None:
    partition.append_as_leader(batch(2, 1000))  # epoch 0: offsets 0-1
    partition.make_leader(3, [1], [1])
    partition.append_as_leader(batch(2, 2000))  # epoch 3: offsets 2-3
    assert partition.end_offset_for_epoch(0) == (0, 2)
    assert partition.diverging_epoch(-1, 5) is None
    assert partition.diverging_epoch(0, 2) is None  # the follower agrees up to 2
    assert partition.diverging_epoch(0, 3) == (0, 2)  # it has epoch-0 records we lack
    assert partition.diverging_epoch(2, 3) == (0, 2)  # an epoch we never had


def test_producer_state(partition: Partition) -> None:
    partition.append_as_leader(build_batch([(b"k", b"v", [], 1000)], producer_id=7,
                                           producer_epoch=1, base_sequence=0))
    entry = partition.last_producer_entry(7)
    assert entry is not None and entry.producer_epoch == 1
    assert [e.producer_id for e in partition.active_producers()] == [7]
    assert partition.last_producer_entry(8) is None
