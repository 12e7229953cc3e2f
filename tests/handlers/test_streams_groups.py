"""Streams groups (KIP-1071): StreamsGroupHeartbeat (88) joins with a topology (the broker
creates its repartition and changelog topics), assigns tasks sticky and revoke-before-assign
across members, fences stale epochs, leaves; StreamsGroupDescribe (89) shows it; ListGroups
and DescribeGroups see type STREAMS; OffsetCommit and OffsetFetch check the member epoch.
The APIs are served by default, as in Kafka 4.4: while streams.version is finalized at 1, as
a new cluster finalizes it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from samsa.protocol.errors import ErrorCode

from .harness import ADMIN, ALICE, Handlers
from .test_groups import join_and_sync

# assigned at once: the initial delay and the assignment interval have their own specs
STREAMS = {"group.streams.initial.rebalance.delay.ms": 0,
           "group.streams.assignment.interval.ms": 0}


@pytest.fixture
async def streams(tmp_path: Path) -> Any:
    h = await Handlers.open(tmp_path / "data", STREAMS)
    try:
        yield h
    finally:
        await h.close()


def _topology(app: str = "app", epoch: int = 0) -> dict[str, Any]:
    """StreamsCount's: read `events`, re-key into a repartition topic, count into a store."""
    changelog_configs = [{"key": "cleanup.policy", "value": "compact"}]
    return {"epoch": epoch, "subtopologies": [
        {"subtopology_id": "0", "source_topics": ["events"], "source_topic_regex": [],
         "state_changelog_topics": [], "repartition_sink_topics": [f"{app}-by-key-repartition"],
         "repartition_source_topics": [], "copartition_groups": []},
        {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [],
         "state_changelog_topics": [{"name": f"{app}-counts-changelog", "partitions": 0,
                                     "replication_factor": 0,
                                     "topic_configs": changelog_configs}],
         "repartition_sink_topics": [],
         "repartition_source_topics": [{"name": f"{app}-by-key-repartition", "partitions": 0,
                                        "replication_factor": 0, "topic_configs": []}],
         "copartition_groups": []}]}


def _beat(member: str, epoch: int, *, process: str = "p1", group: str = "app",
          active: list[tuple[str, list[int]]] | None = None, topology: bool = False
          ) -> dict[str, Any]:
    return {"group_id": group, "member_id": member, "member_epoch": epoch,
            "endpoint_information_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout": 10_000 if epoch == 0 else -1,
            "topology": _topology(group) if topology or epoch == 0 else None,
            "active_tasks": [] if epoch == 0 else (
                None if active is None else
                [{"subtopology_id": s, "partitions": ps} for s, ps in active]),
            "standby_tasks": [] if epoch == 0 else None,
            "warmup_tasks": [] if epoch == 0 else None,
            "process_id": process if epoch == 0 else None, "user_endpoint": None,
            "client_tags": [] if epoch == 0 else None, "task_offsets": None,
            "task_end_offsets": None, "shutdown_application": False}


def _active(r: Any) -> list[tuple[str, list[int]]] | None:
    if r.active_tasks is None:
        return None
    return [(t.subtopology_id, list(t.partitions)) for t in r.active_tasks]


@pytest.fixture
async def without_streams(tmp_path: Path) -> Any:
    h = await Handlers.open(tmp_path / "data", {"initial.feature.levels": "streams.version=0"})
    try:
        yield h
    finally:
        await h.close()


async def test_not_served_while_streams_version_is_not_finalized(without_streams):
    h = without_streams
    versions = await h.call("ApiVersions", 3, {"client_software_name": "t",
                                               "client_software_version": "1"})
    assert {88, 89}.isdisjoint(k.api_key for k in versions.api_keys)
    await h.find_coordinator("app")
    r = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    assert r.error_code == ErrorCode.unsupported_version


async def test_advertised_by_default_with_streams_version_finalized(handlers):
    # Kafka 4.4: a new cluster finalizes streams.version 1 and serves the APIs, no switch
    versions = await handlers.call("ApiVersions", 3, {"client_software_name": "t",
                                                      "client_software_version": "1"})
    served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert served[88] == (0, 1) and served[89] == (0, 1) and served[93] == (0, 0)
    assert ("streams.version", 1) in {(f.name, f.max_version_level)
                                      for f in versions.finalized_features}


