"""Online upgrade of a classic group with members to a consumer group (KIP-848,
`group.consumer.migration.policy`): a rolling restart of librdkafka members from
group.protocol=classic to consumer while they consume and commit."""

from __future__ import annotations

import re
import time
import uuid
from collections import Counter

import pytest

from tests.groups.clients import FAST, create_topic, produce

SETTINGS = dict(FAST, **{"group.consumer.heartbeat.interval.ms": 1000})


def _consumer(bootstrap: str, group: str, protocol: str, instance: str | None = None):
    from confluent_kafka import Consumer

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    if instance is not None:
        conf["group.instance.id"] = instance
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
    phases: list[range] = []

    def restart(old: str | None, new: str, protocol: str) -> None:
        """Close member `old`, start `new`; records keep coming until it read some, then
        every record is read."""
        nonlocal produced
        if old is not None:
            members.pop(old).close()
        members[new] = _consumer(b, group, protocol)
        members[new].subscribe([topic])
        start, deadline = produced, time.monotonic() + 40
        while not got.get(new) and time.monotonic() < deadline:
            produce(b, topic, 4, 4, start=produced)
            produced += 4
            _read(members, got, produced, timeout=1)
        _read(members, got, produced)
        assert sum(map(len, got.values())) == produced, got
        phases.append(range(start, produced))

    try:
        restart(None, "a", "classic")
        restart(None, "c", "classic")
        # a rolling upgrade: a, then c, restarted with the consumer protocol; c keeps
        # consuming as a classic member of the consumer group meanwhile
        restart("a", "a2", "consumer")
        assert "converted to a consumer group" in broker.log_text()
        restart("c", "c2", "consumer")
        # and back: c2, then a2 (the last consumer-protocol member: the group is classic again)
        restart("c2", "c3", "classic")
        restart("a2", "a3", "classic")
        assert "converted to a classic group" in broker.log_text()
    finally:
        for x in members.values():
            x.close()
    values = [v for vs in got.values() for v in vs]
    # nothing read twice after its commit, nothing skipped
    assert Counter(values) == Counter(f"v{i}" for i in range(produced)), got

    def readers(phase: int) -> set[str]:
        return {name for name, vs in got.items() if any(int(v[1:]) in phases[phase] for v in vs)}

    # each member of a mixed group read its share: the classic member in the consumer group
    # (c with a2, c3 with a2) and the members of the classic group again (a3 with c3)
    assert {"a2", "c"} <= readers(2) and {"a2", "c3"} <= readers(4), got
    assert {"a3", "c3"} <= readers(5), got


CONSOLE = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS_CMD = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


@pytest.mark.timeout(280)
def test_java_rolling_upgrade_and_downgrade(broker_factory, tmp_path):
    """Java 4.x KafkaConsumers (ConsoleConsumer, auto-commit) restarted one at a time from
    group.protocol=classic to consumer and back while records keep coming."""
    from tests.support.java import JavaProcess, run_java_tool

    broker = broker_factory(settings=SETTINGS)
    b = broker.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"jmig-{u}", f"jmig-group-{u}"
    create_topic(b, topic, 4)
    running: dict[str, JavaProcess] = {}
    stopped: list[JavaProcess] = []
    produced = 0

    def values(*members: JavaProcess) -> list[str]:
        return [line for p in (members or [*stopped, *running.values()])
                for line in p.log_text().splitlines() if re.fullmatch(r"v\d+", line)]

    def restart(old: str | None, new: str, protocol: str) -> None:
        nonlocal produced
        if old is not None:
            p = running.pop(old)
            assert p.stop() is not None, p.log_tail()  # closed (LeaveGroup), not killed
            stopped.append(p)
        props = ["group.protocol=" + protocol, "auto.offset.reset=earliest"]
        if protocol == "classic":
            props += ["session.timeout.ms=6000", "heartbeat.interval.ms=500"]
        running[new] = JavaProcess(CONSOLE, [
            "--bootstrap-server", b, "--topic", topic, "--group", group,
            *[x for prop in props for x in ("--command-property", prop)]],
            log_path=tmp_path / f"{new}.log", name=new).start()
        # records keep coming until the new member has joined and read some
        deadline = time.monotonic() + 60
        while not values(running[new]) and time.monotonic() < deadline:
            produce(b, topic, 4, 4, start=produced)
            produced += 4
            time.sleep(0.5)
        while len(values()) < produced and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(values()) == produced, (values(), [p.log_tail() for p in running.values()])

    try:
        restart(None, "a", "classic")
        restart(None, "c", "classic")
        restart("a", "a2", "consumer")
        # mixed: the consumer group lists the classic member and the consumer-protocol one
        res = run_java_tool(GROUPS_CMD, ["--bootstrap-server", b, "--describe", "--group",
                                         group, "--members"])
        rows = [line.split() for line in res.stdout.splitlines() if line.startswith(group)]
        assert res.returncode == 0 and len(rows) == 2, res.describe()
        restart("c", "c2", "consumer")
        restart("c2", "c3", "classic")
        restart("a2", "a3", "classic")
    finally:
        for p in running.values():
            p.stop()
    log = broker.log_text()
    assert "converted to a consumer group" in log and "converted to a classic group" in log
    # nothing read twice after its commit, nothing skipped
    assert Counter(values()) == Counter(f"v{i}" for i in range(produced))


