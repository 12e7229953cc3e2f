"""The consumer-protocol (KIP-848) group's pure parts: the uniform and range assignors, and
the member reconciliation (Kafka's CurrentAssignmentBuilder)."""

from __future__ import annotations

import uuid

from samsa.coordinator.group.consumer.assignors import range_assign, uniform_assign
from samsa.coordinator.group.consumer.model import ConsumerGroup, ConsumerMember, MemberState
from samsa.coordinator.group.consumer.reconciliation import reconcile

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {"a": (A, 4), "b": (B, 3)}


def _owners(target):
    seen: dict[tuple[uuid.UUID, int], str] = {}
    for m, a in target.items():
        for tid, ps in a.items():
            for p in ps:
                assert (tid, p) not in seen, f"{(tid, p)} owned twice"
                seen[(tid, p)] = m
    return seen


def test_uniform_spreads_evenly_and_sticks():
    subs = {"m1": {"a", "b"}, "m2": {"a", "b"}, "m3": {"a", "b"}}
    first = uniform_assign(subs, TOPICS, {})
    owners = _owners(first)
    assert len(owners) == 7
    assert sorted(sum(len(ps) for ps in a.values()) for a in first.values()) == [2, 2, 3]
    # m3 leaves: m1 and m2 keep everything they had and share m3's partitions
    second = uniform_assign({"m1": subs["m1"], "m2": subs["m2"]}, TOPICS, first)
    assert len(_owners(second)) == 7
    for m in ("m1", "m2"):
        for tid, ps in first[m].items():
            assert ps <= second[m].get(tid, set())
    assert sorted(sum(len(ps) for ps in a.values()) for a in second.values()) == [3, 4]
    # a new member takes partitions only from the most loaded
    third = uniform_assign({**subs, "m4": {"a", "b"}}, TOPICS, second)
    assert sorted(sum(len(ps) for ps in a.values()) for a in third.values()) == [1, 2, 2, 2]
    assert len(_owners(third)) == 7


def test_uniform_heterogeneous_subscriptions():
    target = uniform_assign({"m1": {"a"}, "m2": {"a", "b"}}, TOPICS, {})
    owners = _owners(target)
    assert len(owners) == 7
    assert B not in target["m1"]  # only subscribers of b get b
    assert sum(len(ps) for ps in target["m1"].values()) >= 3


def test_range_assigns_consecutive_ranges_per_topic():
    target = range_assign({"m2": {"a", "b"}, "m1": {"a", "b"}}, TOPICS)
    assert target["m1"] == {A: {0, 1}, B: {0, 1}}
    assert target["m2"] == {A: {2, 3}, B: {2}}


def _member(epoch, assigned, state=MemberState.STABLE, revoking=None):
    return ConsumerMember("m", member_epoch=epoch, state=state, assigned=assigned,
                          pending_revocation=revoking or {})


def test_reconcile_revokes_before_the_new_epoch_and_waits_for_unreleased():
    group = ConsumerGroup("g", 0)
    other = _member(3, {A: {2, 3}})
    other.member_id = "other"
    group.update_member(None, other)
    m = _member(3, {A: {0, 1}})
    # target epoch 4: m keeps 0, gives up 1, gets 2 (still held by "other")
    step = reconcile(m, 4, {A: {0, 2}}, group.current_partition_epoch, [(A, [0, 1])])
    assert step.state == MemberState.UNREVOKED_PARTITIONS
    assert (step.member_epoch, step.assigned, step.pending_revocation) == (3, {A: {0}}, {A: {1}})
    # still reports 1: no progress
    same = reconcile(step, 4, {A: {0, 2}}, group.current_partition_epoch, [(A, [0, 1])])
    assert same is step
    # 1 revoked; 2 still held by the other member: new epoch, UNRELEASED_PARTITIONS
    step2 = reconcile(step, 4, {A: {0, 2}}, group.current_partition_epoch, [(A, [0])])
    assert step2.state == MemberState.UNRELEASED_PARTITIONS
    assert (step2.member_epoch, step2.previous_member_epoch, step2.assigned) == (4, 3, {A: {0}})
    # the other member releases 2: it is assigned, the member is stable
    group.update_member(other, _member(4, {A: {3}}))
    step3 = reconcile(step2, 4, {A: {0, 2}}, group.current_partition_epoch, [(A, [0])])
    assert (step3.state, step3.member_epoch, step3.assigned) == (MemberState.STABLE, 4,
                                                                  {A: {0, 2}})


