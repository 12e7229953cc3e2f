"""An Iceberg topic's table holds exactly the records of the committed transactions, each once,
through kill -9 of the broker while it streams and commits."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from .helpers import (
    TxnStream,
    create_iceberg_topic,
    produce_transactions,
    read_committed_keys,
    start_broker,
    table_keys,
    wait_for_table,
)


def _assert_each_once(keys: list[bytes]) -> None:
    twice = [k for k, n in Counter(keys).items() if n > 1]
    assert not twice, f"{len(twice)} records written twice, e.g. {twice[:3]}"


def test_committed_transactions_only_each_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    try:
        create_iceberg_topic(broker.bootstrap, "orders", 2)
        stream = produce_transactions(broker.bootstrap, "orders", 0, 9)
        keys = wait_for_table(data, "orders", len(stream.committed))
        _assert_each_once(keys)
        assert set(keys) == stream.committed
        assert sorted(read_committed_keys(broker.bootstrap, "orders", 2)) == sorted(keys)
    finally:
        broker.close()


def _wait_for_growth(data: Path, topic: str, above: int, timeout: float = 60) -> int:
    """Until a commit of this broker's life added rows to the table."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = len(table_keys(data, topic))
        if n > above:
            return n
        time.sleep(0.1)
    raise AssertionError(f"the table of {topic} stayed at {above} rows")


def test_exactly_once_through_two_kill9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    streams: list[TxnStream] = []
    try:
        create_iceberg_topic(broker.bootstrap, "events", 3)
        rows = 0
        for life in range(3):
            stream = TxnStream(broker.bootstrap, "events", life * 1000).start()
            streams.append(stream)
            rows = _wait_for_growth(data, "events", rows)
            if life < 2:  # while the producer streams and the broker commits
                time.sleep(0.3)
                broker.kill9()
                broker.start()
                stream.stop()  # it finishes, or learns it failed, against the new life
        streams[-1].stop()
        assert streams[-1].error is None, streams[-1].error
        committed = set().union(*(s.committed for s in streams))
        aborted = set().union(*(s.aborted for s in streams))
        consumed = read_committed_keys(broker.bootstrap, "events", 3)
        keys = wait_for_table(data, "events", len(consumed))
        _assert_each_once(keys)
        assert sorted(keys) == sorted(consumed)
        assert committed <= set(keys), f"missing {sorted(committed - set(keys))[:5]}"
        assert not aborted & set(keys), f"aborted in the table: {sorted(aborted & set(keys))[:5]}"
    finally:
        for s in streams:
            s.stop()
        broker.close()
