"""Streams groups (KIP-1071) as a spec, without a broker: the records round-trip, the topology
against the topics (coordinator/group/streams/topology.py), the sticky assignor, and the
heartbeat's decisions (transitions.py): records to write plus an answer. The state is what
replaying the records gives, as the coordinator does after each write."""

from __future__ import annotations

from dataclasses import replace

import pytest

from samsa.coordinator.group.common import GroupError
from samsa.coordinator.group.streams import records as rec
from samsa.coordinator.group.streams.assignor import assign
from samsa.coordinator.group.streams.model import (
    MemberState,
    StreamsGroup,
    StreamsMember,
    Subtopology,
    TaskMap,
    Tasks,
    TopicInfo,
    Topology,
    task_map,
)
from samsa.coordinator.group.streams.topology import Status, configure, metadata_hash
from samsa.coordinator.group.streams.transitions import (
    Answer,
    Heartbeat,
    Outcome,
    heartbeat,
    leave,
)
from samsa.protocol.errors import ErrorCode

APP = "app"
REPARTITION, CHANGELOG = "app-by-key-repartition", "app-counts-changelog"


def topology(epoch: int = 0, source: str = "events") -> Topology:
    """StreamsCount's: events -> (re-key) repartition -> count with a changelog store."""
    return Topology(epoch, (
        Subtopology("0", source_topics=(source,), repartition_sink_topics=(REPARTITION,)),
        Subtopology("1", repartition_source_topics=(TopicInfo(REPARTITION),),
                    state_changelog_topics=(TopicInfo(CHANGELOG, 0, 0,
                                                      (("cleanup.policy", "compact"),)),)),
    ))


def counts(**topics: int):
    named = {k.replace("_", "-"): v for k, v in topics.items()}
    return lambda name: named.get(name)


ALL = counts(events=2, app_by_key_repartition=2, app_counts_changelog=2)


def join(member: str, process: str = "p1", t: Topology | None = None) -> Heartbeat:
    return Heartbeat(APP, member, 0, rebalance_timeout_ms=10_000, topology=t or topology(),
                     active={}, standby={}, warmup={}, process_id=process, client_tags=())


def beat(member: str, epoch: int, active: dict[str, set[int]] | None = None) -> Heartbeat:
    owned = None if active is None else {s: frozenset(ps) for s, ps in active.items()}
    return Heartbeat(APP, member, epoch, active=owned)


class Group:
    """A group's state as the coordinator keeps it: each outcome's records replayed."""

    def __init__(self, partition_counts=ALL) -> None:
        self.groups: dict[str, StreamsGroup] = {}
        self.counts = partition_counts

    def send(self, req: Heartbeat) -> Outcome:
        out = heartbeat(self.groups.get(APP), req, 0, self.counts, 1000)
        self.apply(out)
        return out

    def apply(self, out: Outcome) -> None:
        for key, value in out.records:
            k = rec.decode_streams_key(key)
            assert k is not None
            rec.replay(self.groups, 0, k, value)

    @property
    def group(self) -> StreamsGroup:
        return self.groups[APP]


def active(out: Outcome) -> set[tuple[str, int]] | None:
    if out.answer.tasks is None:
        return None
    return {(s, p) for s, ps in out.answer.tasks.active.items() for p in ps}


# ---- records --------------------------------------------------------------------------------
def test_records_round_trip():
    m = StreamsMember("m1", process_id="p1", instance_id="i", rack_id="r", client_id="c",
                      client_host="/h", rebalance_timeout_ms=5, topology_epoch=3,
                      user_endpoint=("host", 8080), client_tags=(("zone", "a"),),
                      member_epoch=4, previous_member_epoch=2,
                      state=MemberState.UNREVOKED_TASKS,
                      assigned=Tasks({"0": frozenset({1})}, {"1": frozenset({0, 2})}),
                      pending_revocation=Tasks({"0": frozenset({0})}))
    t = Topology(3, (Subtopology("0", ("a",), ("b.*",), (TopicInfo("c", 0, 3, (("k", "v"),)),),
                                 ("d",), (TopicInfo("d", 4),), (((0,), (0,), (0,)),)),))
    groups: dict[str, StreamsGroup] = {}
    for key, value in [rec.group_metadata(APP, 7, -12345, 3), rec.topology(APP, t),
                       rec.member_metadata(APP, m), rec.current_assignment(APP, m),
                       rec.target_member(APP, "m1", Tasks({"0": frozenset({0, 1})})),
                       rec.target_metadata(APP, 6, 99)]:
        k = rec.decode_streams_key(key)
        assert k is not None
        rec.replay(groups, 0, k, value)
    g = groups[APP]
    assert (g.epoch, g.metadata_hash, g.validated_topology_epoch, g.assignment_epoch) == (
        7, -12345, 3, 6)
    assert g.topology == t
    assert g.members["m1"] == m
    assert g.target["m1"] == Tasks({"0": frozenset({0, 1})})


