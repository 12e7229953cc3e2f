"""kill -9 while the cleaner thread compacts: the restarted broker serves the newest
acknowledged value of every key, and compacts the log again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.loop_stall import enable_compaction, fill_compacted_topic

KEYS = 500


def _newest_per_key(bootstrap: str, topic: str) -> tuple[dict[bytes, int], int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    newest: dict[bytes, int] = {}
    read, last = 0, -1
    deadline = time.monotonic() + 60
    while last < high - 1 and time.monotonic() < deadline:
        for m in c.consume(5000, timeout=1):
            assert m.error() is None, m.error()
            newest[m.key()] = max(newest.get(m.key(), -1), int(m.value()[:9]))
            read, last = read + 1, m.offset()
    c.close()
    return newest, read


@pytest.mark.parametrize("stage", [".cleaned", ".swap"])
def test_kill9_during_compaction_loses_no_newest_value(broker_factory, unique_topic, stage):
    """Killed while a group's output is being written (.cleaned), or once output is swapped
    into the segment list but not yet renamed (.swap, the old files maybe still there)."""
    broker = broker_factory({"log.cleaner.backoff.ms": 1000})
    count = fill_compacted_topic(broker.bootstrap, unique_topic, mib=8, keys=KEYS)
    expected = {b"key-%06d" % k: max(range(k, count, KEYS)) for k in range(KEYS)}
    enable_compaction(broker.bootstrap, unique_topic)
    part = Path(broker.data_dir) / f"{unique_topic}-0"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # kill as soon as the stage is seen on disk
        if any(p.name.endswith(stage) for p in part.iterdir()):
            break
        time.sleep(0.005)
    else:
        raise AssertionError(f"no {stage} file seen: the cleaner never got there")
    broker.kill9()
    broker.start()
    newest, read = _newest_per_key(broker.bootstrap, unique_topic)
    assert newest == expected
    # The restarted broker compacts it again (or finishes what was swapped in).
    deadline = time.monotonic() + 90
    while read > 2 * KEYS + 5000 and time.monotonic() < deadline:
        time.sleep(1)
        newest, read = _newest_per_key(broker.bootstrap, unique_topic)
        assert newest == expected
    assert read <= 2 * KEYS + 5000, read
