"""A Produce request read, and its answer written, without kio (issue 47).

A producer of keyed records over many partitions sends thousands of small Produce requests a
second (librdkafka sends one partition a request), and kio's generic reader and writer with
the guard were a sixth of such a request's CPU. `read_produce` reads the usual request
(v3-v13, topics by name or from v13 by id, no tagged fields, every length within the frame,
valid UTF-8) in a few struct reads and returns None for anything else, which the general path
(the guard, the lenient reader, kio) then reads as before: what it accepts, kio reads alike
(tests/protocol/test_produce_wire.py compares them, mutated frames included).
`write_produce_response` writes the answer the general encoder would, for answers without
per-record errors (None for the others).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from .encoder import uvarint

# a request header's api key, version, correlation id and client id's length
_HEADER = struct.Struct(">hhih")
_I32_I32 = struct.Struct(">ii")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
# A partition's answer: index, error, base offset, log append time; v5+ log start offset;
# v8+ record errors (none) and error message (null) in the fixed-length forms of v8.
_PARTITION_ANSWER_V3 = struct.Struct(">ihqq")
_PARTITION_ANSWER_V5 = struct.Struct(">ihqqq")
_PARTITION_ANSWER_V8 = struct.Struct(">ihqqqih")

MIN_VERSION, MAX_VERSION = 3, 13
FLEXIBLE_FROM = 9
TOPIC_IDS_FROM = 13  # KIP-516: each topic named by its id, in the request and the answer
_NO_ID = bytes(16)  # Kafka's zero Uuid: left to the general path


class PartitionData:
    """A partition's data (not a NamedTuple: its `index` would hide tuple.index)."""

    __slots__ = ("index", "records")

    def __init__(self, index: int, records: bytes | None) -> None:
        self.index = index
        self.records = records

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PartitionData) and self.index == other.index
                and self.records == other.records)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value


class TopicData:
    """A topic's data: by name (v3-v12, `topic_id` None) or by id (v13, `name` None)."""

    __slots__ = ("name", "partition_data", "topic_id")

    def __init__(self, name: str | None, partition_data: tuple[PartitionData, ...],
                 topic_id: uuid.UUID | None = None) -> None:
        self.name = name
        self.partition_data = partition_data
        self.topic_id = topic_id

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TopicData) and self.name == other.name
                and self.topic_id == other.topic_id
                and self.partition_data == other.partition_data)

    __hash__ = None  # type: ignore[assignment]  # compared by value


class ProduceRequest:
    """What the Produce handler reads of kio's ProduceRequest, by the same names. (Classes
    with slots, not NamedTuples or dataclasses, and the timeout's timedelta made only when
    asked for: each of those cost a microsecond a request.)"""

    __slots__ = ("acks", "client_id", "timeout_ms", "topic_data", "transactional_id")

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int,
                 topic_data: tuple[TopicData, ...], client_id: str | None) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data
        self.client_id = client_id

    @property
    def timeout(self) -> timedelta:
        return timedelta(milliseconds=self.timeout_ms)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProduceRequest) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # compared by value


class _Unusual(Exception):
    """Anything `read_produce` leaves to the general reader."""


