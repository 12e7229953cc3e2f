"""Share groups (KIP-932): ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78),
ShareAcknowledge (79), the share-group offsets APIs (90-92) and the share coordinator's state
APIs between brokers (83-87)."""

from __future__ import annotations

import uuid

from samsa.coordinator.share.coordinator import coordinator_key
from samsa.protocol.errors import ErrorCode

from .harness import ALICE, eventually, values_of

GROUP_RESOURCE, SET = 32, 0
ACCEPT, RELEASE = 1, 2


async def _share_group(h, topic: str = "t", member: str = "m1") -> uuid.UUID:
    """A topic with two records, a share group reading it from the earliest offset, and one
    member joined; the topic's id."""
    tid = (await h.create_topic(topic)).topic_id
    await h.produce(topic, 0, [b"a", b"b"])
    r = await h.call("IncrementalAlterConfigs", 1, {"resources": [{
        "resource_type": GROUP_RESOURCE, "resource_name": "sg", "configs": [
            {"name": "share.auto.offset.reset", "config_operation": SET,
             "value": "earliest"}]}], "validate_only": False})
    assert r.responses[0].error_code == ErrorCode.none
    await h.find_coordinator("sg")
    beat = await h.call("ShareGroupHeartbeat", 1, _beat(member, 0, [topic]))
    assert (beat.error_code, beat.member_epoch) == (ErrorCode.none, 1)
    return tid


def _beat(member: str, epoch: int, topics: list[str] | None = None) -> dict:
    return {"group_id": "sg", "member_id": member, "member_epoch": epoch, "rack_id": None,
            "subscribed_topic_names": topics}


def _share_fetch(tid: uuid.UUID, epoch: int, acks: list[dict] | None = None,
                 member: str = "m1") -> dict:
    return {"group_id": "sg", "member_id": member, "share_session_epoch": epoch,
            "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100,
            "batch_size": 100, "forgotten_topics_data": [], "topics": [{
                "topic_id": tid, "partitions": [{"partition_index": 0,
                                                 "acknowledgement_batches": acks or []}]}]}


async def test_heartbeat_and_describe(handlers):
    tid = await _share_group(handlers)
    d = await handlers.call("ShareGroupDescribe", 1, {"group_ids": ["sg", "none"]})
    g, none = d.groups
    assert (g.error_code, g.group_state, [m.member_id for m in g.members]) == (
        ErrorCode.none, "Stable", ["m1"])
    assert [(tp.topic_id, tp.partitions) for tp in g.members[0].assignment.topic_partitions
            ] == [(tid, (0,))]
    assert none.error_code == ErrorCode.group_id_not_found
    unknown = await handlers.call("ShareGroupHeartbeat", 1, _beat("who", 4))
    assert unknown.error_code == ErrorCode.unknown_member_id


async def test_share_fetch_acquires_and_acknowledge_accepts(handlers):
    tid = await _share_group(handlers)
    r = await handlers.call("ShareFetch", 1, _share_fetch(tid, 0))
    p = r.responses[0].partitions[0]
    assert (r.error_code, p.error_code) == (ErrorCode.none, ErrorCode.none)
    assert values_of(p.records) == [b"a", b"b"]
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [
        (0, 1, 1)]
    ack = await handlers.call("ShareAcknowledge", 1, {
        "group_id": "sg", "member_id": "m1", "share_session_epoch": 1, "topics": [{
            "topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 1, "acknowledge_types": [ACCEPT]}]}]}]})
    assert ack.error_code == ErrorCode.none
    assert ack.responses[0].partitions[0].error_code == ErrorCode.none
    again = await handlers.call("ShareFetch", 1, _share_fetch(tid, 2))
    assert again.responses == () or values_of(again.responses[0].partitions[0].records) == []


async def test_share_fetch_session_errors(handlers):
    tid = await _share_group(handlers)
    no_session = await handlers.call("ShareFetch", 1, _share_fetch(tid, 3))
    stranger = await handlers.call("ShareFetch", 1, _share_fetch(tid, 0, member="who"))
    assert no_session.error_code == ErrorCode.share_session_not_found
    assert stranger.error_code == ErrorCode.unknown_member_id


async def test_share_group_offsets(handlers):
    await _share_group(handlers)
    r = await handlers.call("ShareFetch", 1, _share_fetch((await handlers.call(
        "Metadata", 12, {"topics": [{"name": "t"}]})).topics[0].topic_id, 0))
    assert r.error_code == ErrorCode.none  # the share-partition is initialized
    described = await handlers.call("DescribeShareGroupOffsets", 0, {"groups": [
        {"group_id": "sg", "topics": [{"topic_name": "t", "partitions": [0]}]}]})
    p = described.groups[0].topics[0].partitions[0]
    assert (p.error_code, p.start_offset) == (ErrorCode.none, 0)
    busy = await handlers.call("AlterShareGroupOffsets", 0, {"group_id": "sg", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 1}]}]})
    assert busy.error_code == ErrorCode.non_empty_group  # a member is still in it
    missing = await handlers.call("DeleteShareGroupOffsets", 0, {"group_id": "sg", "topics": [
        {"topic_name": "nope"}]})
    assert missing.error_code == ErrorCode.non_empty_group or (
        missing.responses[0].error_code == ErrorCode.unknown_topic_or_partition)


