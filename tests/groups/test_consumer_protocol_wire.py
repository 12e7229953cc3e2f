"""Consumer-protocol (KIP-848) groups at the wire level: ConsumerGroupHeartbeat's epochs and
errors, the offset-commit member checks, classic and consumer groups side by side, and a
group that survives a broker restart (tests/protocol/wire.py)."""

from __future__ import annotations

import uuid

import pytest

from tests.groups.clients import FAST
from tests.protocol.wire import WireClient

OFFSET_COMMIT, FIND, JOIN, DESCRIBE, LIST, API_VERSIONS = 8, 10, 11, 15, 16, 18
HEARTBEAT, CG_DESCRIBE = 68, 69
NONE, UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL, INVALID_REQUEST = 0, 25, 23, 42
GROUP_ID_NOT_FOUND, FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR = 69, 110, 112
STALE_MEMBER_EPOCH = 113
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0


@pytest.fixture
def wire(broker_factory):
    b = broker_factory(settings=FAST)
    with WireClient(b.bootstrap) as w:
        r = w.call(19, 5, {"topics": [{"name": "t", "num_partitions": 4,
                                       "replication_factor": 1, "assignments": [],
                                       "configs": []}],
                           "timeout_ms": 10_000, "validate_only": False})
        assert r.topics[0].error_code == 0, r
        r = w.call(FIND, 3, {"key": "any", "key_type": 0})  # creates __consumer_offsets
        assert r.error_code == 0, r
        yield w, b


def _hb(w, group, member, epoch, topics=("t",), owned=(), assignor=None, instance=None,
        version=1, rebalance=30_000):
    return w.call(HEARTBEAT, version, {
        "group_id": group, "member_id": member, "member_epoch": epoch,
        "instance_id": instance, "rack_id": None,
        "rebalance_timeout": rebalance if epoch == 0 else -1,
        "subscribed_topic_names": list(topics) if topics is not None else None,
        "subscribed_topic_regex": None, "server_assignor": assignor,
        "topic_partitions": None if owned is None else [
            {"topic_id": tid, "partitions": list(ps)} for tid, ps in owned]})


def _parts(r):
    return {p for tp in r.assignment.topic_partitions for p in tp.partitions}


def _owned(r):
    return [(tp.topic_id, tp.partitions) for tp in r.assignment.topic_partitions]


