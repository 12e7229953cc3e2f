"""DescribeShareGroupOffsets (90) of all of a group's topics (topics null) finds the offsets
AlterShareGroupOffsets (91) set, also for a group that had no members yet: Kafka's
alterShareGroupOffsets makes the share group when it has none (franz-go's
TestShareGroupOffsetsAdmin saw such a partition left out)."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode


async def _describe_all(h, group: str) -> list[tuple[str, list[tuple[int, int]]]]:
    r = await h.call("DescribeShareGroupOffsets", 0, {"groups": [
        {"group_id": group, "topics": None}]})
    g = r.groups[0]
    assert g.error_code == ErrorCode.none
    return [(t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
            for t in g.topics]


async def test_offsets_altered_for_a_new_group_are_described_with_all_topics(handlers):
    await handlers.create_topic("t", partitions=1)
    await handlers.produce("t", 0, [b"a", b"b", b"c"])
    await handlers.find_coordinator("fresh")
    altered = await handlers.call("AlterShareGroupOffsets", 0, {"group_id": "fresh", "topics": [
        {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 2}]}]})
    assert altered.error_code == ErrorCode.none
    assert altered.responses[0].partitions[0].error_code == ErrorCode.none
    assert await _describe_all(handlers, "fresh") == [("t", [(0, 2)])]
    listed = await handlers.call("ListGroups", 5, {"states_filter": [], "types_filter": []})
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("fresh", "share")]
