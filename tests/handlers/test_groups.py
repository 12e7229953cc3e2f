"""Classic groups on the group coordinator: JoinGroup (11), SyncGroup (14), Heartbeat (12),
LeaveGroup (13), DescribeGroups (15), ListGroups (16), DeleteGroups (42)."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE


def _join(member_id: str = "", group: str = "g") -> dict:
    return {"group_id": group, "session_timeout": 10_000, "rebalance_timeout": 10_000,
            "member_id": member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"m"}], "reason": None}


async def join_and_sync(h, group: str = "g") -> tuple[str, int]:
    """One member joins (a member id first, KIP-394) and syncs: its id and generation."""
    assert (await h.find_coordinator(group)).error_code == ErrorCode.none
    first = await h.call("JoinGroup", 9, _join("", group))
    assert first.error_code == ErrorCode.member_id_required
    joined = await h.call("JoinGroup", 9, _join(first.member_id, group))
    assert (joined.error_code, joined.leader) == (ErrorCode.none, first.member_id)
    synced = await h.call("SyncGroup", 5, {
        "group_id": group, "generation_id": joined.generation_id,
        "member_id": joined.member_id, "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": joined.member_id, "assignment": b"a"}]})
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"a")
    return joined.member_id, joined.generation_id


async def test_join_sync_heartbeat_leave(handlers):
    member, generation = await join_and_sync(handlers)
    assert generation == 1
    beat = await handlers.call("Heartbeat", 4, {"group_id": "g", "generation_id": generation,
                                                "member_id": member})
    left = await handlers.call("LeaveGroup", 5, {"group_id": "g", "members": [
        {"member_id": member, "group_instance_id": None, "reason": None}]})
    assert beat.error_code == ErrorCode.none
    assert (left.error_code, left.members[0].error_code) == (ErrorCode.none, ErrorCode.none)


async def test_heartbeat_errors(handlers):
    member, generation = await join_and_sync(handlers)
    stale = await handlers.call("Heartbeat", 4, {"group_id": "g",
                                                 "generation_id": generation - 1,
                                                 "member_id": member})
    stranger = await handlers.call("Heartbeat", 4, {"group_id": "g",
                                                    "generation_id": generation,
                                                    "member_id": "who"})
    assert stale.error_code == ErrorCode.illegal_generation
    assert stranger.error_code == ErrorCode.unknown_member_id


async def test_join_with_an_inconsistent_protocol_type(handlers):
    await join_and_sync(handlers)
    body = _join()
    body["protocol_type"] = "connect"
    r = await handlers.call("JoinGroup", 9, body)
    assert r.error_code == ErrorCode.inconsistent_group_protocol


async def test_describe_and_list_groups(handlers):
    member, _ = await join_and_sync(handlers)
    described = await handlers.call("DescribeGroups", 5, {"groups": ["g", "none"],
                                                          "include_authorized_operations": False})
    listed = await handlers.call("ListGroups", 5, {"states_filter": [], "types_filter": []})
    g, none = described.groups
    assert (g.error_code, g.group_state, g.protocol_data) == (ErrorCode.none, "Stable", "range")
    assert [m.member_id for m in g.members] == [member]
    assert (none.error_code, none.group_state) == (ErrorCode.none, "Dead")
    assert [(x.group_id, x.group_state, x.protocol_type) for x in listed.groups] == [
        ("g", "Stable", "consumer")]


async def test_describe_groups_v6_answers_group_id_not_found(handlers):
    """KIP-1043: v6 answers GROUP_ID_NOT_FOUND, with Kafka's message, where v5 says Dead."""
    await join_and_sync(handlers)
    await handlers.create_topic("t")
    await handlers.call("ConsumerGroupHeartbeat", 1, {
        "group_id": "new", "member_id": "m1", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 10_000, "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": []})
    v6 = await handlers.call("DescribeGroups", 6, {"groups": ["g", "none", "new"],
                                                   "include_authorized_operations": False})
    v5 = await handlers.call("DescribeGroups", 5, {"groups": ["none", "new"],
                                                   "include_authorized_operations": False})
    assert [(x.group_id, x.error_code, x.error_message, x.group_state) for x in v6.groups] == [
        ("g", ErrorCode.none, None, "Stable"),
        ("none", ErrorCode.group_id_not_found, "Group none not found.", "Dead"),
        ("new", ErrorCode.group_id_not_found, "Group new is not a classic group.", "Dead")]
    assert [(x.error_code, x.group_state) for x in v5.groups] == [(ErrorCode.none, "Dead")] * 2


async def test_delete_groups(handlers):
    member, _ = await join_and_sync(handlers, "busy")
    await join_and_sync(handlers, "idle")
    idle_member = (await handlers.call("DescribeGroups", 5, {"groups": ["idle"]})
                   ).groups[0].members[0].member_id
    await handlers.call("LeaveGroup", 5, {"group_id": "idle", "members": [
        {"member_id": idle_member, "group_instance_id": None, "reason": None}]})
    r = await handlers.call("DeleteGroups", 2, {"groups_names": ["busy", "idle", "none"]})
    codes = {x.group_id: x.error_code for x in r.results}
    assert codes == {"busy": ErrorCode.non_empty_group, "idle": ErrorCode.none,
                     "none": ErrorCode.group_id_not_found}


async def test_delete_groups_v3_results_have_an_error_message(handlers):
    """Kafka 4.4's v3 (kio has no schema for it): the results of v2, each with an ErrorMessage,
    null unless a streams group's topics could not go (Samsa has no streams groups)."""
    await join_and_sync(handlers, "busy")
    r = await handlers.call("DeleteGroups", 3, {"groups_names": ["busy", "none"]})
    assert [(x.group_id, x.error_code, x.error_message) for x in r.results] == [
        ("busy", ErrorCode.non_empty_group, None), ("none", ErrorCode.group_id_not_found, None)]


async def test_group_authorization_failed(secured):
    join = await secured.call("JoinGroup", 9, _join(), principal=ALICE)
    described = await secured.call("DescribeGroups", 5, {"groups": ["g"]}, principal=ALICE)
    assert join.error_code == ErrorCode.group_authorization_failed
    assert described.groups[0].error_code == ErrorCode.group_authorization_failed