def test_classic_member_survives_a_coordinator_restart_in_a_consumer_group(broker_factory):
    """The classic member's protocols and session timeout are in its
    ConsumerGroupMemberMetadata record (Kafka's ClassicMemberMetadata): reloaded, it is
    still a classic member of the consumer group."""
    from tests.groups.test_consumer_protocol_wire import CG_DESCRIBE, FIND, JOIN, SUB, _hb
    from tests.protocol.wire import WireClient
    from tests.support.java import run_java_tool

    heartbeat, sync = 12, 14
    broker = broker_factory(settings=FAST)
    group = f"mig-wire-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as w:
        assert w.call(19, 5, {"topics": [{"name": "t", "num_partitions": 4,
                                          "replication_factor": 1, "assignments": [],
                                          "configs": []}],
                              "timeout_ms": 10_000, "validate_only": False}
                      ).topics[0].error_code == 0
        assert w.call(FIND, 3, {"key": group, "key_type": 0}).error_code == 0
        j = w.call(JOIN, 3, {"group_id": group, "session_timeout": 30_000,
                             "rebalance_timeout": 5000, "member_id": "",
                             "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": SUB}]})
        assert j.error_code == 0, j
        classic_id, generation = j.member_id, j.generation_id
        s = w.call(sync, 3, {"group_id": group, "generation_id": generation,
                             "member_id": classic_id, "assignments": [
                                 {"member_id": classic_id, "assignment": b""}]})
        assert s.error_code == 0, s
        assert _hb(w, group, uuid.uuid4().hex, 0).error_code == 0  # converts the group
    broker.stop()
    # Kafka's own decoder reads the classic member's metadata from the record
    segments = [str(p) for p in sorted(broker.data_dir.glob("__consumer_offsets-*/*.log"))
                if p.stat().st_size]
    res = run_java_tool("org.apache.kafka.tools.DumpLogSegments",
                        ["--offsets-decoder", "--print-data-log", "--files", *segments])
    res.check()
    members = [line for line in res.stdout.splitlines()
               if f'"memberId":"{classic_id}"' in line and "classicMemberMetadata" in line]
    assert members and '"classicMemberMetadata":{"sessionTimeoutMs":30000,' \
        '"supportedProtocols":[{"name":"range"' in members[-1], res.describe()
    broker.start()
    with WireClient(broker.bootstrap) as w:
        for _ in range(100):
            d = w.call(CG_DESCRIBE, 1, {"group_ids": [group],
                                        "include_authorized_operations": False}).groups[0]
            if d.error_code != 14:  # COORDINATOR_LOAD_IN_PROGRESS
                break
            time.sleep(0.1)
        assert d.error_code == 0, d
        types = {m.member_id: m.member_type for m in d.members}
        assert types.pop(classic_id) == 0 and list(types.values()) == [1], d
        # the classic member goes on with its generation: asked to rejoin, not unknown
        r = w.call(heartbeat, 3, {"group_id": group, "generation_id": generation,
                                  "member_id": classic_id, "group_instance_id": None})
        assert r.error_code == 27, r  # REBALANCE_IN_PROGRESS


