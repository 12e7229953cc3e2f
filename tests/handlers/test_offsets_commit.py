"""Committed offsets on the group coordinator: OffsetCommit (8), OffsetFetch (9),
TxnOffsetCommit (28), OffsetDelete (47)."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE, begin_transaction, eventually
from .test_groups import join_and_sync


def _commit(group: str, topic: str, offsets: dict[int, int], generation: int = -1,
            member: str = "") -> dict:
    return {"group_id": group, "generation_id_or_member_epoch": generation,
            "member_id": member, "group_instance_id": None, "topics": [{"name": topic,
            "partitions": [{"partition_index": p, "committed_offset": o,
                            "committed_leader_epoch": -1, "committed_metadata": "md"}
                           for p, o in offsets.items()]}]}


async def _committed(h, group: str, topic: str, partitions: list[int],
                     require_stable: bool = False) -> dict[int, tuple[int, int]]:
    r = await h.call("OffsetFetch", 7, {"group_id": group, "require_stable": require_stable,
                                        "topics": [{"name": topic,
                                                    "partition_indexes": partitions}]})
    assert r.error_code == ErrorCode.none
    return {p.partition_index: (p.error_code, p.committed_offset) for p in r.topics[0].partitions}


async def test_commit_and_fetch_without_a_group_member(handlers):
    await handlers.create_topic("t", 2)
    await handlers.find_coordinator("g")
    r = await handlers.call("OffsetCommit", 8, _commit("g", "t", {0: 5, 1: 7}))
    assert [p.error_code for p in r.topics[0].partitions] == [ErrorCode.none] * 2
    assert await _committed(handlers, "g", "t", [0, 1]) == {
        0: (ErrorCode.none, 5), 1: (ErrorCode.none, 7)}


async def test_nothing_committed_is_offset_minus_one(handlers):
    await handlers.create_topic("t")
    await handlers.find_coordinator("g")
    assert await _committed(handlers, "g", "t", [0]) == {0: (ErrorCode.none, -1)}


async def test_commit_of_a_stale_generation_or_unknown_member(handlers):
    await handlers.create_topic("t")
    member, generation = await join_and_sync(handlers)
    stale = await handlers.call("OffsetCommit", 8, _commit("g", "t", {0: 1}, generation + 1,
                                                           member))
    stranger = await handlers.call("OffsetCommit", 8, _commit("g", "t", {0: 1}, generation,
                                                              "who"))
    ok = await handlers.call("OffsetCommit", 8, _commit("g", "t", {0: 1}, generation, member))
    assert stale.topics[0].partitions[0].error_code == ErrorCode.illegal_generation
    assert stranger.topics[0].partitions[0].error_code == ErrorCode.unknown_member_id
    assert ok.topics[0].partitions[0].error_code == ErrorCode.none


async def test_commit_to_an_unknown_topic(handlers):
    await handlers.find_coordinator("g")
    r = await handlers.call("OffsetCommit", 8, _commit("g", "nope", {0: 1}))
    assert r.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


async def test_txn_offset_commit_is_visible_once_committed(handlers):
    await handlers.create_topic("t")
    await handlers.find_coordinator("g")
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    added = await handlers.call("AddOffsetsToTxn", 3, {
        "transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
        "group_id": "g"})
    committed = await handlers.call("TxnOffsetCommit", 3, {
        "transactional_id": "tx", "group_id": "g", "producer_id": pid,
        "producer_epoch": epoch, "generation_id": -1, "member_id": "",
        "group_instance_id": None, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": -1,
             "committed_metadata": None}]}]})
    assert added.error_code == ErrorCode.none
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none
    assert await _committed(handlers, "g", "t", [0], require_stable=True) == {
        0: (ErrorCode.unstable_offset_commit, -1)}
    end = await handlers.call("EndTxn", 3, {"transactional_id": "tx", "producer_id": pid,
                                            "producer_epoch": epoch, "committed": True})
    assert end.error_code == ErrorCode.none

    async def visible() -> bool:  # once the commit marker reaches the offsets partition
        return await _committed(handlers, "g", "t", [0]) == {0: (ErrorCode.none, 42)}
    await eventually(visible)


async def test_offset_delete(handlers):
    await handlers.create_topic("t")
    await handlers.find_coordinator("g")
    await handlers.call("OffsetCommit", 8, _commit("g", "t", {0: 3}))
    r = await handlers.call("OffsetDelete", 0, {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    missing = await handlers.call("OffsetDelete", 0, {"group_id": "other", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert (r.error_code, r.topics[0].partitions[0].error_code) == (
        ErrorCode.none, ErrorCode.none)
    assert await _committed(handlers, "g", "t", [0]) == {0: (ErrorCode.none, -1)}
    assert missing.error_code == ErrorCode.group_id_not_found


async def test_group_authorization_failed(secured):
    await secured.create_topic("t")
    await secured.find_coordinator("g")
    commit = await secured.call("OffsetCommit", 8, _commit("g", "t", {0: 1}), principal=ALICE)
    fetch = await secured.call("OffsetFetch", 7, {"group_id": "g", "topics": None},
                               principal=ALICE)
    assert commit.topics[0].partitions[0].error_code == ErrorCode.group_authorization_failed
    assert fetch.error_code == ErrorCode.group_authorization_failed


def _txn_commit(pid: int, epoch: int, topics: list[dict], group: str = "g",
                generation: int = -1, member: str = "") -> dict:
    return {"transactional_id": "tx", "group_id": group, "producer_id": pid,
            "producer_epoch": epoch, "generation_id": generation, "member_id": member,
            "group_instance_id": None, "topics": topics}


def _offset(partition: int, offset: int) -> dict:
    return {"partition_index": partition, "committed_offset": offset,
            "committed_leader_epoch": -1, "committed_metadata": None}


async def test_txn_offset_commit_v6_names_topics_by_id(handlers):
    """KIP-1319 (kio has no v6): topics by id in the request and the answer; an id this
    cluster does not know is UNKNOWN_TOPIC_ID; the commit lands with the transaction's."""
    import uuid
    created = await handlers.create_topic("t")
    await handlers.find_coordinator("g")
    await handlers.find_coordinator("tx", key_type=1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    nowhere = uuid.uuid4()
    r = await handlers.call("TxnOffsetCommit", 6, _txn_commit(pid, epoch, [
        {"topic_id": created.topic_id, "partitions": [_offset(0, 42)]},
        {"topic_id": nowhere, "partitions": [_offset(0, 1)]}]))
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in r.topics] == [
        (created.topic_id, [ErrorCode.none]), (nowhere, [ErrorCode.unknown_topic_id])]
    end = await handlers.call("EndTxn", 3, {"transactional_id": "tx", "producer_id": pid,
                                            "producer_epoch": epoch, "committed": True})
    assert end.error_code == ErrorCode.none

    async def visible() -> bool:
        return await _committed(handlers, "g", "t", [0]) == {0: (ErrorCode.none, 42)}
    await eventually(visible)


