"""`samsa group reset-offsets` of a share group (KIP-932) against a Samsa broker, as
kafka-share-groups.sh --reset-offsets does it: the plan from the share-partitions' start
offsets (DescribeShareGroupOffsets), applied by AlterShareGroupOffsets with --execute, refused
while the group has members."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import Producer, ShareConsumer

from tests.admin.conftest import Samsa
from tests.admin.test_groups import wait_for
from tests.support.broker import BrokerProcess


def _starts(samsa: Samsa, b: str, g: str) -> list[tuple[int, Any]]:
    (desc,) = samsa("group", "describe", g, "--format", "json", bootstrap=b).json()
    assert desc["type"] == "share"
    return [(o["partition"], o["current_offset"]) for o in desc["offsets"]]


def test_reset_offsets_of_a_share_group(group_broker: BrokerProcess, samsa: Samsa) -> None:
    b, t, g = group_broker.bootstrap, f"t-{uuid.uuid4().hex[:8]}", f"s-{uuid.uuid4().hex[:8]}"
    assert samsa("topic", "create", t, "-p", "2", bootstrap=b).rc == 0
    p = Producer({"bootstrap.servers": b})
    for i in range(10):
        p.produce(t, b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    share = ShareConsumer({"bootstrap.servers": b, "group.id": g})
    share.subscribe([t])
    try:
        wait_for("the share group's start offsets", lambda: _starts(samsa, b, g) == [
            (0, 5), (1, 5)], lambda: share.poll(0.5))  # read (and acknowledged) to the end
        r = samsa("group", "reset-offsets", g, "--topic", t, "--to-earliest", "--execute",
                  bootstrap=b)
        assert (r.rc, r.err) == (1, f"samsa: NON_EMPTY_GROUP: Assignments can only be reset "
                                    f"if the group '{g}' is inactive, but the current state "
                                    "is Stable.\n")
    finally:
        share.close()
    wait_for("the share group empty", lambda: samsa(
        "group", "describe", g, "--format", "json", bootstrap=b).json()[0]["state"] == "Empty",
        lambda: None)

    plan = samsa("group", "reset-offsets", g, "--topic", t, "--to-earliest", "--format",
                 "json", bootstrap=b).json()
    assert [(r["partition"], r["new_offset"]) for r in plan] == [(0, 0), (1, 0)]
    assert _starts(samsa, b, g) == [(0, 5), (1, 5)]  # a dry run alters nothing
    rows = samsa("group", "reset-offsets", g, "--all-topics", "--shift-by", "-2", "--execute",
                 bootstrap=b).table()
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in rows] == [("0", "3"), ("1", "3")]
    assert _starts(samsa, b, g) == [(0, 3), (1, 3)]
    assert samsa("group", "reset-offsets", g, "--topic", f"{t}:1", "--to-earliest",
                 "--execute", bootstrap=b).rc == 0
    assert _starts(samsa, b, g) == [(0, 3), (1, 0)]

    again = ShareConsumer({"bootstrap.servers": b, "group.id": g})  # reads from the new starts
    again.subscribe([t])
    seen: set[bytes] = set()
    try:
        wait_for("the records after the new start offsets", lambda: len(seen) == 7,
                 lambda: seen.update(m.value() for m in again.poll(0.5) or ()
                                     if m.error() is None))
    finally:
        again.close()
    assert seen == {b"v%d" % i for i in (1, 3, 5, 7, 9, 6, 8)}