def test_tombstones_remove_the_member_then_the_group():
    g = Group()
    g.send(join("m1"))
    for key, value in rec.tombstones(APP, "m1") + rec.group_tombstones(APP):
        k = rec.decode_streams_key(key)
        assert k is not None and value is None
        rec.replay(g.groups, 0, k, value)
    assert APP not in g.groups


# ---- the topology against the topics ---------------------------------------------------------
def test_repartition_and_changelog_counts_derive_from_the_source():
    c = configure(topology(), counts(events=3))
    assert c.status == Status.MISSING_INTERNAL_TOPICS
    assert {(t.name, t.partitions) for t in c.to_create} == {(REPARTITION, 3), (CHANGELOG, 3)}
    assert dict(next(t for t in c.to_create if t.name == CHANGELOG).configs) == {
        "cleanup.policy": "compact"}
    ready = configure(topology(), counts(events=3, app_by_key_repartition=3,
                                         app_counts_changelog=3))
    assert ready.ready and ready.tasks == {"0": 3, "1": 3}


def test_missing_source_and_wrongly_partitioned_topics():
    assert configure(topology(), counts()).status == Status.MISSING_SOURCE_TOPICS
    wrong = configure(topology(), counts(events=3, app_by_key_repartition=2))
    assert wrong.status == Status.INCORRECTLY_PARTITIONED_TOPICS and REPARTITION in wrong.detail


def test_copartitioned_sources_must_agree():
    t = Topology(0, (Subtopology("0", ("a", "b"), copartition_groups=(((0, 1), (), ()),)),))
    assert configure(t, counts(a=2, b=3)).status == Status.INCORRECTLY_PARTITIONED_TOPICS
    assert configure(t, counts(a=3, b=3)).tasks == {"0": 3}


# ---- the assignor ----------------------------------------------------------------------------
def test_assignor_balances_and_is_sticky():
    first = assign({"m1": ("p1", {}), "m2": ("p2", {})}, {"0": 2, "1": 2})
    assert sorted(len(t.active.get("0", ())) + len(t.active.get("1", ()))
                  for t in first.values()) == [2, 2]
    # a third member: the others keep what they had, up to their share
    again = assign({m: ("p" + m, t.active) for m, t in first.items()} | {"m3": ("p3", {})},
                   {"0": 2, "1": 2})
    for m in ("m1", "m2"):
        kept = {(s, p) for s, ps in again[m].active.items() for p in ps}
        had = {(s, p) for s, ps in first[m].active.items() for p in ps}
        assert kept <= had and kept
    every = [(s, p) for t in again.values() for s, ps in t.active.items() for p in ps]
    assert sorted(every) == [("0", 0), ("0", 1), ("1", 0), ("1", 1)]


def test_a_member_keeping_its_share_keeps_some_of_every_subtopology():
    # One member ran every task of a two-subtopology application (a repartition, then a
    # count); a second joins. Kafka 4.4's assignor keeps the tasks partition by partition
    # across subtopologies, so both members run both: the first no longer keeps all of
    # subtopology 0 while the newcomer gets all of subtopology 1 (then only one instance
    # ever writes the application's output, and which one depended on who joined first).
    alone = assign({"m1": ("p1", {})}, {"0": 4, "1": 4})
    both = assign({"m1": ("p1", alone["m1"].active), "m2": ("p2", {})}, {"0": 4, "1": 4})
    assert both["m1"].active == {"0": frozenset({0, 1}), "1": frozenset({0, 1})}
    assert both["m2"].active == {"0": frozenset({2, 3}), "1": frozenset({2, 3})}