async def test_txn_offset_commit_v6_knows_group_id_not_found_and_stale_member_epoch(handlers):
    """KIP-1319: v6 answers GROUP_ID_NOT_FOUND (no such group, a generation given) and
    STALE_MEMBER_EPOCH (a consumer-protocol member's newer epoch); v3-v5 ILLEGAL_GENERATION."""
    created = await handlers.create_topic("t")
    await handlers.find_coordinator("g")
    await handlers.find_coordinator("tx", key_type=1)
    joined = await handlers.call("ConsumerGroupHeartbeat", 1, {
        "group_id": "g", "member_id": "m1", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 10_000, "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    by_id = [{"topic_id": created.topic_id, "partitions": [_offset(0, 1)]}]
    by_name = [{"name": "t", "partitions": [_offset(0, 1)]}]

    async def code(version: int, group: str = "g", generation: int = -1,
                   member: str = "") -> int:
        body = _txn_commit(pid, epoch, by_id if version >= 6 else by_name, group, generation,
                           member)
        return (await handlers.call("TxnOffsetCommit", version, body)
                ).topics[0].partitions[0].error_code

    assert await code(6, group="none", generation=1) == ErrorCode.group_id_not_found
    assert await code(3, group="none", generation=1) == ErrorCode.illegal_generation
    assert await code(6, generation=2, member="m1") == ErrorCode.stale_member_epoch
    assert await code(3, generation=2, member="m1") == ErrorCode.illegal_generation
    assert await code(6, generation=1, member="m1") == ErrorCode.none


async def test_txn_offset_commit_without_a_member_to_a_consumer_group_with_members(handlers):
    """Kafka 4.4: a producer that names no member of the group (sendOffsetsToTransaction with
    a group id alone) commits to a consumer-protocol group whose members are active."""
    await handlers.create_topic("t")
    await handlers.find_coordinator("g")
    await handlers.find_coordinator("tx", key_type=1)
    joined = await handlers.call("ConsumerGroupHeartbeat", 1, {
        "group_id": "g", "member_id": "m1", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 10_000, "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
    assert joined.error_code == ErrorCode.none
    pid, epoch = await begin_transaction(handlers, "tx", "t", 0)
    added = await handlers.call("AddOffsetsToTxn", 3, {
        "transactional_id": "tx", "producer_id": pid, "producer_epoch": epoch,
        "group_id": "g"})
    assert added.error_code == ErrorCode.none
    r = await handlers.call("TxnOffsetCommit", 3, _txn_commit(
        pid, epoch, [{"name": "t", "partitions": [_offset(0, 9)]}]))
    stranger = await handlers.call("TxnOffsetCommit", 3, _txn_commit(
        pid, epoch, [{"name": "t", "partitions": [_offset(0, 9)]}], generation=1, member="who"))
    assert r.topics[0].partitions[0].error_code == ErrorCode.none
    assert stranger.topics[0].partitions[0].error_code == ErrorCode.unknown_member_id
