"""The length guard accepts every well-formed request the broker serves and refuses lies."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.broker.apis import build_registry
from samsa.protocol.codec import request_type
from samsa.protocol.framing import read_request_header
from samsa.protocol.guard import MalformedRequest, check_request

from .samples import encode_body, sample, with_null
from .wire import WireClient

SPECS = [
    (s.key, v) for s in build_registry().all() for v in range(s.min_version, s.max_version + 1)
]


def _encoded(api_key: int, version: int, body: dict) -> tuple[bytes, int]:
    client = WireClient.__new__(WireClient)
    client._correlation = 0
    _, framed = client.encode_request(api_key, version, body)
    frame = framed[4:]
    _, offset = read_request_header(frame, request_type(api_key, version).__flexible__)
    return frame, offset


@pytest.mark.parametrize(("api_key", "version"), SPECS)
def test_default_requests_pass(api_key, version):
    try:
        frame, offset = _encoded(api_key, version, {})
    except Exception:
        pytest.skip("kio cannot encode an all-defaults request of this version")
    check_request(request_type(api_key, version), frame, offset)


def test_realistic_produce_passes_and_truncations_fail():
    body = {
        "acks": 1,
        "timeout": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"r" * 100}]}],
    }
    for version in (3, 8, 9, 11):
        frame, offset = _encoded(0, version, body)
        check_request(request_type(0, version), frame, offset)
        with pytest.raises(MalformedRequest):
            check_request(request_type(0, version), frame[:-1], offset)


@settings(max_examples=300, deadline=None)
@given(count=st.integers(1, 2**31 - 1), flexible=st.booleans())
def test_inflated_array_counts_are_refused(count, flexible):
    version = 9 if flexible else 4
    frame, offset = _encoded(3, version, {"topics": [{"name": "x"}]})
    if flexible:
        # topics is the first field: a compact array (uvarint N+1).
        varint = bytearray()
        n = count + 1
        while n > 0x7F:
            varint.append((n & 0x7F) | 0x80)
            n >>= 7
        varint.append(n)
        forged = frame[:offset] + bytes(varint) + frame[offset + 1 :]
    else:
        forged = frame[:offset] + struct.pack(">i", count) + frame[offset + 4 :]
    if count == 1:
        return
    with pytest.raises(MalformedRequest):
        check_request(request_type(3, version), forged, offset)


@pytest.mark.parametrize(("api_key", "version"), SPECS)
def test_every_truncation_of_a_default_request_is_refused(api_key, version):
    """The walk generated for each schema reaches the end of an intact request exactly, and
    refuses the request cut short anywhere (a field past the end, or a length that no longer
    fits), with MalformedRequest and nothing else."""
    try:
        frame, offset = _encoded(api_key, version, {})
    except Exception:
        pytest.skip("kio cannot encode an all-defaults request of this version")
    entity = request_type(api_key, version)
    check_request(entity, frame, offset)
    for cut in range(offset, len(frame)):
        with pytest.raises(MalformedRequest):
            check_request(entity, frame[:cut], offset)


@pytest.mark.parametrize(("api_key", "version", "path"), [
    (20, 5, ("topic_names",)),  # DeleteTopics v5
    (20, 6, ("topics",)),  # DeleteTopics v6
    (10, 6, ("coordinator_keys",)),  # FindCoordinator v6
    (27, 1, ("markers",)),  # WriteTxnMarkers v1
    (27, 1, ("markers", 0, "topics", 0, "partition_indexes")),
    (21, 2, ("topics", 0, "partitions")),  # DeleteRecords v2
    (3, 4, ("topics", 0, "name")),  # Metadata v4: a string
    (0, 9, ("topic_data", 0, "partition_data")),  # Produce v9
])
def test_a_null_the_version_forbids_is_refused_in_kafkas_words(api_key, version, path):
    """kio reads a null array as None whatever the schema says: the guard refuses it, as
    Kafka's reader does, before a handler could see it."""
    entity = request_type(api_key, version)
    body = encode_body(entity, with_null(sample(entity), path))
    with pytest.raises(MalformedRequest, match=f"non-nullable field {path[-1]} was serialized "
                                               f"as null"):
        check_request(entity, body, 0)


def test_a_null_the_version_allows_passes():
    """Metadata v4's topics may be null (all topics)."""
    entity = request_type(3, 4)
    check_request(entity, encode_body(entity, with_null(sample(entity), ("topics",))), 0)
