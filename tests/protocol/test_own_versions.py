"""Versions of Kafka 4.4's APIs kio lacks (protocol/own_versions.py), checked against frames
written out by hand from Kafka 4.4's schemas, not by the classes under test: DeleteGroups v3,
TxnOffsetCommit v6, ApiVersions v5."""

from __future__ import annotations

import struct
import time
import uuid

from samsa.protocol.codec import build, encode, reader, request_type, response_type

from .wire import WireClient

DELETE_GROUPS, FIND_COORDINATOR, TXN_OFFSET_COMMIT = 42, 10, 28
UNKNOWN_TOPIC_ID, REBOOTSTRAP_REQUIRED, API_VERSIONS = 100, 129, 18
GROUP_ID_NOT_FOUND = 69
RETRIABLE = (14, 15, 16)  # the coordinator loading, not available, not this broker


def _compact(s: bytes) -> bytes:
    return bytes([len(s) + 1]) + s  # a compact string's length + 1 (short ones: one byte)


def test_delete_groups_v3_is_kafka_4_4s_layout():
    # the request as v2 (flexible): compact array of compact strings, then no tagged fields
    assert encode(build(request_type(DELETE_GROUPS, 3), {"groups_names": ["a", "bc"]})) == (
        b"\x03" + _compact(b"a") + _compact(b"bc") + b"\x00")
    # each result: group id, error code, then v3's nullable ErrorMessage, then its tags
    body = (struct.pack(">i", 7) + b"\x03"
            + _compact(b"g") + struct.pack(">h", GROUP_ID_NOT_FOUND) + b"\x00" + b"\x00"
            + _compact(b"h") + struct.pack(">h", 0) + _compact(b"why") + b"\x00" + b"\x00")
    got, end = reader(response_type(DELETE_GROUPS, 3))(body, 0)
    assert end == len(body)
    assert [(r.group_id, r.error_code, r.error_message) for r in got.results] == [
        ("g", GROUP_ID_NOT_FOUND, None), ("h", 0, "why")]


def test_delete_groups_v3_over_the_wire(shared_broker):
    client_id = b"raw"
    header = struct.pack(">hhih", DELETE_GROUPS, 3, 5, len(client_id)) + client_id + b"\x00"
    request = header + b"\x02" + _compact(b"no-such-group") + b"\x00"
    with WireClient(shared_broker.bootstrap) as c:
        deadline = time.monotonic() + 30
        # the group's coordinator first (the offsets topic is made and loaded on first ask)
        while c.call(FIND_COORDINATOR, 3, {"key": "no-such-group", "key_type": 0}).error_code:
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.1)
        while True:
            c.send_raw(struct.pack(">i", len(request)) + request)
            frame = c.read_frame()
            code = struct.unpack_from(">h", frame, len(frame) - 5)[0]
            if code not in RETRIABLE or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    # correlation id, the header's tags, throttle time, one result: NOT FOUND, a null message
    assert frame == (struct.pack(">i", 5) + b"\x00" + struct.pack(">i", 0) + b"\x02"
                     + _compact(b"no-such-group") + struct.pack(">h", GROUP_ID_NOT_FOUND)
                     + b"\x00" + b"\x00" + b"\x00")


def _txn_offset_commit_v6_body(topic_id: uuid.UUID) -> bytes:
    """transactional id "tx", group "g", producer 7 epoch 0, generation -1, member "", no
    instance; one topic by id with partition 0 at offset 5, leader epoch -1, null metadata."""
    return (_compact(b"tx") + _compact(b"g") + struct.pack(">qhi", 7, 0, -1) + _compact(b"")
            + b"\x00" + b"\x02" + topic_id.bytes + b"\x02"
            + struct.pack(">iqi", 0, 5, -1) + b"\x00" + b"\x00" + b"\x00" + b"\x00")


def test_txn_offset_commit_v6_is_kafka_4_4s_layout():
    topic_id = uuid.uuid4()
    request = build(request_type(TXN_OFFSET_COMMIT, 6), {
        "transactional_id": "tx", "group_id": "g", "producer_id": 7, "producer_epoch": 0,
        "topics": [{"topic_id": topic_id, "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_metadata": None}]}]})
    assert encode(request) == _txn_offset_commit_v6_body(topic_id)
    # the answer: throttle time, topics by id, each partition's index and error code
    body = (struct.pack(">i", 0) + b"\x02" + topic_id.bytes + b"\x02"
            + struct.pack(">ih", 3, UNKNOWN_TOPIC_ID) + b"\x00" + b"\x00" + b"\x00")
    got, end = reader(response_type(TXN_OFFSET_COMMIT, 6))(body, 0)
    assert end == len(body)
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in got.topics] == [(topic_id, [(3, UNKNOWN_TOPIC_ID)])]


