"""`__share_group_state` records (Kafka's ShareSnapshot/ShareUpdate key and value, share-coordinator
module), the combination of state batches, the replay of a state partition, and a
share-partition read back from its persisted state."""

from __future__ import annotations

import dataclasses
import struct
import uuid

import pytest

from samsa.broker.share.partition import RecordState, SharePartitionState
from samsa.broker.share.partition import StateBatch as LeaderBatch
from samsa.coordinator.share.coordinator import (
    _settled_count,
    coordinator_key,
    parse_coordinator_key,
    replay,
)
from samsa.coordinator.share.records import (
    SNAPSHOT,
    UPDATE,
    CorruptShareRecord,
    ShareKey,
    ShareSnapshot,
    ShareUpdate,
    StateBatch,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
)
from samsa.coordinator.share.state import ShareState, combine

TID = uuid.UUID("0123456789abcdef0123456789abcdef")


def test_key_layout_is_kafkas():
    raw = encode_key(UPDATE, "g1", TID, 7)
    # int16 record type, GroupId (int16 length + UTF-8), TopicId (16 bytes), Partition int32
    assert raw == b"\x00\x01" + b"\x00\x02g1" + TID.bytes + b"\x00\x00\x00\x07"
    assert decode_key(raw) == ShareKey(UPDATE, "g1", TID, 7)
    assert decode_key(b"\x00\x05\x00\x00") is None  # another record type: not ours
    with pytest.raises(CorruptShareRecord):
        decode_key(b"\x00\x00\x00\x09g1")


def test_snapshot_value_layout_is_kafkas():
    v = ShareSnapshot(3, 1, 5, 100, 1000, 2000, (StateBatch(100, 104, 2, 1),))
    raw = encode_snapshot(v)
    expected = (struct.pack(">hiiiqqq", 0, 3, 1, 5, 100, 1000, 2000)
                + b"\x02" + struct.pack(">qqbh", 100, 104, 2, 1) + b"\x00" + b"\x00")
    assert raw == expected
    assert decode_snapshot(raw) == v
    # Kafka 4.2+ writes DeliveryCompleteCount (KIP-1226) as tagged field 0 when it is set
    tagged = raw[:-1] + b"\x01" + b"\x00" + b"\x04" + struct.pack(">i", 5)
    counted = dataclasses.replace(v, delivery_complete_count=5)
    assert decode_snapshot(tagged) == counted
    assert encode_snapshot(counted) == tagged


def test_update_value_layout_is_kafkas():
    v = ShareUpdate(3, 5, -1, (StateBatch(7, 7, 4, 5), StateBatch(8, 9, 0, 2)))
    raw = encode_update(v)
    assert raw[:18] == struct.pack(">hiiq", 0, 3, 5, -1)
    assert raw[18] == 3  # compact array of two batches
    assert decode_update(raw) == v
    with pytest.raises(CorruptShareRecord):
        decode_update(raw[:-5])
    counted = dataclasses.replace(v, delivery_complete_count=7)
    assert encode_update(counted) == raw[:-1] + b"\x01\x00\x04" + struct.pack(">i", 7)
    assert decode_update(encode_update(counted)) == counted


def test_combine_overrides_prunes_and_joins():
    base = [StateBatch(10, 19, 0, 1), StateBatch(20, 29, 2, 1)]
    new = [StateBatch(15, 22, 2, 1), StateBatch(25, 25, 4, 3)]
    assert combine(base, new, 12) == (
        StateBatch(12, 14, 0, 1), StateBatch(15, 24, 2, 1), StateBatch(25, 25, 4, 3),
        StateBatch(26, 29, 2, 1))
    # overlapping batches within one write: the later one wins
    assert combine((), [StateBatch(0, 9, 0, 1), StateBatch(5, 6, 2, 1)], 0) == (
        StateBatch(0, 4, 0, 1), StateBatch(5, 6, 2, 1), StateBatch(7, 9, 0, 1))
    assert combine(base, (), 30) == ()


def test_replay_snapshot_updates_and_tombstone():
    states: dict = {}
    key = ("g", TID, 0)
    replay(states, encode_key(SNAPSHOT, "g", TID, 0),
           encode_snapshot(ShareSnapshot(0, 2, 4, 10, 1, 1, (StateBatch(10, 14, 0, 1),))))
    replay(states, encode_key(UPDATE, "g", TID, 0),
           encode_update(ShareUpdate(0, -1, -1, (StateBatch(11, 12, 2, 1),))))
    replay(states, encode_key(UPDATE, "g", TID, 0),
           encode_update(ShareUpdate(0, 6, 12, (StateBatch(14, 14, 4, 3),))))
    s = states[key]
    assert (s.state_epoch, s.leader_epoch, s.start_offset, s.updates) == (2, 6, 12, 2)
    assert s.batches == (StateBatch(12, 12, 2, 1), StateBatch(13, 13, 0, 1),
                         StateBatch(14, 14, 4, 3))
    # a snapshot replaces the state (leader epoch never goes back)
    replay(states, encode_key(SNAPSHOT, "g", TID, 0),
           encode_snapshot(ShareSnapshot(1, 2, 5, 20, 2, 2, ())))
    assert (states[key].start_offset, states[key].batches, states[key].leader_epoch,
            states[key].updates) == (20, (), 6, 0)
    replay(states, encode_key(SNAPSHOT, "g", TID, 0), None)
    assert key not in states


