"""The share coordinator's persister APIs (83-87), their refusals: Kafka's ShareCoordinatorShard
fences a write or read of an older leader epoch (FENCED_LEADER_EPOCH) and a write or
initialization of an older state epoch (FENCED_STATE_EPOCH), answers INVALID_REQUEST for a
share-partition never initialized (or deleted) and UNKNOWN_TOPIC_OR_PARTITION for a partition
the topic does not have. Each partition of a request is answered on its own."""

from __future__ import annotations

import uuid

from samsa.coordinator.share.coordinator import coordinator_key
from samsa.protocol.errors import ErrorCode

from .harness import Handlers, eventually


async def _state_partition(h: Handlers, partitions: int = 1) -> uuid.UUID:
    """A topic and its share-partition 0 of group "sg", its state partition loaded here."""
    tid = (await h.create_topic("t", partitions)).topic_id
    await _loaded(h, tid, 0)
    return tid


async def _loaded(h: Handlers, tid: uuid.UUID, partition: int) -> None:
    """Until the state partition of the share-partition is loaded here (before, its answers
    are COORDINATOR_LOAD_IN_PROGRESS, which the persister retries)."""
    await h.find_coordinator(coordinator_key("sg", tid, partition), key_type=2)

    async def loaded() -> bool:
        r = await h.call("ReadShareGroupStateSummary", 0, {"group_id": "sg", "topics": [
            {"topic_id": tid, "partitions": [{"partition": partition, "leader_epoch": 0}]}]})
        return r.results[0].partitions[0].error_code != ErrorCode.coordinator_load_in_progress
    await eventually(loaded)


async def _initialize(h: Handlers, tid: uuid.UUID, state_epoch: int,
                      partition: int = 0) -> ErrorCode:
    r = await h.call("InitializeShareGroupState", 0, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": partition, "state_epoch": state_epoch,
                                          "start_offset": 0}]}]})
    return r.results[0].partitions[0].error_code


async def _write(h: Handlers, tid: uuid.UUID, state_epoch: int, leader_epoch: int) -> ErrorCode:
    r = await h.call("WriteShareGroupState", 1, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{
            "partition": 0, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
            "start_offset": 1, "delivery_complete_count": 0, "state_batches": []}]}]})
    return r.results[0].partitions[0].error_code


async def _read(h: Handlers, tid: uuid.UUID, leader_epoch: int) -> ErrorCode:
    r = await h.call("ReadShareGroupState", 0, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": leader_epoch}]}]})
    return r.results[0].partitions[0].error_code


async def test_an_older_state_epoch_is_fenced(handlers):
    tid = await _state_partition(handlers)
    assert await _initialize(handlers, tid, state_epoch=2) == ErrorCode.none
    assert await _initialize(handlers, tid, state_epoch=1) == ErrorCode.fenced_state_epoch
    assert await _write(handlers, tid, state_epoch=1, leader_epoch=0) == (
        ErrorCode.fenced_state_epoch)
    assert await _write(handlers, tid, state_epoch=2, leader_epoch=0) == ErrorCode.none


async def test_an_older_leader_epoch_is_fenced(handlers):
    """A read records the newer leader epoch it carries (a share-partition leader's first
    read); a write or read of an older one is from a leader that has lost the partition."""
    tid = await _state_partition(handlers)
    await _initialize(handlers, tid, state_epoch=0)
    assert await _read(handlers, tid, leader_epoch=3) == ErrorCode.none
    assert await _write(handlers, tid, state_epoch=0, leader_epoch=2) == (
        ErrorCode.fenced_leader_epoch)
    assert await _read(handlers, tid, leader_epoch=2) == ErrorCode.fenced_leader_epoch
    assert await _write(handlers, tid, state_epoch=0, leader_epoch=3) == ErrorCode.none


async def test_a_write_to_an_uninitialized_share_partition_is_an_invalid_request(handlers):
    tid = await _state_partition(handlers)
    assert await _write(handlers, tid, state_epoch=0, leader_epoch=0) == ErrorCode.invalid_request


async def test_a_deleted_share_partition_is_uninitialized(handlers):
    tid = await _state_partition(handlers)
    await _initialize(handlers, tid, state_epoch=0)
    deleted = await handlers.call("DeleteShareGroupState", 0, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0}]}]})
    assert deleted.results[0].partitions[0].error_code == ErrorCode.none
    assert await _read(handlers, tid, leader_epoch=0) == ErrorCode.invalid_request


async def test_a_partition_the_topic_lacks_is_unknown(handlers):
    tid = await _state_partition(handlers)
    await _loaded(handlers, tid, 7)
    assert await _initialize(handlers, tid, state_epoch=0, partition=7) == (
        ErrorCode.unknown_topic_or_partition)


async def test_each_partition_is_answered_on_its_own(handlers):
    tid = await _state_partition(handlers)
    await _initialize(handlers, tid, state_epoch=0)
    summary = await handlers.call("ReadShareGroupStateSummary", 1, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0},
                                         {"partition": -1, "leader_epoch": 0}]}]})
    assert [(p.partition, p.error_code) for p in summary.results[0].partitions] == [
        (0, ErrorCode.none), (-1, ErrorCode.invalid_request)]