def test_the_sticky_quota_is_counted_again_as_members_fill_it():
    # 7 tasks, 3 members: ceil(7/3) = 3 each while all have room; once m1 kept its 3, the 4
    # left over the 2 members left make 2 each: m2 keeps 2 of its 3 and m3 gets 2.
    out = assign({"m1": ("p1", {"0": frozenset({0, 1, 2})}),
                  "m2": ("p2", {"0": frozenset({3, 4, 5})}), "m3": ("p3", {})}, {"0": 7})
    assert [len(out[m].active.get("0", ())) for m in ("m1", "m2", "m3")] == [3, 2, 2]


def test_an_active_task_goes_back_to_its_previous_standby_owner_first():
    out = assign({"m1": ("p1", {}), "m2": ("p2", {})}, {"0": 2},
                 previous_standby={"m2": {"0": frozenset({0})}})
    assert out["m2"].active == {"0": frozenset({0})} and out["m1"].active == {"0": frozenset({1})}


# ---- the heartbeat ---------------------------------------------------------------------------
def test_first_join_sets_the_topology_and_assigns_every_task():
    g = Group()
    out = g.send(join("m1"))
    assert (out.answer.member_epoch, active(out)) == (1, {("0", 0), ("0", 1), ("1", 0),
                                                           ("1", 1)})
    assert g.group.topology == topology() and g.group.assignment_epoch == 1
    assert g.group.members["m1"].state == MemberState.STABLE
    # nothing changed: nothing written, the tasks not repeated
    again = g.send(beat("m1", 1))
    assert (again.records, active(again), again.answer.member_epoch) == ([], None, 1)


def test_missing_internal_topics_assign_nothing_and_are_to_be_created():
    g = Group(counts(events=2))
    out = g.send(join("m1"))
    assert active(out) == set()
    assert [code for code, _ in out.answer.status] == [Status.MISSING_INTERNAL_TOPICS]
    assert {t.name for t in out.to_create} == {REPARTITION, CHANGELOG}
    g.counts = ALL  # created: the topics' metadata moves the group epoch, tasks follow
    out = g.send(beat("m1", 1))
    assert out.answer.member_epoch == 2 and len(active(out) or ()) == 4


def test_tasks_move_only_once_revoked():
    g = Group()
    owned = {"0": {0, 1}, "1": {0, 1}}
    g.send(join("m1"))
    j2 = g.send(join("m2", "p2"))
    assert (j2.answer.member_epoch, active(j2)) == (2, set())  # m1 holds every task
    r1 = g.send(beat("m1", 1, owned))
    kept = active(r1)
    assert r1.answer.member_epoch == 1 and kept is not None and len(kept) == 2
    assert g.group.members["m1"].state == MemberState.UNREVOKED_TASKS
    assert active(g.send(beat("m2", 2, {}))) is None  # still held: nothing yet
    assert g.group.members["m2"].state == MemberState.UNRELEASED_TASKS
    still = g.send(beat("m1", 1, owned))  # has not revoked yet: no progress
    assert still.answer.member_epoch == 1
    revoked = {s: {p for s2, p in kept if s2 == s} for s in ("0", "1")}
    done = g.send(beat("m1", 1, revoked))
    assert done.answer.member_epoch == 2
    r2 = g.send(beat("m2", 2, {}))
    assert active(r2) == {("0", 0), ("0", 1), ("1", 0), ("1", 1)} - kept
    assert g.group.members["m2"].state == MemberState.STABLE


def test_member_epochs_fence_and_a_lost_answer_is_forgiven():
    g = Group()
    g.send(join("m1"))
    g.send(join("m2", "p2"))
    with pytest.raises(GroupError) as fenced:
        heartbeat(g.group, beat("m1", 5), 0, ALL, 0)
    assert fenced.value.error_code == ErrorCode.fenced_member_epoch
    with pytest.raises(GroupError) as unknown:
        heartbeat(g.group, beat("who", 1), 0, ALL, 0)
    assert unknown.value.error_code == ErrorCode.unknown_member_id
    g.send(beat("m1", 1, {"0": {0, 1}, "1": {0, 1}}))
    revoked = {s: set(ps) for s, ps in g.group.members["m1"].assigned.active.items()}
    g.send(beat("m1", 1, revoked))
    assert g.group.members["m1"].member_epoch == 2
    # the answer with epoch 2 was lost: epoch 1 with only tasks it was given passes
    assert heartbeat(g.group, beat("m1", 1, revoked), 0, ALL, 0).answer.member_epoch == 2


