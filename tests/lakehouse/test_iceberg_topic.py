"""An Iceberg topic's table holds exactly the records of the committed transactions, each once,
through kill -9 of the broker mid-stream."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .helpers import (
    create_iceberg_topic,
    produce_transactions,
    read_committed_keys,
    start_broker,
    wait_for_table,
)


def _assert_exactly(keys: list[bytes], expected: set[bytes]) -> None:
    twice = [k for k, n in Counter(keys).items() if n > 1]
    assert not twice, f"{len(twice)} records written twice, e.g. {twice[:3]}"
    assert set(keys) == expected, (f"missing {sorted(expected - set(keys))[:5]}, "
                                   f"extra {sorted(set(keys) - expected)[:5]}")


def test_committed_transactions_only_each_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    try:
        create_iceberg_topic(broker.bootstrap, "orders", 2)
        expected = produce_transactions(broker.bootstrap, "orders", 0, 9)
        keys = wait_for_table(data, "orders", len(expected))
        _assert_exactly(keys, expected)
        assert sorted(read_committed_keys(broker.bootstrap, "orders", 2)) == sorted(keys)
    finally:
        broker.close()


def test_exactly_once_through_two_kill9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    broker = start_broker(data)
    try:
        create_iceberg_topic(broker.bootstrap, "events", 3)
        expected: set[bytes] = set()
        for phase in range(3):
            expected |= produce_transactions(broker.bootstrap, "events", phase * 30, 30)
            if phase < 2:  # while the broker is still committing what just became stable
                broker.kill9()
                broker.start()
        keys = wait_for_table(data, "events", len(expected))
        _assert_exactly(keys, expected)
        assert sorted(read_committed_keys(broker.bootstrap, "events", 3)) == sorted(keys)
    finally:
        broker.close()