async def _loaded(h, tid: uuid.UUID) -> None:
    """Until the share coordinator has loaded the state partition of `tid`'s key: before, its
    answers are COORDINATOR_LOAD_IN_PROGRESS, which clients retry."""
    async def loaded() -> bool:
        r = await h.call("ReadShareGroupStateSummary", 0, {"group_id": "sg", "topics": [
            {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
        return r.results[0].partitions[0].error_code != ErrorCode.coordinator_load_in_progress
    await eventually(loaded)


async def test_share_state_apis(handlers):
    tid = (await handlers.create_topic("t")).topic_id
    key = coordinator_key("sg", tid, 0)  # "group:topicId:partition", the id in Kafka's base64
    assert (await handlers.find_coordinator(key, key_type=2)).error_code == ErrorCode.none
    await _loaded(handlers, tid)
    init = await handlers.call("InitializeShareGroupState", 0, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "state_epoch": 1,
                                          "start_offset": 10}]}]})
    assert init.results[0].partitions[0].error_code == ErrorCode.none
    write = await handlers.call("WriteShareGroupState", 0, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "state_epoch": 1,
                                          "leader_epoch": 0, "start_offset": 12,
                                          "state_batches": [{"first_offset": 12,
                                                             "last_offset": 13,
                                                             "delivery_state": 2,
                                                             "delivery_count": 1}]}]}]})
    assert write.results[0].partitions[0].error_code == ErrorCode.none
    read = await handlers.call("ReadShareGroupState", 0, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
    p = read.results[0].partitions[0]
    assert (p.error_code, p.state_epoch, p.start_offset) == (ErrorCode.none, 1, 12)
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in p.state_batches] == [
        (12, 13, 2)]
    summary = await handlers.call("ReadShareGroupStateSummary", 0, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
    assert summary.results[0].partitions[0].start_offset == 12
    deleted = await handlers.call("DeleteShareGroupState", 0, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0}]}]})
    assert deleted.results[0].partitions[0].error_code == ErrorCode.none


async def test_state_of_an_uninitialized_share_partition(handlers):
    tid = (await handlers.create_topic("t")).topic_id
    await handlers.find_coordinator(coordinator_key("sg", tid, 0), key_type=2)
    await _loaded(handlers, tid)
    read = await handlers.call("ReadShareGroupState", 0, {"group_id": "sg", "topics": [
        {"topic_id": tid, "partitions": [{"partition": 0, "leader_epoch": 0}]}]})
    p = read.results[0].partitions[0]
    assert (p.error_code, p.start_offset) == (ErrorCode.invalid_request, -1)


async def test_authorization_failed(secured):
    await secured.create_topic("t")
    await secured.find_coordinator("sg")
    beat = await secured.call("ShareGroupHeartbeat", 1, _beat("m1", 0, ["t"]), principal=ALICE)
    state = await secured.call("ReadShareGroupState", 0, {"group_id": "sg", "topics": [
        {"topic_id": uuid.uuid4(), "partitions": [{"partition": 0, "leader_epoch": 0}]}]},
        principal=ALICE)
    assert beat.error_code == ErrorCode.group_authorization_failed
    assert state.results[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
