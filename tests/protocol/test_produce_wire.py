"""protocol/produce_wire.py against the general path: what `read_produce` accepts, the guard,
the lenient reader and kio read alike (mutated frames included), and what
`write_produce_response` writes is the general encoder's answer byte for byte."""

from __future__ import annotations

import random
import struct
import uuid
from typing import Any

import pytest

from samsa.protocol.codec import build, encode, reader, request_type, response_type
from samsa.protocol.encoder import encode_response
from samsa.protocol.errors import ErrorCode
from samsa.protocol.framing import read_request_header
from samsa.protocol.lenient import decode_request
from samsa.protocol.produce_wire import read_produce, write_produce_response
from samsa.protocol.records import build_batch

VERSIONS = range(3, 14)
BY_ID = 13  # v13 names topics by id


def _frame(version: int, body: dict[str, Any], client_id: bytes | None = b"bench") -> bytes:
    req_type = request_type(0, version)
    if version >= BY_ID:  # the same topics, each by an id made from its name
        body = {**body, "topic_data": [
            {"topic_id": _id(t["name"]), "partition_data": t["partition_data"]}
            for t in body["topic_data"]]}
    header = struct.pack(">hhi", 0, version, 42)
    header += struct.pack(">h", -1) if client_id is None else (
        struct.pack(">h", len(client_id)) + client_id)
    if req_type.__flexible__:
        header += b"\x00"
    return header + encode(build(req_type, body))


def _id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def _general(frame: bytes) -> Any:
    """The general path's reading (raises what it raises)."""
    version = struct.unpack_from(">h", frame, 2)[0]
    req_type = request_type(0, version)
    header, offset = read_request_header(frame, req_type.__flexible__)
    return header, decode_request(req_type, reader(req_type), frame, offset)


def _same(fast: Any, frame: bytes) -> None:
    header, kio = _general(frame)
    assert fast.client_id == header.client_id
    assert fast.transactional_id == kio.transactional_id
    assert fast.acks == kio.acks
    assert fast.timeout == kio.timeout
    assert len(fast.topic_data) == len(kio.topic_data)
    for ft, kt in zip(fast.topic_data, kio.topic_data, strict=True):
        assert ft.name == getattr(kt, "name", None)
        assert ft.topic_id == getattr(kt, "topic_id", None)
        assert [(p.index, p.records) for p in ft.partition_data] == [
            (p.index, p.records) for p in kt.partition_data]


def _bodies() -> list[dict[str, Any]]:
    batch = build_batch([(b"key", b"value" * 40)], producer_id=3, producer_epoch=0,
                        base_sequence=7)
    return [
        {"transactional_id": None, "acks": -1, "timeout": 30_000, "topic_data": [
            {"name": "t", "partition_data": [{"index": 4, "records": batch}]}]},
        {"transactional_id": "tx-\u00e9", "acks": 1, "timeout": 5, "topic_data": [
            {"name": "a.b-c", "partition_data": [{"index": 0, "records": batch},
                                                 {"index": 2, "records": None},
                                                 {"index": 1, "records": b""}]},
            {"name": "x" * 200, "partition_data": [{"index": 9, "records": batch * 3}]}]},
        {"transactional_id": "", "acks": 0, "timeout": 0, "topic_data": []},
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_read_produce_reads_what_kio_reads(version: int) -> None:
    for body in _bodies():
        for client_id in (b"bench", None, b""):
            frame = _frame(version, body, client_id)
            fast = read_produce(frame)
            assert fast is not None
            _same(fast, frame)
            assert read_produce(memoryview(bytearray(frame))) == fast


def test_read_produce_leaves_the_unusual_to_the_general_path() -> None:
    body = _bodies()[0]
    assert read_produce(_frame(12, body)) is not None
    zero_id = _frame(13, body).replace(_id("t").bytes, bytes(16))
    assert read_produce(zero_id) is None  # the zero id: the general path's (no topic)
    frame = _frame(9, body)
    assert read_produce(frame + b"\x00") is None  # trailing bytes
    assert read_produce(frame[:-1]) is None
    tagged = bytearray(frame)
    tagged[-1] = 1  # a tagged field at the end (and none following: malformed as well)
    assert read_produce(bytes(tagged)) is None
    bad_utf8 = _frame(8, {**body, "transactional_id": "tx"}).replace(b"tx", b"\xff\xfe")
    assert read_produce(bad_utf8) is None  # the lenient reader's business (U+FFFD)


@pytest.mark.parametrize("version", [3, 7, 8, 9, 12, 13])
def test_mutated_frames_read_by_the_fast_reader_read_alike(version: int) -> None:
    rnd = random.Random(version)
    accepted = 0
    for body in _bodies():
        frame = _frame(version, body)
        for _ in range(400):
            data = bytearray(frame)
            for _ in range(rnd.randint(1, 3)):
                pos = rnd.randrange(len(data))
                if rnd.random() < 0.8:
                    data[pos] = rnd.choice((0, 1, 2, 0x7F, 0x80, 0xFF, rnd.randrange(256)))
                else:
                    del data[pos:pos + rnd.randint(1, 4)]
            fast = read_produce(bytes(data))
            if fast is None:
                continue
            accepted += 1
            _same(fast, bytes(data))  # raises if the general path refuses what fast read
    assert accepted > 100


def _result(rnd: random.Random, topics: int, by_id: bool) -> dict[str, Any]:
    codes = [ErrorCode.none, ErrorCode.not_leader_or_follower,
             ErrorCode.out_of_order_sequence_number, ErrorCode.duplicate_sequence_number]
    return {"responses": [{
        "name": f"topic-{t}", "topic_id": _id(f"topic-{t}") if by_id else None,
        "partition_responses": [{
            "index": rnd.randrange(1 << 31), "error_code": rnd.choice(codes),
            "base_offset": rnd.choice((-1, 0, rnd.randrange(1 << 62))),
            "log_append_time": rnd.choice((None, rnd.randrange(1 << 41))),
            "log_start_offset": rnd.choice((-1, rnd.randrange(1 << 40))),
            "record_errors": [], "error_message": None,
        } for _ in range(rnd.randint(0, 3))]} for t in range(topics)],
        "throttle_time": rnd.choice((0, 17))}


@pytest.mark.parametrize("version", VERSIONS)
def test_write_produce_response_writes_the_general_encoders_bytes(version: int) -> None:
    rnd = random.Random(version)
    resp_type = response_type(0, version)
    for topics in (0, 1, 1, 2, 3) * 4:
        result = _result(rnd, topics, by_id=version >= BY_ID)
        written = write_produce_response(version, result)
        assert written is not None
        parts, errors = encode_response(resp_type, result)
        assert written[0] == b"".join(bytes(p) for p in parts)  # type: ignore[arg-type]
        assert sorted(written[1]) == sorted(errors)


def test_answers_with_record_errors_go_to_the_general_encoder() -> None:
    result = _result(random.Random(1), 1, by_id=False)
    result["responses"][0]["partition_responses"] = [{
        "index": 0, "error_code": ErrorCode.invalid_record, "base_offset": -1,
        "log_append_time": None, "log_start_offset": 0,
        "record_errors": [{"batch_index": 0, "batch_index_error_message": "no key"}],
        "error_message": "One or more records have been rejected"}]
    assert write_produce_response(9, result) is None
    assert write_produce_response(13, _result(random.Random(2), 1, by_id=False)) is None
    assert write_produce_response(12, _result(random.Random(2), 1, by_id=True)) is None