def test_heartbeat_epochs_and_errors(wire):
    w, _ = wire
    versions = {k.api_key: k for k in w.call(API_VERSIONS, 3, {
        "client_software_name": "t", "client_software_version": "1"}).api_keys}
    assert (versions[HEARTBEAT].min_version, versions[HEARTBEAT].max_version) == (0, 1)
    g = f"cg-{uuid.uuid4().hex[:8]}"
    m1 = uuid.uuid4().hex
    r = _hb(w, g, m1, 0)
    assert r.error_code == NONE and r.member_epoch == 1, r
    assert _parts(r) == {0, 1, 2, 3}
    assert r.heartbeat_interval.total_seconds() * 1000 == 5000
    # a second member: the group epoch moves to 2; m1 must revoke two partitions first
    m2 = uuid.uuid4().hex
    r2 = _hb(w, g, m2, 0)
    assert r2.error_code == NONE and r2.member_epoch == 2 and _parts(r2) == set(), r2
    r = _hb(w, g, m1, 1, topics=None, owned=_owned(r))
    assert r.error_code == NONE and r.member_epoch == 1 and len(_parts(r)) == 2, r
    kept = _parts(r)
    # m1 acknowledges the revocation: epoch 2; m2 then gets the released partitions
    r = _hb(w, g, m1, 1, topics=None, owned=_owned(r))
    assert r.member_epoch == 2 and r.assignment is None, r
    r2 = _hb(w, g, m2, 2, topics=None, owned=[])
    assert r2.member_epoch == 2 and _parts(r2) == {0, 1, 2, 3} - kept, r2
    # epochs ahead or behind (not the previous one with a subset) are fenced
    assert _hb(w, g, m1, 5, topics=None).error_code == FENCED_MEMBER_EPOCH
    assert _hb(w, g, m2, 0 + 1, topics=None, owned=[(uuid.UUID(int=7), [0])]).error_code \
        == FENCED_MEMBER_EPOCH
    assert _hb(w, g, "nobody", 2, topics=None).error_code == UNKNOWN_MEMBER_ID
    assert _hb(w, g, m1, 0, assignor="fancy").error_code == UNSUPPORTED_ASSIGNOR
    assert _hb(w, g, "", 0).error_code == INVALID_REQUEST  # v1: the client names itself
    assert _hb(w, g, m1, 0, owned=None).error_code == INVALID_REQUEST
    # offsets: the member epoch is checked (OffsetCommit v9); an older one (KIP-1251, Kafka
    # 4.3) only for partitions the member was given at or before it: m1 sent epoch 1 before
    # it heard of epoch 2, for a partition it kept, as a client does in a revocation
    def commit(member, epoch, partitions=(0,)):
        r = w.call(OFFSET_COMMIT, 9, {
            "group_id": g, "generation_id_or_member_epoch": epoch, "member_id": member,
            "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                {"partition_index": p, "committed_offset": 0, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p in partitions]}]})
        codes = {p.error_code for p in r.topics[0].partitions}
        assert len(codes) == 1, r  # one answer for the whole request
        return codes.pop()
    given_away = min({0, 1, 2, 3} - kept)
    assert commit(m1, 1, sorted(kept)) == NONE
    assert commit(m1, 1, [given_away]) == STALE_MEMBER_EPOCH
    assert commit(m1, 1, [min(kept), given_away]) == STALE_MEMBER_EPOCH
    assert commit(m1, 0, sorted(kept)) == STALE_MEMBER_EPOCH  # older than the assignment
    assert commit(m1, 3, sorted(kept)) == STALE_MEMBER_EPOCH  # ahead of the member
    assert commit(m2, 1, [given_away]) == STALE_MEMBER_EPOCH  # m2 got it at epoch 2
    assert commit("nobody", 2) == UNKNOWN_MEMBER_ID
    assert commit(m1, 2) == NONE
    d = w.call(47, 0, {"group_id": g, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0}]}]})
    assert d.topics[0].partitions[0].error_code == 86  # GROUP_SUBSCRIBED_TO_TOPIC
    # a classic member of another protocol type may not join it
    j = w.call(JOIN, 5, {"group_id": g, "session_timeout": 6000, "rebalance_timeout": 5000,
                         "member_id": "", "group_instance_id": None, "protocol_type": "connect",
                         "protocols": [{"name": "range", "metadata": SUB}]})
    assert j.error_code == INCONSISTENT_GROUP_PROTOCOL
    d = w.call(CG_DESCRIBE, 1, {"group_ids": [g], "include_authorized_operations": False})
    grp = d.groups[0]
    assert (grp.error_code, grp.group_state, grp.group_epoch, grp.assignment_epoch,
            grp.assignor_name) == (NONE, "Stable", 2, 2, "uniform"), grp
    assert sorted(m.member_id for m in grp.members) == sorted([m1, m2])
    # leaving: epoch -1, the group epoch moves on
    r = _hb(w, g, m2, -1, topics=None)
    assert (r.error_code, r.member_epoch) == (NONE, -1)
    r = _hb(w, g, m1, 2, topics=None, owned=[(tid, sorted(kept)) for tid, _ in _owned(r2)])
    assert r.member_epoch == 3 and _parts(r) == {0, 1, 2, 3}, r