def test_txn_offset_commit_v6_over_the_wire(shared_broker):
    """A topic id the cluster does not know is answered UNKNOWN_TOPIC_ID, by id."""
    topic_id = uuid.uuid4()
    client_id = b"raw"
    header = struct.pack(">hhih", TXN_OFFSET_COMMIT, 6, 9, len(client_id)) + client_id + b"\x00"
    request = header + _txn_offset_commit_v6_body(topic_id)
    with WireClient(shared_broker.bootstrap) as c:
        c.send_raw(struct.pack(">i", len(request)) + request)
        frame = c.read_frame()
    assert frame == (struct.pack(">i", 9) + b"\x00" + struct.pack(">i", 0) + b"\x02"
                     + topic_id.bytes + b"\x02" + struct.pack(">ih", 0, UNKNOWN_TOPIC_ID)
                     + b"\x00" + b"\x00" + b"\x00")


def _api_versions_v5(correlation: int, cluster_id: bytes | None, node_id: int) -> bytes:
    """ApiVersions v5, header v2: client software "t" "1", then ClusterId and NodeId."""
    header = struct.pack(">hhih", API_VERSIONS, 5, correlation, 1) + b"x" + b"\x00"
    cluster = b"\x00" if cluster_id is None else _compact(cluster_id)
    body = _compact(b"t") + _compact(b"1") + cluster + struct.pack(">i", node_id) + b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def test_api_versions_v5_over_the_wire(shared_broker):
    """KIP-1242: named elsewhere, the answer is REBOOTSTRAP_REQUIRED with no API table (a v0
    response header: the correlation id alone); named nothing, the usual table."""
    with WireClient(shared_broker.bootstrap) as c:
        c.send_raw(_api_versions_v5(3, b"not-this-cluster", 0))
        elsewhere = c.read_frame()
        c.send_raw(_api_versions_v5(4, None, -1))
        answered = c.read_frame()
    # correlation, error code, an empty compact array, throttle time, no tagged fields
    assert elsewhere == struct.pack(">ihbib", 3, REBOOTSTRAP_REQUIRED, 1, 0, 0)
    correlation, error, count = struct.unpack_from(">ihb", answered)
    assert (correlation, error) == (4, 0) and count - 1 > 40


STREAMS_HEARTBEAT, STREAMS_DESCRIBE = 88, 89


def test_streams_group_heartbeat_v1_response_is_kafka_4_4s_layout():
    # v1: TaskOffsetIntervalMs, then AcceptableRecoveryLag as an int64 (v0's int32 came before
    # TaskOffsetIntervalMs), the four nullable arrays, TopologyDescriptionRequired, then IQ's
    body = {"throttle_time": 0, "error_code": 0, "error_message": None, "member_id": "m",
            "member_epoch": 3, "heartbeat_interval": 5000, "task_offset_interval": 60000,
            "acceptable_recovery_lag": 10000, "status": None, "active_tasks": [],
            "standby_tasks": None, "warmup_tasks": None,
            "topology_description_required": True, "endpoint_information_epoch": 2,
            "partitions_by_user_endpoint": None}
    frame = encode(build(response_type(STREAMS_HEARTBEAT, 1), body))
    assert frame == (struct.pack(">ih", 0, 0) + b"\x00" + _compact(b"m")
                     + struct.pack(">iii", 3, 5000, 60000) + struct.pack(">q", 10000)
                     + b"\x00" + b"\x01" + b"\x00" + b"\x00" + b"\x01"
                     + struct.pack(">i", 2) + b"\x00" + b"\x00")


def test_streams_group_describe_v1_is_kafka_4_4s_layout():
    # the request adds IncludeTopologyDescription after IncludeAuthorizedOperations
    assert encode(build(request_type(STREAMS_DESCRIBE, 1), {
        "group_ids": ["g"], "include_authorized_operations": False,
        "include_topology_description": True})) == (
        b"\x02" + _compact(b"g") + b"\x00" + b"\x01" + b"\x00")
    # a described group adds a null TopologyDescription, its status (1: not stored) and the
    # assignor's name after AuthorizedOperations
    body = (struct.pack(">i", 0) + b"\x02" + struct.pack(">h", 0) + b"\x00" + _compact(b"g")
            + _compact(b"Empty") + struct.pack(">ii", 4, 4) + b"\xff" + b"\x01"
            + struct.pack(">i", -2**31) + b"\xff" + b"\x01" + _compact(b"sticky") + b"\x00"
            + b"\x00")
    got, end = reader(response_type(STREAMS_DESCRIBE, 1))(body, 0)
    assert end == len(body)
    g = got.groups[0]
    assert (g.group_id, g.group_epoch, g.topology, g.topology_description,
            g.topology_description_status, g.assignor_name) == ("g", 4, None, None, 1, "sticky")