def test_topology_epochs():
    g = Group()
    g.send(join("m1"))
    changed = topology(source="other")
    with pytest.raises(GroupError) as same_epoch:
        heartbeat(g.group, join("m2", t=changed), 0, ALL, 0)
    assert same_epoch.value.error_code == ErrorCode.streams_invalid_topology_epoch
    newer = g.send(join("m2", t=topology(epoch=1)))
    assert g.group.topology is not None and g.group.topology.epoch == 1
    assert newer.answer.status == []
    stale = g.send(beat("m1", g.group.members["m1"].member_epoch))
    assert [code for code, _ in stale.answer.status] == [Status.STALE_TOPOLOGY]


def test_requests_kafka_refuses():
    with pytest.raises(GroupError) as no_topology:
        heartbeat(None, Heartbeat(APP, "m1", 0, rebalance_timeout_ms=1, process_id="p"), 0,
                  ALL, 0)
    assert no_topology.value.error_code == ErrorCode.invalid_request
    with pytest.raises(GroupError) as unknown_group:
        heartbeat(None, beat("m1", 3), 0, ALL, 0)
    assert unknown_group.value.error_code == ErrorCode.group_id_not_found
    bad = Topology(0, (Subtopology("0", ("a",), repartition_sink_topics=("nowhere",)),))
    with pytest.raises(GroupError) as invalid:
        heartbeat(None, join("m1", t=bad), 0, ALL, 0)
    assert invalid.value.error_code == ErrorCode.streams_invalid_topology


def test_leave_writes_tombstones_and_moves_the_group_epoch():
    g = Group()
    g.send(join("m1"))
    g.send(join("m2", "p2"))
    out = leave(g.group, "m2")
    g.apply(out)
    assert out.answer.member_epoch == -1 and "m2" not in g.group.members
    assert g.group.epoch == 3
    # the remaining member is given everything at its next heartbeat
    r1 = g.send(beat("m1", 1, {"0": {0, 1}, "1": {0, 1}}))
    assert r1.answer.member_epoch == 3 and len(g.group.target["m1"].active["0"]) == 2


def test_standbys_go_to_other_processes_for_stateful_tasks_only():
    members = {"a1": ("pa", {}), "a2": ("pa", {}), "b1": ("pb", {})}
    out = assign(members, {"0": 2, "1": 2}, standby_replicas=1, stateful={"1"})
    owner = {(s, p): m for m, t in out.items() for s, ps in t.active.items() for p in ps}
    standby = {(s, p): m for m, t in out.items() for s, ps in t.standby.items() for p in ps}
    assert set(standby) == {("1", 0), ("1", 1)}  # subtopology 0 has no state: no standby
    for task, m in standby.items():
        assert members[m][0] != members[owner[task]][0]  # never on the active's process
    # two copies asked, one other process: only one is given
    again = assign(members, {"1": 2}, standby_replicas=2, stateful={"1"})
    assert sum(len(ps) for t in again.values() for ps in t.standby.values()) == 2


def test_standby_tasks_are_assigned_with_the_target():
    g = Group()
    g.send(join("m1"))
    out = heartbeat(g.group, join("m2", "p2"), 0, ALL, 0, standby_replicas=1)
    g.apply(out)
    targets = g.group.target
    assert targets["m1"].standby or targets["m2"].standby
    for m, t in targets.items():
        other = targets["m2" if m == "m1" else "m1"]
        assert t.standby.get("1", frozenset()) <= other.active.get("1", frozenset())
    # a standby is given at once: nothing to wait for
    assert out.answer.tasks is not None and out.answer.tasks.standby == targets["m2"].standby


def test_an_empty_group_takes_a_changed_topology():
    g = Group()
    g.send(join("m1"))
    g.apply(leave(g.group, "m1"))
    changed = topology(source="other")
    out = g.send(join("m2", t=changed))
    assert g.group.topology == changed and out.answer.member_epoch == g.group.epoch