def test_classic_and_consumer_groups_coexist(wire):
    w, _ = wire
    classic, consumer = (f"{k}-{uuid.uuid4().hex[:8]}" for k in ("classic", "consumer"))
    # a classic group of another protocol type than "consumer" is not upgraded (Kafka's
    # validateOnlineUpgrade)
    j = w.call(JOIN, 3, {"group_id": classic, "session_timeout": 6000, "rebalance_timeout": 5000,
                         "member_id": "", "protocol_type": "connect",
                         "protocols": [{"name": "range", "metadata": SUB}]})
    assert j.error_code == NONE, j
    assert _hb(w, classic, uuid.uuid4().hex, 0).error_code == GROUP_ID_NOT_FOUND
    assert _hb(w, consumer, uuid.uuid4().hex, 0).error_code == NONE
    listed = w.call(LIST, 5, {"states_filter": [], "types_filter": []}).groups
    types = {g.group_id: (g.group_type, g.protocol_type) for g in listed}
    assert types[classic] == ("classic", "connect")
    assert types[consumer] == ("consumer", "consumer")
    only = w.call(LIST, 5, {"states_filter": [], "types_filter": ["consumer"]}).groups
    assert [g.group_id for g in only] == [consumer]
    # DescribeGroups (classic) does not describe a consumer group; ConsumerGroupDescribe
    # does not describe a classic one
    d = w.call(DESCRIBE, 5, {"groups": [consumer], "include_authorized_operations": False})
    assert d.groups[0].group_state == "Dead"
    d = w.call(CG_DESCRIBE, 0, {"group_ids": [classic], "include_authorized_operations": False})
    assert d.groups[0].error_code == GROUP_ID_NOT_FOUND


def test_restart_keeps_the_group(wire):
    w, b = wire
    g = f"cg-{uuid.uuid4().hex[:8]}"
    m1, m2 = sorted(uuid.uuid4().hex for _ in range(2))  # range: by member id
    r1 = _hb(w, g, m1, 0, assignor="range")
    r2 = _hb(w, g, m2, 0, assignor="range")
    r1 = _hb(w, g, m1, 1, topics=None, owned=_owned(r1))  # revoke half
    r1b = _hb(w, g, m1, 1, topics=None, owned=_owned(r1))
    r2 = _hb(w, g, m2, 2, topics=None, owned=[])
    assert (r1b.member_epoch, r2.member_epoch) == (2, 2)
    assert (_parts(r1), _parts(r2)) == ({0, 1}, {2, 3})
    w.close()
    b.stop()
    b.start()
    with WireClient(b.bootstrap) as w2:
        for _ in range(100):
            d = w2.call(CG_DESCRIBE, 1, {"group_ids": [g],
                                         "include_authorized_operations": False}).groups[0]
            if d.error_code != 14:  # COORDINATOR_LOAD_IN_PROGRESS
                break
        assert (d.error_code, d.group_state, d.group_epoch, d.assignment_epoch,
                d.assignor_name) == (NONE, "Stable", 2, 2, "range"), d
        parts = {m.member_id: {p for tp in m.assignment.topic_partitions for p in tp.partitions}
                 for m in d.members}
        assert parts == {m1: {0, 1}, m2: {2, 3}}
        # the members go on at their epochs, nothing moves
        r = _hb(w2, g, m1, 2, topics=None, owned=_owned(r1))
        assert (r.error_code, r.member_epoch, r.assignment) == (NONE, 2, None), r
        assert _hb(w2, g, m2, 1, topics=None).error_code == FENCED_MEMBER_EPOCH


