"""The Protobuf compatibility rules (Confluent's), on .proto text and on the base64
FileDescriptorProto confluent-kafka's serializer registers."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from samsa.broker.schema_registry.errors import RegistryError
from samsa.broker.schema_registry.formats import PROTOBUF, parse
from samsa.broker.schema_registry.formats.proto_text import parse_proto, to_proto


def proto(body: str, package: str = "shop") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


def kinds(reader: str, writer: str) -> list[str]:
    found = parse(PROTOBUF, reader).read_errors(parse(PROTOBUF, writer))
    return [e.split(":")[0] for e in found]


ORDER = proto("message Order { string id = 1; int32 qty = 2; }")


def test_adding_and_removing_fields_is_compatible() -> None:
    more = proto("message Order { string id = 1; int32 qty = 2; repeated string tags = 3; }")
    assert kinds(more, ORDER) == []
    assert kinds(ORDER, more) == []


@pytest.mark.parametrize("new_type,ok", [
    ("int64", True), ("uint32", True), ("bool", True),  # the varint group
    ("sint32", False), ("fixed32", False), ("string", False), ("double", False),
])
def test_a_field_number_keeps_a_compatible_scalar_type(new_type: str, ok: bool) -> None:
    changed = proto(f"message Order {{ string id = 1; {new_type} qty = 2; }}")
    assert (kinds(changed, ORDER) == []) is ok


def test_string_and_bytes_read_each_other() -> None:
    assert kinds(proto("message Order { bytes id = 1; int32 qty = 2; }"), ORDER) == []


def test_a_scalar_becoming_a_message_is_a_kind_change() -> None:
    changed = proto("message Order { Item id = 1; int32 qty = 2; } message Item { string s = 1; }")
    assert kinds(changed, ORDER) == ["FIELD_KIND_CHANGED"]


def test_a_field_naming_another_message_is_a_named_type_change() -> None:
    two = "message A { string s = 1; } message B { string s = 1; }"
    old = proto(f"message Order {{ A item = 1; }} {two}")
    new = proto(f"message Order {{ B item = 1; }} {two}")
    assert kinds(new, old) == ["FIELD_NAMED_TYPE_CHANGED"]


def test_removing_a_message_and_changing_the_package_are_not_compatible() -> None:
    assert kinds(proto("message Other { string s = 1; }"), ORDER) == ["MESSAGE_REMOVED"]
    assert kinds(proto("message Order { string id = 1; int32 qty = 2; }", "store"), ORDER) == [
        "PACKAGE_CHANGED"]


def test_required_fields_may_be_neither_added_nor_removed() -> None:
    old = 'syntax = "proto2"; message M { optional string a = 1; }'
    new = 'syntax = "proto2"; message M { optional string a = 1; required int32 b = 2; }'
    assert kinds(new, old) == ["REQUIRED_FIELD_ADDED"]
    assert kinds(old, new) == ["REQUIRED_FIELD_REMOVED"]


def test_fields_moving_into_a_oneof() -> None:
    old = proto("message M { string a = 1; string b = 2; oneof o { string c = 3; } }")
    one = proto("message M { string b = 2; oneof o { string c = 3; } oneof p { string a = 1; } }")
    two = proto("message M { oneof p { string a = 1; string b = 2; } oneof o { string c = 3; } }")
    existing = proto("message M { string b = 2; oneof o { string c = 3; string a = 1; } }")
    assert kinds(one, old) == []
    assert kinds(two, old) == ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]
    assert kinds(existing, old) == ["FIELD_MOVED_TO_EXISTING_ONEOF"]


def test_nested_messages_maps_and_enums_parse() -> None:
    text = proto("""
        import "google/protobuf/timestamp.proto";
        option java_package = "x.y";
        message Order {
          message Line { string sku = 1; uint32 qty = 2; }
          enum State { NEW = 0; PAID = 1 [deprecated = true]; }
          repeated Line lines = 1;
          map<string, int64> totals = 2;
          State state = 3;
          google.protobuf.Timestamp at = 4;
          reserved 5, 6;
          // a comment
          optional string note = 7 [json_name = "n"];
        }""")
    fd = parse(PROTOBUF, text).descriptor  # type: ignore[attr-defined]
    order = fd.message_type[0]
    assert [f.type_name for f in order.field if f.type_name] == [
        ".shop.Order.Line", ".shop.Order.TotalsEntry", ".shop.Order.State",
        ".google.protobuf.Timestamp"]
    assert order.field[4].proto3_optional
    assert list(fd.dependency) == ["google/protobuf/timestamp.proto"]


def test_the_printed_text_parses_back_to_the_same_descriptor() -> None:
    text = proto("""
        import "other.proto";
        message Order {
          message Line { string sku = 1; repeated uint32 qty = 2; }
          enum State { NEW = 0; PAID = 1; }
          Line line = 1;
          map<string, Line> lines = 2;
          State state = 3;
          other.Thing thing = 4;
          optional string note = 5;
          oneof pay { string card = 6; sint64 cash = 7; }
        }
        enum Top { A = 0; }""")
    fd = parse_proto(text)
    printed = to_proto(fd)
    assert parse_proto(printed) == fd
    assert "map<string, .shop.Order.Line> lines = 2;" in printed


def test_the_base64_descriptor_and_the_text_check_alike() -> None:
    fd = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    m = fd.message_type.add(name="Order")
    m.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    m.field.add(name="qty", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
                label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    encoded = base64.b64encode(fd.SerializeToString()).decode()
    assert kinds(encoded, ORDER) == ["FIELD_SCALAR_KIND_CHANGED"]
    assert kinds(ORDER, ORDER) == []


def test_invalid_proto_text_is_42201() -> None:
    for bad in ("message {", "message M { string a = ; }", 'syntax = "proto2"; message M {'
                                                              " group G = 1 { } }"):
        with pytest.raises(RegistryError) as e:
            parse(PROTOBUF, bad)
        assert e.value.error_code == 42201