async def test_join_creates_internal_topics_then_assigns_every_task(streams):
    await streams.create_topic("events", 3)
    await streams.find_coordinator("app")
    first = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    assert (first.error_code, first.member_id, first.member_epoch) == (ErrorCode.none, "m1", 1)
    # the repartition and changelog topics did not exist: created now, no tasks yet
    assert [s.status_code for s in first.status] == [3]  # MISSING_INTERNAL_TOPICS
    assert _active(first) == []
    store = streams.broker.store
    assert len(store.topic("app-by-key-repartition").partitions) == 3
    changelog = store.topic("app-counts-changelog")
    assert len(changelog.partitions) == 3 and changelog.configs["cleanup.policy"] == "compact"

    second = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 1, active=[]))
    assert (second.error_code, second.member_epoch, second.status) == (ErrorCode.none, 2, None)
    assert _active(second) == [("0", [0, 1, 2]), ("1", [0, 1, 2])]
    assert second.heartbeat_interval.total_seconds() == 5

    described = await streams.call("StreamsGroupDescribe", 0, {
        "group_ids": ["app"], "include_authorized_operations": False})
    g = described.groups[0]
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch) == (
        ErrorCode.none, "Stable", 2, 2)
    assert [s.subtopology_id for s in g.topology.subtopologies] == ["0", "1"]
    assert [(m.member_id, m.process_id, m.member_epoch) for m in g.members] == [("m1", "p1", 2)]


async def test_second_member_gets_tasks_only_once_the_first_revoked_them(streams):
    await streams.create_topic("events", 2)
    await streams.find_coordinator("app")
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    r1 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 1, active=[]))
    assert _active(r1) == [("0", [0, 1]), ("1", [0, 1])]
    owned1 = _active(r1)

    j2 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m2", 0, process="p2"))
    assert j2.error_code == ErrorCode.none
    # m1 still holds every task: m2 is at the new epoch with none of them yet
    assert (j2.member_epoch, _active(j2)) == (3, [])

    # m1 is told to keep half (revoke the rest), at its old epoch
    r1 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 2, active=owned1))
    assert r1.member_epoch == 2
    kept = _active(r1)
    assert kept is not None and sum(len(ps) for _, ps in kept) == 2

    # before m1 reports the revocation, m2 gets nothing
    r2 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m2", 3, active=[]))
    assert _active(r2) in (None, [])

    r1 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 2, active=kept))
    assert r1.member_epoch == 3
    r2 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m2", 3, active=[]))
    given = _active(r2)
    assert given is not None and sum(len(ps) for _, ps in given) == 2
    tasks = {(s, p) for s, ps in given + (kept or []) for p in ps}
    assert tasks == {("0", 0), ("0", 1), ("1", 0), ("1", 1)}

    listed = await streams.call("ListGroups", 5, {"states_filter": [],
                                                  "types_filter": ["streams"]})
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [
        ("app", "streams", "Stable")]


async def test_fenced_unknown_and_leave(streams):
    await streams.create_topic("events", 1)
    await streams.find_coordinator("app")
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    fenced = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 9))
    unknown = await streams.call("StreamsGroupHeartbeat", 0, _beat("who", 1))
    assert fenced.error_code == ErrorCode.fenced_member_epoch
    assert unknown.error_code == ErrorCode.unknown_member_id
    left = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", -1))
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    described = await streams.call("StreamsGroupDescribe", 0, {
        "group_ids": ["app"], "include_authorized_operations": False})
    assert (described.groups[0].group_state, described.groups[0].members) == ("Empty", ())


async def test_join_without_topology_is_an_invalid_request(streams):
    await streams.find_coordinator("app")
    body = _beat("m1", 0) | {"topology": None}
    r = await streams.call("StreamsGroupHeartbeat", 0, body)
    assert r.error_code == ErrorCode.invalid_request


async def test_missing_source_topic_is_a_status(streams):
    await streams.find_coordinator("app")
    r = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    assert r.error_code == ErrorCode.none
    assert [(s.status_code, s.status_detail) for s in r.status] == [
        (1, "Source topics events are missing.")]
    assert _active(r) == []