def test_coordinator_key_is_kafkas_share_partition_key():
    key = coordinator_key("grp", TID, 3)
    assert key == "grp:ASNFZ4mrze8BI0VniavN7w:3"  # Kafka's base64 Uuid.toString()
    assert parse_coordinator_key(key) == ("grp", TID, 3)
    assert parse_coordinator_key("a:b:c") is None and parse_coordinator_key("x") is None


def test_leader_state_round_trips_through_persisted_batches():
    sp = SharePartitionState(0, lock_ms=1000, delivery_limit=5)
    sp.acquire("m1", range(0, 6), 6, now_ms=0)
    sp.acknowledge("m1", 0, 1, 1)  # accept 0..1: the start offset moves to 2
    sp.acknowledge("m1", 3, 3, 1)  # accept 3
    sp.acknowledge("m1", 4, 4, 3)  # reject 4
    batches = sp.state_batches()
    # 2 and 5 are acquired: persisted as available with their delivery count
    assert [(b.first_offset, b.last_offset, b.state, b.delivery_count) for b in batches] == [
        (2, 2, RecordState.AVAILABLE, 1), (3, 3, RecordState.ACKNOWLEDGED, 1),
        (4, 4, RecordState.ARCHIVED, 1), (5, 5, RecordState.AVAILABLE, 1)]
    again = SharePartitionState.from_state_batches(
        sp.start_offset, [LeaderBatch(b.first_offset, b.last_offset, b.state, b.delivery_count)
                          for b in batches])
    got = again.acquire("m2", range(2, 8), 10, now_ms=0)
    # the accepted and rejected records never come back; those in flight do, counted again
    assert got == [(2, 2), (5, 2), (6, 1), (7, 1)]


def test_leader_writes_only_what_changed_and_the_coordinator_combines_it():
    from samsa.broker.share.fetch import _changed_batches, _persisted_view

    sp = SharePartitionState(0)
    sp.acquire("m", range(0, 6), 6, now_ms=0)
    written = _persisted_view(sp)  # as if written now
    persisted = combine((), [StateBatch(o, o, s, c) for o, (s, c) in written.items()], 0)
    sp.acknowledge("m", 3, 4, 1)  # accept 3..4: only they change
    delta = _changed_batches(_persisted_view(sp), written)
    assert delta == [StateBatch(3, 4, 2, 1)]
    # the coordinator's combination of the delta equals the leader's whole state
    whole = [StateBatch(b.first_offset, b.last_offset, int(b.state), b.delivery_count)
             for b in sp.state_batches()]
    assert combine(persisted, delta, sp.start_offset) == combine((), whole, sp.start_offset)


def test_delivery_complete_count_is_the_settled_records_after_the_start_offset():
    """KIP-1226: the leader counts the acknowledged and archived records it still holds (those
    after the start offset); with the high watermark it gives the lag."""
    sp = SharePartitionState(0, lock_ms=1000, delivery_limit=5)
    sp.acquire("m1", range(0, 6), 6, now_ms=0)
    assert sp.delivery_complete_count() == 0
    sp.acknowledge("m1", 0, 1, 1)  # accepted at the start: the start offset moves past them
    sp.acknowledge("m1", 3, 3, 1)  # accepted after a record in flight: counted
    sp.acknowledge("m1", 4, 4, 3)  # rejected (archived): counted
    assert (sp.start_offset, sp.delivery_complete_count()) == (2, 2)
    # lag at a high watermark of 10: 10 - 2 - 2 = offsets 2, 5 (in flight) and 6..9 (unread)
    again = SharePartitionState.from_state_batches(
        sp.start_offset, [LeaderBatch(b.first_offset, b.last_offset, b.state, b.delivery_count)
                          for b in sp.state_batches()])
    assert again.delivery_complete_count() == 2


def test_the_delivery_complete_count_a_write_leaves_is_kafkas():
    current = ShareState(0, 1, 3, 10, 0, 0, (), 4)
    assert _settled_count(current, 12, 1) == 1  # the start offset moved on: the written one
    assert _settled_count(current, 10, 2) == 4  # same start: the larger (writes may cross)
    assert _settled_count(current, 10, 6) == 6
    assert _settled_count(current, 8, 0) == 4  # an earlier start offset: the current one
    assert _settled_count(current, -1, 9) == 4  # no start offset written: the current one


def test_replay_carries_the_delivery_complete_count():
    states: dict = {}
    key = ("g", TID, 0)
    replay(states, encode_key(SNAPSHOT, "g", TID, 0),
           encode_snapshot(ShareSnapshot(0, 0, 1, 10, 1, 1, (), 0)))
    assert states[key].delivery_complete_count == 0
    replay(states, encode_key(UPDATE, "g", TID, 0),
           encode_update(ShareUpdate(0, 1, 10, (StateBatch(12, 13, 2, 1),), 2)))
    assert states[key].delivery_complete_count == 2
    assert states[key].snapshot(5).delivery_complete_count == 2
    # a record of a writer before KIP-1226 (no tagged field): unknown
    replay(states, encode_key(UPDATE, "g", TID, 0),
           encode_update(ShareUpdate(0, 1, 14, ())))
    assert states[key].delivery_complete_count == -1
