"""The share group's simple assignor (KIP-932): every partition of a subscribed topic is
assigned, spread over its subscribers; with more subscribers than partitions a partition is
shared, and every subscriber gets one."""

from __future__ import annotations

import uuid

from samsa.coordinator.group.share.model import simple_assign

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": (A, 4), "b": (B, 1)}


def _holders(target, tid, p):
    return sorted(m for m, a in target.items() if p in a.get(tid, ()))


def test_partitions_spread_over_subscribers():
    target = simple_assign({"m1": ["a"], "m2": ["a"]}, TOPICS)
    assert target == {"m1": {A: {0, 2}}, "m2": {A: {1, 3}}}


def test_more_members_than_partitions_share_them():
    members = {f"m{i}": ["a", "b"] for i in range(5)}
    target = simple_assign(members, TOPICS)
    assert _holders(target, B, 0) == sorted(members)  # the one partition of b: shared by all
    for p in range(4):
        assert _holders(target, A, p)  # every partition of a has a holder
    assert all(target[m].get(A) for m in members)  # every member has a partition of a


def test_only_subscribers_get_a_topic():
    target = simple_assign({"m1": ["a"], "m2": ["b"], "m3": []}, TOPICS)
    assert target == {"m1": {A: {0, 1, 2, 3}}, "m2": {B: {0}}, "m3": {}}
