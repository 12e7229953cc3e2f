"""`__consumer_offsets` records of consumer-protocol (KIP-848) groups, as Kafka writes them.

A key is its record type (int16: 3 ConsumerGroupMetadata, 5 ConsumerGroupMemberMetadata,
6 ConsumerGroupTargetAssignmentMetadata, 7 ConsumerGroupTargetAssignmentMember,
8 ConsumerGroupCurrentMemberAssignment) followed by the non-flexible key struct; a value is
int16 version 0 followed by the flexible value struct; a null value is a tombstone. Type 4
(ConsumerGroupPartitionMetadata) is read and ignored: the subscribed topics' metadata is
taken from the cluster metadata when the group is loaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...records_codec import RecordFormatError, RecordReader, RecordWriter
from .model import Assignment, AssignmentEpochs, ConsumerGroup, ConsumerMember, MemberState

# Kafka's ConsumerGroup* record types, 3 to 8
(GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_ASSIGNMENT_METADATA,
 TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT) = range(3, 9)


@dataclass(frozen=True, slots=True)
class GroupRecordKey:
    """The key of a consumer or share group record."""

    type: int
    group: str
    member: str | None = None  # for the types that name a member


ConsumerKey = GroupRecordKey


@dataclass(frozen=True, slots=True)
class KeyLayout:
    """One group kind's record keys (the layout of consumer and share group records alike):
    the type, the group id, and the member id for the types `with_member`."""

    types: range
    with_member: tuple[int, ...]

    def key(self, type_: int, group: str, member: str | None = None) -> bytes:
        w = RecordWriter().i16(type_).string(group)
        return (w.string(member or "") if type_ in self.with_member else w).value()

    def decode(self, buf: bytes) -> GroupRecordKey | None:
        """The key; None for a key of another kind's type."""
        r = RecordReader(buf)
        type_ = r.i16()
        if type_ not in self.types:
            return None
        group = r.string() or ""
        member = (r.string() or "") if type_ in self.with_member else None
        return GroupRecordKey(type_, group, member)


KEYS = KeyLayout(range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1),
                 (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT))
key = KEYS.key
decode_consumer_key = KEYS.decode


def _value() -> RecordWriter:
    w = RecordWriter()
    w.i16(0)
    return w


# A member's fields in a value record, in order, as (attribute, type): "i32", "strings" (an
# array of strings), "string" (null read as ""), "nullable" (a string that may be null).
Fields = tuple[tuple[str, str], ...]
MEMBER_FIELDS: Fields = (
    ("instance_id", "nullable"), ("rack_id", "nullable"), ("client_id", "string"),
    ("client_host", "string"), ("subscribed_topic_names", "strings"),
    ("subscribed_topic_regex", "nullable"), ("rebalance_timeout_ms", "i32"),
    ("server_assignor", "nullable"))
EPOCH_FIELDS: Fields = (("member_epoch", "i32"), ("previous_member_epoch", "i32"))


def write_fields(w: RecordWriter, member: object, fields: Fields) -> None:
    for attr, type_ in fields:
        v = getattr(member, attr)
        if type_ == "i32":
            w.i32(v)
        elif type_ == "strings":
            w.compact_strings(v)
        else:
            w.compact_string(v)


def read_fields(r: RecordReader, member: object, fields: Fields) -> None:
    for attr, type_ in fields:
        v: object
        if type_ == "i32":
            v = r.i32()
        elif type_ == "strings":
            v = [r.string() or "" for _ in range(r.array_len())]
        else:
            v = r.string()
            if type_ == "string":
                v = v or ""
        setattr(member, attr, v)


def _assignment(w: RecordWriter, a: Assignment, member: ConsumerMember | None = None) -> None:
    """TopicPartitions; with `member`, each one's AssignmentEpochs (tagged field 0, KIP-1251:
    the current member assignment's, an epoch per partition in the same order)."""
    items = sorted(a.items(), key=lambda kv: str(kv[0]))
    w.compact_array_len(len(items))
    for tid, ps in items:
        w.uuid(tid)
        w.compact_array_len(len(ps))
        for p in sorted(ps):
            w.i32(p)
        if member is None or not ps:
            w.tags()
            continue
        epochs = RecordWriter()
        epochs.compact_array_len(len(ps))
        for p in sorted(ps):
            epochs.i32(member.assignment_epoch(tid, p) or 0)
        w.tags([(0, epochs.value())])


def group_metadata_value(epoch: int) -> bytes:
    w = _value()
    w.i32(epoch)
    w.tags()
    return w.value()


