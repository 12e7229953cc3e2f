"""The Avro reader/writer resolution rules the registry's compatibility check applies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samsa.broker.schema_registry.compatibility import incompatibilities
from samsa.broker.schema_registry.errors import RegistryError
from samsa.broker.schema_registry.formats import AVRO, Reference, parse


def avro(schema: Any, refs: tuple[Reference, ...] = ()) -> Any:
    return parse(AVRO, json.dumps(schema), refs)


def record(*fields: dict[str, Any], name: str = "User") -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "com.example", "fields": list(fields)}


def errors(reader: Any, writer: Any) -> list[str]:
    return avro(reader).read_errors(avro(writer))


ID = {"name": "id", "type": "long"}


def test_a_field_added_with_a_default_is_read_from_old_data() -> None:
    new = record(ID, {"name": "email", "type": "string", "default": ""})
    assert errors(new, record(ID)) == []


def test_a_field_added_without_a_default_is_not() -> None:
    new = record(ID, {"name": "email", "type": "string"})
    assert [e.split(" at ")[0] for e in errors(new, record(ID))] == [
        "READER_FIELD_MISSING_DEFAULT_VALUE"]


def test_a_removed_field_is_skipped_by_the_reader() -> None:
    old = record(ID, {"name": "email", "type": "string"})
    assert errors(record(ID), old) == []


def test_an_alias_finds_a_renamed_field() -> None:
    new = record({"name": "key", "type": "long", "aliases": ["id"]})
    assert errors(new, record(ID)) == []


@pytest.mark.parametrize("writer,reader", [
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
    ("float", "double"), ("string", "bytes"), ("bytes", "string"),
])
def test_the_promotions_of_the_specification(writer: str, reader: str) -> None:
    assert errors(reader, writer) == []


@pytest.mark.parametrize("writer,reader", [
    ("long", "int"), ("double", "float"), ("string", "int"), ("boolean", "int"),
])
def test_other_type_changes_are_refused(writer: str, reader: str) -> None:
    assert errors(reader, writer)[0].startswith("TYPE_MISMATCH")


def test_a_promotion_inside_a_record_field() -> None:
    old = record({"name": "n", "type": "int"})
    new = record({"name": "n", "type": "long"})
    assert errors(new, old) == []
    assert errors(old, new)[0].startswith("TYPE_MISMATCH at /fields/0/type/")


def test_enum_symbols_added_are_read_removed_are_not_unless_a_default() -> None:
    small = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
    big = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}
    assert errors(big, small) == []
    assert errors(small, big)[0].startswith("MISSING_ENUM_SYMBOLS")
    assert errors(small | {"default": "RED"}, big) == []


def test_unions() -> None:
    assert errors(["null", "string"], "string") == []  # the reader's union has the branch
    assert errors(["null", "string"], "int")[0].startswith("READER_UNION_MISSING_WRITER_TYPE")
    assert errors("string", ["null", "string"]) != []  # the writer's null has no reader type
    assert errors(["null", "long"], ["null", "int"]) == []  # each branch promoted


def test_named_types_must_keep_their_name_or_alias_it() -> None:
    assert errors(record(ID, name="Account"), record(ID))[0].startswith("NAME_MISMATCH")
    renamed = record(ID, name="Account") | {"aliases": ["User"]}
    assert errors(renamed, record(ID)) == []


def test_fixed_size() -> None:
    assert errors({"type": "fixed", "name": "H", "size": 16},
                  {"type": "fixed", "name": "H", "size": 32})[0].startswith("FIXED_SIZE")


def test_arrays_and_maps_check_their_items() -> None:
    assert errors({"type": "array", "items": "long"}, {"type": "array", "items": "int"}) == []
    assert errors({"type": "map", "values": "int"}, {"type": "map", "values": "long"}) != []


def test_a_recursive_type_ends_its_recursion() -> None:
    node = record({"name": "next", "type": ["null", "com.example.Node"], "default": None},
                  name="Node")
    assert errors(node, node) == []


def test_logical_types_check_as_their_underlying_type() -> None:
    ts = {"type": "long", "logicalType": "timestamp-millis"}
    assert errors(record({"name": "t", "type": ts}), record({"name": "t", "type": "int"})) == []


def test_a_reference_supplies_a_named_type() -> None:
    address = {"type": "record", "name": "Address", "namespace": "com.example",
               "fields": [{"name": "city", "type": "string"}]}
    ref = Reference("com.example.Address", AVRO, json.dumps(address))
    schema = avro(record({"name": "home", "type": "com.example.Address"}), (ref,))
    assert schema.read_errors(schema) == []
    with pytest.raises(RegistryError) as e:
        avro(record({"name": "home", "type": "com.example.Address"}))
    assert e.value.error_code == 42201


def test_invalid_schemas_are_42201() -> None:
    for bad in ('{"type": "record", "name": "X"}', "not json", '{"type": "nope"}'):
        with pytest.raises(RegistryError) as e:
            parse(AVRO, bad)
        assert (e.value.status, e.value.error_code) == (422, 42201)


V1 = record(ID)
V2 = record()  # id removed
V3 = record({"name": "id", "type": "string", "default": ""})  # id back, as another type


@pytest.mark.parametrize("level,ok", [
    ("NONE", True), ("BACKWARD", True), ("FORWARD", True), ("FULL", True),
    ("BACKWARD_TRANSITIVE", False), ("FORWARD_TRANSITIVE", False), ("FULL_TRANSITIVE", False),
])
def test_levels_choose_the_versions_and_the_direction(level: str, ok: bool) -> None:
    """V3 follows V2 either way, but its id is not V1's type: only the transitive levels,
    which check V1 too, refuse it."""
    assert (incompatibilities(level, avro(V3), [avro(V1), avro(V2)]) == []) is ok


def test_backward_is_new_reads_old_forward_is_old_reads_new() -> None:
    required = record(ID, {"name": "b", "type": "string"})
    assert incompatibilities("BACKWARD", avro(required), [avro(V1)]) != []
    assert incompatibilities("FORWARD", avro(required), [avro(V1)]) == []
    assert incompatibilities("FULL", avro(required), [avro(V1)]) != []
    assert incompatibilities("FORWARD", avro(V1), [avro(required)]) != []


def test_identity_ignores_how_the_same_schema_is_written() -> None:
    """The registry gives the same id to the same schema written otherwise: key order, spacing,
    a primitive as {"type": ...}, the namespace apart or in the name (as Avro's Schema.toString
    prints them alike)."""
    apart = {"type": "record", "name": "R", "namespace": "a",
             "fields": [{"name": "x", "type": {"type": "int"}}]}
    folded = {"fields": [{"type": "int", "name": "x"}], "type": "record", "name": "a.R"}
    assert avro(apart).canonical == avro(folded).canonical
    assert avro("string").canonical == avro({"type": "string"}).canonical
    other = {"fields": [{"type": "long", "name": "x"}], "type": "record", "name": "a.R"}
    assert avro(other).canonical != avro(folded).canonical
    with_default = {**folded, "fields": [{"type": "int", "name": "x", "default": 1}]}
    assert avro(with_default).canonical != avro(folded).canonical
