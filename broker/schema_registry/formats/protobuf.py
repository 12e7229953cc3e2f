"""Protobuf schemas, as confluent-kafka's serializers send them (a base64 FileDescriptorProto)
or as .proto text (proto_text parses it). The compatibility check follows Confluent's rules for
Protobuf: a field number keeps a compatible wire type and its kind, messages are not removed,
required fields are neither added nor removed, fields do not move into a oneof; adding or
removing optional fields and enum constants is compatible."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from google.protobuf import descriptor_pb2 as pb  # type: ignore[import-untyped]
from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

from . import PROTOBUF, ParsedSchema, Reference
from .proto_text import parse_proto, to_proto

Field = pb.FieldDescriptorProto
# Field types whose values read as each other (Confluent's compatible scalar groups)
_GROUPS = (
    frozenset((Field.TYPE_INT32, Field.TYPE_UINT32, Field.TYPE_INT64, Field.TYPE_UINT64,
               Field.TYPE_BOOL)),
    frozenset((Field.TYPE_SINT32, Field.TYPE_SINT64)),
    frozenset((Field.TYPE_STRING, Field.TYPE_BYTES)),
    frozenset((Field.TYPE_FIXED32, Field.TYPE_SFIXED32)),
    frozenset((Field.TYPE_FIXED64, Field.TYPE_SFIXED64)),
)


@dataclass
class ProtobufSchema:
    schema_type = PROTOBUF
    descriptor: pb.FileDescriptorProto
    canonical: str

    def read_errors(self, writer: ParsedSchema) -> list[str]:
        assert isinstance(writer, ProtobufSchema)
        return _compare(self.descriptor, writer.descriptor)


def parse(schema: str, references: tuple[Reference, ...]) -> ProtobufSchema:
    fd = _from_base64(schema)
    if fd is None:
        fd = parse_proto(schema)
    fd.name = ""  # the name is the client's choice, not part of the schema
    return ProtobufSchema(fd, base64.b64encode(fd.SerializeToString(deterministic=True))
                          .decode("ascii"))


def formatted(schema: str, fmt: str | None) -> str:
    """The schema in the format a client asks for: `serialized`, the base64 descriptor
    (what confluent-kafka's Python deserializer reads); by default .proto text (what
    Confluent's registry serves, and its Java deserializer reads), printed from the descriptor
    when the schema was registered as base64."""
    fd = _from_base64(schema)
    if fmt == "serialized":
        descriptor = fd if fd is not None else parse_proto(schema)
        return base64.b64encode(descriptor.SerializeToString(deterministic=True)).decode("ascii")
    return schema if fd is None else to_proto(fd)


def _from_base64(schema: str) -> pb.FileDescriptorProto | None:
    """The descriptor when the schema is the base64 form, else None (then it is .proto text)."""
    try:
        data = base64.b64decode(schema.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    fd = pb.FileDescriptorProto()
    try:
        fd.ParseFromString(data)
    except DecodeError:
        return None
    return fd


def _messages(fd: pb.FileDescriptorProto) -> dict[str, pb.DescriptorProto]:
    out: dict[str, pb.DescriptorProto] = {}

    def walk(scope: str, msgs: list[pb.DescriptorProto]) -> None:
        for m in msgs:
            if not m.options.map_entry:  # a map's entry goes with its field
                out[f"{scope}{m.name}"] = m
            walk(f"{scope}{m.name}.", list(m.nested_type))

    walk("", list(fd.message_type))
    return out


def _compare(reader: pb.FileDescriptorProto, writer: pb.FileDescriptorProto) -> list[str]:
    if reader.package != writer.package:
        return [f"PACKAGE_CHANGED: {writer.package!r} to {reader.package!r}"]
    rmsgs, wmsgs = _messages(reader), _messages(writer)
    errors = [f"MESSAGE_REMOVED: {name}" for name in wmsgs if name not in rmsgs]
    for name, wmsg in wmsgs.items():
        if name in rmsgs:
            errors += _message(name, rmsgs[name], wmsg, reader.package, writer.package)
    return errors


def _message(name: str, reader: pb.DescriptorProto, writer: pb.DescriptorProto,
             rpkg: str, wpkg: str) -> list[str]:
    errors: list[str] = []
    rfields = {f.number: f for f in reader.field}
    wfields = {f.number: f for f in writer.field}
    for number, wf in wfields.items():
        rf = rfields.get(number)
        if rf is None:
            if wf.label == Field.LABEL_REQUIRED:
                errors.append(f"REQUIRED_FIELD_REMOVED: {name}.{wf.name} ({number})")
            continue
        errors += _field(f"{name}.{rf.name} ({number})", rf, wf, rpkg, wpkg)
    errors += [f"REQUIRED_FIELD_ADDED: {name}.{rf.name} ({n})" for n, rf in rfields.items()
               if n not in wfields and rf.label == Field.LABEL_REQUIRED]
    errors += _oneofs(name, reader, writer)
    return errors


def _field(where: str, rf: pb.FieldDescriptorProto, wf: pb.FieldDescriptorProto,
           rpkg: str, wpkg: str) -> list[str]:
    kinds = {Field.TYPE_MESSAGE: "message", Field.TYPE_ENUM: "enum", Field.TYPE_GROUP: "group"}
    rkind, wkind = kinds.get(rf.type, "scalar"), kinds.get(wf.type, "scalar")
    if rkind != wkind:
        return [f"FIELD_KIND_CHANGED: {where} from {wkind} to {rkind}"]
    if rkind == "scalar" and rf.type != wf.type and not any(
            rf.type in g and wf.type in g for g in _GROUPS):
        return [f"FIELD_SCALAR_KIND_CHANGED: {where} from {Field.Type.Name(wf.type)} to "
                f"{Field.Type.Name(rf.type)}"]
    if rkind != "scalar" and _local(rf.type_name, rpkg) != _local(wf.type_name, wpkg):
        return [f"FIELD_NAMED_TYPE_CHANGED: {where} from {wf.type_name} to {rf.type_name}"]
    if (rf.label == Field.LABEL_REPEATED) != (wf.label == Field.LABEL_REPEATED):
        return [f"FIELD_KIND_CHANGED: {where} repeated changed"]
    return []


def _local(type_name: str, package: str) -> str:
    prefix = f".{package}." if package else "."
    return type_name[len(prefix):] if type_name.startswith(prefix) else type_name


def _oneofs(name: str, reader: pb.DescriptorProto, writer: pb.DescriptorProto) -> list[str]:
    """Fields that were outside any oneof and are in one now: one field moving into a new
    oneof is compatible, more than one (or into an existing oneof) is not."""
    wnumbers = {f.number: f for f in writer.field}
    woneofs = {writer.oneof_decl[f.oneof_index].name for f in writer.field
               if f.HasField("oneof_index") and not f.proto3_optional}
    moved: dict[str, list[int]] = {}
    for f in reader.field:
        if not f.HasField("oneof_index") or f.proto3_optional:
            continue
        wf = wnumbers.get(f.number)
        if wf is not None and not (wf.HasField("oneof_index") and not wf.proto3_optional):
            moved.setdefault(reader.oneof_decl[f.oneof_index].name, []).append(f.number)
    errors = []
    for oneof, numbers in moved.items():
        if oneof in woneofs:
            errors.append(f"FIELD_MOVED_TO_EXISTING_ONEOF: {name}.{oneof} {numbers}")
        elif len(numbers) > 1:
            errors.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF: {name}.{oneof} {numbers}")
    return errors