async def test_a_consumer_group_id_is_not_a_streams_group(streams):
    await streams.create_topic("events", 1)
    await streams.find_coordinator("app")
    beat = {"group_id": "app", "member_id": "c1", "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout": 10_000, "subscribed_topic_names": ["events"],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}
    assert (await streams.call("ConsumerGroupHeartbeat", 1, beat)).error_code == ErrorCode.none
    r = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    assert r.error_code == ErrorCode.group_id_not_found


async def test_offset_commit_checks_the_member_epoch(streams):
    await streams.create_topic("events", 1)
    await streams.find_coordinator("app")
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 1, active=[]))

    def commit(epoch: int) -> dict[str, Any]:
        return {"group_id": "app", "generation_id_or_member_epoch": epoch, "member_id": "m1",
                "group_instance_id": None, "topics": [{"name": "events", "partitions": [
                    {"partition_index": 0, "committed_offset": 5,
                     "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    ok = await streams.call("OffsetCommit", 9, commit(2))
    stale = await streams.call("OffsetCommit", 9, commit(1))
    assert ok.topics[0].partitions[0].error_code == ErrorCode.none
    assert stale.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
    groups = await streams.call("DescribeGroups", 5, {"groups": ["app"],
                                                      "include_authorized_operations": False})
    assert groups.groups[0].group_state == "Dead"  # not a classic group


    def fetch(epoch: int) -> dict[str, Any]:
        return {"groups": [{"group_id": "app", "member_id": "m1", "member_epoch": epoch,
                            "topics": [{"name": "events", "partition_indexes": [0]}]}],
                "require_stable": False}
    fetched = await streams.call("OffsetFetch", 9, fetch(2))
    stale_fetch = await streams.call("OffsetFetch", 9, fetch(1))
    assert fetched.groups[0].error_code == ErrorCode.none
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == 5
    assert stale_fetch.groups[0].error_code == ErrorCode.stale_member_epoch


async def test_a_member_whose_session_ends_is_removed_and_its_tasks_move(tmp_path):
    h = await Handlers.open(tmp_path / "data", STREAMS | {"group.streams.session.timeout.ms": 300})
    try:
        await h.create_topic("events", 2)
        await h.find_coordinator("app")
        await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
        r1 = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 1, active=[]))
        await h.call("StreamsGroupHeartbeat", 0, _beat("m2", 0, process="p2"))
        owned = _active(r1)
        epoch = r1.member_epoch
        for _ in range(10):  # m1 heartbeats, m2 falls silent
            r1 = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", epoch, active=owned))
            epoch, owned = r1.member_epoch, _active(r1) or owned
            await asyncio.sleep(0.1)
        described = await h.call("StreamsGroupDescribe", 0, {
            "group_ids": ["app"], "include_authorized_operations": False})
        g = described.groups[0]
        assert [m.member_id for m in g.members] == ["m1"]
        assert sum(len(t.partitions) for t in g.members[0].assignment.active_tasks) == 4
    finally:
        await h.close()


async def test_a_member_that_does_not_revoke_in_time_is_removed(streams):
    await streams.create_topic("events", 2)
    await streams.find_coordinator("app")
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0) | {"rebalance_timeout": 300})
    r1 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 1, active=[]))
    owned, epoch = _active(r1), r1.member_epoch
    j2 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m2", 0, process="p2"))
    told = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", epoch, active=owned))
    def count(tasks: Any) -> int:
        return sum(len(ps) for _, ps in tasks or [])

    assert count(_active(told)) < count(owned)  # told to revoke some
    await asyncio.sleep(0.2)
    again = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", epoch, active=owned))
    assert again.error_code == ErrorCode.none  # still within its rebalance timeout
    await asyncio.sleep(0.3)
    gone = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", epoch, active=owned))
    assert gone.error_code == ErrorCode.unknown_member_id
    r2 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m2", j2.member_epoch, active=[]))
    assert sum(len(ps) for _, ps in _active(r2) or []) == 4


async def test_delete_groups_deletes_an_empty_streams_group_only(streams):
    await streams.create_topic("events", 1)
    await streams.find_coordinator("app")
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    busy = await streams.call("DeleteGroups", 2, {"groups_names": ["app"]})
    assert busy.results[0].error_code == ErrorCode.non_empty_group
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", -1))
    done = await streams.call("DeleteGroups", 2, {"groups_names": ["app"]})
    assert done.results[0].error_code == ErrorCode.none
    described = await streams.call("StreamsGroupDescribe", 0, {
        "group_ids": ["app"], "include_authorized_operations": False})
    assert described.groups[0].error_code == ErrorCode.group_id_not_found
    # the group is gone from the log too: a reload finds nothing of it
    groups = streams.broker.groups
    p = groups.partition_for("app")
    groups.on_leadership(p, False)
    groups.on_leadership(p, True)
    await eventually_loaded(groups, p)
    assert "app" not in groups.streams.groups


