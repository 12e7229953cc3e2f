"""DescribeTopicPartitions (75): topics in name order from a cursor, at most a limit of
partitions, and the cursor where the next page starts."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE


async def test_pages_by_the_partition_limit(handlers):
    await handlers.create_topic("a", 3)
    await handlers.create_topic("b", 2)
    first = await handlers.call("DescribeTopicPartitions", 0, {
        "topics": [], "response_partition_limit": 4, "cursor": None})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in first.topics
            if not t.is_internal] == [("a", [0, 1, 2]), ("b", [0])]
    cursor = first.next_cursor
    assert (cursor.topic_name, cursor.partition_index) == ("b", 1)
    rest = await handlers.call("DescribeTopicPartitions", 0, {
        "topics": [], "response_partition_limit": 4,
        "cursor": {"topic_name": "b", "partition_index": 1}})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [
        ("b", [1])]
    assert rest.next_cursor is None


async def test_unknown_topic_and_invalid_cursor(handlers):
    await handlers.create_topic("a")
    unknown = await handlers.call("DescribeTopicPartitions", 0, {
        "topics": [{"name": "nope"}], "response_partition_limit": 10, "cursor": None})
    bad_cursor = await handlers.call("DescribeTopicPartitions", 0, {
        "topics": [{"name": "a"}], "response_partition_limit": 10,
        "cursor": {"topic_name": "other", "partition_index": 0}})
    assert unknown.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert bad_cursor.topics[0].error_code == ErrorCode.invalid_request


async def test_topic_authorization_failed(secured):
    await secured.create_topic("a")
    r = await secured.call("DescribeTopicPartitions", 0, {
        "topics": [{"name": "a"}], "response_partition_limit": 10, "cursor": None},
        principal=ALICE)
    assert r.topics[0].error_code == ErrorCode.topic_authorization_failed