def test_static_classic_member_rejoins_a_consumer_group_under_a_new_id(broker_factory):
    from tests.groups.test_consumer_protocol_wire import CG_DESCRIBE, FIND, JOIN, SUB, _hb
    from tests.protocol.wire import WireClient

    broker = broker_factory(settings=FAST)
    group = f"mig-static-{uuid.uuid4().hex[:8]}"

    def join(w, member_id=""):
        return w.call(JOIN, 5, {"group_id": group, "session_timeout": 30_000,
                                "rebalance_timeout": 5000, "member_id": member_id,
                                "group_instance_id": "i1", "protocol_type": "consumer",
                                "protocols": [{"name": "range", "metadata": SUB}]})

    with WireClient(broker.bootstrap) as w:
        assert w.call(19, 5, {"topics": [{"name": "t", "num_partitions": 4,
                                          "replication_factor": 1, "assignments": [],
                                          "configs": []}],
                              "timeout_ms": 10_000, "validate_only": False}
                      ).topics[0].error_code == 0
        assert w.call(FIND, 3, {"key": group, "key_type": 0}).error_code == 0
        assert _hb(w, group, uuid.uuid4().hex, 0).error_code == 0  # a consumer group
        first = join(w)
        assert first.error_code == 0, first
        again = join(w)  # the same instance restarted: a new member id, the old one replaced
        assert again.error_code == 0 and again.member_id != first.member_id, again
        d = w.call(CG_DESCRIBE, 1, {"group_ids": [group],
                                    "include_authorized_operations": False}).groups[0]
        assert len(d.members) == 2 and {(m.instance_id, m.member_type) for m in d.members} == {
            (None, 1), ("i1", 0)}, d
        assert again.member_id in {m.member_id for m in d.members}, d


def test_downgrade_is_written_as_a_classic_group(broker_factory):
    """The last consumer-protocol member leaves: the classic group (its members and
    assignments) is written at once, and survives a coordinator restart."""
    from tests.groups.test_consumer_protocol_wire import FIND, JOIN, SUB, _hb
    from tests.protocol.wire import WireClient

    heartbeat, sync, describe = 12, 14, 15
    broker = broker_factory(settings=FAST)
    group = f"mig-down-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as w:
        assert w.call(19, 5, {"topics": [{"name": "t", "num_partitions": 4,
                                          "replication_factor": 1, "assignments": [],
                                          "configs": []}],
                              "timeout_ms": 10_000, "validate_only": False}
                      ).topics[0].error_code == 0
        assert w.call(FIND, 3, {"key": group, "key_type": 0}).error_code == 0
        j = w.call(JOIN, 3, {"group_id": group, "session_timeout": 30_000,
                             "rebalance_timeout": 5000, "member_id": "",
                             "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": SUB}]})
        classic_id = j.member_id
        assert w.call(sync, 3, {"group_id": group, "generation_id": j.generation_id,
                                "member_id": classic_id, "assignments": [
                                    {"member_id": classic_id, "assignment": b""}]}
                      ).error_code == 0
        member = uuid.uuid4().hex
        r = _hb(w, group, member, 0)
        assert r.error_code == 0, r
        assert _hb(w, group, member, -1, topics=None, owned=None).error_code == 0  # leaves
        # a classic group again, rebalancing, at the consumer group's epoch (Kafka's
        # ClassicGroup.fromConsumerGroup): 2, the consumer member's join bumped it, which
        # the classic member never caught up with; asked to rejoin either way
        r = w.call(heartbeat, 3, {"group_id": group, "generation_id": j.generation_id,
                                  "member_id": classic_id, "group_instance_id": None})
        assert r.error_code == 22, r  # ILLEGAL_GENERATION
        r = w.call(heartbeat, 3, {"group_id": group, "generation_id": j.generation_id + 1,
                                  "member_id": classic_id, "group_instance_id": None})
        assert r.error_code == 27, r  # REBALANCE_IN_PROGRESS
    # the leave wrote only the conversion (no removal of the member, no epoch bump), in
    # Kafka's order (convertToClassicGroup): both members' assignments, target assignments
    # and subscriptions, then the group's records deleted, then the classic group
    records = [(t, d) for t, _, d in _group_records(broker.bootstrap, group)]
    assert records[-10:] == [(8, True), (8, True), (7, True), (7, True), (6, True),
                             (5, True), (5, True), (4, True), (3, True), (2, False)], records
    assert records[-11] != (3, False), records
    broker.stop()
    broker.start()
    with WireClient(broker.bootstrap) as w:
        for _ in range(100):
            d = w.call(describe, 5, {"groups": [group],
                                     "include_authorized_operations": False}).groups[0]
            if d.error_code != 14:  # COORDINATOR_LOAD_IN_PROGRESS
                break
            time.sleep(0.1)
        assert (d.error_code, d.protocol_type, d.protocol_data) == (0, "consumer", "range"), d
        assert [m.member_id for m in d.members] == [classic_id], d


