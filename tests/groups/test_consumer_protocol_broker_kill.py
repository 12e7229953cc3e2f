"""The group coordinator killed with SIGKILL under the consumer protocol (KIP-848): a Java 4.x
KafkaConsumer and a confluent-kafka consumer with `group.protocol=consumer` share a
6-partition topic on one broker while records keep coming, each committing what it read after
every poll; the broker is killed -9 mid-consumption and started again. The restarted
coordinator reloads the group from __consumer_offsets (members, epochs, assignments, offsets):
both members heartbeat on as before, keep their partitions (no member fenced, nothing
revoked), and at the end every record was read, none read again after its offset was
committed."""

from __future__ import annotations

import sys
import time
import uuid

import pytest

from tests.groups.clients import create_topic
from tests.groups.test_consumer_protocol_kill import (
    PARTITIONS,
    SETTINGS,
    Feeder,
    Member,
    read_history,
    wait_for,
)
from tests.protocol.wire import WireClient
from tests.support.java import JAVA_SRC, JVM_ARGS, classpath_dir, compile_java, java_executable

CONSUMER_GROUP_DESCRIBE = 69


def group_epoch(bootstrap: str, group: str) -> tuple[int, dict[str, int]]:
    """(group epoch, member id -> member epoch) from ConsumerGroupDescribe."""
    with WireClient(bootstrap) as w:
        r = w.call(CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [group],
                                                "include_authorized_operations": False})
    g = r.groups[0]
    assert g.error_code == 0, g
    return g.group_epoch, {m.member_id: m.member_epoch for m in g.members}


@pytest.mark.timeout(240)
def test_consumer_protocol_members_survive_coordinator_kill9(broker_factory, tmp_path):
    broker = broker_factory(settings=SETTINGS)
    b = broker.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"k848bkill-{u}", f"k848bkill-group-{u}"
    create_topic(b, topic, PARTITIONS)
    classes = compile_java([JAVA_SRC / "GroupReader.java"], classpath="kafka4")
    java = [java_executable(), *JVM_ARGS, "-cp", f"{classes}:{classpath_dir('kafka4')}/*",
            "GroupReader", b, topic, group]
    members = [Member("java", java, tmp_path),
               Member("librdkafka", [sys.executable, "-m", "tests.groups.group_reader",
                                     b, topic, group], tmp_path)]
    feeder = Feeder(b, topic)
    feeder.start()
    for m in members:
        m.start()
    try:
        wait_for(lambda: all(len(m.assignment()) == PARTITIONS // 2 for m in members)
                 and all(any("committed" in e for e in m.events()) for m in members),
                 90, "two members with three partitions each, each having committed", members)
        before = group_epoch(b, group)
        owned = [m.assignment() for m in members]
        broker.kill9()
        t_kill = time.time() * 1000
        time.sleep(2)
        broker.start()
        t_up = time.time() * 1000
        # Both members commit again on the restarted coordinator.
        wait_for(lambda: all(any("committed" in e and e["t"] > t_up for e in m.events())
                             for m in members), 60, "commits after the restart", members)
        time.sleep(3)
        after = group_epoch(b, group)
        feeder.halt.set()
        feeder.join(60)

        def read_values() -> set[str]:
            return {v for m in members for e in m.events() for _, _, v in e.get("read", [])}

        wait_for(lambda: set(feeder.acked) <= read_values(), 60, "every record read", members)
    finally:
        feeder.halt.set()
        for m in members:
            m.kill9()

    # The group came back as it was: same epoch, same members at the same epochs, and no
    # member saw its partitions revoked or lost.
    assert after == before, (before, after)
    for m, mine in zip(members, owned, strict=True):
        changes = [e["assigned"] for e in m.events() if "assigned" in e and e["t"] >= t_kill]
        assert all(set(a) == mine for a in changes), (m.name, mine, changes)

    reads, _, read_by, problems = read_history(members, feeder)
    twice = {k: n for k, n in read_by.items() if len(n) > 1}
    print(f"group epoch {before[0]} before the kill, {after[0]} after; {len(reads)} reads of "
          f"{len(feeder.acked)} records, {len(twice)} read twice")
    assert not problems, problems[:10]
    assert set(feeder.acked) == {v for *_, v in reads}