async def eventually_loaded(groups: Any, p: int) -> None:
    for _ in range(100):
        if p in groups.loaded:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"partition {p} not loaded again")


async def test_a_reloaded_partition_brings_the_group_back_from_its_records(streams):
    await streams.create_topic("events", 2)
    await streams.find_coordinator("app")
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    r1 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 1, active=[]))
    groups = streams.broker.groups
    before = streams.broker.groups.streams.describe("app")
    p = groups.partition_for("app")
    groups.on_leadership(p, False)
    assert "app" not in groups.streams.groups
    groups.on_leadership(p, True)
    await eventually_loaded(groups, p)
    assert groups.streams.describe("app") == before
    again = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", r1.member_epoch,
                                                                  active=_active(r1)))
    assert (again.error_code, again.member_epoch) == (ErrorCode.none, r1.member_epoch)


async def test_a_source_regex_is_resolved_against_the_cluster_topics(streams):
    await streams.create_topic("events-a", 1)
    await streams.create_topic("events-b", 2)
    await streams.find_coordinator("regex")
    beat = _beat("m1", 0, group="regex") | {"topology": {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [], "source_topic_regex": ["events-.*"],
         "state_changelog_topics": [], "repartition_sink_topics": [],
         "repartition_source_topics": [], "copartition_groups": []}]}}
    r = await streams.call("StreamsGroupHeartbeat", 0, beat)
    assert (r.error_code, r.status, _active(r)) == (ErrorCode.none, None, [("0", [0, 1])])


async def test_a_streams_group_id_is_not_a_consumer_or_classic_group(streams):
    await streams.create_topic("events", 1)
    await streams.find_coordinator("app")
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    beat = {"group_id": "app", "member_id": "c1", "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout": 10_000, "subscribed_topic_names": ["events"],
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []}
    consumer = await streams.call("ConsumerGroupHeartbeat", 1, beat)
    assert consumer.error_code == ErrorCode.group_id_not_found
    join = await streams.call("JoinGroup", 9, {
        "group_id": "app", "session_timeout": 10_000, "rebalance_timeout": 10_000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}], "reason": None})
    assert join.error_code == ErrorCode.inconsistent_group_protocol


async def test_authorization(tmp_path):
    h = await Handlers.open(tmp_path / "data", STREAMS, authorizer=True)
    try:
        await h.create_topic("events", 1)
        await h.find_coordinator("app")
        denied = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 0), principal=ALICE)
        assert denied.error_code == ErrorCode.group_authorization_failed

        async def allow(rtype: int, name: str, operation: int) -> None:
            acl = {"resource_type": rtype, "resource_name": name, "resource_pattern_type": 3,
                   "principal": "User:alice", "host": "*", "operation": operation,
                   "permission_type": 3}
            await h.call("CreateAcls", 3, {"creations": [acl]}, principal=ADMIN)
        GROUP, TOPIC, READ, DESCRIBE = 3, 2, 3, 8
        await allow(GROUP, "app", READ)
        topics = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 0), principal=ALICE)
        assert topics.error_code == ErrorCode.topic_authorization_failed
        for name in ("events", "app-by-key-repartition", "app-counts-changelog"):
            await allow(TOPIC, name, DESCRIBE)
        # may describe, may not create: the internal topics stay missing, the status says why
        r = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 0), principal=ALICE)
        assert r.error_code == ErrorCode.none
        assert [(s.status_code, s.status_detail) for s in r.status] == [
            (3, "Unable to create topics: Unauthorized to CREATE on topics "
                "app-by-key-repartition, app-counts-changelog.")]
        assert h.broker.store.topic("app-counts-changelog") is None
    finally:
        await h.close()


