"""Group coordinator error paths and placement with a raw client (tests/protocol/wire.py)."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from samsa.coordinator.internal_log import partition_for
from tests.groups.clients import FAST
from tests.protocol.wire import WireClient

FIND, JOIN, HB, LEAVE, SYNC, DESCRIBE, LIST = 10, 11, 12, 13, 14, 15, 16
COMMIT, FETCH, DELETE_GROUPS, OFFSET_DELETE = 8, 9, 42, 47
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0 ["t"]


def _create_t(w):
    """Topic "t", whose offsets the tests commit (Kafka refuses offsets of unknown topics)."""
    r = w.call(19, 5, {"topics": [{"name": "t", "num_partitions": 3, "replication_factor": 1,
                                   "assignments": [], "configs": []}],
                       "timeout_ms": 10_000, "validate_only": False})
    assert r.topics[0].error_code == 0, r


@pytest.fixture
def wire(broker_factory):
    b = broker_factory(settings=dict(FAST, **{"group.min.session.timeout.ms": 1000}))
    with WireClient(b.bootstrap) as w:
        _create_t(w)
        yield w, b


def _find(w, group):
    return w.call(FIND, 3, {"key": group, "key_type": 0})


def _join(w, group, member="", version=5, protocols=(("range", SUB),), ptype="consumer",
          session=6000, instance=None):
    return w.call(JOIN, version, {
        "group_id": group, "session_timeout": session, "rebalance_timeout": 5000,
        "member_id": member, "group_instance_id": instance, "protocol_type": ptype,
        "protocols": [{"name": n, "metadata": m} for n, m in protocols]})


def _join_stable(w, group, **kw):
    r = _join(w, group, **kw)
    assert r.error_code == 79  # MEMBER_ID_REQUIRED
    r = _join(w, group, member=r.member_id, **kw)
    assert r.error_code == 0, r
    s = w.call(SYNC, 3, {"group_id": group, "generation_id": r.generation_id,
                         "member_id": r.member_id, "assignments": [
                             {"member_id": r.member_id, "assignment": b"A"}]})
    assert s.error_code == 0 and s.assignment == b"A"
    return r


def test_find_coordinator_placement_and_batching(broker):
    with WireClient(broker.bootstrap) as w:
        r = w.call(FIND, 0, {"key": "g"})
        assert r.error_code == 0 and r.port == broker.port
        r = w.call(FIND, 4, {"key_type": 0, "coordinator_keys": ["a", "b", "c"]})
        assert [c.key for c in r.coordinators] == ["a", "b", "c"]
        assert all(c.error_code == 0 and c.port == broker.port for c in r.coordinators)
        r = w.call(FIND, 6, {"key_type": 2, "coordinator_keys": ["x"]})
        assert r.coordinators[0].error_code == 42  # INVALID_REQUEST for share keys
        r = w.call(FIND, 4, {"key_type": 1, "coordinator_keys": ["txn-1"]})
        assert r.coordinators[0].error_code == 0
        md = w.call(3, 12, {"topics": [{"name": "__consumer_offsets"}]})
        topic = md.topics[0]
        assert topic.is_internal and len(topic.partitions) == 50
    # the group's offsets land in abs(javaHash(group)) % 50
    group = "placement-group"
    with WireClient(broker.bootstrap) as w:
        _create_t(w)
        w.call(COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": -1,
                           "member_id": "", "topics": [{"name": "t", "partitions": [
                               {"partition_index": 0, "committed_offset": 7,
                                "committed_metadata": ""}]}]})
    p = partition_for(group, 50)
    assert p == abs(sum(ord(c) * 31 ** (len(group) - 1 - i) for i, c in enumerate(group))
                    % (1 << 32) - ((1 << 32) if sum(ord(c) * 31 ** (len(group) - 1 - i)
                    for i, c in enumerate(group)) % (1 << 32) >= (1 << 31) else 0)) % 50
    seg = broker.data_dir / f"__consumer_offsets-{p}" / "00000000000000000000.log"
    out = subprocess.run([sys.executable, "-m", "samsa.broker.cli", "dump-log", str(seg)],
                         capture_output=True, text=True, check=True).stdout
    assert "baseOffset: 0 lastOffset: 0 count: 1" in out
    assert '"group":"placement-group","topic":"t","partition":0' in out
    assert '"offset":7' in out and "compresscodec: none" in out


def test_not_coordinator_before_topic_exists(broker):
    with WireClient(broker.bootstrap) as w:
        r = _join(w, "g1")
        assert r.error_code == 16  # NOT_COORDINATOR: no __consumer_offsets yet


def test_join_sync_heartbeat_errors(wire):
    w, _ = wire
    g = f"g-{uuid.uuid4().hex[:6]}"
    _find(w, g)
    assert _join(w, g, session=10).error_code == 26  # INVALID_SESSION_TIMEOUT
    assert _join(w, g, member="nobody").error_code == 25  # UNKNOWN_MEMBER_ID
    r = _join_stable(w, g)
    # another protocol type/name than the group's
    assert _join(w, g, protocols=(("other", b""),)).error_code == 23
    hb = {"group_id": g, "generation_id": r.generation_id, "member_id": r.member_id}
    assert w.call(HB, 3, hb).error_code == 0
    assert w.call(HB, 3, dict(hb, generation_id=r.generation_id + 5)).error_code == 22
    assert w.call(HB, 3, dict(hb, member_id="x")).error_code == 25
    bad_sync = {"group_id": g, "generation_id": r.generation_id + 1, "member_id": r.member_id,
                "assignments": []}
    assert w.call(SYNC, 3, bad_sync).error_code == 22
    # offsets: a member commit with a stale generation
    commit = {"group_id": g, "generation_id_or_member_epoch": r.generation_id + 1,
              "member_id": r.member_id, "topics": [{"name": "t", "partitions": [
                  {"partition_index": 0, "committed_offset": 3, "committed_metadata": "m"}]}]}
    res = w.call(COMMIT, 8, commit)
    assert res.topics[0].partitions[0].error_code == 22
    res = w.call(COMMIT, 8, dict(commit, generation_id_or_member_epoch=r.generation_id))
    assert res.topics[0].partitions[0].error_code == 0
    # non-empty group: cannot be deleted, its subscribed topic's offsets neither
    assert w.call(DELETE_GROUPS, 2, {"groups_names": [g]}).results[0].error_code == 68
    od = w.call(OFFSET_DELETE, 0, {"group_id": g, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert od.error_code == 0 and od.topics[0].partitions[0].error_code == 86
    d = w.call(DESCRIBE, 5, {"groups": [g, "missing"], "include_authorized_operations": False})
    assert d.groups[0].group_state == "Stable" and d.groups[0].protocol_data == "range"
    assert d.groups[0].members[0].member_assignment == b"A"
    assert d.groups[1].group_state == "Dead" and d.groups[1].error_code == 0
    # a second member joining puts the group into PreparingRebalance
    r2 = _join(w, g, version=3)  # v3: no MEMBER_ID_REQUIRED; parks until the rebalance
    assert r2.error_code == 0
    # (the first member did not rejoin within the rebalance timeout: it was removed)
    assert r2.leader == r2.member_id and len(r2.members) == 1
    lv = w.call(LEAVE, 5, {"group_id": g, "members": [
        {"member_id": r2.member_id}, {"member_id": "ghost"}]})
    assert lv.error_code == 0
    assert [m.error_code for m in lv.members] == [0, 25]
    lst = w.call(LIST, 5, {"states_filter": ["Empty"], "types_filter": []})
    assert g in {x.group_id for x in lst.groups}
    assert w.call(DELETE_GROUPS, 2, {"groups_names": [g]}).results[0].error_code == 0
    assert w.call(DELETE_GROUPS, 2, {"groups_names": [g]}).results[0].error_code == 69
    od = w.call(OFFSET_DELETE, 0, {"group_id": g, "topics": []})
    assert od.error_code == 69


def test_offset_fetch_unknown_group_and_versions(wire):
    w, _ = wire
    _find(w, "x")
    r = w.call(FETCH, 1, {"group_id": "nope", "topics": [
        {"name": "t", "partition_indexes": [0, 1]}]})
    assert [p.committed_offset for p in r.topics[0].partitions] == [-1, -1]
    r = w.call(FETCH, 8, {"groups": [{"group_id": "nope", "topics": None},
                                     {"group_id": "nope2", "topics": [
                                         {"name": "t", "partition_indexes": [3]}]}],
                          "require_stable": True})
    assert r.groups[0].topics == () and r.groups[1].topics[0].partitions[0].committed_offset == -1
    # simple (generation -1) commit, then fetch through several versions
    for v in (2, 5, 9):
        res = w.call(COMMIT, v, {"group_id": "simple", "generation_id_or_member_epoch": -1,
                                 "member_id": "", "topics": [{"name": "t", "partitions": [
                                     {"partition_index": 2, "committed_offset": 40 + v,
                                      "committed_metadata": "md"}]}]})
        assert res.topics[0].partitions[0].error_code == 0
    for v in (1, 3, 7):
        r = w.call(FETCH, v, {"group_id": "simple", "topics": [
            {"name": "t", "partition_indexes": [2]}]})
        assert r.topics[0].partitions[0].committed_offset == 49
        assert r.topics[0].partitions[0].metadata == "md"
    r = w.call(FETCH, 7, {"group_id": "simple", "topics": None})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics] == [("t", [2])]
    # v9 commit to an unknown group with a generation: GROUP_ID_NOT_FOUND (ILLEGAL_GENERATION <9)
    body = {"group_id": "nope", "generation_id_or_member_epoch": 3, "member_id": "m",
            "topics": [{"name": "t", "partitions": [{"partition_index": 0,
                                                     "committed_offset": 1,
                                                     "committed_metadata": ""}]}]}
    assert w.call(COMMIT, 9, body).topics[0].partitions[0].error_code == 69
    assert w.call(COMMIT, 7, body).topics[0].partitions[0].error_code == 22


def test_static_member_fencing(wire):
    w, _ = wire
    g = f"static-{uuid.uuid4().hex[:6]}"
    _find(w, g)
    r = _join(w, g, instance="i-1")
    assert r.error_code == 0
    s = w.call(SYNC, 3, {"group_id": g, "generation_id": r.generation_id,
                         "member_id": r.member_id, "group_instance_id": "i-1",
                         "assignments": [{"member_id": r.member_id, "assignment": b"X"}]})
    assert s.error_code == 0
    # the same instance id restarts (no member id): takes over without a rebalance
    r2 = _join(w, g, instance="i-1")
    assert r2.error_code == 0 and r2.member_id != r.member_id
    assert r2.generation_id == r.generation_id
    hb = {"group_id": g, "generation_id": r.generation_id, "member_id": r.member_id,
          "group_instance_id": "i-1"}
    assert w.call(HB, 3, hb).error_code == 82  # FENCED_INSTANCE_ID: the old incarnation
    assert w.call(HB, 3, dict(hb, member_id=r2.member_id)).error_code == 0


def test_rejoins_heartbeats_and_parked_members_during_rebalance(wire):
    """What a client sees around a rebalance: the leader rejoining a Stable group with the same
    metadata (kafka-python does so when its metadata snapshot changes) gets a new generation at
    once; a heartbeat during PreparingRebalance answers REBALANCE_IN_PROGRESS; members parked
    in JoinGroup or SyncGroup longer than their session timeout are not expired."""
    import time

    w, b = wire
    g = f"rejoin-{uuid.uuid4().hex[:6]}"
    _find(w, g)
    a = _join_stable(w, g, session=1500)
    r = _join(w, g, member=a.member_id, session=1500)  # the leader rejoins while Stable
    assert r.error_code == 0 and r.generation_id == a.generation_id + 1
    assert r.leader == a.member_id and [m.member_id for m in r.members] == [a.member_id]
    s = w.call(SYNC, 3, {"group_id": g, "generation_id": r.generation_id,
                         "member_id": a.member_id,
                         "assignments": [{"member_id": a.member_id, "assignment": b"A2"}]})
    assert s.error_code == 0 and s.assignment == b"A2"
    gen = r.generation_id
    hb = {"group_id": g, "generation_id": gen, "member_id": a.member_id}
    with WireClient(b.bootstrap) as wb:
        # a second member: its JoinGroup parks until the first one rejoins
        rb = _join(wb, g, session=1500)
        assert rb.error_code == 79
        corr, frame = wb.encode_request(JOIN, 5, {
            "group_id": g, "session_timeout": 1500, "rebalance_timeout": 5000,
            "member_id": rb.member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUB}]})
        wb.send_raw(frame)
        deadline = time.monotonic() + 10
        while (code := w.call(HB, 3, hb).error_code) == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert code == 27  # REBALANCE_IN_PROGRESS: the member must rejoin
        until = time.monotonic() + 2.0  # B waits in JoinGroup past its 1.5 s session timeout
        while time.monotonic() < until:  # (A keeps heartbeating)
            assert w.call(HB, 3, hb).error_code == 27
            time.sleep(0.3)
        ra = _join(w, g, member=a.member_id, session=1500)
        joined_b = wb.read_response(JOIN, 5, corr)
        assert ra.error_code == 0 and joined_b.error_code == 0
        assert ra.generation_id == joined_b.generation_id == gen + 1
        assert ra.leader == a.member_id and len(ra.members) == 2 and joined_b.members == ()
        # B waits in SyncGroup past its session timeout until the leader's assignment comes
        corr, frame = wb.encode_request(SYNC, 3, {
            "group_id": g, "generation_id": gen + 1, "member_id": rb.member_id,
            "assignments": []})
        wb.send_raw(frame)
        hb["generation_id"] = gen + 1
        until = time.monotonic() + 2.0
        while time.monotonic() < until:  # CompletingRebalance: heartbeats are fine
            assert w.call(HB, 3, hb).error_code == 0
            time.sleep(0.3)
        s = w.call(SYNC, 3, {"group_id": g, "generation_id": gen + 1,
                             "member_id": a.member_id, "assignments": [
                                 {"member_id": a.member_id, "assignment": b"a"},
                                 {"member_id": rb.member_id, "assignment": b"b"}]})
        synced_b = wb.read_response(SYNC, 3, corr)
        assert s.error_code == 0 and s.assignment == b"a"
        assert synced_b.error_code == 0 and synced_b.assignment == b"b"
        for member, c in ((a.member_id, w), (rb.member_id, wb)):
            assert c.call(HB, 3, dict(hb, member_id=member)).error_code == 0
