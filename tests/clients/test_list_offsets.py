"""ListOffsets with every special timestamp, asked by the Java admin client, confluent-kafka's
admin client and raw requests, on a partition whose record timestamps are out of order (so the
record with the largest timestamp is neither the first nor the last one, nor last in its batch).
"""

from __future__ import annotations

import re
import time

import pytest

from tests.protocol.wire import WireClient
from tests.support.java import JAVA_SRC, compile_java, run_java_tool

from .pyclients import OP_TIMEOUT, create_topic, unique_name

pytestmark = pytest.mark.timeout(300)

LIST_OFFSETS = 2
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
# Timestamps relative to a base, in offset order; sent as two batches (3 + 2 records).
STEPS = ((10, 50, 20), (40, 30))
MAX_OFFSET, MAX_STEP = 1, 50
END_OFFSET = 5


@pytest.fixture(scope="module")
def shuffled(shared_broker) -> tuple[str, int]:
    """Topic with 2 partitions: 0 holds the out-of-order records, 1 stays empty."""
    from confluent_kafka import Producer

    topic = unique_name("list-offsets")
    create_topic("confluent-kafka", shared_broker.bootstrap, topic, 2)
    base = int(time.time() * 1000) - 60_000
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 200,
                         "acks": "all", "enable.idempotence": True})
    offsets: list[int] = []

    def acked(err, msg) -> None:  # noqa: ANN001 - confluent's callback signature
        assert err is None, err
        offsets.append(msg.offset())

    for batch in STEPS:
        for step in batch:
            producer.produce(topic, value=f"at+{step}".encode(), partition=0,
                             timestamp=base + step, on_delivery=acked)
        assert producer.flush(OP_TIMEOUT) == 0
    assert sorted(offsets) == list(range(END_OFFSET))
    return topic, base


def test_java_admin_offset_specs(shared_broker, shuffled):
    topic, base = shuffled
    classes = compile_java([JAVA_SRC / "ListOffsetSpecs.java"], classpath="kafka4")

    def specs(partition: int, timestamp: int) -> dict[str, tuple[str, ...]]:
        res = run_java_tool("ListOffsetSpecs", [shared_broker.bootstrap, topic, str(partition),
                                                str(timestamp)],
                            classpath="kafka4", extra_classpath=[classes], timeout=150).check()
        return {m[0]: tuple(m[1].split()) for m in re.findall(r"^SPEC (\S+) (.*)$",
                                                              res.stdout, re.M)}

    got = specs(0, base + 35)
    # (offset, timestamp, leader epoch); -1 where Kafka answers "unknown"
    assert got == {
        "earliest": ("0", "-1", "0"),
        "latest": (str(END_OFFSET), "-1", "0"),
        "maxTimestamp": (str(MAX_OFFSET), str(base + MAX_STEP), "0"),
        "forTimestamp": (str(MAX_OFFSET), str(base + MAX_STEP), "0"),
        "earliestLocal": ("0", "-1", "0"),
        "latestTiered": ("-1", "-1", "-1"),  # no tiered storage
    }
    empty = specs(1, base)
    assert empty["maxTimestamp"] == ("-1", "-1", "-1")
    assert empty["forTimestamp"] == ("-1", "-1", "-1")
    assert empty["latest"][:2] == ("0", "-1")


def test_confluent_admin_offset_specs(shared_broker, shuffled):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    topic, base = shuffled
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})

    def ask(partition: int, spec: OffsetSpec) -> tuple[int, int, int]:
        tp = TopicPartition(topic, partition)
        info = admin.list_offsets({tp: spec}, request_timeout=OP_TIMEOUT)[tp].result(
            timeout=OP_TIMEOUT)
        return info.offset, info.timestamp, info.leader_epoch

    assert ask(0, OffsetSpec.max_timestamp()) == (MAX_OFFSET, base + MAX_STEP, 0)
    assert ask(0, OffsetSpec.latest())[0] == END_OFFSET
    assert ask(0, OffsetSpec.earliest())[0] == 0
    assert ask(0, OffsetSpec.for_timestamp(base + 45)) == (MAX_OFFSET, base + MAX_STEP, 0)
    assert ask(0, OffsetSpec.for_timestamp(base + MAX_STEP + 1))[0] == -1
    assert ask(1, OffsetSpec.max_timestamp())[0] == -1


def _list_offsets(version: int, topic: str, timestamps: list[tuple[int, int]]) -> dict:
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": p, "current_leader_epoch": -1, "timestamp": ts}
        for p, ts in timestamps]}]}
    return body


def test_special_timestamps_need_their_request_version(shared_broker, shuffled):
    topic, base = shuffled
    with WireClient(shared_broker.bootstrap) as c:
        def codes(version: int, timestamps: list[tuple[int, int]]) -> list[tuple[int, int]]:
            resp = c.call(LIST_OFFSETS, version, _list_offsets(version, topic, timestamps))
            return [(p.error_code, p.offset) for p in resp.topics[0].partitions]

        # MAX_TIMESTAMP is ListOffsets v7+, EARLIEST_LOCAL v8+, LATEST_TIERED v9+ (KIP-734,
        # KIP-405, KIP-1005); -6 and below mean nothing here.
        assert codes(6, [(0, -3)]) == [(UNSUPPORTED_VERSION, -1)]
        assert codes(7, [(0, -3)]) == [(0, MAX_OFFSET)]
        assert codes(7, [(0, -4)]) == [(UNSUPPORTED_VERSION, -1)]
        assert codes(8, [(0, -4)]) == [(0, 0)]
        assert codes(8, [(0, -5)]) == [(UNSUPPORTED_VERSION, -1)]
        assert codes(9, [(0, -5)]) == [(0, -1)]
        assert codes(9, [(0, -6)]) == [(UNSUPPORTED_VERSION, -1)]
        assert codes(1, [(0, -1), (1, -2)]) == [(0, END_OFFSET), (0, 0)]
        # A partition asked twice in one request is refused, the others answered.
        assert codes(9, [(0, -3), (1, -1), (0, -1)]) == [
            (INVALID_REQUEST, -1), (0, 0), (INVALID_REQUEST, -1)]


def test_list_offsets_v10_v11_and_earliest_pending_upload(shared_broker, shuffled):
    """v10 adds a timeout for tiered reads (none here), v11 EARLIEST_PENDING_UPLOAD (-6,
    KIP-1023): with nothing tiered there is no such offset (-1), as Kafka answers."""
    topic, _base = shuffled
    with WireClient(shared_broker.bootstrap) as c:
        def codes(version: int, timestamps: list[tuple[int, int]]) -> list[tuple[int, int]]:
            body = {**_list_offsets(version, topic, timestamps), "timeout": 5000}
            resp = c.call(LIST_OFFSETS, version, body)
            return [(p.error_code, p.offset) for p in resp.topics[0].partitions]

        for version in (10, 11):
            assert codes(version, [(0, -1), (1, -2)]) == [(0, END_OFFSET), (0, 0)]
            assert codes(version, [(0, -5)]) == [(0, -1)]
            assert codes(version, [(0, -3)]) == [(0, MAX_OFFSET)]
        assert codes(10, [(0, -6)]) == [(UNSUPPORTED_VERSION, -1)]
        assert codes(11, [(0, -6)]) == [(0, -1)]
        assert codes(11, [(0, -7)]) == [(UNSUPPORTED_VERSION, -1)]