def test_group_version_gates_the_consumer_protocol(wire):
    w, _ = wire

    def advertised():
        return {k.api_key for k in w.call(API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"}).api_keys}

    assert {HEARTBEAT, CG_DESCRIBE} <= advertised()
    r = w.call(57, 1, {"feature_updates": [
        {"feature": "group.version", "max_version_level": 0, "upgrade_type": 2}],
        "validate_only": False})
    assert r.error_code == NONE, r
    assert not {HEARTBEAT, CG_DESCRIBE} & advertised()
    assert _hb(w, "gated", uuid.uuid4().hex, 0).error_code == 35  # UNSUPPORTED_VERSION
    r = w.call(57, 1, {"feature_updates": [
        {"feature": "group.version", "max_version_level": 1, "upgrade_type": 1}],
        "validate_only": False})
    assert r.error_code == NONE and {HEARTBEAT, CG_DESCRIBE} <= advertised()
    assert _hb(w, "gated", uuid.uuid4().hex, 0).error_code == NONE


def test_new_topics_and_partitions_bump_the_group_epoch(wire):
    w, _ = wire
    g = f"cg-{uuid.uuid4().hex[:8]}"
    later = f"later-{uuid.uuid4().hex[:8]}"
    m = uuid.uuid4().hex
    r = _hb(w, g, m, 0, topics=("t", later))
    assert (r.error_code, r.member_epoch, len(_parts(r))) == (NONE, 1, 4), r
    r = w.call(19, 5, {"topics": [{"name": later, "num_partitions": 2, "replication_factor": 1,
                                   "assignments": [], "configs": []}],
                       "timeout_ms": 10_000, "validate_only": False})
    assert r.topics[0].error_code == NONE
    r = _hb(w, g, m, 1, topics=None, owned=[])
    assert r.member_epoch == 2 and len(r.assignment.topic_partitions) == 2, r
    r = w.call(37, 3, {"topics": [{"name": later, "count": 3, "assignments": None}],
                       "timeout_ms": 10_000, "validate_only": False})
    assert r.results[0].error_code == NONE, r
    r = _hb(w, g, m, 2, topics=None, owned=[])
    assert r.member_epoch == 3 and sum(len(tp.partitions) for tp in
                                       r.assignment.topic_partitions) == 7, r


def test_regex_subscription_and_static_members(wire):
    w, _ = wire
    g = f"cg-{uuid.uuid4().hex[:8]}"
    m = uuid.uuid4().hex
    r = w.call(HEARTBEAT, 1, {
        "group_id": g, "member_id": m, "member_epoch": 0, "instance_id": "i1",
        "rebalance_timeout": 30_000, "subscribed_topic_names": None,
        "subscribed_topic_regex": "[t]", "server_assignor": None, "topic_partitions": []})
    assert (r.error_code, _parts(r)) == (NONE, {0, 1, 2, 3}), r
    bad = w.call(HEARTBEAT, 1, {
        "group_id": g, "member_id": uuid.uuid4().hex, "member_epoch": 0,
        "rebalance_timeout": 30_000, "subscribed_topic_names": None,
        "subscribed_topic_regex": "[", "server_assignor": None, "topic_partitions": []})
    assert bad.error_code == 128  # INVALID_REGULAR_EXPRESSION
    # another process with the same instance id while the first one is in: refused
    other = uuid.uuid4().hex
    assert _hb(w, g, other, 0, instance="i1").error_code == 111  # UNRELEASED_INSTANCE_ID
    assert _hb(w, g, other, 1, instance="i1", topics=None).error_code == 82  # FENCED_INSTANCE_ID
    # the static member leaves for a moment (-2) and comes back under a new member id: it
    # gets its partitions back at once
    r = _hb(w, g, m, -2, instance="i1", topics=None)
    assert (r.error_code, r.member_epoch) == (NONE, -2), r
    r = _hb(w, g, other, 0, instance="i1", topics=None)
    assert r.error_code == INVALID_REQUEST  # rejoining needs the subscription
    r = w.call(HEARTBEAT, 1, {
        "group_id": g, "member_id": other, "member_epoch": 0, "instance_id": "i1",
        "rebalance_timeout": 30_000, "subscribed_topic_names": None,
        "subscribed_topic_regex": "[t]", "server_assignor": None, "topic_partitions": []})
    assert (r.error_code, r.member_epoch, _parts(r)) == (NONE, 1, {0, 1, 2, 3}), r
    d = w.call(CG_DESCRIBE, 1, {"group_ids": [g], "include_authorized_operations": False})
    assert [(x.member_id, x.instance_id) for x in d.groups[0].members] == [(other, "i1")]


def test_group_max_size_and_an_emptied_group_turning_classic(broker_factory):
    b = broker_factory(settings=dict(FAST, **{"group.consumer.max.size": 1}))
    with WireClient(b.bootstrap) as w:
        w.call(19, 5, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1,
                                   "assignments": [], "configs": []}],
                       "timeout_ms": 10_000, "validate_only": False})
        assert w.call(FIND, 3, {"key": "any", "key_type": 0}).error_code == 0
        g, m = f"cg-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
        assert _hb(w, g, m, 0).error_code == NONE
        assert _hb(w, g, uuid.uuid4().hex, 0).error_code == 81  # GROUP_MAX_SIZE_REACHED
        assert _hb(w, g, m, -1, topics=None).error_code == NONE
        # empty now: a classic member may take the group id over
        j = w.call(JOIN, 3, {"group_id": g, "session_timeout": 6000, "rebalance_timeout": 5000,
                             "member_id": "", "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": SUB}]})
        assert j.error_code == NONE, j
        listed = w.call(LIST, 5, {"states_filter": [], "types_filter": []}).groups
        assert [(x.group_id, x.group_type) for x in listed] == [(g, "classic")]


