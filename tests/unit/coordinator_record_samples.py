"""Coordinator records of every kind, built with the record modules' encoders: the samples
whose bytes tests/unit/fixtures/coordinator_records.json holds, as the encoders wrote them
before the record modules shared one reader/writer (coordinator/records_codec.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from samsa.coordinator.group import records as gr
from samsa.coordinator.group.consumer import records as cr
from samsa.coordinator.group.consumer.model import ConsumerMember, MemberState
from samsa.coordinator.group.share import records as sr
from samsa.coordinator.group.share.model import ShareMember
from samsa.coordinator.share import records as shr
from samsa.coordinator.transaction import log as tl

T1 = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")
T2 = uuid.UUID("11111111-2222-3333-4444-555555555555")


def _consumer_member(classic: bool) -> ConsumerMember:
    m = ConsumerMember(
        "member-1", instance_id="inst" if classic else None, rack_id="rack-a",
        client_id="client", client_host="/10.0.0.1", subscribed_topic_names=["a", "b"],
        subscribed_topic_regex=None if classic else "t.*", rebalance_timeout_ms=30000,
        server_assignor="uniform", member_epoch=7, previous_member_epoch=6,
        state=MemberState.UNREVOKED_PARTITIONS, assigned={T1: {0, 2}, T2: set()},
        pending_revocation={T2: {1}}, assignment_epochs={(T1, 0): 3, (T2, 1): 5})
    if classic:
        m.classic_session_ms = 45000
        m.classic_protocols = [("range", b"\x00\x01meta"), ("cooperative-sticky", b"")]
    return m


def _share_member() -> ShareMember:
    return ShareMember("share-member", rack_id=None, client_id="c", client_host="/h",
                       subscribed_topic_names=["s"], member_epoch=4, previous_member_epoch=3,
                       assigned={T1: {1, 0}})


_GROUP_VALUE = gr.GroupValue("consumer", 5, "range", "m1", 1700000000000, [
    gr.MemberValue("m1", None, "cid", "/1.2.3.4", 30000, 10000, b"\x00\x00sub", b"asg"),
    gr.MemberValue("m2", "static", "cid2", "/5.6.7.8", 60000, 45000, b"", b""),
])
_BATCHES = (shr.StateBatch(10, 19, 0, 1), shr.StateBatch(20, 20, 2, 3))
_TXN = tl.TxnLogValue(4242, 7, 60000, 2, (("b", 1), ("a", 0), ("a", 3)), 1700000001000,
                      1700000000000)

SAMPLES: dict[str, Callable[[], bytes]] = {
    "offset_commit_key": lambda: gr.offset_commit_key("group", "topic", 3),
    "group_metadata_key": lambda: gr.group_metadata_key("gröup"),
    "offset_commit_value_v3": lambda: gr.offset_commit_value(
        gr.OffsetValue(12345, 4, "meta", 1700000000000)),
    "offset_commit_value_v1": lambda: gr.offset_commit_value(
        gr.OffsetValue(9, -1, "", 1700000000000, 1700000600000)),
    "group_metadata_value": lambda: gr.group_metadata_value(_GROUP_VALUE),
    "group_metadata_value_empty": lambda: gr.group_metadata_value(
        gr.GroupValue("", 0, None, None)),
    "consumer_assignment": lambda: gr.encode_consumer_assignment({"b": [2, 1], "a": [0]}),
    "consumer_key_member": lambda: cr.key(cr.MEMBER_METADATA, "g", "member-1"),
    "consumer_key_group": lambda: cr.key(cr.GROUP_METADATA, "g"),
    "consumer_group_metadata": lambda: cr.group_metadata_value(9),
    "consumer_member_metadata": lambda: cr.member_metadata_value(_consumer_member(False)),
    "consumer_member_metadata_classic": lambda: cr.member_metadata_value(
        _consumer_member(True)),
    "consumer_target_member": lambda: cr.target_member_value({T1: {2, 0}, T2: {5}}),
    "consumer_current_assignment": lambda: cr.current_assignment_value(
        _consumer_member(False)),
    "share_group_key": lambda: sr.share_key(sr.CURRENT_MEMBER_ASSIGNMENT, "sg", "m"),
    "share_group_metadata": lambda: sr.group_metadata_value(3),
    "share_member_metadata": lambda: sr.member_metadata_value(_share_member()),
    "share_current_assignment": lambda: sr.current_assignment_value(_share_member()),
    "share_state_partition_metadata": lambda: sr.state_partition_metadata_value(
        {T1: ("t1", {2, 0}), T2: ("t0", set())}),
    "share_state_key": lambda: shr.encode_key(shr.UPDATE, "sg", T1, 4),
    "share_snapshot": lambda: shr.encode_snapshot(shr.ShareSnapshot(
        2, 1, 5, 10, 1700000000000, 1700000001000, _BATCHES)),
    "share_update": lambda: shr.encode_update(shr.ShareUpdate(2, 5, -1, _BATCHES)),
    "txn_key": lambda: tl.encode_key("txn-id"),
    "txn_value_v0": lambda: tl.encode_value(_TXN),
    "txn_value_v1": lambda: tl.encode_value(_TXN, 1),
    "txn_value_v1_tags": lambda: tl.encode_value(tl.TxnLogValue(
        4242, 8, 60000, 4, (), 1700000001000, -1, 4241, 4243, 2), 1),
}