def test_source_regexes_resolve_against_the_topics():
    t = Topology(0, (Subtopology("0", source_topic_regex=("ev.*",)),))
    none = configure(t, counts(events=2), names=["other"])
    assert (none.status, none.detail) == (Status.MISSING_SOURCE_TOPICS,
                                          "Regular expressions ev.* cannot be resolved.")
    # whole names only, internal topics never
    c = configure(t, counts(events=2, evx=3, zev=9), names=["events", "evx", "zev", "__ev"])
    assert c.ready and c.tasks == {"0": 3}


def test_a_new_topic_matching_a_regex_moves_the_group_epoch():
    t = Topology(0, (Subtopology("0", source_topic_regex=("ev.*",)),))
    g = Group(counts(ev1=1, ev2=2))
    out = heartbeat(None, join("m1", t=t), 0, g.counts, 0, names=["ev1"])
    g.apply(out)
    assert g.group.epoch == 1 and len(active(out) or ()) == 1
    out = heartbeat(g.group, beat("m1", 1), 0, g.counts, 0, names=["ev1", "ev2"])
    g.apply(out)
    assert g.group.epoch == 2 and active(out) == {("0", 0), ("0", 1)}
    with pytest.raises(GroupError) as bad:
        heartbeat(None, join("m1", t=Topology(0, (Subtopology("0", source_topic_regex=(
            "(",)),))), 0, g.counts, 0)
    assert bad.value.error_code == ErrorCode.streams_invalid_topology


def test_a_decision_leaves_the_group_as_it_was_until_its_records_are_applied():
    g = Group()
    g.send(join("m1"))
    before = rec.current_assignment(APP, g.group.members["m1"]), g.group.epoch
    out = heartbeat(g.group, join("m2", "p2"), 0, ALL, 0)
    assert out.records and "m2" not in g.group.members
    assert (rec.current_assignment(APP, g.group.members["m1"]), g.group.epoch) == before
    assert out.group is not None and "m2" in out.group.members  # what the records say


def test_a_full_group_refuses_a_new_member():
    g = Group()
    g.send(join("m1"))
    with pytest.raises(GroupError) as full:
        heartbeat(g.group, join("m2", "p2"), 0, ALL, 0, max_size=1)
    assert full.value.error_code == ErrorCode.group_max_size_reached
    assert heartbeat(g.group, beat("m1", 1), 0, ALL, 0, max_size=1).answer.member_epoch == 1


def test_a_static_member_leaves_for_a_while_and_its_instance_comes_back():
    g = Group()
    epoch = g.send(replace(join("m1"), instance_id="i1")).answer.member_epoch
    g.send(join("m2", "p2"))  # m2 waits for the tasks m1 holds
    left = heartbeat(g.group, Heartbeat(APP, "m1", -2), 0, ALL, 0)
    g.apply(left)
    assert left.answer.member_epoch == -2
    m1 = g.group.members["m1"]  # still there, its tasks held, no new group epoch
    assert (m1.member_epoch, m1.previous_member_epoch, g.group.epoch) == (-2, epoch, 2)
    held = {(s, p) for s, ps in m1.assigned.active.items() for p in ps}
    assert held and active(g.send(beat("m2", 2, {}))) in (None, set())
    back = g.send(replace(join("m1b"), instance_id="i1"))
    assert "m1" not in g.group.members and g.group.epoch == 2  # no rebalance
    # its tasks: the ones its target keeps; the rest it was to revoke it does not hold (its
    # join reports no task), so it takes the group's epoch at once (Kafka 4.4's hasNotReleased)
    target = {(s, p) for s, ps in g.group.target["m1b"].active.items() for p in ps}
    assert (back.answer.member_epoch, active(back)) == (2, held & target) and epoch == 1
    assert g.group.members["m1b"].state == MemberState.STABLE
    with pytest.raises(GroupError) as unreleased:
        heartbeat(g.group, replace(join("m1c"), instance_id="i1"), 0, ALL, 0)
    assert unreleased.value.error_code == ErrorCode.unreleased_instance_id


