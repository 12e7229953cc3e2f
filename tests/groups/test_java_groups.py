"""Kafka's Java tools against the group coordinator: ConsoleConsumer --group and
ConsumerGroupCommand (kafka-consumer-groups: list, describe with lag, reset offsets, delete)."""

from __future__ import annotations

import uuid

import pytest

from tests.groups.clients import FAST, create_topic, produce
from tests.support.java import run_java_tool

TOOLS = "org.apache.kafka.tools"
GROUPS_CMD = f"{TOOLS}.consumer.group.ConsumerGroupCommand"


def _ok(res):
    assert res.returncode == 0 and not res.timed_out, res.describe()
    return res


@pytest.fixture
def fast_broker(broker_factory):
    return broker_factory(settings=FAST)


def _consume(b: str, topic: str, group: str, n: int):
    return _ok(run_java_tool(f"{TOOLS}.consumer.ConsoleConsumer", [
        "--bootstrap-server", b, "--topic", topic, "--group", group, "--from-beginning",
        "--max-messages", str(n), "--timeout-ms", "20000"], timeout=90))


def test_console_consumer_group_and_consumer_groups_command(fast_broker):
    b = fast_broker.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"jt-{u}", f"jg-{u}"
    create_topic(b, topic, 3)
    produce(b, topic, 3, 30)
    cons = _consume(b, topic, group, 20)
    assert len(cons.stdout.split()) == 20
    listed = _ok(run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--list"]))
    assert group in listed.stdout.split()
    desc = _ok(run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--describe",
                                          "--group", group]))
    rows = [line.split() for line in desc.stdout.splitlines() if topic in line]
    assert len(rows) == 3, desc.stdout
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    assert sum(int(r[3]) for r in rows) == 20 and sum(int(r[5]) for r in rows) == 10
    assert all(int(r[4]) == 10 for r in rows)
    reset = _ok(run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--reset-offsets",
                                           "--group", group, "--topic", topic,
                                           "--to-earliest", "--execute"]))
    assert topic in reset.stdout
    # the group resumes from the reset offsets: all 30 again
    cons = _consume(b, topic, group, 30)
    assert sorted(cons.stdout.split()) == sorted(f"v{i}" for i in range(30))
    _ok(run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--delete", "--group", group]))
    listed = _ok(run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--list"]))
    assert group not in listed.stdout.split()