def test_group_config_overrides_the_heartbeat_interval(wire):
    w, _ = wire
    g = f"cg-{uuid.uuid4().hex[:8]}"
    r = w.call(44, 1, {"resources": [{"resource_type": 32, "resource_name": g, "configs": [
        {"name": "consumer.heartbeat.interval.ms", "config_operation": 0, "value": "6000"}]}],
        "validate_only": False})
    assert r.responses[0].error_code == NONE, r
    r = _hb(w, g, uuid.uuid4().hex, 0)
    assert r.error_code == NONE and r.heartbeat_interval.total_seconds() == 6, r


def test_session_and_rebalance_timeouts_fence_members(broker_factory):
    import time

    # m1's 1 s rebalance timeout must end well before m2's session: were m2 gone first, m1
    # would keep its partitions and never be fenced (3 s leaves 2 s for a slow machine)
    b = broker_factory(settings=dict(FAST, **{"group.consumer.session.timeout.ms": 3000,
                                              "group.consumer.min.session.timeout.ms": 1000}))
    with WireClient(b.bootstrap) as w:
        w.call(19, 5, {"topics": [{"name": "t", "num_partitions": 4, "replication_factor": 1,
                                   "assignments": [], "configs": []}],
                       "timeout_ms": 10_000, "validate_only": False})
        assert w.call(FIND, 3, {"key": "any", "key_type": 0}).error_code == 0
        g = f"cg-{uuid.uuid4().hex[:8]}"
        m1, m2 = uuid.uuid4().hex, uuid.uuid4().hex
        r1 = _hb(w, g, m1, 0, rebalance=1000)
        _hb(w, g, m2, 0)
        # m1 is asked to revoke two partitions and never does: fenced after its rebalance
        # timeout (1 s), while it keeps heartbeating
        r1 = _hb(w, g, m1, 1, topics=None, owned=_owned(r1))
        assert r1.member_epoch == 1 and len(_parts(r1)) == 2
        deadline = time.monotonic() + 10
        while True:
            r = _hb(w, g, m1, 1, topics=None, owned=[(t, [0, 1, 2, 3]) for t, _ in _owned(r1)])
            if r.error_code != NONE:
                break
            assert time.monotonic() < deadline, r
            time.sleep(0.2)
        assert r.error_code == UNKNOWN_MEMBER_ID
        # m2 (silent since it joined) is gone after its 3 s session: the group is empty
        deadline = time.monotonic() + 10
        while True:
            d = w.call(CG_DESCRIBE, 1, {"group_ids": [g],
                                        "include_authorized_operations": False}).groups[0]
            if not d.members:
                break
            assert time.monotonic() < deadline, d
            time.sleep(0.2)
        assert (d.group_state, d.group_epoch) == ("Empty", 4), d