@pytest.mark.parametrize("policy", ["disabled", "downgrade", "upgrade"])
def test_migration_policy(broker_factory, policy):
    from tests.groups.test_consumer_protocol_wire import CG_DESCRIBE, FIND, JOIN, SUB, _hb
    from tests.protocol.wire import WireClient

    broker = broker_factory(settings=dict(FAST, **{"group.consumer.migration.policy": policy}))
    group = f"mig-policy-{uuid.uuid4().hex[:8]}"
    with WireClient(broker.bootstrap) as w:
        assert w.call(19, 5, {"topics": [{"name": "t", "num_partitions": 4,
                                          "replication_factor": 1, "assignments": [],
                                          "configs": []}],
                              "timeout_ms": 10_000, "validate_only": False}
                      ).topics[0].error_code == 0
        assert w.call(FIND, 3, {"key": group, "key_type": 0}).error_code == 0
        j = w.call(JOIN, 3, {"group_id": group, "session_timeout": 30_000,
                             "rebalance_timeout": 5000, "member_id": "",
                             "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": SUB}]})
        assert j.error_code == 0, j
        member = uuid.uuid4().hex
        r = _hb(w, group, member, 0)
        if policy != "upgrade":
            assert r.error_code == 69, r  # GROUP_ID_NOT_FOUND: not upgraded
            return
        assert r.error_code == 0, r
        assert _hb(w, group, member, -1, topics=None, owned=None).error_code == 0
        # no downgrade: a consumer group with its classic member
        d = w.call(CG_DESCRIBE, 1, {"group_ids": [group],
                                    "include_authorized_operations": False}).groups[0]
        assert d.error_code == 0 and [(m.member_id, m.member_type) for m in d.members] == [
            (j.member_id, 0)], d


def _group_records(bootstrap: str, group: str) -> list[tuple[int, str | None, bool]]:
    """The records of `group` in its __consumer_offsets partition, in order: (record type,
    member id, tombstone)."""
    from kafka import KafkaConsumer, TopicPartition

    from samsa.coordinator.group.consumer.records import decode_consumer_key
    from samsa.coordinator.group.records import GroupKey, decode_key
    from samsa.coordinator.internal_log import partition_for

    tp = TopicPartition("__consumer_offsets",
                        partition_for(group, FAST["offsets.topic.num.partitions"]))
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        end = c.end_offsets([tp])[tp]
        out = []
        while c.position(tp) < end:
            for r in c.poll(1000).get(tp, []):
                k = decode_consumer_key(r.key)
                if k is not None and k.group == group:
                    out.append((k.type, k.member, r.value is None))
                elif k is None and isinstance(g := decode_key(r.key), GroupKey) and \
                        g.group == group:
                    out.append((2, None, r.value is None))
        return out
    finally:
        c.close()


