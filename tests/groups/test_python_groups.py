"""Consumer groups with kafka-python, aiokafka and confluent-kafka over real sockets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.groups.clients import (
    FAST,
    Member,
    create_topic,
    poll_until,
    produce,
    seen,
    split_evenly,
)
from tests.support.broker import REPO_ROOT

CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka")


@pytest.fixture
def fast_broker(broker_factory):
    return broker_factory(settings=FAST)


def _names(client: str) -> tuple[str, str]:
    u = uuid.uuid4().hex[:8]
    return f"grp-{client}-{u}", f"topic-{client}-{u}"


@pytest.mark.parametrize("client", CLIENTS)
def test_members_split_then_take_over_after_leave(fast_broker, client):
    b = fast_broker.bootstrap
    group, topic = _names(client)
    create_topic(b, topic, 6)
    members = [Member(client, b, group, topic) for _ in range(3)]
    gone: list[Member] = []
    try:
        poll_until(members, split_evenly(members, 6))
        assert all(len(m.assignment()) == 2 for m in members)
        produce(b, topic, 6, 60)
        poll_until(members, lambda: len(seen(members)) >= 60)
        for m in members:
            m.commit()
        leaving = members.pop()
        leaving.close()
        gone.append(leaving)
        poll_until(members, split_evenly(members, 6))
        # the survivors resume from the committed offsets: nothing is read twice
        produce(b, topic, 6, 12, start=60)
        poll_until(members, lambda: len(seen(members + gone)) >= 72)
        time.sleep(0.5)
        assert sorted(seen(members + gone)) == sorted(f"v{i}" for i in range(72))
    finally:
        for m in members:
            m.close()


_CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from tests.groups.clients import Member
m = Member({client!r}, {b!r}, {group!r}, {topic!r})
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not m.assignment():
    time.sleep(0.1)
print("ASSIGNED", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("client", CLIENTS)
def test_dead_member_is_evicted_after_session_timeout(fast_broker, client):
    """A member whose process is SIGKILLed sends no LeaveGroup: the coordinator expires it
    after session.timeout.ms and the survivor takes over its partitions, reading them from
    the start (the dead member never committed) and its own from its committed offsets."""
    b = fast_broker.bootstrap
    group, topic = _names(client)
    create_topic(b, topic, 4)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(root=str(REPO_ROOT), client=client, b=b,
                                             group=group, topic=topic)],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    survivor = None
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ASSIGNED"
        survivor = Member(client, b, group, topic)
        poll_until([survivor], lambda: len(survivor.assignment()) == 2, timeout=30)
        produce(b, topic, 4, 8)  # 2 records per partition, read by both members
        poll_until([survivor], lambda: len(survivor.seen) >= 4, timeout=30)
        survivor.commit()
        os.kill(child.pid, signal.SIGKILL)  # no LeaveGroup: only the session timeout helps
        child.wait()
        started = time.monotonic()
        poll_until([survivor], lambda: len(survivor.assignment()) == 4, timeout=30)
        assert time.monotonic() - started >= 2.0  # it took the session timeout, not a leave
        poll_until([survivor], lambda: len(survivor.seen) >= 8, timeout=30)
        time.sleep(0.5)
        assert sorted(survivor.seen) == sorted(f"v{i}" for i in range(8))
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        if survivor is not None:
            survivor.close()


@pytest.mark.parametrize("how", ["restart", "kill9"])
@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_broker_restart(fast_broker, client, how):
    b = fast_broker.bootstrap
    group, topic = _names(client)
    create_topic(b, topic, 3)
    produce(b, topic, 3, 30)
    m = Member(client, b, group, topic)
    try:
        poll_until([m], lambda: len(m.seen) >= 30)
        m.commit()
    finally:
        m.close()
    assert sorted(m.seen) == sorted(f"v{i}" for i in range(30))
    if how == "restart":
        fast_broker.stop()
    else:
        fast_broker.kill9()
    fast_broker.start()
    produce(b, topic, 3, 9, start=30)
    m = Member(client, b, group, topic)
    try:
        poll_until([m], lambda: len(m.seen) >= 9, timeout=40)
        time.sleep(0.5)
    finally:
        m.close()
    assert sorted(m.seen) == sorted(f"v{i}" for i in range(30, 39))


def test_simple_assign_commit_and_admin(fast_broker):
    """assign() users commit with generation -1; the admin client lists/describes/deletes."""
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    b = fast_broker.bootstrap
    group, topic = _names("simple")
    create_topic(b, topic, 2)
    c = KafkaConsumer(bootstrap_servers=b, group_id=group, enable_auto_commit=False)
    tp = TopicPartition(topic, 1)
    c.assign([tp])
    from kafka.structs import OffsetAndMetadata

    c.commit({tp: OffsetAndMetadata(5, "meta", -1)})
    assert c.committed(tp) == 5
    c.close()
    admin = KafkaAdminClient(bootstrap_servers=b)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["group_state"] == "Empty"
        offsets = admin.list_group_offsets(group)[group]
        assert offsets[tp].offset == 5 and offsets[tp].metadata == "meta"
        admin.delete_groups([group])
        assert group not in {g["group_id"] for g in admin.list_groups()}
    finally:
        admin.close()
