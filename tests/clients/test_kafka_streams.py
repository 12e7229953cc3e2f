"""Kafka Streams 4.x (exactly_once_v2) against one Samsa broker.

tests/java/src/StreamsCount.java re-keys its input, repartitions it through an internal
topic, counts per key in a changelog-backed store and writes each new count to an output
topic; tests/support/streams_app.py describes the input and the check: the read_committed
output of every key is exactly 1, 2, ..., EVENTS. Half the input is there before the
application starts, half arrives while it runs. Streams creates its internal topics itself
(replication factor -1: the broker's default) and purges the repartition topic with
DeleteRecords once its records are committed.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.support.streams_app import (
    KEYS,
    CountReader,
    compile_streams_app,
    describe_bad,
    feed,
    streams_app,
)

pytestmark = pytest.mark.timeout(300)

EVENTS = 60  # per key: KEYS * EVENTS input records
IN_PARTITIONS, OUT_PARTITIONS = 4, 3


def _create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(t, n, 1) for t, n in topics], operation_timeout=10)
    for f in fs.values():
        f.result(timeout=20)


def _topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(timeout=20)
    return {k: e.value for k, e in entries.items()}


def _low_watermarks(bootstrap: str, topic: str, partitions: int) -> list[int]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{uuid.uuid4().hex[:6]}"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0]
                for p in range(partitions)]
    finally:
        c.close()


def test_streams_exactly_once_count(broker, tmp_path):
    suffix = uuid.uuid4().hex[:6]
    app_id, src, dst = f"count-{suffix}", f"events-{suffix}", f"counts-{suffix}"
    _create_topics(broker.bootstrap, (src, IN_PARTITIONS), (dst, OUT_PARTITIONS))
    classes = compile_streams_app()
    started = time.monotonic()
    half = EVENTS // 2
    feed(broker.bootstrap, src, range(half))
    app = streams_app(classes, broker.bootstrap, app_id, src, dst, tmp_path / "state")
    app.start()
    reader = CountReader(broker.bootstrap, dst, OUT_PARTITIONS)
    try:
        feed(broker.bootstrap, src, range(half, EVENTS))

        def alive() -> str | None:
            return None if app.is_running() else f"the application exited ({app.proc.returncode})"

        try:
            reader.wait_complete(EVENTS, 120, alive)
        except AssertionError as exc:
            pytest.fail(f"{exc}\n{app.log_tail()}", pytrace=False)
        bad = reader.bad_sequences(EVENTS)
        assert not bad, f"{describe_bad(bad, EVENTS)}\n{app.log_tail()}"
        assert not reader.errors, reader.errors

        # The internal topics, as Streams asked for them.
        changelog, repartition = f"{app_id}-counts-changelog", f"{app_id}-by-key-repartition"
        assert _topic_configs(broker.bootstrap, changelog)["cleanup.policy"] == "compact"
        rep = _topic_configs(broker.bootstrap, repartition)
        assert rep["cleanup.policy"] == "delete" and rep["retention.ms"] == "-1", rep
        # Committed repartition records are deleted (DeleteRecords) every purge interval.
        deadline = time.monotonic() + 40
        while sum(lows := _low_watermarks(broker.bootstrap, repartition, IN_PARTITIONS)) == 0:
            assert time.monotonic() < deadline, f"repartition topic never purged: {lows}"
            time.sleep(1)
    finally:
        reader.close()
        rc = app.stop()
    log = app.log_text()
    assert rc is not None, f"the application hung on SIGTERM\n{app.log_tail()}"
    assert "CLOSED" in log, app.log_tail()
    assert "UNCAUGHT" not in log, app.log_tail()
    assert re.search(r"STATE REBALANCING->RUNNING", log), app.log_tail()
    print(f"{KEYS * EVENTS} records counted exactly once in {time.monotonic() - started:.1f} s")
