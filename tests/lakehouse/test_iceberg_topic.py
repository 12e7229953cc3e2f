"""An Iceberg topic's table holds exactly the records of the committed transactions, each once,
through kill -9 of the broker while it streams and commits."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .helpers import (
    create_iceberg_topic,
    produce_transactions,
    read_committed_keys,
    start_broker,
    stream_through_kills,
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


def test_exactly_once_through_two_kill9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    try:
        create_iceberg_topic(broker.bootstrap, "events", 3)
        committed, aborted = stream_through_kills(broker, "events")
        consumed = read_committed_keys(broker.bootstrap, "events", 3)
        keys = wait_for_table(data, "events", len(consumed))
        _assert_each_once(keys)
        assert sorted(keys) == sorted(consumed)
        assert committed <= set(keys), f"missing {sorted(committed - set(keys))[:5]}"
        assert not aborted & set(keys), f"aborted in the table: {sorted(aborted & set(keys))[:5]}"
    finally:
        broker.close()