def test_a_static_member_heartbeating_under_another_member_id_is_fenced():
    """Kafka's throwIfStaticMemberIsUnknown and throwIfInstanceIdIsFenced: after a new member
    took instance i1 over, the old member id is FENCED_INSTANCE_ID; an instance id the group
    does not know, at an epoch past 0, is UNKNOWN_MEMBER_ID."""
    g = Group()
    epoch = g.send(replace(join("m1"), instance_id="i1")).answer.member_epoch
    g.apply(heartbeat(g.group, Heartbeat(APP, "m1", -2), 0, ALL, 0))
    g.send(replace(join("m1b"), instance_id="i1"))
    with pytest.raises(GroupError) as fenced:
        heartbeat(g.group, replace(beat("m1", epoch), instance_id="i1"), 0, ALL, 0)
    assert fenced.value.error_code == ErrorCode.fenced_instance_id
    with pytest.raises(GroupError) as unknown:
        heartbeat(g.group, replace(beat("m1b", epoch), instance_id="i9"), 0, ALL, 0)
    assert unknown.value.error_code == ErrorCode.unknown_member_id
    ok = heartbeat(g.group, replace(beat("m1b", epoch), instance_id="i1"), 0, ALL, 0)
    assert ok.answer.member_epoch == epoch


def test_tasks_a_member_reports_must_exist_in_the_configured_topology():
    """Kafka's throwIfRequestContainsInvalidTasks: a reported active, standby or warm-up task
    of a subtopology the topology lacks, or past its task count, is INVALID_REQUEST."""
    g = Group()
    epoch = g.send(join("m1")).answer.member_epoch
    for reported in ({"9": {0}}, {"0": {2}}, {"1": {-1}}):
        with pytest.raises(GroupError) as invalid:
            heartbeat(g.group, beat("m1", epoch, reported), 0, ALL, 0)
        assert invalid.value.error_code == ErrorCode.invalid_request, reported
    with pytest.raises(GroupError) as standby:
        heartbeat(g.group, replace(beat("m1", epoch, {}), standby=task_map({"7": {0}})),
                  0, ALL, 0)
    assert standby.value.error_code == ErrorCode.invalid_request
    assert heartbeat(g.group, beat("m1", epoch, {"0": {1}}), 0, ALL, 0).answer.member_epoch \
        == epoch


def test_a_standby_waits_while_another_thread_of_its_process_runs_the_task():
    # Kafka 4.4's isUnreleasedStandbyTask: two members (threads) of one process never hold one
    # task. The target moves task 1_0 from m1 (process p1) to m3 (p2) and gives its standby
    # to m2, m1's fellow thread on p1: m2 gets it only once m1 has revoked it.
    g = Group()
    t, task = topology(), {"1": frozenset({0})}
    records = [rec.group_metadata(APP, 6, metadata_hash(t, ALL, []), 0), rec.topology(APP, t)]
    for member_id, process, epoch, held, target in (
            ("m1", "p1", 5, Tasks(active=task), Tasks()),
            ("m2", "p1", 6, Tasks(), Tasks(standby=task)),
            ("m3", "p2", 6, Tasks(), Tasks(active=task))):
        m = StreamsMember(member_id, process_id=process, topology_epoch=0, member_epoch=epoch,
                          rebalance_timeout_ms=10_000, assigned=held)
        records += [rec.member_metadata(APP, m), rec.current_assignment(APP, m),
                    rec.target_member(APP, member_id, target)]
    records.append(rec.target_metadata(APP, 6, 1000))
    g.apply(Outcome(records, Answer("", 0)))
    waits = g.send(beat("m2", 6))
    assert g.group.members["m2"].state == MemberState.UNRELEASED_TASKS
    assert waits.answer.tasks is None or not waits.answer.tasks.standby
    g.send(beat("m1", 5, {"1": {0}}))  # told to revoke it
    g.send(beat("m1", 5, {}))  # revoked
    given = g.send(beat("m2", 6))
    assert given.answer.tasks is not None and given.answer.tasks.standby == task
    assert g.group.members["m2"].state == MemberState.STABLE


# ---- role changes in place and revocations already done (Kafka 4.4's CurrentAssignmentBuilder)
T10 = {"1": frozenset({0})}