async def test_a_static_member_that_left_keeps_its_place_until_its_session_ends(tmp_path):
    h = await Handlers.open(tmp_path / "data", STREAMS | {"group.streams.session.timeout.ms": 400})
    try:
        await h.create_topic("events", 1)
        await h.find_coordinator("app")
        await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 0) | {"instance_id": "i1"})
        left = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", -2))
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -2)

        async def members() -> list[tuple[str, int]]:
            d = await h.call("StreamsGroupDescribe", 0, {
                "group_ids": ["app"], "include_authorized_operations": False})
            return [(m.member_id, m.member_epoch) for m in d.groups[0].members]
        assert await members() == [("m1", -2)]
        await asyncio.sleep(0.6)
        assert await members() == []
    finally:
        await h.close()


async def test_an_empty_group_turns_from_classic_to_streams_and_back_keeping_its_offsets(
        streams):
    """Kafka 4.4 converts only empty groups (GroupMetadataManager.getOrCreateStreamsGroup
    and classicGroupJoinToClassicGroup): the first streams member of an empty classic group
    makes it a streams group, a new classic member of an empty streams group makes it classic
    again; the committed offsets stay. An application moves by stopping and restarting."""
    await streams.create_topic("events", 1)
    member, generation = await join_and_sync(streams, "app")
    committed = await streams.call("OffsetCommit", 9, {
        "group_id": "app", "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "topics": [{"name": "events", "partitions": [
            {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]})
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none
    busy = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    assert busy.error_code == ErrorCode.group_id_not_found  # a classic member is still in
    await streams.call("LeaveGroup", 5, {"group_id": "app", "members": [
        {"member_id": member, "group_instance_id": None, "reason": None}]})

    joined = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    assert joined.error_code == ErrorCode.none
    listed = await streams.call("ListGroups", 5, {"states_filter": [], "types_filter": []})
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("app", "streams")]
    fetch = {"groups": [{"group_id": "app", "member_id": None, "member_epoch": -1,
                         "topics": [{"name": "events", "partition_indexes": [0]}]}],
             "require_stable": False}
    offsets = await streams.call("OffsetFetch", 9, fetch)
    assert offsets.groups[0].topics[0].partitions[0].committed_offset == 7
    refused = await streams.call("JoinGroup", 9, _classic_join())
    assert refused.error_code == ErrorCode.inconsistent_group_protocol  # a streams member is in

    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", -1))
    first = await streams.call("JoinGroup", 9, _classic_join())
    assert first.error_code == ErrorCode.member_id_required
    again = await streams.call("JoinGroup", 9, _classic_join(first.member_id))
    assert again.error_code == ErrorCode.none
    described = await streams.call("StreamsGroupDescribe", 0, {
        "group_ids": ["app"], "include_authorized_operations": False})
    assert described.groups[0].error_code == ErrorCode.group_id_not_found
    offsets = await streams.call("OffsetFetch", 9, fetch)
    assert offsets.groups[0].topics[0].partitions[0].committed_offset == 7
    # the streams group's records were tombstoned: a reload finds only the classic group
    groups = streams.broker.groups
    p = groups.partition_for("app")
    groups.on_leadership(p, False)
    groups.on_leadership(p, True)
    await eventually_loaded(groups, p)
    assert "app" not in groups.streams.groups and "app" in groups.groups


