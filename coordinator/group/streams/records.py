"""`__consumer_offsets` records of streams groups (KIP-1071), as Kafka 4.4 writes them.

A key is its record type (int16: 17 StreamsGroupMetadata, 19 StreamsGroupMemberMetadata,
20 StreamsGroupTargetAssignmentMetadata, 21 StreamsGroupTargetAssignmentMember,
22 StreamsGroupCurrentMemberAssignment, 23 StreamsGroupTopology) and the non-flexible key
struct; a value is int16 version 0 and the flexible value struct; a null value is a tombstone.
Type 18 (StreamsGroupPartitionMetadata, gone in Kafka 4.4) is read and ignored.

`replay` is the one way the in-memory state changes: at load, and after a write's records are
in the local log (groups.py), so memory is what the log says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ...records_codec import RecordReader, RecordWriter
from ..consumer.records import GroupRecordKey, KeyLayout
from .model import (
    MemberState,
    StreamsGroup,
    StreamsMember,
    Subtopology,
    TaskMap,
    Tasks,
    TopicInfo,
    Topology,
)

(GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER,
 CURRENT_ASSIGNMENT, TOPOLOGY) = range(17, 24)

KEYS = KeyLayout(range(GROUP_METADATA, TOPOLOGY + 1),
                 (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT))
decode_streams_key = KEYS.decode

Record = tuple[bytes, bytes | None]
T = TypeVar("T")


def _value() -> RecordWriter:
    return RecordWriter().i16(0)


def _array(w: RecordWriter, items: list[T] | tuple[T, ...],
           write: Callable[[RecordWriter, T], object]) -> None:
    w.compact_array_len(len(items))
    for item in items:
        write(w, item)


def _read_array(r: RecordReader, read: Callable[[RecordReader], T]) -> list[T]:
    return [read(r) for _ in range(max(r.array_len(), 0))]


EpochOf = Callable[[str, int], int | None]


def _task_ids(w: RecordWriter, tasks: TaskMap, epoch_of: EpochOf | None = None) -> None:
    """TaskIds; with `epoch_of`, each task's AssignmentEpochs (tag 0, active tasks only)."""
    def one(w: RecordWriter, item: tuple[str, frozenset[int]]) -> None:
        w.compact_string(item[0])
        ps = sorted(item[1])
        _array(w, ps, RecordWriter.i32)
        if epoch_of is None:
            w.tags()
            return
        epochs = RecordWriter()
        _array(epochs, [epoch_of(item[0], p) or 0 for p in ps], RecordWriter.i32)
        w.tags([(0, epochs.value())])
    _array(w, sorted(tasks.items()), one)


def _read_task_ids(r: RecordReader, epochs: dict[tuple[str, int], int] | None = None
                   ) -> TaskMap:
    def one(r: RecordReader) -> tuple[str, frozenset[int]]:
        s = r.string() or ""
        ps = _read_array(r, RecordReader.i32)
        for tag in r.tagged_fields():
            if tag == 0 and epochs is not None:  # AssignmentEpochs, as long as Partitions
                given = _read_array(r, RecordReader.i32)
                epochs.update(zip(((s, p) for p in ps), given, strict=False))
        return s, frozenset(ps)
    return {s: ps for s, ps in _read_array(r, one) if ps}


def _tasks(w: RecordWriter, t: Tasks, epoch_of: EpochOf | None = None) -> None:
    _task_ids(w, t.active, epoch_of)
    for part in (t.standby, t.warmup):
        _task_ids(w, part)


def _read_tasks(r: RecordReader, epochs: dict[tuple[str, int], int] | None = None) -> Tasks:
    return Tasks(_read_task_ids(r, epochs), _read_task_ids(r), _read_task_ids(r))


def _key_values(w: RecordWriter, pairs: tuple[tuple[str, str], ...]) -> None:
    def one(w: RecordWriter, kv: tuple[str, str]) -> None:
        w.compact_string(kv[0]).compact_string(kv[1]).tags()
    _array(w, pairs, one)


def _read_key_values(r: RecordReader) -> tuple[tuple[str, str], ...]:
    def one(r: RecordReader) -> tuple[str, str]:
        k, v = r.string() or "", r.string() or ""
        r.skip_tags()
        return k, v
    return tuple(_read_array(r, one))


def _flex(buf: bytes) -> RecordReader:
    r = RecordReader(buf, flexible=True)
    r.i16()  # the value's version: 0 is the only one
    return r