def seeded(epoch: int, *rows: tuple[str, str, int, Tasks, Tasks]) -> Group:
    """A group at group and assignment epoch `epoch` whose members (id, process, member
    epoch, tasks held, target) are as given."""
    g, t = Group(), topology()
    records = [rec.group_metadata(APP, epoch, metadata_hash(t, ALL, []), 0), rec.topology(APP, t)]
    for member_id, process, member_epoch, held, target in rows:
        m = StreamsMember(member_id, process_id=process, topology_epoch=0,
                          member_epoch=member_epoch, rebalance_timeout_ms=10_000, assigned=held)
        records += [rec.member_metadata(APP, m), rec.current_assignment(APP, m),
                    rec.target_member(APP, member_id, target)]
    records.append(rec.target_metadata(APP, epoch, 1000))
    g.apply(Outcome(records, Answer("", 0)))
    return g


def owns(member: str, epoch: int, active: TaskMap | None = None, standby: TaskMap | None = None,
         warmup: TaskMap | None = None) -> Heartbeat:
    return Heartbeat(APP, member, epoch, active=active or {}, standby=standby or {},
                     warmup=warmup or {})


def test_a_standby_is_promoted_in_place_once_its_active_task_is_released():
    # the target swaps task 1_0's roles: m1 (p1) active -> standby, m2 (p2) standby -> active
    g = seeded(6, ("m1", "p1", 5, Tasks(active=T10), Tasks(standby=T10)),
               ("m2", "p2", 5, Tasks(standby=T10), Tasks(active=T10)))
    # m1 still runs it: m2 keeps its standby (no revocation round) and waits at the new epoch
    waits = g.send(owns("m2", 5, standby=T10))
    m2 = g.group.members["m2"]
    assert (m2.member_epoch, m2.state, m2.assigned) == (6, MemberState.UNRELEASED_TASKS,
                                                        Tasks(standby=T10))
    assert waits.answer.tasks is None  # unchanged: it keeps its standby
    # m1 is told to revoke the active task and given the standby in the same answer
    demoted = g.send(owns("m1", 5, active=T10))
    m1 = g.group.members["m1"]
    assert (m1.member_epoch, m1.state) == (5, MemberState.UNREVOKED_TASKS)
    assert (m1.assigned, m1.pending_revocation) == (Tasks(standby=T10), Tasks(active=T10))
    assert demoted.answer.tasks == Tasks(standby=T10)
    g.send(owns("m1", 5, standby=T10))  # released
    assert (g.group.members["m1"].member_epoch, g.group.members["m1"].state) == (
        6, MemberState.STABLE)
    # now free: m2's standby becomes the active task in one step
    promoted = g.send(owns("m2", 6, standby=T10))
    m2 = g.group.members["m2"]
    assert (m2.state, m2.assigned, m2.pending_revocation) == (
        MemberState.STABLE, Tasks(active=T10), Tasks())
    assert promoted.answer.tasks == Tasks(active=T10)


def test_a_standby_becomes_a_warmup_and_back_without_a_revocation():
    g = seeded(6, ("m1", "p1", 5, Tasks(standby=T10), Tasks(warmup=T10)),
               ("m2", "p2", 6, Tasks(active=T10), Tasks(active=T10)))
    out = g.send(owns("m1", 5, standby=T10))
    m1 = g.group.members["m1"]
    assert (m1.member_epoch, m1.state, m1.assigned, m1.pending_revocation) == (
        6, MemberState.STABLE, Tasks(warmup=T10), Tasks())
    assert out.answer.tasks == Tasks(warmup=T10)
    g.apply(Outcome([rec.group_metadata(APP, 7, g.group.metadata_hash, 0),
                     rec.target_member(APP, "m1", Tasks(standby=T10)),
                     rec.target_metadata(APP, 7, 2000)], Answer("", 0)))
    g.send(owns("m1", 6, warmup=T10))
    m1 = g.group.members["m1"]
    assert (m1.member_epoch, m1.state, m1.assigned) == (7, MemberState.STABLE,
                                                        Tasks(standby=T10))