def _classic_join(member_id: str = "") -> dict[str, Any]:
    return {"group_id": "app", "session_timeout": 10_000, "rebalance_timeout": 10_000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m"}], "reason": None}


async def test_version_1_answers_as_kafka_4_4_without_a_topology_description_plugin(streams):
    """v1 (KIP-1331): the recovery lag as an int64; with no topology description plugin
    configured (Kafka's default) no description is ever required, and a describe that asks
    for one gets status 1, NOT_STORED; AssignorName is Kafka's sticky assignor, null on error."""
    await streams.create_topic("events", 1)
    await streams.find_coordinator("app")
    r = await streams.call("StreamsGroupHeartbeat", 1, _beat("m1", 0))
    assert (r.error_code, r.acceptable_recovery_lag, r.topology_description_required) == (
        ErrorCode.none, 10_000, False)
    asked = await streams.call("StreamsGroupDescribe", 1, {
        "group_ids": ["app", "nope"], "include_authorized_operations": False,
        "include_topology_description": True})
    app, nope = asked.groups
    assert (app.error_code, app.topology_description, app.topology_description_status,
            app.assignor_name) == (ErrorCode.none, None, 1, "sticky")
    assert (nope.error_code, nope.topology_description_status, nope.assignor_name) == (
        ErrorCode.group_id_not_found, 0, None)
    plain = await streams.call("StreamsGroupDescribe", 1, {
        "group_ids": ["app"], "include_authorized_operations": False,
        "include_topology_description": False})
    assert (plain.groups[0].topology_description_status, plain.groups[0].assignor_name) == (
        0, "sticky")


async def _set_group_configs(h: Handlers, group: str, configs: dict[str, str]) -> Any:
    r = await h.call("IncrementalAlterConfigs", 1, {"resources": [{
        "resource_type": 32, "resource_name": group, "configs": [
            {"name": k, "config_operation": 0, "value": v} for k, v in configs.items()]}],
        "validate_only": False})
    return r.responses[0]


async def test_per_group_streams_configs_apply_within_the_brokers_bounds(streams):
    """Kafka's GroupConfig: a streams group's streams.* overrides, each within the broker's
    group.streams.min/max.* bounds (and the session above the heartbeat), set the interval,
    lag and standby count its heartbeats are answered with."""
    for key, value in [("streams.session.timeout.ms", "1000"),
                       ("streams.heartbeat.interval.ms", "20000"),
                       ("streams.num.standby.replicas", "3"),
                       ("streams.task.offset.interval.ms", "1000"),
                       ("streams.num.warmup.replicas", "21"),
                       ("streams.assignment.interval.ms", "16000")]:
        refused = await _set_group_configs(streams, "app", {key: value})
        assert refused.error_code == ErrorCode.invalid_config, key
    ok = await _set_group_configs(streams, "app", {
        "streams.heartbeat.interval.ms": "6000", "streams.session.timeout.ms": "50000",
        "streams.acceptable.recovery.lag": "77", "streams.task.offset.interval.ms": "20000",
        "streams.num.standby.replicas": "1"})
    assert ok.error_code == ErrorCode.none
    await streams.create_topic("events", 1)
    await streams.find_coordinator("app")
    r = await streams.call("StreamsGroupHeartbeat", 1, _beat("m1", 0))
    assert (r.error_code, r.heartbeat_interval.total_seconds(), r.acceptable_recovery_lag,
            r.task_offset_interval.total_seconds()) == (ErrorCode.none, 6, 77, 20)
    await streams.call("StreamsGroupHeartbeat", 1, _beat("m2", 0, process="p2"))
    r1 = await streams.call("StreamsGroupHeartbeat", 1, _beat("m1", r.member_epoch,
                                                               active=_active(r)))
    r2 = await streams.call("StreamsGroupHeartbeat", 1, _beat("m2", 2, active=[]))
    standbys = [t for x in (r1, r2) if x.standby_tasks for t in x.standby_tasks]
    assert standbys  # the stateful subtopology's task has one standby on the other process


async def test_the_task_offsets_a_member_reports_are_described(streams):
    """Kafka's MemberTaskOffsets: a heartbeat's TaskOffsets and TaskEndOffsets replace the
    member's last ones (a null list keeps them) and StreamsGroupDescribe shows them."""
    await streams.create_topic("events", 1)
    await streams.find_coordinator("app")
    r = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    offsets = [{"subtopology_id": "1", "partition": 0, "offset": 40}]
    ends = [{"subtopology_id": "1", "partition": 0, "offset": 55}]
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", r.member_epoch,
                       active=_active(r)) | {"task_offsets": offsets, "task_end_offsets": ends})
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", r.member_epoch,
                       active=_active(r)) | {"task_offsets": [{**offsets[0], "offset": 50}]})

    async def described() -> list[tuple[Any, ...]]:
        d = await streams.call("StreamsGroupDescribe", 0, {
            "group_ids": ["app"], "include_authorized_operations": False})
        m = d.groups[0].members[0]
        return [(t.subtopology_id, t.partition, t.offset) for t in m.task_offsets] + [
            ("end", t.subtopology_id, t.partition, t.offset) for t in m.task_end_offsets]
    assert await described() == [("1", 0, 50), ("end", "1", 0, 55)]


