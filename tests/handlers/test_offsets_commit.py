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