# ---- the records, written -------------------------------------------------------------------
def group_metadata(group_id: str, epoch: int, metadata_hash: int,
                   validated_topology_epoch: int) -> Record:
    w = _value().i32(epoch).i64(metadata_hash)
    tags = []
    if validated_topology_epoch != -1:
        tags.append((0, RecordWriter().i32(validated_topology_epoch).value()))
    return KEYS.key(GROUP_METADATA, group_id), w.tags(tags).value()


def member_metadata(group_id: str, m: StreamsMember) -> Record:
    w = _value().compact_string(m.instance_id).compact_string(m.rack_id)
    w.compact_string(m.client_id).compact_string(m.client_host)
    w.i32(m.rebalance_timeout_ms).i32(m.topology_epoch).compact_string(m.process_id)
    if m.user_endpoint is None:
        w.i8(-1)
    else:
        w.i8(1).compact_string(m.user_endpoint[0]).pack(">H", m.user_endpoint[1]).tags()
    _key_values(w, m.client_tags)
    return KEYS.key(MEMBER_METADATA, group_id, m.member_id), w.tags().value()


def target_metadata(group_id: str, epoch: int, timestamp_ms: int) -> Record:
    w = _value().i32(epoch).tags([(0, RecordWriter().i64(timestamp_ms).value())])
    return KEYS.key(TARGET_METADATA, group_id), w.value()


def target_member(group_id: str, member_id: str, tasks: Tasks) -> Record:
    w = _value()
    _tasks(w, tasks)
    return KEYS.key(TARGET_MEMBER, group_id, member_id), w.tags().value()


def current_assignment(group_id: str, m: StreamsMember) -> Record:
    w = _value().i32(m.member_epoch).i32(m.previous_member_epoch).i8(int(m.state))
    _tasks(w, m.assigned, m.task_epoch)
    _tasks(w, m.pending_revocation, m.task_epoch)
    return KEYS.key(CURRENT_ASSIGNMENT, group_id, m.member_id), w.tags().value()


def _topic_info(w: RecordWriter, t: TopicInfo) -> None:
    w.compact_string(t.name).i32(t.partitions).i16(t.replication_factor)
    _key_values(w, t.configs)
    w.tags()


def _subtopology(w: RecordWriter, s: Subtopology) -> None:
    w.compact_string(s.subtopology_id)
    w.compact_strings(s.source_topics).compact_strings(s.source_topic_regex)
    _array(w, s.state_changelog_topics, _topic_info)
    w.compact_strings(s.repartition_sink_topics)
    _array(w, s.repartition_source_topics, _topic_info)

    def group(w: RecordWriter, g: tuple[tuple[int, ...], ...]) -> None:
        for indexes in g:
            _array(w, indexes, RecordWriter.i16)
        w.tags()
    _array(w, s.copartition_groups, group)
    w.tags()


def topology(group_id: str, t: Topology) -> Record:
    w = _value().i32(t.epoch)
    _array(w, t.subtopologies, _subtopology)
    return KEYS.key(TOPOLOGY, group_id), w.tags().value()


def tombstones(group_id: str, member_id: str) -> list[Record]:
    """A member leaves: its current assignment, target assignment and metadata, in Kafka's
    order (the assignment first, so a partial write never leaves a member without one)."""
    return [(KEYS.key(CURRENT_ASSIGNMENT, group_id, member_id), None),
            (KEYS.key(TARGET_MEMBER, group_id, member_id), None),
            (KEYS.key(MEMBER_METADATA, group_id, member_id), None)]


def group_tombstones(group_id: str) -> list[Record]:
    """An empty group is deleted: its target metadata, topology and metadata."""
    return [(KEYS.key(TARGET_METADATA, group_id), None), (KEYS.key(TOPOLOGY, group_id), None),
            (KEYS.key(GROUP_METADATA, group_id), None)]


# ---- the records, read ----------------------------------------------------------------------
def _read_topic_info(r: RecordReader) -> TopicInfo:
    name, partitions, rf = r.string() or "", r.i32(), r.i16()
    configs = _read_key_values(r)
    r.skip_tags()
    return TopicInfo(name, partitions, rf, configs)


def _read_strings(r: RecordReader) -> tuple[str, ...]:
    return tuple(_read_array(r, lambda r: r.string() or ""))


