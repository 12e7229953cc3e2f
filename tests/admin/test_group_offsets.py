"""`samsa group reset-offsets` and `samsa group delete` against a Samsa broker: a dry run that
commits nothing, each strategy (earliest, latest, offset, datetime, shift) kept within the log,
--execute committing as kafka-consumer-groups.sh does, an active group refused, and delete."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.admin.conftest import Samsa
from tests.admin.test_groups import wait_for
from tests.support.broker import BrokerProcess

RESET_KEYS = {"group_id", "topic", "partition", "new_offset"}
BASE_MS = 1_700_000_000_000  # the records' timestamps: BASE_MS + 1000 * i


def _fill(bootstrap: str, topic: str, group: str) -> None:
    """Two partitions of 5 records (timestamps a second apart); the group committed 2 and 3."""
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        p.produce(topic, b"v%d" % i, partition=i % 2, timestamp=BASE_MS + 1000 * (i // 2))
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 3)],
             asynchronous=False)
    c.close()


def _committed(samsa: Samsa, b: str, group: str) -> list[Any]:
    (g,) = samsa("group", "describe", group, "--format", "json", bootstrap=b).json()
    return [(o["partition"], o["current_offset"]) for o in g["offsets"]]


def _plan(samsa: Samsa, b: str, group: str, *args: str) -> list[tuple[int, int]]:
    rows = samsa("group", "reset-offsets", group, *args, "--format", "json", bootstrap=b).json()
    assert all(set(r) == RESET_KEYS and r["group_id"] == group for r in rows)
    return [(r["partition"], r["new_offset"]) for r in rows]


@pytest.fixture
def filled(shared_broker: BrokerProcess, unique_topic: str, samsa: Samsa
           ) -> tuple[str, str, str]:
    b, group = shared_broker.bootstrap, f"g-{unique_topic}"
    assert samsa("topic", "create", unique_topic, "-p", "2", bootstrap=b).rc == 0
    _fill(b, unique_topic, group)
    return b, unique_topic, group


def test_reset_offsets_plans_each_strategy(filled: tuple[str, str, str], samsa: Samsa) -> None:
    b, t, g = filled
    assert _plan(samsa, b, g, "--topic", t, "--to-earliest") == [(0, 0), (1, 0)]
    assert _plan(samsa, b, g, "--topic", t, "--to-latest", "--dry-run") == [(0, 5), (1, 5)]
    assert _plan(samsa, b, g, "--topic", f"{t}:1", "--to-offset", "4") == [(1, 4)]
    assert _plan(samsa, b, g, "--topic", t, "--to-offset", "99") == [(0, 5), (1, 5)]
    assert _plan(samsa, b, g, "--all-topics", "--shift-by", "2") == [(0, 4), (1, 5)]
    assert _plan(samsa, b, g, "--topic", t, "--shift-by", "-3") == [(0, 0), (1, 0)]
    at = datetime.datetime.fromtimestamp((BASE_MS + 2500) / 1000, tz=datetime.UTC)
    assert _plan(samsa, b, g, "--topic", t, "--to-datetime",
                 at.isoformat(timespec="milliseconds")) == [(0, 3), (1, 3)]
    assert _plan(samsa, b, g, "--topic", t, "--to-datetime",
                 "2100-01-01T00:00:00.000Z") == [(0, 5), (1, 5)]
    assert _committed(samsa, b, g) == [(0, 2), (1, 3)]  # a dry run commits nothing

    r = samsa("group", "reset-offsets", g, "--topic", t, "--to-earliest", bootstrap=b)
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert [line.split() for line in lines[1:]] == [[g, t, "0", "0"], [g, t, "1", "0"]]


def test_reset_offsets_execute(filled: tuple[str, str, str], samsa: Samsa) -> None:
    b, t, g = filled
    r = samsa("group", "reset-offsets", g, "--topic", f"{t}:0", "--to-latest", "--execute",
              bootstrap=b)
    assert r.rc == 0, r.err
    assert [line.split() for line in r.out.splitlines()[1:]] == [[g, t, "0", "5"]]
    assert _committed(samsa, b, g) == [(0, 5), (1, 3)]
    assert _plan(samsa, b, g, "--all-topics", "--shift-by", "-1", "--execute") == [
        (0, 4), (1, 2)]
    assert _committed(samsa, b, g) == [(0, 4), (1, 2)]
    fresh = f"{g}-new"  # a group that does not exist yet gets its offsets, as in Kafka
    assert _plan(samsa, b, fresh, "--topic", t, "--to-offset", "1", "--execute") == [
        (0, 1), (1, 1)]
    assert _committed(samsa, b, fresh) == [(0, 1), (1, 1)]


def test_reset_offsets_refusals(filled: tuple[str, str, str], samsa: Samsa) -> None:
    b, t, g = filled
    r = samsa("group", "reset-offsets", f"{g}-none", "--topic", t, "--shift-by", "1",
              bootstrap=b)
    assert (r.rc, r.err) == (1, f"samsa: INVALID_OFFSET: cannot shift the offset of {t}-0: "
                                "the group has committed none\n")
    r = samsa("group", "reset-offsets", g, "--topic", f"{t}:7", "--to-earliest", bootstrap=b)
    assert (r.rc, r.err) == (1, f"samsa: UNKNOWN_TOPIC_OR_PARTITION: {t} has no partition 7\n")
    c = Consumer({"bootstrap.servers": b, "group.id": g, "group.protocol": "consumer",
                  "enable.auto.commit": False})
    try:
        c.subscribe([t])
        wait_for("an assignment", lambda: len(c.assignment()) == 2, lambda: c.poll(0.2))
        r = samsa("group", "reset-offsets", g, "--topic", t, "--to-earliest", "--execute",
                  bootstrap=b)
        assert (r.rc, r.err) == (1, "samsa: NON_EMPTY_GROUP: Assignments can only be reset if "
                                    f"the group '{g}' is inactive, but the current state is "
                                    "Stable.\n")
        r = samsa("group", "delete", g, bootstrap=b)
        assert (r.rc, r.err) == (1, f"samsa: NON_EMPTY_GROUP: The group {g} is not empty.\n")
    finally:
        c.close()
    assert _committed(samsa, b, g) == [(0, 2), (1, 3)]


def test_delete_groups(filled: tuple[str, str, str], samsa: Samsa) -> None:
    b, t, g = filled
    other = f"{g}-2"
    assert _plan(samsa, b, other, "--topic", t, "--to-earliest", "--execute") == [(0, 0), (1, 0)]
    r = samsa("group", "delete", g, bootstrap=b)
    assert (r.rc, r.out) == (0, f"Deleted group {g}.\n")
    assert samsa("group", "delete", other, "--format", "json", bootstrap=b).json() == [
        {"group_id": other, "deleted": True}]
    deadline = time.monotonic() + 10
    while samsa("group", "describe", g, bootstrap=b).rc == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    r = samsa("group", "delete", g, bootstrap=b)
    assert (r.rc, r.err) == (1, f"samsa: GROUP_ID_NOT_FOUND: Group {g} not found.\n")