def test_static_classic_member_replacing_the_last_consumer_member_downgrades(broker_factory):
    """Kafka's classicGroupJoinToConsumerGroup step 4: a classic static member joining with
    the instance id of the group's last consumer-protocol member replaces it and turns the
    group classic at once (stable, no rebalance), the joining member holding the replaced
    one's assignment; written as a classic group, as a coordinator restart shows."""
    from samsa.coordinator.group.records import decode_consumer_assignment
    from tests.groups.test_consumer_protocol_wire import (
        CG_DESCRIBE,
        FIND,
        JOIN,
        SUB,
        _hb,
        _owned,
        _parts,
    )
    from tests.protocol.wire import WireClient

    sync, list_groups, describe = 14, 16, 15
    broker = broker_factory(settings=FAST)
    group = f"mig-replace-{uuid.uuid4().hex[:8]}"

    def join(w, member_id: str, instance: str | None):
        return w.call(JOIN, 5, {"group_id": group, "session_timeout": 30_000,
                                "rebalance_timeout": 5000, "member_id": member_id,
                                "group_instance_id": instance, "protocol_type": "consumer",
                                "protocols": [{"name": "range", "metadata": SUB}]})

    def group_type(w) -> str:
        r = w.call(list_groups, 5, {"states_filter": [], "types_filter": []})
        return {g.group_id: g.group_type for g in r.groups}[group]

    def described(w):
        for _ in range(100):
            d = w.call(describe, 5, {"groups": [group],
                                     "include_authorized_operations": False}).groups[0]
            if d.error_code != 14:  # COORDINATOR_LOAD_IN_PROGRESS
                return d
            time.sleep(0.1)
        raise AssertionError("group never loaded")

    with WireClient(broker.bootstrap) as w:
        assert w.call(19, 5, {"topics": [{"name": "t", "num_partitions": 4,
                                          "replication_factor": 1, "assignments": [],
                                          "configs": []}],
                              "timeout_ms": 10_000, "validate_only": False}
                      ).topics[0].error_code == 0
        assert w.call(FIND, 3, {"key": group, "key_type": 0}).error_code == 0
        s = uuid.uuid4().hex
        r = _hb(w, group, s, 0, instance="s1")  # the static consumer-protocol member
        assert r.error_code == 0 and len(_parts(r)) == 4, r
        c = join(w, "", None)
        assert c.error_code == 79, c  # MEMBER_ID_REQUIRED
        c = join(w, c.member_id, None)  # a classic member of the consumer group
        assert c.error_code == 0, c
        # s gives c its share, keeping two partitions
        owned = _owned(r)
        for _ in range(10):
            r = _hb(w, group, s, r.member_epoch, topics=None, owned=owned)
            assert r.error_code == 0, r
            owned = _owned(r) if r.assignment else owned
            if r.member_epoch == c.generation_id:
                break
        kept = sorted(p for _, ps in owned for p in ps)
        assert r.member_epoch == c.generation_id and len(kept) == 2, r
        assert _hb(w, group, s, -2, topics=None, owned=None, instance="s1").error_code == 0
        assert group_type(w) == "consumer"
        # the instance comes back with the classic protocol
        j = join(w, "", "s1")
        assert j.error_code == 0 and j.member_id not in (s, c.member_id), j
        assert group_type(w) == "classic"
        d = described(w)
        assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (
            0, "Stable", "consumer", "range"), d
        assert {(m.member_id, m.group_instance_id) for m in d.members} == {
            (c.member_id, None), (j.member_id, "s1")}, d
        cg = w.call(CG_DESCRIBE, 1, {"group_ids": [group],
                                     "include_authorized_operations": False}).groups[0]
        assert cg.error_code == 69, cg  # GROUP_ID_NOT_FOUND: no consumer group any more
        # stable: the joining member syncs at once and gets the partitions s held
        a = w.call(sync, 3, {"group_id": group, "generation_id": j.generation_id,
                             "member_id": j.member_id, "group_instance_id": "s1",
                             "assignments": []})
        assert a.error_code == 0 and decode_consumer_assignment(a.assignment) == {
            "t": kept}, a
    # what the JoinGroup wrote, in Kafka's order: the replacement (replaceMember, then the
    # member's own changes), then the conversion (convertToClassicGroup) with the joining
    # member's tombstones in place of the replaced one's, the classic group last
    records = _group_records(broker.bootstrap, group)
    tail = records[-18:]
    assert tail[:8] == [(8, s, True), (7, s, True), (5, s, True),
                        (5, j.member_id, False), (7, j.member_id, False),
                        (8, j.member_id, False), (5, j.member_id, False),
                        (8, j.member_id, False)], records
    members = {c.member_id, j.member_id}
    assert [(t, d) for t, _, d in tail[8:]] == [
        (8, True), (8, True), (7, True), (7, True), (6, True), (5, True), (5, True),
        (4, True), (3, True), (2, False)], records
    assert {m for _, m, _ in tail[8:10]} == {m for _, m, _ in tail[10:12]} == \
        {m for _, m, _ in tail[13:15]} == members, records
    broker.stop()
    broker.start()
    with WireClient(broker.bootstrap) as w:
        d = described(w)
        assert (d.error_code, d.protocol_type, d.protocol_data) == (0, "consumer", "range"), d
        assert {m.member_id for m in d.members} == {c.member_id, j.member_id}, d
        assert group_type(w) == "classic"


