"""The coordinator record modules write through one reader/writer (coordinator/records_codec.py)
and still write every record byte for byte as before: the fixture holds the bytes the
modules' own writers produced, captured before they shared one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from samsa.coordinator.group import records as gr
from samsa.coordinator.group.consumer import records as cr
from samsa.coordinator.group.consumer.model import ConsumerMember
from samsa.coordinator.group.share import records as sr
from samsa.coordinator.group.share.model import ShareMember
from samsa.coordinator.records_codec import RecordFormatError, RecordReader, RecordWriter
from samsa.coordinator.share import records as shr
from samsa.coordinator.transaction import log as tl
from tests.unit.coordinator_record_samples import SAMPLES, T1

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "coordinator_records.json")
                     .read_text())


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_record_is_written_as_before(name: str) -> None:
    assert SAMPLES[name]().hex() == FIXTURE[name]


def _consumer_member_again(raw: bytes, decode: object) -> ConsumerMember:
    m = ConsumerMember("member-1")
    assert callable(decode)
    decode(raw, m)
    return m


def _reencoded(name: str, raw: bytes) -> bytes:  # noqa: C901 - one decoder per record kind
    """The record read back with its module's decoder and written again."""
    if name in ("offset_commit_value_v3", "offset_commit_value_v1"):
        return gr.offset_commit_value(gr.decode_offset_value(raw))
    if name.startswith("group_metadata_value"):
        return gr.group_metadata_value(gr.decode_group_value(raw))
    if name == "consumer_assignment":
        return gr.encode_consumer_assignment(gr.decode_consumer_assignment(raw))
    if name.startswith("consumer_member_metadata"):
        member = _consumer_member_again(raw, cr.decode_member_metadata)
        return cr.member_metadata_value(member)
    if name == "consumer_target_member":
        return cr.target_member_value(cr.decode_target_member(raw))
    if name == "consumer_current_assignment":
        return cr.current_assignment_value(
            _consumer_member_again(raw, cr.decode_current_assignment))
    if name == "consumer_group_metadata":
        return cr.group_metadata_value(cr.decode_epoch_value(raw))
    if name == "share_group_metadata":
        return sr.group_metadata_value(sr.decode_epoch(raw))
    if name == "share_member_metadata":
        m = ShareMember("share-member")
        sr.decode_member_metadata(raw, m)
        return sr.member_metadata_value(m)
    if name == "share_current_assignment":
        m = ShareMember("share-member")
        sr.decode_current_assignment(raw, m)
        return sr.current_assignment_value(m)
    if name == "share_state_partition_metadata":
        return sr.state_partition_metadata_value(sr.decode_state_partition_metadata(raw))
    if name == "share_state_key":
        k = shr.decode_key(raw)
        assert k is not None
        return shr.encode_key(k.record_type, k.group_id, k.topic_id, k.partition)
    if name == "share_snapshot":
        return shr.encode_snapshot(shr.decode_snapshot(raw))
    if name == "share_update":
        return shr.encode_update(shr.decode_update(raw))
    if name == "txn_key":
        txn_id = tl.decode_key(raw)
        assert txn_id is not None
        return tl.encode_key(txn_id)
    if name.startswith("txn_value"):
        return tl.encode_value(tl.decode_value(raw), raw[1])
    return _reencoded_key(name, raw)


def _reencoded_key(name: str, raw: bytes) -> bytes:
    if name in ("offset_commit_key", "group_metadata_key"):
        k = gr.decode_key(raw)
        if isinstance(k, gr.OffsetKey):
            return gr.offset_commit_key(k.group, k.topic, k.partition)
        assert isinstance(k, gr.GroupKey)
        return gr.group_metadata_key(k.group)
    if name.startswith("consumer_key"):
        ck = cr.decode_consumer_key(raw)
        assert ck is not None
        return cr.key(ck.type, ck.group, ck.member)
    assert name == "share_group_key"
    sk = sr.decode_share_key(raw)
    assert sk is not None
    return sr.share_key(sk.type, sk.group, sk.member)


# the sample's assignment names a topic with no partitions, which a read does not keep
_DROPS_EMPTY_TOPICS = {"consumer_current_assignment"}


@pytest.mark.parametrize("name", sorted(set(SAMPLES) - _DROPS_EMPTY_TOPICS))
def test_each_record_reads_back_to_the_same_bytes(name: str) -> None:
    raw = bytes.fromhex(FIXTURE[name])
    assert _reencoded(name, raw) == raw


def test_an_assignment_reads_back_without_its_empty_topics() -> None:
    raw = bytes.fromhex(FIXTURE["consumer_current_assignment"])
    once = _reencoded("consumer_current_assignment", raw)
    assert len(once) == len(raw) - 18  # the empty topic's uuid, length and tags
    assert _reencoded("consumer_current_assignment", once) == once
    member = _consumer_member_again(once, cr.decode_current_assignment)
    assert (member.member_epoch, member.previous_member_epoch) == (7, 6)
    assert member.assigned == {T1: {0, 2}}


def test_the_reader_names_each_modules_error() -> None:
    with pytest.raises(tl.CorruptTxnLogRecord):
        tl.decode_value(bytes.fromhex(FIXTURE["txn_value_v1"])[:-3])
    with pytest.raises(shr.CorruptShareRecord):
        shr.decode_snapshot(bytes.fromhex(FIXTURE["share_snapshot"])[:20])
    with pytest.raises(RecordFormatError):
        gr.decode_group_value(bytes.fromhex(FIXTURE["group_metadata_value"])[:-1])
    with pytest.raises(RecordFormatError, match="varint"):  # longer than Kafka's 5 bytes
        RecordReader(b"\xff" * 6, flexible=True).uvarint()


def test_classic_and_flexible_lengths() -> None:
    w = RecordWriter()
    w.string(None)
    w.compact_string(None)
    w.compact_string("é")
    w.bytes_(b"x")
    w.tags([(3, b"\x01\x02")])
    assert w.value() == bytes.fromhex("ffff" "00" "03c3a9" "0000000178" "01030201" "02")
    r = RecordReader(w.value())
    assert r.string() is None
    r.flexible = True
    assert (r.string(), r.string()) == (None, "é")
    r.flexible = False
    assert r.bytes_() == b"x"
    r.flexible = True
    assert [(tag, r.i8(), r.pos) for tag in r.tagged_fields()] == [(3, 1, len(w.out) - 1)]
    assert r.pos == len(w.out)
