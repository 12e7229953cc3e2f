"""`__consumer_offsets` record formats: Kafka's OffsetCommitKey/Value, GroupMetadataKey/Value.

A key starts with an int16 version that says which struct follows: 0 and 1 are
OffsetCommitKey (group, topic, partition), 2 is GroupMetadataKey (group). Values start with
their own int16 version. Samsa writes OffsetCommitValue v3 (v1 when an explicit expire
timestamp was asked for) and GroupMetadataValue v3; it reads versions 0-4 of both.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from samsa.coordinator.records_codec import RecordFormatError as RecordFormatError
from samsa.coordinator.records_codec import RecordReader, RecordWriter

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


# ---- keys --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    w = RecordWriter().i16(OFFSET_COMMIT_KEY_VERSION)
    return w.string(group).string(topic).i32(partition).value()


def group_metadata_key(group: str) -> bytes:
    return RecordWriter().i16(GROUP_METADATA_KEY_VERSION).string(group).value()


def decode_key(buf: bytes) -> OffsetKey | GroupKey | None:
    """The key, or None for key versions this coordinator does not know (skipped on load)."""
    r = RecordReader(buf)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == 2:
        return GroupKey(r.string() or "")
    return None


# ---- OffsetCommitValue -------------------------------------------------------------------
@dataclass(slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = 0
    expire_timestamp: int = -1


def offset_commit_value(v: OffsetValue) -> bytes:
    w = RecordWriter()
    version = 1 if v.expire_timestamp >= 0 else OFFSET_COMMIT_VALUE_VERSION
    w.i16(version)
    w.i64(v.offset)
    if version >= 3:
        w.i32(v.leader_epoch)
    w.string(v.metadata)
    w.i64(v.commit_timestamp)
    if version == 1:
        w.i64(v.expire_timestamp)
    return w.value()


def _value_reader(buf: bytes, what: str) -> tuple[RecordReader, int]:
    """A reader past the value's version (0 to 4 read; 4 is flexible) and that version."""
    r = RecordReader(buf)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown {what} version {version}")
    r.flexible = version >= 4
    return r, version


def decode_offset_value(buf: bytes) -> OffsetValue:
    r, version = _value_reader(buf, "OffsetCommitValue")
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetValue(offset, epoch, metadata, commit_ts, expire_ts)


# ---- GroupMetadataValue ------------------------------------------------------------------
@dataclass(slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


def group_metadata_value(v: GroupValue) -> bytes:
    w = RecordWriter()
    w.i16(GROUP_METADATA_VALUE_VERSION)
    w.string(v.protocol_type)
    w.i32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    w.i64(v.current_state_timestamp)
    w.i32(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.value()


def decode_group_value(buf: bytes) -> GroupValue:
    r, version = _value_reader(buf, "GroupMetadataValue")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance = r.i32() if version >= 1 else -1
        session = r.i32()
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        r.skip_tags()
        members.append(
            MemberValue(member_id, instance, client_id, client_host,
                        rebalance, session, subscription, assignment)
        )
    r.skip_tags()
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)


# ---- consumer protocol: subscribed topics ------------------------------------------------
def subscribed_topics(subscription: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (versions 0-3 share the leading topic array)."""
    try:
        r = RecordReader(subscription)
        r.i16()
        return {t for t in (r.string() for _ in range(r.i32())) if t is not None}
    except (RecordFormatError, UnicodeDecodeError, struct.error):
        return set()


def subscription_owned_partitions(subscription: bytes) -> list[tuple[str, list[int]]]:
    """The partitions a ConsumerProtocolSubscription (v1+) says its member owns."""
    try:
        r = RecordReader(subscription)
        version = r.i16()
        for _ in range(r.i32()):
            r.string()
        r.bytes_()  # user data
        if version < 1:
            return []
        out = []
        for _ in range(r.i32()):
            topic = r.string()
            partitions = [r.i32() for _ in range(r.i32())]
            if topic is not None:
                out.append((topic, partitions))
        return out
    except (RecordFormatError, UnicodeDecodeError, struct.error):
        return []


def decode_consumer_assignment(assignment: bytes) -> dict[str, list[int]]:
    """A ConsumerProtocolAssignment (versions 0-3 share the leading topic array)."""
    try:
        r = RecordReader(assignment)
        r.i16()
        out: dict[str, list[int]] = {}
        for _ in range(r.i32()):
            topic = r.string()
            partitions = [r.i32() for _ in range(r.i32())]
            if topic is not None:
                out[topic] = partitions
        return out
    except (RecordFormatError, UnicodeDecodeError, struct.error):
        return {}


def encode_consumer_assignment(assignment: dict[str, list[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0 (no user data), what a classic member of a consumer
    group gets from SyncGroup."""
    w = RecordWriter()
    w.i16(0)
    w.array_len(len(assignment))
    for topic, partitions in sorted(assignment.items()):
        w.string(topic)
        w.array_len(len(partitions))
        for p in sorted(partitions):
            w.i32(p)
    w.bytes_(None)  # user data
    return w.value()


def describe_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    """Readable key and payload of one __consumer_offsets record (for dump-log)."""
    if key is None:
        return "null", "null"
    try:
        k = decode_key(key)
    except (RecordFormatError, UnicodeDecodeError) as exc:
        return f"<undecodable key: {exc}>", "?"
    if k is None:
        return f"unknown key version {key[:2].hex()}", "?"
    kd: dict[str, Any]
    if isinstance(k, OffsetKey):
        kd = {"type": "offset_commit", "group": k.group, "topic": k.topic,
              "partition": k.partition}
    else:
        kd = {"type": "group_metadata", "group": k.group}
    if value is None:
        return _fmt(kd), "<DELETE>"
    try:
        if isinstance(k, OffsetKey):
            ov = decode_offset_value(value)
            vd: dict[str, Any] = {"version": struct.unpack_from(">h", value)[0],
                                  "offset": ov.offset, "leaderEpoch": ov.leader_epoch,
                                  "metadata": ov.metadata,
                                  "commitTimestamp": ov.commit_timestamp}
            if ov.expire_timestamp >= 0:
                vd["expireTimestamp"] = ov.expire_timestamp
        else:
            gv = decode_group_value(value)
            vd = {"version": struct.unpack_from(">h", value)[0],
                  "protocolType": gv.protocol_type, "generation": gv.generation,
                  "protocol": gv.protocol, "leader": gv.leader,
                  "currentStateTimestamp": gv.current_state_timestamp,
                  "members": [
                      {"memberId": m.member_id, "groupInstanceId": m.group_instance_id,
                       "clientId": m.client_id, "clientHost": m.client_host,
                       "rebalanceTimeout": m.rebalance_timeout,
                       "sessionTimeout": m.session_timeout,
                       "subscription": f"<{len(m.subscription)} bytes>",
                       "assignment": f"<{len(m.assignment)} bytes>"}
                      for m in gv.members
                  ]}
    except (RecordFormatError, UnicodeDecodeError) as exc:
        return _fmt(kd), f"<undecodable value: {exc}>"
    return _fmt(kd), _fmt(vd)


def _fmt(d: dict[str, Any]) -> str:
    import json

    return json.dumps(d, separators=(",", ":"))