def _uvarint(buf: Any, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:  # nearly every length and count here
        return b, pos + 1
    value, shift = b & 0x7F, 7
    while True:
        pos += 1
        if shift > 28:
            raise _Unusual
        b = buf[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7


def _length(buf: Any, pos: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A length prefix (-1: null) and the position after it."""
    if flexible:
        b = buf[pos]
        if b < 0x80:  # one byte, without _uvarint's call
            return b - 1, pos + 1
        b2 = buf[pos + 1]
        if b2 < 0x80:  # two (a small batch's size)
            return (b & 0x7F | b2 << 7) - 1, pos + 2
        n, pos = _uvarint(buf, pos)
        return n - 1, pos
    if wide:
        return _I32.unpack_from(buf, pos)[0], pos + 4
    return _I16.unpack_from(buf, pos)[0], pos + 2


def _string(buf: Any, pos: int, end: int, flexible: bool, nullable: bool
            ) -> tuple[str | None, int]:
    n, pos = _length(buf, pos, flexible, wide=False)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise _Unusual
    if pos + n > end:
        raise _Unusual
    return bytes(buf[pos:pos + n]).decode("utf-8"), pos + n  # invalid UTF-8: general path


def read_produce(frame: Any) -> ProduceRequest | None:
    """The Produce request in `frame` (header and body, after the size prefix), or None when
    it is not the usual kind (see the module's docstring) or is malformed."""
    try:
        return _read(frame)
    except (_Unusual, IndexError, struct.error, UnicodeDecodeError):
        return None


def _read(buf: Any) -> ProduceRequest:
    # (tagged-field sections and counts read inline: this runs for every Produce request)
    end = len(buf)
    api_key, version, _, n = _HEADER.unpack_from(buf, 0)
    if api_key != 0 or not MIN_VERSION <= version <= MAX_VERSION:
        raise _Unusual
    flexible = version >= FLEXIBLE_FROM
    by_id = version >= TOPIC_IDS_FROM
    # after the correlation id, the client id: never a compact string (as _string, inline)
    pos = _HEADER.size
    if n >= 0:
        if pos + n > end:
            raise _Unusual
        client_id: str | None = bytes(buf[pos:pos + n]).decode("utf-8")
        pos += n
    elif n == -1:
        client_id = None
    else:
        raise _Unusual
    if flexible:
        if buf[pos]:  # the header's tagged fields
            raise _Unusual
        pos += 1
    transactional_id, pos = _string(buf, pos, end, flexible, nullable=True)
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    b = buf[pos]  # (a count of one byte read inline: _length's call saved, every request)
    count, pos = (b - 1, pos + 1) if flexible and b < 0x80 else _length(buf, pos, flexible, True)
    if count < 0:
        raise _Unusual
    topics = []
    for _ in range(count):
        topic_id = None
        if by_id:
            raw_id = bytes(buf[pos:pos + 16])
            if len(raw_id) != 16 or raw_id == _NO_ID:
                raise _Unusual
            topic_id, name, pos = uuid.UUID(bytes=raw_id), None, pos + 16
        else:
            name, pos = _string(buf, pos, end, flexible, nullable=False)
            assert name is not None
        b = buf[pos]
        partitions_count, pos = ((b - 1, pos + 1) if flexible and b < 0x80
                                 else _length(buf, pos, flexible, True))
        if partitions_count < 0:
            raise _Unusual
        partitions = []
        for _ in range(partitions_count):
            if flexible:
                (index,) = _I32.unpack_from(buf, pos)
                size, pos = _length(buf, pos + 4, flexible, wide=True)
            else:  # the index and the records' size in one read
                index, size = _I32_I32.unpack_from(buf, pos)
                pos += 8
            records = None
            if size >= 0:
                if pos + size > end:
                    raise _Unusual
                records = bytes(buf[pos:pos + size])
                pos += size
            elif size != -1:
                raise _Unusual
            if flexible:
                if buf[pos]:  # the partition's tagged fields
                    raise _Unusual
                pos += 1
            partitions.append(PartitionData(index, records))
        if flexible:
            if buf[pos]:  # the topic's
                raise _Unusual
            pos += 1
        topics.append(TopicData(name, tuple(partitions), topic_id))
    if flexible:
        if buf[pos]:  # the request's
            raise _Unusual
        pos += 1
    if pos != end:
        raise _Unusual
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics), client_id)


def write_produce_response(version: int, result: Mapping[str, Any]
                           ) -> tuple[bytes, list[int]] | None:
    """The Produce answer body (after the response header) the general encoder writes for
    `result` (the handler's dict) at `version`, and its non-zero error codes; None for one
    this does not write: a version outside v3-v13, per-record errors or an error message, a
    topic by id before v13 or without one from v13, or fields other than the handler's."""
    if not MIN_VERSION <= version <= MAX_VERSION or len(result) != 2:
        return None
    flexible = version >= FLEXIBLE_FROM
    by_id = version >= TOPIC_IDS_FROM
    out = bytearray()
    errors: list[int] = []
    responses = result["responses"]
    out += uvarint(len(responses) + 1) if flexible else _I32.pack(len(responses))
    for topic in responses:
        if len(topic) != 3 or (topic["topic_id"] is None) is by_id:
            return None
        if by_id:
            out += topic["topic_id"].bytes
        else:
            name = topic["name"].encode()
            out += uvarint(len(name) + 1) if flexible else _I16.pack(len(name))
            out += name
        partitions = topic["partition_responses"]
        out += uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            if len(p) != 7 or p["record_errors"] or p["error_message"] is not None:
                return None
            code, append_time = p["error_code"], p["log_append_time"]
            if code:
                errors.append(code)
            out += _partition_answer(version, p["index"], code, p["base_offset"],
                                     -1 if append_time is None else append_time,
                                     p["log_start_offset"])
        if flexible:
            out.append(0)
    out += _I32.pack(result["throttle_time"])
    if flexible:
        out.append(0)
    return bytes(out), errors


def write_one_partition_answer(version: int, topic: bytes, index: int, code: int,
                               base_offset: int, log_append_time: int, log_start_offset: int
                               ) -> bytes:
    """The answer body `write_produce_response` writes for one topic (its name encoded, or
    from v13 its id's 16 bytes) with one partition, no per-record errors, no error message and
    no throttle, from the values themselves (the Produce lane of the usual one-partition
    request, without the dicts)."""
    if version >= TOPIC_IDS_FROM:
        return b"".join((_ONE_COMPACT, topic, _ONE_COMPACT,
                         _partition_answer(version, index, code, base_offset, log_append_time,
                                           log_start_offset),
                         _FLEXIBLE_TAIL))
    if version < FLEXIBLE_FROM:
        return b"".join((_ONE_TOPIC, _I16.pack(len(topic)), topic, _ONE_PARTITION,
                         _partition_answer(version, index, code, base_offset,
                                           log_append_time, log_start_offset),
                         _NO_THROTTLE))
    return b"".join((_ONE_COMPACT, uvarint(len(topic) + 1), topic, _ONE_COMPACT,
                     _partition_answer(version, index, code, base_offset, log_append_time,
                                       log_start_offset),
                     _FLEXIBLE_TAIL))


_ONE_TOPIC = _ONE_PARTITION = _I32.pack(1)
_ONE_COMPACT = uvarint(2)
_NO_THROTTLE = _I32.pack(0)
_FLEXIBLE_TAIL = b"\x00" + _NO_THROTTLE + b"\x00"  # the topic's tags, throttle, the answer's


def _partition_answer(version: int, index: int, code: int, base_offset: int,
                      log_append_time: int, log_start_offset: int) -> bytes:
    """A partition's answer without record errors or an error message."""
    if version < 5:
        return _PARTITION_ANSWER_V3.pack(index, code, base_offset, log_append_time)
    if version < 8:
        return _PARTITION_ANSWER_V5.pack(index, code, base_offset, log_append_time,
                                         log_start_offset)
    if version < FLEXIBLE_FROM:
        return _PARTITION_ANSWER_V8.pack(index, code, base_offset, log_append_time,
                                         log_start_offset, 0, -1)
    # no record errors, a null message, no tagged fields
    return _PARTITION_ANSWER_V5.pack(index, code, base_offset, log_append_time,
                                     log_start_offset) + b"\x01\x00\x00"