def _read_subtopology(r: RecordReader) -> Subtopology:
    sid = r.string() or ""
    sources, regex = _read_strings(r), _read_strings(r)
    changelogs = tuple(_read_array(r, _read_topic_info))
    sinks = _read_strings(r)
    repartition = tuple(_read_array(r, _read_topic_info))

    def group(r: RecordReader) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        g = (tuple(_read_array(r, RecordReader.i16)), tuple(_read_array(r, RecordReader.i16)),
             tuple(_read_array(r, RecordReader.i16)))
        r.skip_tags()
        return g
    groups = tuple(_read_array(r, group))
    r.skip_tags()
    return Subtopology(sid, sources, regex, changelogs, sinks, repartition, groups)


def read_topology(buf: bytes) -> Topology:
    r = _flex(buf)
    epoch = r.i32()
    return Topology(epoch, tuple(_read_array(r, _read_subtopology)))


def _read_member(buf: bytes, m: StreamsMember) -> None:
    r = _flex(buf)
    m.instance_id, m.rack_id = r.string(), r.string()
    m.client_id, m.client_host = r.string() or "", r.string() or ""
    m.rebalance_timeout_ms, m.topology_epoch = r.i32(), r.i32()
    m.process_id = r.string() or ""
    m.user_endpoint = None
    if r.i8() >= 0:
        m.user_endpoint = (r.string() or "", r.unpack(">H")[0])
        r.skip_tags()
    m.client_tags = _read_key_values(r)


def _read_current(buf: bytes, m: StreamsMember) -> None:
    r = _flex(buf)
    m.member_epoch, m.previous_member_epoch = r.i32(), r.i32()
    state = r.i8()
    m.state = MemberState(state) if state in MemberState._value2member_map_ else (
        MemberState.UNKNOWN)
    epochs: dict[tuple[str, int], int] = {}
    m.assigned, m.pending_revocation = _read_tasks(r, epochs), _read_tasks(r, epochs)
    # kept only where it differs from the member epoch (what a task listed without one has)
    m.task_epochs = {k: e for k, e in epochs.items() if e != max(m.member_epoch, 0)}


def replay(groups: dict[str, StreamsGroup], p: int, k: GroupRecordKey,
           value: bytes | None) -> None:
    """Apply one streams record of partition p to `groups`."""
    group = groups.get(k.group)
    if value is None:
        _replay_tombstone(groups, k)
        return
    if group is None:
        group = groups[k.group] = StreamsGroup(k.group, p)
    member_id = k.member or ""
    if k.type == GROUP_METADATA:
        r = _flex(value)
        group.epoch, group.metadata_hash = r.i32(), r.i64()
        for tag in r.tagged_fields():
            if tag == 0:
                group.validated_topology_epoch = r.i32()
    elif k.type == TOPOLOGY:
        group.topology = read_topology(value)
    elif k.type == TARGET_METADATA:
        r = _flex(value)
        group.assignment_epoch = r.i32()
        for tag in r.tagged_fields():
            if tag == 0:
                group.assignment_ms = r.i64()
    elif k.type == TARGET_MEMBER:
        group.target[member_id] = _read_tasks(_flex(value))
    elif k.type == MEMBER_METADATA:
        member = group.members.setdefault(member_id, StreamsMember(member_id))
        before = member.user_endpoint
        _read_member(value, member)
        if member.user_endpoint != before:
            group.endpoint_epoch += 1
    elif k.type == CURRENT_ASSIGNMENT:
        member = group.members.setdefault(member_id, StreamsMember(member_id))
        before_active = member.assigned.active
        _read_current(value, member)
        if member.user_endpoint is not None and member.assigned.active != before_active:
            group.endpoint_epoch += 1


def _replay_tombstone(groups: dict[str, StreamsGroup], k: GroupRecordKey) -> None:
    group = groups.get(k.group)
    if group is None:
        return
    member_id = k.member or ""
    if k.type == MEMBER_METADATA:
        if group.members.pop(member_id, None) is not None:
            group.endpoint_epoch += 1
    elif k.type == TARGET_MEMBER:
        group.target.pop(member_id, None)
    elif k.type == CURRENT_ASSIGNMENT:
        member = group.members.get(member_id)
        if member is not None:
            member.assigned = member.pending_revocation = Tasks()
    elif k.type == TOPOLOGY:
        group.topology = None
    elif k.type == GROUP_METADATA:
        del groups[k.group]
