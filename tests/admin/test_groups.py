"""`samsa group list|describe` against a Samsa broker: a classic group, a KIP-848 consumer
group and a share group (KIP-932), each joined by a real client (librdkafka), with committed
offsets, log end offsets and lag, as tables and as JSON."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition

from tests.admin.conftest import Samsa, parse_table
from tests.support.broker import BrokerProcess

GROUP_KEYS = {"group_id", "type", "protocol_type", "state", "coordinator"}
DESCRIBE_KEYS = {"group_id", "type", "state", "protocol_type", "assignor", "group_epoch",
                 "members", "offsets"}
MEMBER_KEYS = {"member_id", "client_id", "host", "member_epoch", "subscribed_topics",
               "assignment"}
OFFSET_KEYS = {"topic", "partition", "current_offset", "log_end_offset", "lag", "member_id",
               "client_id", "host"}


def wait_for(what: str, check: Callable[[], Any], poll: Callable[[], Any],
             timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        poll()
        found = check()
        if found:
            return found
    pytest.fail(f"timed out waiting for {what}")


def _groups(samsa: Samsa, b: str, *args: str) -> dict[str, dict[str, Any]]:
    return {g["group_id"]: g for g in samsa("group", "list", *args, "--format", "json",
                                            bootstrap=b).json()}


def test_groups_of_the_three_kinds(group_broker: BrokerProcess, samsa: Samsa) -> None:
    b, t = group_broker.bootstrap, f"lag-{uuid.uuid4().hex[:8]}"
    assert samsa("topic", "create", t, "-p", "2", bootstrap=b).rc == 0
    p = Producer({"bootstrap.servers": b})
    for i in range(10):
        p.produce(t, b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0

    names = {kind: f"{kind}-{uuid.uuid4().hex[:8]}" for kind in ("classic", "consumer", "share")}
    clients: list[Any] = []
    try:
        for kind in ("classic", "consumer"):
            conf = {"bootstrap.servers": b, "group.id": names[kind], "client.id": f"c-{kind}",
                    "enable.auto.commit": False, "group.protocol": kind}
            if kind == "classic":
                conf["session.timeout.ms"] = 6000
            c = Consumer(conf)
            clients.append(c)
            c.subscribe([t])
            wait_for(f"the {kind} member's assignment", lambda c=c: len(c.assignment()) == 2,
                     lambda c=c: c.poll(0.2))
            c.commit(offsets=[TopicPartition(t, 0, 3)], asynchronous=False)
        share = ShareConsumer({"bootstrap.servers": b, "group.id": names["share"],
                               "client.id": "c-share"})
        clients.append(share)
        share.subscribe([t])
        groups = wait_for("the three groups Stable", lambda: (
            g := _groups(samsa, b)) and all(g.get(n, {}).get("state") == "Stable"
                                             for n in names.values()) and g,
            lambda: share.poll(0.2))

        for kind, name in names.items():
            assert set(groups[name]) == GROUP_KEYS
            assert (groups[name]["type"], groups[name]["coordinator"]) == (kind, 0)
            assert groups[name]["protocol_type"] == ("share" if kind == "share" else "consumer")
        assert set(_groups(samsa, b, "--type", "share")) >= {names["share"]}
        assert not set(_groups(samsa, b, "--type", "share")) & {names["classic"],
                                                                names["consumer"]}
        assert names["classic"] not in _groups(samsa, b, "--state", "Empty")
        rows = {r["GROUP"]: r for r in samsa("group", "list", bootstrap=b).table()}
        assert (rows[names["consumer"]]["TYPE"], rows[names["consumer"]]["STATE"]) == (
            "consumer", "Stable")

        described = samsa("group", "describe", *names.values(), "--format", "json",
                          bootstrap=b).json()
        for (kind, name), d in zip(names.items(), described, strict=True):
            assert set(d) == DESCRIBE_KEYS and (d["group_id"], d["type"], d["state"]) == (
                name, kind, "Stable")
            (member,) = d["members"]
            assert set(member) == MEMBER_KEYS and member["client_id"] == f"c-{kind}"
            assert member["assignment"] == [{"topic": t, "partitions": [0, 1]}]
            assert [set(o) for o in d["offsets"]] == [OFFSET_KEYS] * 2
            assert [(o["topic"], o["partition"], o["log_end_offset"]) for o in d["offsets"]] == [
                (t, 0, 5), (t, 1, 5)]
            assert all(o["member_id"] == member["member_id"] for o in d["offsets"])
            if kind != "share":
                assert [(o["current_offset"], o["lag"]) for o in d["offsets"]] == [
                    (3, 2), (None, None)]
        assert described[0]["assignor"] in ("range", "roundrobin")
        assert described[1]["assignor"] == "uniform" and described[1]["members"][0][
            "member_epoch"] > 0
        assert described[2]["assignor"] == "simple"
        for o in described[2]["offsets"]:  # a share group's start offset and lag, when known
            assert o["current_offset"] is None or o["lag"] == 5 - o["current_offset"]

        out = samsa("group", "describe", names["classic"], bootstrap=b).out.splitlines()
        assert out[0].startswith(f"Group: {names['classic']}  Type: classic  State: Stable  ")
        assert out[0].endswith("Members: 1")
        table = parse_table(out[1:])
        assert [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"],
                 r["LAG"], r["CLIENT-ID"]) for r in table] == [
            (t, "0", "3", "5", "2", "c-classic"), (t, "1", "-", "5", "-", "c-classic")]
    finally:
        for c in clients:
            c.close()


def test_describe_a_group_that_does_not_exist(group_broker: BrokerProcess,
                                              samsa: Samsa) -> None:
    r = samsa("group", "describe", "no-such-group", bootstrap=group_broker.bootstrap)
    assert (r.rc, r.out) == (1, "")
    assert r.err == "samsa: GROUP_ID_NOT_FOUND: Group no-such-group not found.\n"