def test_a_member_whose_heartbeat_no_longer_holds_the_tasks_to_revoke_moves_on_at_once():
    both, one = {"0": frozenset({0, 1})}, {"0": frozenset({0})}
    g = seeded(6, ("m1", "p1", 5, Tasks(active=both), Tasks(active=one)))
    # without its owned tasks nothing proves the release: it is told to revoke
    g.send(Heartbeat(APP, "m1", 5))
    assert g.group.members["m1"].state == MemberState.UNREVOKED_TASKS
    g = seeded(6, ("m1", "p1", 5, Tasks(active=both), Tasks(active=one)))
    out = g.send(owns("m1", 5, active=one))  # already dropped 0_1
    m1 = g.group.members["m1"]
    assert (m1.member_epoch, m1.state, m1.assigned, m1.pending_revocation) == (
        6, MemberState.STABLE, Tasks(active=one), Tasks())
    assert (out.answer.member_epoch, out.answer.tasks) == (6, Tasks(active=one))
    # a role it does not report cannot prove its tasks of that role released
    g = seeded(6, ("m1", "p1", 5, Tasks(standby=both), Tasks(standby=one)))
    g.send(Heartbeat(APP, "m1", 5, active={}))
    assert g.group.members["m1"].state == MemberState.UNREVOKED_TASKS


def retarget(g: Group, epoch: int, **targets: Tasks) -> None:
    """The group's next epoch with the given members' new targets (the others' unchanged)."""
    g.apply(Outcome([rec.group_metadata(APP, epoch, g.group.metadata_hash, 0),
                     *(rec.target_member(APP, m, t) for m, t in targets.items()),
                     rec.target_metadata(APP, epoch, 2000)], Answer("", 0)))


def test_a_member_done_revoking_that_must_revoke_again_takes_the_next_epoch():
    # Kafka 4.4's CurrentAssignmentBuilder.build for UNREVOKED_TASKS: once the member no longer
    # holds the tasks to revoke, computeNextAssignment runs at its epoch + 1, which a new
    # revocation (buildNewMember) keeps; a member done at last takes the target's epoch
    both, one = {"0": frozenset({0, 1})}, {"0": frozenset({0})}
    g = seeded(6, ("m1", "p1", 5, Tasks(active=both), Tasks(active=one)))
    g.send(owns("m1", 5, active=both))
    assert g.group.members["m1"].pending_revocation == Tasks(active={"0": frozenset({1})})
    retarget(g, 8, m1=Tasks())  # meanwhile its last task goes too
    out = g.send(owns("m1", 5, active=one))  # revoked 0_1; now told to revoke 0_0
    m1 = g.group.members["m1"]
    assert (m1.member_epoch, m1.previous_member_epoch, m1.state, m1.pending_revocation) == (
        6, 5, MemberState.UNREVOKED_TASKS, Tasks(active=one))
    assert out.answer.member_epoch == 6
    done = g.send(owns("m1", 6))
    m1 = g.group.members["m1"]
    assert (m1.member_epoch, m1.previous_member_epoch, m1.state) == (8, 6, MemberState.STABLE)
    assert done.answer.member_epoch == 8


def test_a_task_given_back_to_the_member_revoking_it_waits_for_its_release():
    # Kafka 4.4's isUnreleasedActiveTask asks the group who runs the task, the member itself
    # included: a task it still had pending revocation is granted a heartbeat after it
    # reported it gone, as the group learns of the release only then
    both, one = {"0": frozenset({0, 1})}, {"0": frozenset({0})}
    g = seeded(6, ("m1", "p1", 5, Tasks(active=both), Tasks(active=one)))
    g.send(owns("m1", 5, active=both))
    retarget(g, 7, m1=Tasks(active=both))  # 0_1 is handed back
    out = g.send(owns("m1", 5, active=one))
    m1 = g.group.members["m1"]
    assert (m1.member_epoch, m1.state, m1.assigned, m1.pending_revocation) == (
        7, MemberState.UNRELEASED_TASKS, Tasks(active=one), Tasks())
    assert out.answer.tasks is None  # unchanged: it keeps 0_0 and waits for 0_1
    given = g.send(owns("m1", 7, active=one))
    m1 = g.group.members["m1"]
    assert (m1.state, m1.assigned) == (MemberState.STABLE, Tasks(active=both))
    assert given.answer.tasks == Tasks(active=both)
