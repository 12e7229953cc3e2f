"""The wire contract: headers, version negotiation, ordering, and refusal of bad frames."""

from __future__ import annotations

import struct

from samsa.protocol import compression
from samsa.protocol.records import HEADER_SIZE, build_batch, compute_crc
from samsa.protocol.varint import read_varint

from .wire import WireClient

API_VERSIONS, METADATA, PRODUCE, FETCH = 18, 3, 0, 1


def test_api_versions_lists_required_apis(shared_broker):
    with WireClient(shared_broker.bootstrap) as c:
        resp = c.call(
            API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
    assert resp.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[PRODUCE][0] == 0 and keys[PRODUCE][1] >= 9  # advertised from v0 (KAFKA-18659)
    assert keys[FETCH][1] >= 12
    assert keys[API_VERSIONS] == (0, 5)
    for key in (2, 3, 19, 20, 21, 22, 23, 32, 33, 37, 44, 60):
        assert key in keys


def test_api_versions_too_new_gets_v0_unsupported_version(shared_broker):
    with WireClient(shared_broker.bootstrap) as c:
        # ApiVersions v99: the broker answers in v0 format with UNSUPPORTED_VERSION (35).
        body = b""
        header = struct.pack(">hhih", API_VERSIONS, 99, 7, 1) + b"x"
        c.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
        frame = c.read_frame()
    correlation, error, count, key, lo, hi = struct.unpack(">ihihhh", frame)
    assert (correlation, error, count, key, lo) == (7, 35, 1, API_VERSIONS, 0)
    assert hi >= 3


def test_unsupported_version_of_other_api_closes_connection(shared_broker):
    with WireClient(shared_broker.bootstrap) as c:
        header = struct.pack(">hhih", METADATA, 99, 1, 1) + b"x"
        c.send_raw(struct.pack(">i", len(header)) + header)
        assert c.is_closed()


def test_unknown_api_key_closes_connection_and_broker_keeps_serving(shared_broker):
    with WireClient(shared_broker.bootstrap) as c:
        header = struct.pack(">hhih", 9999, 0, 1, 1) + b"x"
        c.send_raw(struct.pack(">i", len(header)) + header)
        assert c.is_closed()
    with WireClient(shared_broker.bootstrap) as c:
        assert c.call(API_VERSIONS, 0, {}).error_code == 0


def test_oversized_frame_refused_without_reading_it(shared_broker):
    with WireClient(shared_broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", 2_000_000_000))
        assert c.is_closed()


def test_negative_and_tiny_frames_refused(shared_broker):
    for size in (-5, 0, 3):
        with WireClient(shared_broker.bootstrap) as c:
            c.send_raw(struct.pack(">i", size) + b"\x00" * max(size, 0))
            assert c.is_closed()


def test_garbage_body_closes_connection(shared_broker):
    with WireClient(shared_broker.bootstrap) as c:
        header = struct.pack(">hhih", METADATA, 9, 1, 1) + b"x"
        body = b"\xff" * 40
        c.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
        assert c.is_closed()


def test_pipelined_requests_answered_in_order(shared_broker):
    with WireClient(shared_broker.bootstrap) as c:
        sent = []
        for i in range(20):
            version = i % 4
            corr, data = c.encode_request(API_VERSIONS, version, {})
            c.send_raw(data)
            sent.append((corr, version))
        for corr, version in sent:
            assert c.read_response(API_VERSIONS, version, corr).error_code == 0


def test_produce_bad_crc_gets_corrupt_message_and_nothing_written(shared_broker):
    topic = "wire-bad-crc"
    with WireClient(shared_broker.bootstrap) as c:
        c.call(METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        batch = bytearray(build_batch([(b"k", b"v", [], 1000)]))
        batch[-1] ^= 0xFF  # flip a byte inside the CRC-covered range
        resp = c.call(
            PRODUCE,
            9,
            {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": 0, "records": bytes(batch)}]}
                ],
            },
        )
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == 2  # CORRUPT_MESSAGE
        good = build_batch([(b"k", b"v", [], 1000)])
        resp = c.call(
            PRODUCE,
            9,
            {
                "acks": -1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": good}]}],
            },
        )
        part = resp.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 0)


def test_produce_record_breaking_the_framing_inside_a_run_gets_invalid_record(shared_broker):
    """2,000 records of one size, one of them claiming a byte more than it has (CRC valid):
    the record lengths no longer tile the batch, INVALID_RECORD as from Kafka's record walk
    (InvalidRecordException), and nothing of the batch is appended."""
    intact = build_batch([(None, b"v" * 100, [], 1000)] * 2000)
    batch = bytearray(intact)
    batch[_record_start(batch, 1000)] += 2  # zigzag: one more byte (a 2-byte varint's low bits)
    _reseal(batch)
    _refused_then_intact(shared_broker.bootstrap, "wire-bad-framing", bytes(batch), intact)


def test_produce_record_whose_key_length_lies_gets_invalid_record(shared_broker):
    """2,000 records of one size that tile the batch, one of them claiming a 2-byte key where
    it has none (CRC valid): its fields no longer fill its length, INVALID_RECORD as from
    Kafka's DefaultRecord.readFrom, and nothing of the batch is appended."""
    intact = build_batch([(None, b"v" * 100, [], 1000)] * 2000)
    batch = bytearray(intact)
    _, q = read_varint(batch, _record_start(batch, 1000))  # past the length
    _, q = read_varint(batch, q + 1)  # attributes, timestampDelta
    _, q = read_varint(batch, q)  # offsetDelta
    assert batch[q] == 0x01  # key length -1 (null)
    batch[q] = 0x04  # key length 2
    _reseal(batch)
    _refused_then_intact(shared_broker.bootstrap, "wire-bad-key-length", bytes(batch), intact)


def test_produce_compressed_record_whose_key_length_lies_gets_invalid_record(shared_broker):
    """The same lie inside an lz4 batch: Kafka's LogValidator walks a compressed batch's
    records too (decompressed), so INVALID_RECORD, and nothing of the batch is appended."""
    plain = build_batch([(None, b"v" * 100, [], 1000)] * 200)
    lying = bytearray(plain)
    _, q = read_varint(lying, _record_start(lying, 100))  # past the length
    _, q = read_varint(lying, q + 1)  # attributes, timestampDelta
    _, q = read_varint(lying, q)  # offsetDelta
    lying[q] = 0x04  # key length 2 where it has none
    bad, intact = _compressed(bytes(lying)), _compressed(plain)
    _refused_then_intact(shared_broker.bootstrap, "wire-bad-lz4-record", bad, intact)


def test_produce_of_two_batches_to_one_partition_gets_invalid_record(shared_broker):
    """Kafka takes one v2 batch per partition in a Produce request (LogValidator: "Compressed
    outer record has more than one batch"); two intact batches get INVALID_RECORD."""
    one = build_batch([(None, b"v", [], 1000)])
    _refused_then_intact(shared_broker.bootstrap, "wire-two-batches", one + one, one)


def _compressed(plain: bytes) -> bytes:
    """`plain` (one uncompressed batch) with its records region lz4-compressed as they are,
    malformed or not, and a valid CRC."""
    body = compression.compress(compression.LZ4, plain[HEADER_SIZE:])
    batch = bytearray(plain[:HEADER_SIZE]) + body
    struct.pack_into(">i", batch, 8, len(batch) - 12)  # batchLength
    attributes = struct.unpack_from(">h", batch, 21)[0]
    struct.pack_into(">h", batch, 21, attributes | compression.LZ4)
    _reseal(batch)
    return bytes(batch)


def _record_start(batch: bytearray, index: int) -> int:
    """Where the record `index` of a one-batch `batch` starts."""
    p = HEADER_SIZE
    for _ in range(index):
        length, p = read_varint(batch, p)
        p += length
    return p


def _reseal(batch: bytearray) -> None:
    """A valid CRC again over the altered batch: only the record check can refuse it."""
    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))