@pytest.mark.timeout(240)
def test_java_static_member_replaced_by_a_classic_one(broker_factory, tmp_path):
    """A Java 4.x static consumer-protocol member (the group's last) is stopped and a
    librdkafka classic member with its group.instance.id takes its place: the group is
    classic again at once (well within the stopped member's session), and consumption goes
    on, nothing read twice after its commit, nothing skipped."""
    from tests.groups.test_consumer_protocol_wire import CG_DESCRIBE
    from tests.protocol.wire import WireClient
    from tests.support.java import JavaProcess

    broker = broker_factory(settings=SETTINGS)
    b = broker.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"jrep-{u}", f"jrep-group-{u}"
    create_topic(b, topic, 4)
    produced = 0
    got: dict[str, list[str]] = {}
    members: dict = {"c": _consumer(b, group, "classic")}
    members["c"].subscribe([topic])

    def java_values() -> list[str]:
        return [line for line in java.log_text().splitlines() if re.fullmatch(r"v\d+", line)]

    def feed_until(done, more: bool = True, timeout: float = 60) -> None:
        """Poll the Python members (producing more records first if `more`) until
        `done()`."""
        nonlocal produced
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            if more:
                produce(b, topic, 4, 4, start=produced)
                produced += 4
            _read(members, got, produced - len(java_values()), timeout=1)
        assert done(), (got, java.log_tail())

    def all_read() -> bool:
        return sum(map(len, got.values())) + len(java_values()) == produced

    def group_type(w) -> str:
        r = w.call(16, 5, {"states_filter": [], "types_filter": []})
        return {g.group_id: g.group_type for g in r.groups}.get(group, "")

    java = JavaProcess(CONSOLE, [
        "--bootstrap-server", b, "--topic", topic, "--group", group,
        *[x for prop in ["group.protocol=consumer", "group.instance.id=i1",
                         "auto.offset.reset=earliest"] for x in ("--command-property", prop)]],
        log_path=tmp_path / "java.log", name="java")
    try:
        feed_until(lambda: bool(got.get("c")))
        java.start()  # upgrades the group; c goes on as a classic member of it
        feed_until(lambda: bool(java_values()))
        feed_until(all_read, more=False)
        with WireClient(b) as w:
            d = w.call(CG_DESCRIBE, 1, {"group_ids": [group],
                                        "include_authorized_operations": False}).groups[0]
            assert ("i1", 1) in {(m.instance_id, m.member_type) for m in d.members}, d
            assert java.stop() is not None, java.log_tail()  # closed, not killed
            assert group_type(w) == "consumer"
            members["s"] = _consumer(b, group, "classic", instance="i1")
            members["s"].subscribe([topic])
            start = time.monotonic()
            while group_type(w) != "classic" and time.monotonic() - start < 15:
                _read(members, got, produced, timeout=0.5)
            assert group_type(w) == "classic", broker.log_text()[-3000:]
        feed_until(lambda: bool(got.get("s")))
        feed_until(all_read, more=False)
    finally:
        java.stop()
        for c in members.values():
            c.close()
    assert "replaces" in broker.log_text()
    values = [v for vs in got.values() for v in vs] + java_values()
    # nothing read twice after its commit, nothing skipped
    assert Counter(values) == Counter(f"v{i}" for i in range(produced)), got


def _wire_group(broker, group: str, *topics: str):
    """A wire client to `broker`, `topics` (4 partitions each) created and `group`'s
    coordinator found."""
    from tests.groups.test_consumer_protocol_wire import FIND
    from tests.protocol.wire import WireClient

    w = WireClient(broker.bootstrap)
    for topic in topics:
        assert w.call(19, 5, {"topics": [{"name": topic, "num_partitions": 4,
                                          "replication_factor": 1, "assignments": [],
                                          "configs": []}],
                              "timeout_ms": 10_000, "validate_only": False}
                      ).topics[0].error_code == 0
    assert w.call(FIND, 3, {"key": group, "key_type": 0}).error_code == 0
    return w


