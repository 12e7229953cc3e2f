"""What protocol/kio_adapter.py takes from kio's private modules, pinned.

The guard, the codec and the encoder see kio's schema classes only through the adapter. If a
kio release renames, moves or changes what it relies on, these tests fail and name it, instead
of requests being walked or responses written wrongly.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import struct
from pathlib import Path

import pytest
from kio.schema.api_versions.v3.response import ApiVersionsResponse, SupportedFeatureKey
from kio.schema.consumer_group_heartbeat.v0.response import (
    Assignment,
    ConsumerGroupHeartbeatResponse,
)
from kio.schema.fetch_snapshot.v0.response import LeaderIdAndEpoch, PartitionSnapshot
from kio.schema.find_coordinator.v0.response import FindCoordinatorResponse
from kio.schema.metadata.v12.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.serial import entity_reader, entity_writer

from samsa.protocol.errors import ErrorCode
from samsa.protocol.kio_adapter import SchemaField, schema_fields, tagged_fields

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("config", "protocol", "storage", "coordinator", "broker", "tests", "bench")
# The adapter, and this test, which pins what the adapter takes from kio.
ALLOWED = (Path("protocol/kio_adapter.py"), Path("tests/unit/test_kio_adapter.py"))


def _fields(entity: type) -> dict[str, SchemaField]:
    return {s.name: s for s in schema_fields(entity)}


# ---- the private names and the signatures the adapter calls them with ----------------------


def test_private_names_exist() -> None:
    from kio.serial import _implicit_defaults, _introspect, _serialize, writers

    for name in ("EntityField", "EntityTupleField", "classify_field", "get_field_tag",
                 "is_optional"):  # fmt: skip
        assert hasattr(_introspect, name), f"kio.serial._introspect.{name}"
    assert hasattr(_implicit_defaults, "get_tagged_field_default")
    assert hasattr(_serialize, "get_field_writer")
    assert hasattr(writers, "write_tagged_field")
    assert hasattr(writers, "Writer")


def test_private_signatures() -> None:
    from kio.serial._implicit_defaults import get_tagged_field_default
    from kio.serial._serialize import get_field_writer
    from kio.serial.writers import write_tagged_field

    def params(fn: object) -> list[str]:
        assert callable(fn)
        return list(inspect.signature(fn).parameters)

    assert params(get_field_writer) == ["field", "flexible", "is_request_header", "is_tag"]
    assert params(write_tagged_field) == ["buffer", "tag", "writer", "value"]
    assert params(get_tagged_field_default) == ["field"]


def test_classify_field_on_real_schemas() -> None:
    from kio.serial._introspect import (
        EntityField,
        EntityTupleField,
        PrimitiveField,
        PrimitiveTupleField,
        classify_field,
        get_field_tag,
        is_optional,
    )

    assert EntityTupleField.is_array is True and EntityField.is_array is False
    metadata = {f.name: f for f in dataclasses.fields(MetadataResponse)}
    assert classify_field(metadata["brokers"]) == EntityTupleField(MetadataResponseBroker)
    assert isinstance(classify_field(metadata["cluster_id"]), PrimitiveField)
    assert is_optional(metadata["cluster_id"]) and not is_optional(metadata["brokers"])
    heartbeat = {f.name: f for f in dataclasses.fields(ConsumerGroupHeartbeatResponse)}
    assert classify_field(heartbeat["assignment"]) == EntityField(Assignment)
    assert is_optional(heartbeat["assignment"])
    api_versions = {f.name: f for f in dataclasses.fields(ApiVersionsResponse)}
    assert get_field_tag(api_versions["zk_migration_ready"]) == 3
    assert get_field_tag(api_versions["error_code"]) is None
    partition = {f.name: f for f in dataclasses.fields(MetadataResponsePartition)}
    replicas = classify_field(partition["replica_nodes"])
    assert isinstance(replicas, PrimitiveTupleField) and replicas.is_array
    assert partition["replica_nodes"].metadata["kafka_type"] == "int32"


# ---- schema_fields on real schema classes ----------------------------------------------------


def test_schema_fields_of_metadata_response() -> None:
    fields = _fields(MetadataResponse)
    assert [s.name for s in schema_fields(MetadataResponse)] == [
        f.name for f in dataclasses.fields(MetadataResponse)
    ]
    brokers = fields["brokers"]
    assert (brokers.entity, brokers.is_array, brokers.nullable, brokers.tag) == (
        MetadataResponseBroker, True, False, None)  # fmt: skip
    assert fields["topics"].entity is MetadataResponseTopic and fields["topics"].is_array
    cluster_id = fields["cluster_id"]
    assert (cluster_id.kafka_type, cluster_id.entity, cluster_id.is_array) == ("string", None,
                                                                               False)
    assert cluster_id.nullable
    controller = fields["controller_id"]
    assert (controller.kafka_type, controller.nullable, controller.tag) == ("int32", False, None)
    assert fields["throttle_time"].kafka_type == "timedelta_i32"
    assert all(s.tag is None for s in fields.values())


def test_schema_fields_nullable_struct_and_primitive_array() -> None:
    assignment = _fields(ConsumerGroupHeartbeatResponse)["assignment"]
    assert (assignment.entity, assignment.is_array, assignment.nullable) == (Assignment, False,
                                                                             True)
    error = _fields(ConsumerGroupHeartbeatResponse)["error_code"]
    assert (error.kafka_type, error.entity) == ("error_code", None)
    topics = _fields(MetadataResponseTopic)
    assert topics["partitions"].entity is MetadataResponsePartition
    assert topics["partitions"].is_array
    replicas = _fields(MetadataResponsePartition)["replica_nodes"]
    assert (replicas.kafka_type, replicas.entity, replicas.is_array) == ("int32", None, True)


def test_schema_fields_tags() -> None:
    fields = _fields(ApiVersionsResponse)
    assert {n: s.tag for n, s in fields.items() if s.tag is not None} == {
        "supported_features": 0,
        "finalized_features_epoch": 1,
        "finalized_features": 2,
        "zk_migration_ready": 3,
    }
    assert fields["supported_features"].entity is SupportedFeatureKey
    assert fields["finalized_features_epoch"].kafka_type == "int64"
    assert fields["error_code"].tag is None


# ---- tagged fields: order, defaults, bytes -------------------------------------------------


def test_tagged_fields_in_tag_order() -> None:
    assert [(t.tag, t.name) for t in tagged_fields(ApiVersionsResponse)] == [
        (0, "supported_features"),
        (1, "finalized_features_epoch"),
        (2, "finalized_features"),
        (3, "zk_migration_ready"),
    ]
    assert tagged_fields(MetadataResponse) == ()


def test_tagged_field_declared_defaults() -> None:
    by_name = {t.name: t for t in tagged_fields(ApiVersionsResponse)}
    assert by_name["finalized_features_epoch"].is_default(-1)
    assert not by_name["finalized_features_epoch"].is_default(0)
    assert by_name["zk_migration_ready"].is_default(False)
    assert not by_name["zk_migration_ready"].is_default(True)
    assert by_name["supported_features"].is_default(())


def test_tagged_field_implicit_default_of_a_struct() -> None:
    # No declared default: kio leaves it out when it equals the struct of its fields' zero
    # values (kio's get_tagged_field_default).
    (leader,) = tagged_fields(PartitionSnapshot)
    assert leader.name == "current_leader"
    field = {f.name: f for f in dataclasses.fields(PartitionSnapshot)}["current_leader"]
    assert field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    zero = LeaderIdAndEpoch(leader_id=0, leader_epoch=0)
    assert leader.is_default(zero)
    assert not leader.is_default(LeaderIdAndEpoch(leader_id=1, leader_epoch=0))


def test_tagged_field_bytes() -> None:
    by_name = {t.name: t for t in tagged_fields(ApiVersionsResponse)}
    out = io.BytesIO()
    by_name["finalized_features_epoch"].write(out, 5)
    assert out.getvalue() == b"\x01\x08" + struct.pack(">q", 5)  # tag, size, int64
    out = io.BytesIO()
    by_name["zk_migration_ready"].write(out, True)
    assert out.getvalue() == b"\x03\x01\x01"
    out = io.BytesIO()
    by_name["supported_features"].write(
        out, (SupportedFeatureKey(name="f", min_version=1, max_version=2),)
    )
    # compact array of one: length+1, compact string "f", int16 1, int16 2, no tags
    body = b"\x02" + b"\x02f" + struct.pack(">hh", 1, 2) + b"\x00"
    assert out.getvalue() == b"\x00" + bytes([len(body)]) + body


# ---- kio's public writer and reader, which the codec uses as they are ----------------------


def test_entity_writer_and_reader() -> None:
    response = FindCoordinatorResponse(
        error_code=ErrorCode.coordinator_load_in_progress,
        node_id=3,
        host="h",
        port=9092,
    )
    buf = io.BytesIO()
    entity_writer(FindCoordinatorResponse)(buf, response)
    expected = struct.pack(">hih", 14, 3, 1) + b"h" + struct.pack(">i", 9092)
    assert buf.getvalue() == expected
    read, end = entity_reader(FindCoordinatorResponse)(expected, 0)
    assert read == response and end == len(expected)


# ---- nothing else touches kio's private modules ---------------------------------------------


@pytest.mark.parametrize("package", SCANNED)
def test_only_the_adapter_imports_kio_private_modules(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.relative_to(ROOT) in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(n.startswith("kio.") and any(p.startswith("_") for p in n.split("."))
                   for n in names):  # fmt: skip
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"kio's private modules outside protocol/kio_adapter.py: {offenders}"
