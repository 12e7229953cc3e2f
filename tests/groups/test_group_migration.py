"""Online upgrade of a classic group with members to a consumer group (KIP-848,
`group.consumer.migration.policy`): a rolling restart of librdkafka members from
group.protocol=classic to consumer while they consume and commit."""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest

from tests.groups.clients import FAST, create_topic, produce

SETTINGS = dict(FAST, **{"group.consumer.heartbeat.interval.ms": 1000})


def _consumer(bootstrap: str, group: str, protocol: str):
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if protocol == "classic":
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    return Consumer(conf)


def _read(consumers: dict, got: dict[str, list[str]], total: int, timeout: float = 40) -> None:
    """Poll every member, committing each record, until `total` records were read."""
    deadline = time.monotonic() + timeout
    while sum(map(len, got.values())) < total and time.monotonic() < deadline:
        for name, c in consumers.items():
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got.setdefault(name, []).append(m.value().decode())
                c.commit(message=m, asynchronous=False)


@pytest.mark.timeout(180)
def test_rolling_upgrade_and_downgrade_while_consuming(broker_factory):
    broker = broker_factory(settings=SETTINGS)
    b = broker.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"mig-{u}", f"mig-group-{u}"
    create_topic(b, topic, 4)
    members: dict = {}
    got: dict[str, list[str]] = {}
    produced = 0

    def restart(old: str | None, new: str, protocol: str) -> None:
        """Close member `old`, start `new`, produce 20 more records and read them all."""
        nonlocal produced
        if old is not None:
            members.pop(old).close()
        members[new] = _consumer(b, group, protocol)
        members[new].subscribe([topic])
        produce(b, topic, 4, 20, start=produced)
        produced += 20
        _read(members, got, produced)
        assert sum(map(len, got.values())) == produced, got

    try:
        restart(None, "a", "classic")
        restart(None, "c", "classic")
        _read(members, got, produced)
        # a rolling upgrade: a, then c, restarted with the consumer protocol; c keeps
        # consuming as a classic member of the consumer group meanwhile
        restart("a", "a2", "consumer")
        assert "converted to a consumer group" in broker.log_text()
        restart("c", "c2", "consumer")
        # and back: c2, then a2 (the last consumer-protocol member: the group is classic again)
        restart("c2", "c3", "classic")
        restart("a2", "a3", "classic")
        assert "converted to a classic group" in broker.log_text()
        restart(None, "d", "classic")
    finally:
        for x in members.values():
            x.close()
    values = [v for vs in got.values() for v in vs]
    # nothing read twice after its commit, nothing skipped
    assert Counter(values) == Counter(f"v{i}" for i in range(produced)), got

    def readers(phase: int) -> set[str]:
        return {name for name, vs in got.items()
                if any(phase * 20 <= int(v[1:]) < phase * 20 + 20 for v in vs)}

    # each member of a mixed group read its share: the classic member in the consumer group
    # (c with a2, c3 with a2) and the members of the classic group again (a3 with c3)
    assert {"a2", "c"} <= readers(2) and {"a2", "c3"} <= readers(4), got
    assert {"a3", "c3"} <= readers(5), got
