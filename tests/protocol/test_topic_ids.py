"""Topic metadata as Kafka answers it: auto-creation, topic ids, and the by-id APIs."""

from __future__ import annotations

from protocol.errors import ErrorCode

from .wire import WireClient

METADATA = 3


def _metadata(c: WireClient, topics: list[str], *, create: bool, version: int = 12):
    return c.call(
        METADATA, version,
        {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": create},
    )


def test_metadata_auto_create_answers_leader_not_available_first(shared_broker, unique_topic):
    """Kafka's AutoTopicCreationManager: the call that creates a topic answers
    LEADER_NOT_AVAILABLE with no partitions; the next one sees the topic."""
    with WireClient(shared_broker.bootstrap) as c:
        first = _metadata(c, [unique_topic], create=True).topics[0]
        assert (first.name, first.error_code) == (unique_topic, ErrorCode.leader_not_available)
        assert list(first.partitions) == []
        second = _metadata(c, [unique_topic], create=True).topics[0]
        assert second.error_code == ErrorCode.none
        assert [p.partition_index for p in second.partitions] == [0]
        assert second.partitions[0].leader_id >= 0


def test_metadata_illegal_name_is_invalid_topic_with_or_without_creation(shared_broker):
    with WireClient(shared_broker.bootstrap) as c:
        for create in (True, False):
            t = _metadata(c, ["bad/name"], create=create).topics[0]
            assert t.error_code == ErrorCode.invalid_topic_exception, create
            unknown = _metadata(c, ["no-such-topic-here"], create=False).topics[0]
            assert unknown.error_code == ErrorCode.unknown_topic_or_partition
