"""Classic members in a consumer group at the wire (Kafka's classicGroupJoinToConsumerGroup):
their JoinGroup and SyncGroup deadlines (the rebalance timeout of the JoinGroup), and a
consumer group whose records cannot be written stays as it was (Kafka's timeline snapshots:
the in-memory state is what the log holds)."""

from __future__ import annotations

import time
import uuid

from tests.groups.test_consumer_protocol_wire import CG_DESCRIBE, JOIN, SUB, _hb, _parts
from tests.groups.test_consumer_protocol_wire import wire as wire  # noqa: F401 (fixture)

SYNC, CLASSIC_HEARTBEAT = 14, 12
NONE, COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID = 0, 15, 25
REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 27, 79
REBALANCE_MS = 1500


def _join(w, group: str, rebalance_ms: int = REBALANCE_MS):
    args = {"group_id": group, "session_timeout": 30_000, "rebalance_timeout": rebalance_ms,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUB}]}
    j = w.call(JOIN, 5, args)
    assert j.error_code == MEMBER_ID_REQUIRED, j
    return w.call(JOIN, 5, dict(args, member_id=j.member_id))


def _heartbeat(w, group: str, member: str, generation: int) -> int:
    return w.call(CLASSIC_HEARTBEAT, 4, {"group_id": group, "generation_id": generation,
                                         "member_id": member,
                                         "group_instance_id": None}).error_code


def _heartbeat_until_fenced(w, group: str, member: str, generation: int, start: float) -> float:
    """Heartbeat every 0.2 s until the member is unknown; the seconds since `start` (taken
    before the request that started the broker's timer, so a slow answer cannot shorten it)."""
    while (code := _heartbeat(w, group, member, generation)) != UNKNOWN_MEMBER_ID:
        assert code in (NONE, REBALANCE_IN_PROGRESS), code
        assert time.monotonic() - start < 15, "never fenced"
        time.sleep(0.2)
    return time.monotonic() - start


def test_classic_member_join_and_sync_deadlines(wire):  # noqa: F811
    w, _ = wire
    g = f"cg-{uuid.uuid4().hex[:8]}"
    assert _hb(w, g, uuid.uuid4().hex, 0).member_epoch == 1  # a consumer group
    # Joined, never synced: fenced once its rebalance timeout passed, heartbeats or not.
    start = time.monotonic()
    j = _join(w, g)
    assert j.error_code == NONE, j
    took = _heartbeat_until_fenced(w, g, j.member_id, j.generation_id, start)
    assert REBALANCE_MS / 1000 - 0.1 <= took, took
    # Joined and synced: no deadline while nothing asks it to rejoin (its session is the
    # JoinGroup's 30 s, the group's default 45 s)...
    j = _join(w, g)
    s = w.call(SYNC, 3, {"group_id": g, "generation_id": j.generation_id,
                         "member_id": j.member_id, "assignments": []})
    assert s.error_code == NONE, s
    deadline = time.monotonic() + 2 * REBALANCE_MS / 1000
    while time.monotonic() < deadline:
        assert _heartbeat(w, g, j.member_id, j.generation_id) == NONE
        time.sleep(0.2)
    # ... but once asked to rejoin (a new member bumped the group epoch), it must rejoin
    # within its rebalance timeout
    start = time.monotonic()
    assert _hb(w, g, uuid.uuid4().hex, 0).error_code == NONE
    assert _heartbeat(w, g, j.member_id, j.generation_id) == REBALANCE_IN_PROGRESS
    took = _heartbeat_until_fenced(w, g, j.member_id, j.generation_id, start)
    assert REBALANCE_MS / 1000 - 0.1 <= took, took


def _describe(w, group: str):
    return w.call(CG_DESCRIBE, 1, {"group_ids": [group],
                                   "include_authorized_operations": False}).groups[0]


def _offsets_min_isr(w, value: str) -> None:
    r = w.call(44, 0, {"resources": [{"resource_type": 2, "resource_name": "__consumer_offsets",
                                      "configs": [{"name": "min.insync.replicas",
                                                   "config_operation": 0, "value": value}]}],
                       "validate_only": False})
    assert r.responses[0].error_code == NONE, r


def test_unwritten_changes_are_undone(wire):  # noqa: F811
    w, _ = wire
    g = f"cg-{uuid.uuid4().hex[:8]}"
    m1 = uuid.uuid4().hex
    r1 = _hb(w, g, m1, 0)
    assert r1.member_epoch == 1 and _parts(r1) == {0, 1, 2, 3}
    # __consumer_offsets (one replica) now refuses writes: NOT_ENOUGH_REPLICAS
    _offsets_min_isr(w, "2")
    try:
        m2 = uuid.uuid4().hex
        assert _hb(w, g, m2, 0).error_code == COORDINATOR_NOT_AVAILABLE
        j = w.call(JOIN, 3, {"group_id": g, "session_timeout": 30_000,
                             "rebalance_timeout": 5000, "member_id": "",
                             "protocol_type": "consumer",
                             "protocols": [{"name": "range", "metadata": SUB}]})
        assert j.error_code == COORDINATOR_NOT_AVAILABLE, j
        assert _hb(w, g, m1, -1, topics=None).error_code == COORDINATOR_NOT_AVAILABLE
        # nobody joined, nobody left, no epoch moved: m1 keeps all four partitions
        d = _describe(w, g)
        assert (d.group_epoch, d.assignment_epoch, [m.member_id for m in d.members]) == (
            1, 1, [m1]), d
        r = _hb(w, g, m1, 1, topics=None)
        assert (r.error_code, r.member_epoch, r.assignment) == (NONE, 1, None), r
    finally:
        _offsets_min_isr(w, "1")
    r2 = _hb(w, g, m2, 0)
    assert (r2.error_code, r2.member_epoch) == (NONE, 2), r2
    assert sorted(m.member_id for m in _describe(w, g).members) == sorted([m1, m2])