def test_reconcile_new_member_gets_free_partitions_at_the_target_epoch():
    group = ConsumerGroup("g", 0)
    step = reconcile(ConsumerMember("m"), 7, {A: {0, 1}, B: {0}}, group.current_partition_epoch,
                     [])
    assert (step.state, step.member_epoch, step.assigned) == (MemberState.STABLE, 7,
                                                              {A: {0, 1}, B: {0}})


def test_records_round_trip_in_kafkas_layout():
    from samsa.coordinator.group.consumer.records import (
        CURRENT_MEMBER_ASSIGNMENT,
        GROUP_METADATA,
        current_assignment_value,
        decode_consumer_key,
        decode_current_assignment,
        decode_member_metadata,
        describe_consumer_record,
        group_metadata_value,
        key,
        member_metadata_value,
    )

    assert key(GROUP_METADATA, "g") == b"\x00\x03\x00\x01g"
    assert group_metadata_value(5) == b"\x00\x00\x00\x00\x00\x05\x00"  # v0, epoch, no tags
    k = key(CURRENT_MEMBER_ASSIGNMENT, "g", "m1")
    assert k == b"\x00\x08\x00\x01g\x00\x02m1"
    assert decode_consumer_key(k).member == "m1"
    m = ConsumerMember("m1", instance_id="i", client_id="c", client_host="/h",
                       subscribed_topic_names=["a", "b"], subscribed_topic_regex=None,
                       rebalance_timeout_ms=30000, server_assignor="range", member_epoch=4,
                       previous_member_epoch=3, state=MemberState.UNREVOKED_PARTITIONS,
                       assigned={A: {0, 2}}, pending_revocation={B: {1}})
    back = ConsumerMember("m1")
    decode_member_metadata(member_metadata_value(m), back)
    decode_current_assignment(current_assignment_value(m), back)
    assert back.metadata_key() == m.metadata_key()
    assert back.assignment_key() == m.assignment_key()
    _, payload = describe_consumer_record(k, current_assignment_value(m))
    assert '"state":"unrevoked_partitions"' in payload and '"memberEpoch":4' in payload


def test_assignment_epochs_follow_each_partition_and_are_stored():
    """KIP-1251: a partition keeps the epoch the member was given it at while the member keeps
    it; one given (back) later gets the later epoch. The current assignment record stores them
    (TopicPartitions' tagged field 0); a record without them reads as the member epoch."""
    from samsa.coordinator.group.consumer.records import (
        current_assignment_value,
        decode_current_assignment,
    )

    group = ConsumerGroup("g", 0)
    m = reconcile(ConsumerMember("m"), 1, {A: {0, 1, 2}}, group.current_partition_epoch, [])
    assert m.held_epochs() == {(A, 0): 1, (A, 1): 1, (A, 2): 1}
    # epoch 2 takes 2 away: revoking keeps the epochs, then 0 and 1 stay at 1
    step = reconcile(m, 2, {A: {0, 1}}, group.current_partition_epoch, [(A, [0, 1, 2])])
    assert step.state == MemberState.UNREVOKED_PARTITIONS
    assert step.assignment_epoch(A, 2) == 1 and step.assignment_epoch(A, 0) == 1
    step = reconcile(step, 2, {A: {0, 1}}, group.current_partition_epoch, [(A, [0, 1])])
    assert (step.member_epoch, step.held_epochs()) == (2, {(A, 0): 1, (A, 1): 1})
    assert step.assignment_epoch(A, 2) is None
    # epoch 3 gives 2 back and adds B-0: both at 3
    step = reconcile(step, 3, {A: {0, 1, 2}, B: {0}}, group.current_partition_epoch,
                     [(A, [0, 1])])
    assert step.held_epochs() == {(A, 0): 1, (A, 1): 1, (A, 2): 3, (B, 0): 3}

    back = ConsumerMember("m")
    decode_current_assignment(current_assignment_value(step), back)
    assert back.assignment_key() == step.assignment_key()
    assert back.assignment_epochs == step.held_epochs()
    # Kafka's layout: after partitions [0, 1, 2] of A, one tagged field 0 holding [1, 1, 3]
    assert (b"\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x02"
            b"\x01\x00\x0d\x04\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x03"
            in current_assignment_value(step))
    old = ConsumerMember("m", member_epoch=5, assigned={A: {0}})
    old_layout = ConsumerMember("m")
    decode_current_assignment(current_assignment_value(old).replace(
        b"\x01\x00\x05\x02\x00\x00\x00\x05", b"\x00"), old_layout)
    assert old_layout.held_epochs() == {(A, 0): 5} and not old_layout.assignment_epochs
