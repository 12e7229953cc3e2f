"""`__consumer_offsets` records of share groups (KIP-932), as Kafka 4.3 writes them.

A key is its record type (int16: 10 ShareGroupMemberMetadata, 11 ShareGroupMetadata,
12 ShareGroupTargetAssignmentMetadata, 13 ShareGroupTargetAssignmentMember,
14 ShareGroupCurrentMemberAssignment, 15 ShareGroupStatePartitionMetadata) followed by the
non-flexible key struct; a value is int16 version 0 followed by the flexible value struct; a
null value is a tombstone. Type 9 (ShareGroupPartitionMetadata, gone from Kafka 4.3) is read
and ignored, as are tagged fields; ShareGroupMetadata's MetadataHash (Kafka's hash of the
subscribed topics' metadata, to see them change) is written 0: the topics' metadata is taken
from the cluster's when the group is loaded.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..consumer.records import (
    EPOCH_FIELDS,
    MEMBER_FIELDS,
    GroupRecordKey,
    KeyLayout,
    _assignment,
    _assignment_json,
    _flex,
    _read_assignment,
    _value,
    decode_target_member,
    describe_group_record,
    read_fields,
    write_fields,
)
from ..consumer.records import decode_epoch_value as decode_epoch
from ..consumer.records import group_metadata_value as epoch_value
from .model import ShareMember

# Kafka's ShareGroup* record types, 9 to 15
(PARTITION_METADATA, MEMBER_METADATA, GROUP_METADATA, TARGET_ASSIGNMENT_METADATA,
 TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT, STATE_PARTITION_METADATA) = range(9, 16)
KEYS = KeyLayout(range(PARTITION_METADATA, STATE_PARTITION_METADATA + 1),
                 (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))
# ShareGroupMemberMetadataValue: a consumer member's RackId, ClientId, ClientHost and
# SubscribedTopicNames
_MEMBER_FIELDS = MEMBER_FIELDS[1:5]
STABLE = 0  # MemberState: a share member is always stable (nothing to revoke)

# topic id -> (topic name, partitions)
TopicPartitions = dict[uuid.UUID, tuple[str, set[int]]]


ShareKey = GroupRecordKey
share_key = KEYS.key
decode_share_key = KEYS.decode


def group_metadata_value(epoch: int) -> bytes:
    """ShareGroupMetadataValue: Epoch, MetadataHash."""
    w = _value()
    w.i32(epoch)
    w.i64(0)
    w.tags()
    return w.value()


def target_metadata_value(epoch: int) -> bytes:
    """ShareGroupTargetAssignmentMetadataValue: AssignmentEpoch (the consumer groups' layout)."""
    return epoch_value(epoch)


def member_metadata_value(m: ShareMember) -> bytes:
    w = _value()
    write_fields(w, m, _MEMBER_FIELDS)
    w.tags()
    return w.value()


def current_assignment_value(m: ShareMember) -> bytes:
    w = _value()
    write_fields(w, m, EPOCH_FIELDS)
    w.i8(STABLE)
    _assignment(w, m.assigned)
    w.tags()
    return w.value()


def state_partition_metadata_value(initialized: TopicPartitions) -> bytes:
    """ShareGroupStatePartitionMetadataValue: no initializing topics, the initialized ones,
    no deleting topics."""
    w = _value()
    w.compact_array_len(0)
    w.compact_array_len(len(initialized))
    for tid, (name, ps) in sorted(initialized.items(), key=lambda kv: kv[1][0]):
        w.uuid(tid)
        w.compact_string(name)
        w.compact_array_len(len(ps))
        for p in sorted(ps):
            w.i32(p)
        w.tags()
    w.compact_array_len(0)
    w.tags()
    return w.value()


# ---- decoding -------------------------------------------------------------------------------
def decode_member_metadata(buf: bytes, m: ShareMember) -> None:
    read_fields(_flex(buf), m, _MEMBER_FIELDS)


def decode_current_assignment(buf: bytes, m: ShareMember) -> None:
    r = _flex(buf)
    read_fields(r, m, EPOCH_FIELDS)
    r.i8()  # state
    m.assigned = _read_assignment(r)


def decode_state_partition_metadata(buf: bytes) -> TopicPartitions:
    """The initialized topics (initializing ones count too: their state may exist)."""
    r = _flex(buf)
    out: TopicPartitions = {}
    for _ in range(2):  # InitializingTopics, InitializedTopics
        for _ in range(r.array_len()):
            tid = r.uuid()
            name = r.string() or ""
            ps = {r.i32() for _ in range(r.array_len())}
            r.skip_tags()
            known = out.setdefault(tid, (name, set()))
            known[1].update(ps)
    return out


_NAMES = {PARTITION_METADATA: "share_group_partition_metadata",
          MEMBER_METADATA: "share_group_member_metadata",
          GROUP_METADATA: "share_group_metadata",
          TARGET_ASSIGNMENT_METADATA: "share_group_target_assignment_metadata",
          TARGET_ASSIGNMENT_MEMBER: "share_group_target_assignment_member",
          CURRENT_MEMBER_ASSIGNMENT: "share_group_current_member_assignment",
          STATE_PARTITION_METADATA: "share_group_state_partition_metadata"}


def describe_share_record(k: bytes, value: bytes | None) -> tuple[str, str] | None:
    """Readable key and payload of a share group record (dump-log); None for other keys."""
    return describe_group_record(k, value, KEYS, _NAMES, _describe_value)


def _describe_value(type_: int, member_id: str | None, value: bytes) -> dict[str, Any]:
    m = ShareMember(member_id or "")
    if type_ in (GROUP_METADATA, TARGET_ASSIGNMENT_METADATA):
        return {"epoch": decode_epoch(value)}
    if type_ == MEMBER_METADATA:
        decode_member_metadata(value, m)
        return {"rackId": m.rack_id, "clientId": m.client_id, "clientHost": m.client_host,
                "subscribedTopicNames": m.subscribed_topic_names}
    if type_ == TARGET_ASSIGNMENT_MEMBER:
        return {"topicPartitions": _assignment_json(decode_target_member(value))}
    if type_ == CURRENT_MEMBER_ASSIGNMENT:
        decode_current_assignment(value, m)
        return {"memberEpoch": m.member_epoch, "previousMemberEpoch": m.previous_member_epoch,
                "assignedPartitions": _assignment_json(m.assigned)}
    if type_ == STATE_PARTITION_METADATA:
        return {"initializedTopics": [
            {"topicId": str(t), "topicName": n, "partitions": sorted(ps)}
            for t, (n, ps) in sorted(decode_state_partition_metadata(value).items(),
                                     key=lambda kv: kv[1][0])]}
    return {"bytes": len(value)}
