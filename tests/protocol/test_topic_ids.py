"""Topic metadata as Kafka answers it: auto-creation, topic ids, and the by-id APIs."""

from __future__ import annotations

import uuid

from samsa.protocol.errors import ErrorCode

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


def test_metadata_v13_has_a_top_level_error_code_and_ids(shared_broker, unique_topic):
    with WireClient(shared_broker.bootstrap) as c:
        _metadata(c, [unique_topic], create=True)
        resp = c.call(METADATA, 13, {"topics": [{"name": unique_topic, "topic_id": None}],
                                     "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        assert resp.error_code == ErrorCode.none
        topic = resp.topics[0]
        assert topic.error_code == ErrorCode.none and topic.topic_id.int != 0
        by_id = c.call(METADATA, 13, {"topics": [{"name": None, "topic_id": topic.topic_id}],
                                      "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False})
        assert [(t.name, t.topic_id) for t in by_id.topics] == [(unique_topic, topic.topic_id)]


DELETE_TOPICS = 20


def test_delete_topics_v6_by_id_and_kafkas_refusals(shared_broker, unique_topic):
    zero = uuid.UUID(int=0)
    with WireClient(shared_broker.bootstrap) as c:
        _metadata(c, [unique_topic], create=True)
        topic_id = _metadata(c, [unique_topic], create=False).topics[0].topic_id

        def delete(*topics: tuple[str | None, uuid.UUID]):
            resp = c.call(DELETE_TOPICS, 6, {"topics": [{"name": n, "topic_id": i}
                                                        for n, i in topics],
                                             "timeout": 10_000})
            return sorted(((r.name, r.topic_id or zero, r.error_code) for r in resp.responses),
                          key=str)

        unknown = uuid.uuid4()
        assert delete((None, unknown)) == [(None, unknown, ErrorCode.unknown_topic_id)]
        assert delete((None, zero)) == [(None, zero, ErrorCode.invalid_request)]
        assert delete((unique_topic, topic_id)) == [
            (unique_topic, topic_id, ErrorCode.invalid_request)]
        assert delete((None, topic_id), (None, topic_id)) == [
            (None, topic_id, ErrorCode.invalid_request)]
        assert _metadata(c, [unique_topic], create=False).topics[0].error_code == 0
        assert delete((None, topic_id)) == [(unique_topic, topic_id, ErrorCode.none)]
        gone = _metadata(c, [unique_topic], create=False).topics[0]
        assert gone.error_code == ErrorCode.unknown_topic_or_partition


DESCRIBE_TOPIC_PARTITIONS = 75


def _create(c: WireClient, topic: str, partitions: int) -> None:
    resp = c.call(19, 7, {"topics": [{"name": topic, "num_partitions": partitions,
                                      "replication_factor": 1, "assignments": [],
                                      "configs": []}],
                          "timeout": 10_000, "validate_only": False})
    assert resp.topics[0].error_code == 0, resp


def test_describe_topic_partitions_pages_with_a_cursor(shared_broker, unique_topic):
    a, b = f"{unique_topic}-a", f"{unique_topic}-b"
    with WireClient(shared_broker.bootstrap) as c:
        _create(c, a, 3)
        _create(c, b, 2)
        ids = {t.name: t.topic_id for t in _metadata(c, [a, b], create=False).topics}

        def describe(names: list[str], limit: int, cursor: dict | None):
            return c.call(DESCRIBE_TOPIC_PARTITIONS, 0, {
                "topics": [{"name": n} for n in names], "response_partition_limit": limit,
                "cursor": cursor})

        seen: list[tuple[str, int]] = []
        cursor = None
        pages = 0
        while True:
            resp = describe([b, "no-such-topic-dtp", a], 2, cursor)
            pages += 1
            for t in resp.topics:
                if t.name == "no-such-topic-dtp":
                    assert t.error_code == ErrorCode.unknown_topic_or_partition
                    continue
                assert (t.error_code, t.topic_id) == (ErrorCode.none, ids[t.name])
                seen += [(t.name, p.partition_index) for p in t.partitions]
                assert all(p.leader_id == 0 and list(p.replica_nodes) == [0]
                           for p in t.partitions)
            if resp.next_cursor is None:
                break
            cursor = {"topic_name": resp.next_cursor.topic_name,
                      "partition_index": resp.next_cursor.partition_index}
        assert seen == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]
        assert pages == 3
        # A cursor naming a topic not asked for, or a negative partition: INVALID_REQUEST.
        bad = describe([a], 10, {"topic_name": b, "partition_index": 0})
        assert [t.error_code for t in bad.topics] == [ErrorCode.invalid_request]
        bad = describe([a], 10, {"topic_name": a, "partition_index": -1})
        assert [t.error_code for t in bad.topics] == [ErrorCode.invalid_request]


def test_metadata_v10_v11_refuse_topic_ids(shared_broker, unique_topic):
    """Kafka looks topics up by id from Metadata v12 on; v10-11 carry the field but a request
    naming a topic by id fails whole with INVALID_REQUEST."""
    with WireClient(shared_broker.bootstrap) as c:
        _metadata(c, [unique_topic], create=True)
        topic_id = _metadata(c, [unique_topic], create=False).topics[0].topic_id
        for version in (10, 11):
            body = {"topics": [{"name": None, "topic_id": topic_id}],
                    "allow_auto_topic_creation": False,
                    "include_topic_authorized_operations": False}
            resp = c.call(METADATA, version, body)
            assert [t.error_code for t in resp.topics] == [ErrorCode.invalid_request]
            by_name = c.call(METADATA, version, {**body, "topics": [
                {"name": unique_topic, "topic_id": None}]})
            assert by_name.topics[0].error_code == ErrorCode.none
        assert c.call(METADATA, 12, body).topics[0].name == unique_topic


def test_a_replica_without_partition_metadata_gets_its_topic_id(broker_factory, unique_topic):
    """A log written before topic ids (or whose partition.metadata is gone) gets the file,
    with the topic's id, when the broker opens it (Kafka's Partition.checkOrSetTopicId)."""
    b = broker_factory()
    with WireClient(b.bootstrap) as c:
        _metadata(c, [unique_topic], create=True)
        topic_id = _metadata(c, [unique_topic], create=False).topics[0].topic_id
    meta = b.data_dir / f"{unique_topic}-0" / "partition.metadata"
    expected = meta.read_text()
    b.stop()
    meta.unlink()
    b.start()
    assert meta.read_text() == expected
    with WireClient(b.bootstrap) as c:
        assert _metadata(c, [unique_topic], create=False).topics[0].topic_id == topic_id