def member_metadata_value(m: ConsumerMember) -> bytes:
    w = _value()
    write_fields(w, m, MEMBER_FIELDS)
    if m.classic_protocols is None:
        w.tags()
        return w.value()
    # tagged field 0, ClassicMemberMetadata (a nullable struct: a varint 1 marks it present)
    c = RecordWriter()
    c.uvarint(1)
    c.i32(m.classic_session_ms)
    c.compact_array_len(len(m.classic_protocols))
    for name, metadata in m.classic_protocols:
        c.compact_string(name)
        c.compact_bytes(metadata)
        c.tags()
    c.tags()
    w.tags([(0, c.value())])
    return w.value()


def target_metadata_value(epoch: int) -> bytes:
    return group_metadata_value(epoch)  # the same layout: one int32 (AssignmentEpoch)


def target_member_value(a: Assignment) -> bytes:
    w = _value()
    _assignment(w, a)
    w.tags()
    return w.value()


def current_assignment_value(m: ConsumerMember) -> bytes:
    w = _value()
    write_fields(w, m, EPOCH_FIELDS)
    w.i8(int(m.state))
    _assignment(w, m.assigned, m)
    _assignment(w, m.pending_revocation, m)
    w.tags()
    return w.value()


# ---- the records a change writes (Kafka's GroupCoordinatorRecordHelpers) -------------------
Record = tuple[bytes, bytes | None]
Records = list[Record]


def epoch_record(group_id: str, epoch: int) -> Record:
    """ConsumerGroupMetadata: the group epoch."""
    return key(GROUP_METADATA, group_id), group_metadata_value(epoch)


def member_record(group_id: str, member: ConsumerMember) -> Record:
    """ConsumerGroupMemberMetadata: the member's subscription and client facts."""
    return key(MEMBER_METADATA, group_id, member.member_id), member_metadata_value(member)


def target_member_record(group_id: str, member_id: str, a: Assignment) -> Record:
    return key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), target_member_value(a)


def target_epoch_record(group_id: str, epoch: int) -> Record:
    return key(TARGET_ASSIGNMENT_METADATA, group_id), target_metadata_value(epoch)


def current_assignment_record(group_id: str, member: ConsumerMember) -> Record:
    """ConsumerGroupCurrentMemberAssignment: the member's epochs, state and partitions."""
    return (key(CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id),
            current_assignment_value(member))