def _description_update(group: str = "app") -> dict[str, Any]:
    """A StreamsGroupTopologyDescriptionUpdate (93) of StreamsCount's first subtopology."""
    node = {"name": "KSTREAM-SOURCE-0000000000", "node_type": 1, "source_topics": ["events"],
            "sink_topic": None, "stores": [], "successors": ["KSTREAM-SINK-0000000001"]}
    return {"group_id": group, "member_id": "m1", "topology_epoch": 0,
            "topology_description": {"subtopologies": [{"subtopology_id": "0",
                                                        "nodes": [node]}],
                                     "global_stores": []}}


async def test_a_topology_description_is_refused_as_kafka_without_its_plugin(tmp_path):
    # Kafka 4.4 stores descriptions only through group.streams.topology.description.plugin.class
    # (none by default, and none here): READ on the group first, then UNSUPPORTED_VERSION.
    h = await Handlers.open(tmp_path / "data", STREAMS, authorizer=True)
    try:
        versions = await h.call("ApiVersions", 3, {"client_software_name": "t",
                                                   "client_software_version": "1"})
        assert {k.api_key: (k.min_version, k.max_version)
                for k in versions.api_keys}[93] == (0, 0)
        denied = await h.call("StreamsGroupTopologyDescriptionUpdate", 0,
                              _description_update(), principal=ALICE)
        assert (denied.error_code, denied.error_message) == (
            ErrorCode.group_authorization_failed, "Group authorization failed.")
        r = await h.call("StreamsGroupTopologyDescriptionUpdate", 0, _description_update(),
                         principal=ADMIN)
        assert (r.error_code, r.error_message) == (
            ErrorCode.unsupported_version,
            "The broker has no streams group topology description plugin configured.")
    finally:
        await h.close()


async def test_a_topology_description_is_not_served_while_streams_version_is_not_finalized(
        without_streams):
    versions = await without_streams.call("ApiVersions", 3, {"client_software_name": "t",
                                                             "client_software_version": "1"})
    assert 93 not in {k.api_key for k in versions.api_keys}
    r = await without_streams.call("StreamsGroupTopologyDescriptionUpdate", 0,
                                   _description_update())
    assert (r.error_code, r.error_message) == (ErrorCode.unsupported_version,
                                               "The version of API is not supported.")


def _tasks(r: Any) -> int:
    return sum(len(ps) for _, ps in _active(r) or [])


async def test_a_new_group_waits_its_initial_delay_then_assigns_every_member(tmp_path):
    # Kafka 4.4's group.streams.initial.rebalance.delay.ms: the members that join a new group
    # within it are assigned together, none given everything first and then told to revoke;
    # meanwhile they are at the initial target epoch 1 with nothing, told ASSIGNMENT_DELAYED.
    h = await Handlers.open(tmp_path / "data", STREAMS | {
        "group.streams.initial.rebalance.delay.ms": 300})
    try:
        await h.create_topic("events", 2)
        await h.find_coordinator("app")
        j1 = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
        j2 = await h.call("StreamsGroupHeartbeat", 0, _beat("m2", 0, process="p2"))
        again = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 1))
        assert [(r.member_epoch, _tasks(r)) for r in (j1, j2)] == [(1, 0)] * 2
        assert (again.member_epoch, again.active_tasks) == (1, None)
        delayed = (5, "Assignment delayed due to the configured initial rebalance delay.")
        assert delayed in [(st.status_code, st.status_detail) for st in again.status]
        group = h.broker.groups.streams.groups["app"]
        assert group.assignment_epoch == 0 and group.target == {}
        await asyncio.sleep(0.45)
        assert group.assignment_epoch == group.epoch  # computed when the delay ended
        r1 = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 1))
        r2 = await h.call("StreamsGroupHeartbeat", 0, _beat("m2", 1))
        assert (r1.member_epoch, r2.member_epoch, r1.status, r2.status) == (
            group.epoch, group.epoch, None, None)
        assert (_tasks(r1), _tasks(r2)) == (2, 2)
    finally:
        await h.close()


