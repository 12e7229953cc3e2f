"""Consumer-protocol groups (KIP-848): ConsumerGroupHeartbeat (68) joins, reconciles and leaves;
ConsumerGroupDescribe (69) shows members and their assignments. The coordinator assigns."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE


def _beat(member: str, epoch: int, topics: list[str] | None = None, group: str = "g") -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout": 10_000, "subscribed_topic_names": topics,
            "subscribed_topic_regex": None, "server_assignor": None,
            "topic_partitions": [] if epoch == 0 else None}


async def test_join_is_assigned_every_partition_then_leaves(handlers):
    created = await handlers.create_topic("t", 3)
    await handlers.find_coordinator("g")
    joined = await handlers.call("ConsumerGroupHeartbeat", 1, _beat("m1", 0, ["t"]))
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (
        ErrorCode.none, "m1", 1)
    assert [(tp.topic_id, sorted(tp.partitions)) for tp in joined.assignment.topic_partitions
            ] == [(created.topic_id, [0, 1, 2])]
    described = await handlers.call("ConsumerGroupDescribe", 1, {"group_ids": ["g"]})
    g = described.groups[0]
    assert (g.error_code, g.group_state, [m.member_id for m in g.members]) == (
        ErrorCode.none, "Stable", ["m1"])
    left = await handlers.call("ConsumerGroupHeartbeat", 1, _beat("m1", -1))
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)


async def test_fenced_and_unknown_members(handlers):
    await handlers.create_topic("t")
    await handlers.find_coordinator("g")
    await handlers.call("ConsumerGroupHeartbeat", 1, _beat("m1", 0, ["t"]))
    fenced = await handlers.call("ConsumerGroupHeartbeat", 1, _beat("m1", 7))
    unknown = await handlers.call("ConsumerGroupHeartbeat", 1, _beat("who", 3))
    assert fenced.error_code == ErrorCode.fenced_member_epoch
    assert unknown.error_code == ErrorCode.unknown_member_id


async def test_join_without_a_subscription_is_an_invalid_request(handlers):
    await handlers.find_coordinator("g")
    r = await handlers.call("ConsumerGroupHeartbeat", 1, _beat("m1", 0, None))
    assert r.error_code == ErrorCode.invalid_request


async def test_describe_an_unknown_group(handlers):
    await handlers.find_coordinator("g")
    r = await handlers.call("ConsumerGroupDescribe", 1, {"group_ids": ["none"]})
    assert r.groups[0].error_code == ErrorCode.group_id_not_found


async def test_group_authorization_failed(secured):
    await secured.create_topic("t")
    await secured.find_coordinator("g")
    r = await secured.call("ConsumerGroupHeartbeat", 1, _beat("m1", 0, ["t"]), principal=ALICE)
    d = await secured.call("ConsumerGroupDescribe", 1, {"group_ids": ["g"]}, principal=ALICE)
    assert r.error_code == ErrorCode.group_authorization_failed
    assert d.groups[0].error_code == ErrorCode.group_authorization_failed