def _classic_join(w, group: str, instance: str | None, topic: str = "t"):
    """A classic member's JoinGroup (v5) subscribing to `topic`, with the member id the
    coordinator asks for if dynamic."""
    from tests.groups.test_consumer_protocol_wire import JOIN

    sub = b"\x00\x00\x00\x00\x00\x01" + len(topic).to_bytes(2, "big") + topic.encode() + \
        b"\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0
    args = {"group_id": group, "session_timeout": 30_000, "rebalance_timeout": 5000,
            "member_id": "", "group_instance_id": instance, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": sub}]}
    j = w.call(JOIN, 5, args)
    if j.error_code == 79:  # MEMBER_ID_REQUIRED
        j = w.call(JOIN, 5, dict(args, member_id=j.member_id))
    return j


def _group_state(w, group: str) -> tuple[str, str]:
    """(type, state) of `group` as ListGroups v5 lists it."""
    r = w.call(16, 5, {"states_filter": [], "types_filter": []})
    return {g.group_id: (g.group_type, g.group_state) for g in r.groups}[group]


def test_static_replacement_with_another_subscription_downgrades_and_rebalances(
        broker_factory):
    """The classic static member replacing the last consumer-protocol member subscribes to
    other topics: the group turns classic and rebalances (Kafka's convertToClassicGroup with
    hasSubscriptionChanged)."""
    from tests.groups.test_consumer_protocol_wire import _hb

    broker = broker_factory(settings=FAST)
    group = f"mig-resub-{uuid.uuid4().hex[:8]}"
    with _wire_group(broker, group, "t", "u") as w:
        assert _hb(w, group, uuid.uuid4().hex, 0, instance="s1").error_code == 0
        c = _classic_join(w, group, None)
        assert c.error_code == 0, c
        s = _hb(w, group, uuid.uuid4().hex, 0, instance="s2")  # another consumer member
        assert s.error_code == 0, s
        assert _hb(w, group, s.member_id, -1, topics=None, owned=None,
                   instance="s2").error_code == 0  # leaves for good: no downgrade yet
        assert _group_state(w, group)[0] == "consumer"
        j = _classic_join(w, group, "s1", topic="u")
        assert j.error_code == 0, j
        assert _group_state(w, group) == ("classic", "PreparingRebalance")
        r = w.call(12, 3, {"group_id": group, "generation_id": j.generation_id,
                           "member_id": j.member_id, "group_instance_id": "s1"})
        assert r.error_code in (22, 27), r  # asked to rejoin


def test_classic_member_leaving_a_consumer_group_of_classic_members_downgrades(
        broker_factory):
    """A consumer group too big for a classic group (group.max.size 1) keeps its two
    classic members when its consumer-protocol member leaves; once one of them leaves too
    (LeaveGroup), the group is classic again (Kafka's validateOnlineDowngradeWithFencedMembers
    counts the members left, whatever the protocol of the leaving one)."""
    from tests.groups.test_consumer_protocol_wire import _hb

    broker = broker_factory(settings=dict(FAST, **{"group.max.size": 1}))
    group = f"mig-leave-{uuid.uuid4().hex[:8]}"
    with _wire_group(broker, group, "t") as w:
        member = uuid.uuid4().hex
        assert _hb(w, group, member, 0).error_code == 0
        c1, c2 = _classic_join(w, group, None), _classic_join(w, group, None)
        assert c1.error_code == 0 and c2.error_code == 0, (c1, c2)
        assert _hb(w, group, member, -1, topics=None, owned=None).error_code == 0
        assert _group_state(w, group)[0] == "consumer"  # two classic members: too many
        r = w.call(13, 3, {"group_id": group, "members": [
            {"member_id": c1.member_id, "group_instance_id": None}]})
        assert r.error_code == 0 and r.members[0].error_code == 0, r
        assert _group_state(w, group) == ("classic", "PreparingRebalance")
        d = w.call(15, 5, {"groups": [group], "include_authorized_operations": False}).groups[0]
        assert [m.member_id for m in d.members] == [c2.member_id], d