async def test_a_target_assignment_waits_for_the_assignment_interval(tmp_path):
    h = await Handlers.open(tmp_path / "data", STREAMS | {
        "group.streams.assignment.interval.ms": 400})
    try:
        await h.create_topic("events", 2)
        await h.find_coordinator("app")
        await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
        await asyncio.sleep(0.45)  # its internal topics made a new epoch: assigned after 400 ms
        r1 = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", 1, active=[]))
        owned = _active(r1)
        assert _tasks(r1) == 4
        j2 = await h.call("StreamsGroupHeartbeat", 0, _beat("m2", 0, process="p2"))
        same = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", r1.member_epoch,
                                                              active=owned))
        # within the interval: no new target, m1 keeps everything, m2 waits with nothing
        assert (_tasks(j2), same.active_tasks, same.member_epoch) == (0, None, r1.member_epoch)
        assert [(st.status_code, st.status_detail) for st in same.status] == [
            (5, "Assignment delayed due to the configured assignment interval.")]
        await asyncio.sleep(0.45)
        told = await h.call("StreamsGroupHeartbeat", 0, _beat("m1", r1.member_epoch,
                                                              active=owned))
        assert _tasks(told) == 2  # the next heartbeat after it: m1 revokes half for m2
    finally:
        await h.close()


async def test_a_member_without_the_rack_aware_tags_is_told_which_it_misses(tmp_path):
    h = await Handlers.open(tmp_path / "data", STREAMS | {
        "group.streams.rack.aware.assignment.tags": "zone,cluster"})
    try:
        await h.create_topic("events", 1)
        await h.find_coordinator("app")
        tagged = _beat("m1", 0) | {"client_tags": [{"key": "zone", "value": "a"}]}
        r = await h.call("StreamsGroupHeartbeat", 1, tagged)
        assert (6, "Missing required client tags for rack-aware standby assignment: [cluster]. "
                   "Configure them via 'client.tag.<tagKey>' in your Streams config.") in [
            (st.status_code, st.status_detail) for st in r.status]
        # v0 has no such status (Kafka 4.4 answers it from v1)
        v0 = await h.call("StreamsGroupHeartbeat", 0, _beat("m2", 0, process="p2"))
        assert 6 not in [st.status_code for st in v0.status or []]
    finally:
        await h.close()


async def test_a_member_rejoining_at_epoch_0_keeps_its_epoch_and_tasks(streams):
    # Kafka 4.4's getOrCreateDefaultMember: a known member's epoch-0 heartbeat (after a lost
    # answer or a fencing) is answered with its epoch and all its tasks, and moves no group
    # epoch: the other members are not rebalanced for it.
    await streams.create_topic("events", 2)
    await streams.find_coordinator("app")
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    r1 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 1, active=[]))
    group = streams.broker.groups.streams.groups["app"]
    epoch = group.epoch
    again = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    assert (again.error_code, again.member_epoch, _active(again)) == (
        ErrorCode.none, r1.member_epoch, _active(r1))
    assert group.epoch == epoch


async def test_an_offset_commit_of_an_older_epoch_passes_for_tasks_held_since(streams):
    # Kafka 4.4's assignment epochs: m1 was given every task at epoch 2, then kept half of
    # them at epoch 3; a commit it sent at epoch 2 passes for the partitions of the tasks it
    # kept, not for those that moved to m2.
    await streams.create_topic("events", 2)
    await streams.find_coordinator("app")
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 0))
    r1 = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 1, active=[]))
    assert (r1.member_epoch, _tasks(r1)) == (2, 4)
    await streams.call("StreamsGroupHeartbeat", 0, _beat("m2", 0, process="p2"))
    told = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 2, active=_active(r1)))
    done = await streams.call("StreamsGroupHeartbeat", 0, _beat("m1", 2, active=_active(told)))
    assert (_active(told), done.member_epoch) == ([("0", [0]), ("1", [0])], 3)

    def commit(partition: int) -> dict[str, Any]:
        return {"group_id": "app", "generation_id_or_member_epoch": 2, "member_id": "m1",
                "group_instance_id": None, "topics": [{"name": "events", "partitions": [
                    {"partition_index": partition, "committed_offset": 5,
                     "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    kept = await streams.call("OffsetCommit", 9, commit(0))
    moved = await streams.call("OffsetCommit", 9, commit(1))
    assert kept.topics[0].partitions[0].error_code == ErrorCode.none
    assert moved.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
    # the epochs are in the records: a reloaded partition still knows them
    groups = streams.broker.groups
    p = groups.partition_for("app")
    groups.on_leadership(p, False)
    groups.on_leadership(p, True)
    await eventually_loaded(groups, p)
    again = await streams.call("OffsetCommit", 9, commit(0))
    assert again.topics[0].partitions[0].error_code == ErrorCode.none