def fence_records(group_id: str, member_id: str) -> Records:
    """The tombstones of a member leaving the group, in Kafka's order."""
    return [(key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
            (key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
            (key(MEMBER_METADATA, group_id, member_id), None)]


def replace_records(group: ConsumerGroup, member: ConsumerMember,
                    replaced: ConsumerMember) -> Records:
    """Kafka's replaceMember: the old member's tombstones, then the new one as a copy of it
    (its target assignment, epoch 0), before the heartbeat's own changes."""
    group_id = group.group_id
    return fence_records(group_id, replaced.member_id) + [
        member_record(group_id, member),
        target_member_record(group_id, member.member_id,
                             group.target.get(replaced.member_id, {})),
        current_assignment_record(group_id, member),
    ]


# ---- decoding -------------------------------------------------------------------------------
def _flex(buf: bytes) -> RecordReader:
    r = RecordReader(buf, flexible=True)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown consumer group value version {version}")
    return r


def _read_assignment(r: RecordReader, epochs: AssignmentEpochs | None = None) -> Assignment:
    """TopicPartitions; their AssignmentEpochs (tagged field 0) into `epochs` if given."""
    out: Assignment = {}
    for _ in range(r.array_len()):
        tid = r.uuid()
        ps = [r.i32() for _ in range(r.array_len())]
        for tag in r.tagged_fields():
            if tag == 0 and epochs is not None:
                # a partition past the end of a shorter list gets the default, as in Kafka
                n = r.array_len()
                epochs.update(((tid, p), r.i32()) for p in ps[:max(n, 0)])
        if ps:
            out[tid] = set(ps)
    return out


def decode_epoch_value(buf: bytes) -> int:
    r = _flex(buf)
    return r.i32()


def decode_member_metadata(buf: bytes, member: ConsumerMember) -> None:
    r = _flex(buf)
    read_fields(r, member, MEMBER_FIELDS)
    member.classic_session_ms, member.classic_protocols = -1, None
    for tag in r.tagged_fields():
        if tag == 0 and r.uvarint() == 1:  # ClassicMemberMetadata, present
            member.classic_session_ms = r.i32()
            protocols = []
            for _ in range(r.array_len()):
                name = r.string() or ""
                protocols.append((name, r.bytes_() or b""))
                r.skip_tags()
            member.classic_protocols = protocols


def decode_target_member(buf: bytes) -> Assignment:
    return _read_assignment(_flex(buf))


def decode_current_assignment(buf: bytes, member: ConsumerMember) -> None:
    r = _flex(buf)
    read_fields(r, member, EPOCH_FIELDS)
    state = r.i8()
    member.state = MemberState(state) if state in (0, 1, 2) else MemberState.UNKNOWN
    epochs: AssignmentEpochs = {}
    member.assigned = _read_assignment(r, epochs)
    member.pending_revocation = _read_assignment(r, epochs)
    member.assignment_epochs = epochs  # partitions without one: the member epoch


_NAMES = {GROUP_METADATA: "consumer_group_metadata",
          PARTITION_METADATA: "consumer_group_partition_metadata",
          MEMBER_METADATA: "consumer_group_member_metadata",
          TARGET_ASSIGNMENT_METADATA: "consumer_group_target_assignment_metadata",
          TARGET_ASSIGNMENT_MEMBER: "consumer_group_target_assignment_member",
          CURRENT_MEMBER_ASSIGNMENT: "consumer_group_current_member_assignment"}


def _assignment_json(a: Assignment) -> list[dict[str, Any]]:
    return [{"topicId": str(t), "partitions": sorted(ps)} for t, ps in
            sorted(a.items(), key=lambda kv: str(kv[0]))]


def describe_group_record(
    k: bytes, value: bytes | None, keys: KeyLayout, names: Mapping[int, str],
    describe_value: Callable[[int, str | None, bytes], dict[str, Any]],
) -> tuple[str, str] | None:
    """Readable key and payload of a consumer or share group record (dump-log): its kind's
    `keys`, the `names` of its record types, and what its value says; None for a key of
    another kind."""
    try:
        decoded = keys.decode(k)
    except (RecordFormatError, UnicodeDecodeError):
        return None
    if decoded is None:
        return None
    type_, group, member = decoded.type, decoded.group, decoded.member
    kd: dict[str, Any] = {"type": names[type_], "group": group}
    if member is not None:
        kd["member"] = member
    if value is None:
        return _json(kd), "<DELETE>"
    try:
        vd = describe_value(type_, member, value)
    except (RecordFormatError, UnicodeDecodeError, ValueError) as exc:
        return _json(kd), f"<undecodable value: {exc}>"
    return _json(kd), _json(vd)


def _json(d: dict[str, Any]) -> str:
    return json.dumps(d, separators=(",", ":"))


def describe_consumer_record(k: bytes, value: bytes | None) -> tuple[str, str] | None:
    """Readable key and payload of a consumer group record (dump-log); None for other keys."""
    return describe_group_record(k, value, KEYS, _NAMES, _describe_value)


def _describe_value(type_: int, member_id: str | None, value: bytes) -> dict[str, Any]:
    if type_ in (GROUP_METADATA, TARGET_ASSIGNMENT_METADATA):
        return {"epoch": decode_epoch_value(value)}
    if type_ == MEMBER_METADATA:
        m = ConsumerMember(member_id or "")
        decode_member_metadata(value, m)
        vd: dict[str, Any] = {"instanceId": m.instance_id, "rackId": m.rack_id,
                              "clientId": m.client_id, "clientHost": m.client_host,
                              "subscribedTopicNames": m.subscribed_topic_names,
                              "subscribedTopicRegex": m.subscribed_topic_regex,
                              "rebalanceTimeoutMs": m.rebalance_timeout_ms,
                              "serverAssignor": m.server_assignor}
        if m.classic_protocols is not None:
            vd["classicMemberMetadata"] = {
                "sessionTimeoutMs": m.classic_session_ms,
                "supportedProtocols": [{"name": n, "metadata": f"<{len(md)} bytes>"}
                                       for n, md in m.classic_protocols]}
        return vd
    if type_ == TARGET_ASSIGNMENT_MEMBER:
        return {"topicPartitions": _assignment_json(decode_target_member(value))}
    if type_ == CURRENT_MEMBER_ASSIGNMENT:
        m = ConsumerMember(member_id or "")
        decode_current_assignment(value, m)
        return {"memberEpoch": m.member_epoch, "previousMemberEpoch": m.previous_member_epoch,
                "state": m.state.label, "assignedPartitions": _assignment_json(m.assigned),
                "partitionsPendingRevocation": _assignment_json(m.pending_revocation)}
    return {"bytes": len(value)}