def _refused_then_intact(bootstrap: str, topic: str, bad: bytes, intact: bytes) -> None:
    """`bad` gets INVALID_RECORD, then `intact` lands at offset 0: the refused batch took
    nothing."""

    def produce(records: bytes):
        resp = c.call(PRODUCE, 9, {"acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
        return resp.responses[0].partition_responses[0]

    with WireClient(bootstrap) as c:
        c.call(METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        assert produce(bad).error_code == 87  # INVALID_RECORD
        part = produce(intact)
        assert (part.error_code, part.base_offset) == (0, 0)  # the refused batch took nothing


def test_produce_to_unknown_partition(shared_broker):
    topic = "wire-unknown-partition"
    with WireClient(shared_broker.bootstrap) as c:
        c.call(METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        resp = c.call(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 5000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [
                            {"index": 7, "records": build_batch([(None, b"v", [], 1)])}
                        ],
                    }
                ],
            },
        )
        assert resp.responses[0].partition_responses[0].error_code == 3


def test_record_too_large(shared_broker):
    topic = "wire-too-large"
    with WireClient(shared_broker.bootstrap) as c:
        c.call(METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})
        big = build_batch([(None, b"x" * 1_100_000, [], 1)])
        resp = c.call(
            PRODUCE,
            9,
            {
                "acks": 1,
                "timeout": 5000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": big}]}],
            },
        )
        assert resp.responses[0].partition_responses[0].error_code == 10  # MESSAGE_TOO_LARGE


def test_huge_array_length_is_refused_not_allocated(shared_broker):
    # Metadata v9 whose topics array claims ~2^32 entries in a 23-byte frame. kio's native
    # reader would reserve memory for all of them; the guard must refuse it first.
    frame = struct.pack(">hhih", METADATA, 9, 7, 1) + b"x" + b"\x00"
    frame += bytes([0xF0, 0xFF, 0xFF, 0xFF, 0x0F]) + b"\x01\x02"
    with WireClient(shared_broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", len(frame)) + frame)
        assert c.is_closed()
    assert shared_broker.is_running()
    with WireClient(shared_broker.bootstrap) as c:
        assert c.call(API_VERSIONS, 0, {}).error_code == 0


def test_a_partition_count_past_kafkas_batch_limit_is_refused(shared_broker, unique_topic):
    """Kafka's controller writes at most 10,000 records for one request: more partitions than
    that get POLICY_VIOLATION (a fuzzed count of 2^31 - 1 took the broker's memory). Checked
    with validate_only, which Kafka refuses alike and which creates nothing when allowed."""
    with WireClient(shared_broker.bootstrap) as c:
        create = c.call(19, 5, {"topics": [{"name": unique_topic, "num_partitions": 10_000,
                                            "replication_factor": 1}],
                                "timeout": 10_000, "validate_only": True}).topics[0]
        assert create.error_code == 44, create  # policy_violation
        assert create.error_message == "Unable to perform excessively large batch operation."
        assert c.call(19, 5, {"topics": [{"name": unique_topic, "num_partitions": 1,
                                          "replication_factor": 1}],
                              "timeout": 10_000}).topics[0].error_code == 0
        grow = c.call(37, 1, {"topics": [{"name": unique_topic, "count": 10_002}],
                              "timeout": 10_000, "validate_only": True}).results[0]
        assert grow.error_code == 44, grow
        grow = c.call(37, 1, {"topics": [{"name": unique_topic, "count": 10_001}],
                              "timeout": 10_000, "validate_only": True}).results[0]
        assert grow.error_code == 0, grow
