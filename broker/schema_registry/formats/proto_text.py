"""A small parser of .proto text into a FileDescriptorProto, and its printer: the protobuf
library for Python parses only compiled descriptors, not .proto files. It reads what the
registry's checks need (syntax, package, imports, messages with their fields, maps and oneofs,
nested types, enums) and skips options, reserved ranges, extensions and services. Groups are
refused. The printer writes a descriptor back as .proto text (what Confluent's registry serves
for a Protobuf schema, whichever way it was registered), with the same parts."""

from __future__ import annotations

import re
from collections.abc import Iterator

from google.protobuf import descriptor_pb2 as pb  # type: ignore[import-untyped]

Field = pb.FieldDescriptorProto
_TOKEN = re.compile(r"""\s+|//[^\n]*|/\*.*?\*/|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"""
                    r"""|[A-Za-z_.][\w.]*|-?\d[\w.+-]*|[{}\[\]()<>=;,:])""", re.S)
SCALARS = {
    "double": Field.TYPE_DOUBLE, "float": Field.TYPE_FLOAT, "int64": Field.TYPE_INT64,
    "uint64": Field.TYPE_UINT64, "int32": Field.TYPE_INT32, "fixed64": Field.TYPE_FIXED64,
    "fixed32": Field.TYPE_FIXED32, "bool": Field.TYPE_BOOL, "string": Field.TYPE_STRING,
    "bytes": Field.TYPE_BYTES, "uint32": Field.TYPE_UINT32, "sfixed32": Field.TYPE_SFIXED32,
    "sfixed64": Field.TYPE_SFIXED64, "sint32": Field.TYPE_SINT32, "sint64": Field.TYPE_SINT64,
}
_LABELS = {"optional": Field.LABEL_OPTIONAL, "required": Field.LABEL_REQUIRED,
           "repeated": Field.LABEL_REPEATED}


def _tokens(text: str) -> Iterator[str]:
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"unexpected character {text[pos]!r} at {pos}")
        if m.group(1):
            yield m.group(1)
        pos = m.end()


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = list(_tokens(text))
        self.i = 0
        self.proto3 = False

    def peek(self) -> str:
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if not tok or (expected is not None and tok != expected):
            raise ValueError(f"expected {expected or 'more'}, found {tok or 'the end'!r}")
        self.i += 1
        return tok

    def skip_statement(self) -> None:
        """Up to and with the next ';' at this level, or a balanced {...} block."""
        depth = 0
        while True:
            tok = self.take()
            depth += tok in "{[(" and len(tok) == 1
            depth -= tok in "}])" and len(tok) == 1
            if depth == 0 and (tok == ";" or tok == "}"):
                return

    def file(self) -> pb.FileDescriptorProto:
        fd = pb.FileDescriptorProto(syntax="proto2")
        while self.peek():
            tok = self.take()
            if tok == "syntax":
                self.take("=")
                fd.syntax = self.take().strip("\"'")
                self.proto3 = fd.syntax == "proto3"
                self.take(";")
            elif tok == "package":
                fd.package = self.take()
                self.take(";")
            elif tok == "import":
                name = self.take()
                name = self.take() if name in ("public", "weak") else name
                fd.dependency.append(name.strip("\"'"))
                self.take(";")
            elif tok == "message":
                self.message(fd.message_type.add())
            elif tok == "enum":
                self.enum(fd.enum_type.add())
            elif tok != ";":
                self.skip_statement()  # option, service, extend
        return fd

    def message(self, msg: pb.DescriptorProto) -> None:
        msg.name = self.take()
        self.take("{")
        while (tok := self.peek()) != "}":
            if tok == "message":
                self.take()
                self.message(msg.nested_type.add())
            elif tok == "enum":
                self.take()
                self.enum(msg.enum_type.add())
            elif tok == "oneof":
                self.take()
                self.oneof(msg)
            elif tok in ("option", "reserved", "extensions", "extend") or tok == ";":
                self.skip_statement() if tok != ";" else self.take()
            else:
                self.field(msg, None)
        self.take("}")

    def oneof(self, msg: pb.DescriptorProto) -> None:
        index = len(msg.oneof_decl)
        msg.oneof_decl.add(name=self.take())
        self.take("{")
        while self.peek() != "}":
            if self.peek() == "option":
                self.skip_statement()
            else:
                self.field(msg, index)
        self.take("}")

    def field(self, msg: pb.DescriptorProto, oneof: int | None) -> None:
        label = Field.LABEL_OPTIONAL
        proto3_optional = False
        if self.peek() in _LABELS:
            proto3_optional = self.proto3 and self.peek() == "optional"
            label = _LABELS[self.take()]
        type_name = self.take()
        if type_name == "group":
            raise ValueError("groups are not supported")
        f = Field(label=label)
        if type_name == "map":
            f.label = Field.LABEL_REPEATED
            type_name = self._map_entry(msg)
        f.name = self.take()
        self.take("=")
        f.number = int(self.take(), 0)
        if type_name in SCALARS:
            f.type = SCALARS[type_name]
        else:
            f.type_name = type_name  # message or enum: resolved by resolve_types
        if oneof is not None:
            f.oneof_index = oneof
        if proto3_optional:
            f.proto3_optional = True
        msg.field.append(f)
        if self.peek() == "[":
            self.skip_statement()
        else:
            self.take(";")

    def _map_entry(self, msg: pb.DescriptorProto) -> str:
        self.take("<")
        key = self.take()
        self.take(",")
        value = self.take()
        self.take(">")
        name = self.peek()
        entry = msg.nested_type.add(name="".join(p.capitalize() for p in name.split("_"))
                                    + "Entry")
        entry.options.map_entry = True
        for number, (fname, ftype) in enumerate((("key", key), ("value", value)), 1):
            f = entry.field.add(name=fname, number=number, label=Field.LABEL_OPTIONAL)
            if ftype in SCALARS:
                f.type = SCALARS[ftype]
            else:
                f.type_name = ftype
        return entry.name

    def enum(self, enum: pb.EnumDescriptorProto) -> None:
        enum.name = self.take()
        self.take("{")
        while (tok := self.peek()) != "}":
            if tok in ("option", "reserved"):
                self.skip_statement()
            elif tok == ";":
                self.take()
            else:
                name = self.take()
                self.take("=")
                enum.value.add(name=name, number=int(self.take(), 0))
                if self.peek() == "[":
                    self.skip_statement()
                else:
                    self.take(";")
        self.take("}")


def parse_proto(text: str) -> pb.FileDescriptorProto:
    fd = _Parser(text).file()
    resolve_types(fd)
    return fd


def resolve_types(fd: pb.FileDescriptorProto) -> None:
    """Give each field naming a type its full name (".pkg.Msg") and kind (message or enum),
    searching scopes from the innermost out, as protoc does; a type not in this file (an
    import) is taken for a message."""
    kinds: dict[str, int] = {}
    prefix = f".{fd.package}" if fd.package else ""

    def collect(scope: str, msgs: list[pb.DescriptorProto], enums: list[pb.EnumDescriptorProto]
                ) -> None:
        for e in enums:
            kinds[f"{scope}.{e.name}"] = Field.TYPE_ENUM
        for m in msgs:
            kinds[f"{scope}.{m.name}"] = Field.TYPE_MESSAGE
            collect(f"{scope}.{m.name}", list(m.nested_type), list(m.enum_type))

    def visit(scope: str, msgs: list[pb.DescriptorProto]) -> None:
        for m in msgs:
            inner = f"{scope}.{m.name}"
            for f in m.field:
                if f.type_name.startswith("."):  # fully qualified already
                    f.type = kinds.get(f.type_name, Field.TYPE_MESSAGE)
                elif f.type_name:
                    f.type_name, f.type = _lookup(f.type_name, inner, kinds)
            visit(inner, list(m.nested_type))

    collect(prefix, list(fd.message_type), list(fd.enum_type))
    visit(prefix, list(fd.message_type))


def _lookup(name: str, scope: str, kinds: dict[str, int]) -> tuple[str, int]:
    first = name.split(".", 1)[0]
    while True:
        if f"{scope}.{first}" in kinds or not scope:
            full = f"{scope}.{name}"
            return full, kinds.get(full, Field.TYPE_MESSAGE)
        scope = scope.rsplit(".", 1)[0] if "." in scope else ""


_SCALAR_NAMES = {v: k for k, v in SCALARS.items()}


def to_proto(fd: pb.FileDescriptorProto) -> str:
    """The descriptor as .proto text (types named fully qualified, with a leading dot)."""
    syntax = fd.syntax or "proto2"
    out = [f'syntax = "{syntax}";']
    if fd.package:
        out.append(f"package {fd.package};")
    out += [f'import "{dep}";' for dep in fd.dependency]
    for enum in fd.enum_type:
        out += _enum_lines(enum, "")
    for msg in fd.message_type:
        out += _message_lines(msg, "", syntax == "proto3")
    return "\n".join(out) + "\n"


def _enum_lines(enum: pb.EnumDescriptorProto, indent: str) -> list[str]:
    return ([f"{indent}enum {enum.name} {{"]
            + [f"{indent}  {v.name} = {v.number};" for v in enum.value] + [f"{indent}}}"])


def _message_lines(msg: pb.DescriptorProto, indent: str, proto3: bool) -> list[str]:
    inner = indent + "  "
    entries = {e.name: e for e in msg.nested_type if e.options.map_entry}
    out = [f"{indent}message {msg.name} {{"]
    for enum in msg.enum_type:
        out += _enum_lines(enum, inner)
    for nested in msg.nested_type:
        if not nested.options.map_entry:
            out += _message_lines(nested, inner, proto3)
    printed_oneofs: set[int] = set()
    for f in msg.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            if f.oneof_index not in printed_oneofs:
                printed_oneofs.add(f.oneof_index)
                members = [g for g in msg.field if g.HasField("oneof_index")
                           and g.oneof_index == f.oneof_index]
                out.append(f"{inner}oneof {msg.oneof_decl[f.oneof_index].name} {{")
                out += [f"{inner}  {_type(g)} {g.name} = {g.number};" for g in members]
                out.append(f"{inner}}}")
            continue
        out.append(f"{inner}{_field_text(f, entries, proto3)}")
    out.append(f"{indent}}}")
    return out


def _field_text(f: pb.FieldDescriptorProto, entries: dict[str, pb.DescriptorProto],
                proto3: bool) -> str:
    entry = entries.get(f.type_name.rsplit(".", 1)[-1]) if f.type_name else None
    if entry is not None and f.label == Field.LABEL_REPEATED:
        key, value = entry.field[0], entry.field[1]
        return f"map<{_type(key)}, {_type(value)}> {f.name} = {f.number};"
    label = {Field.LABEL_REPEATED: "repeated ", Field.LABEL_REQUIRED: "required "}.get(
        f.label, "optional " if (not proto3 or f.proto3_optional) else "")
    return f"{label}{_type(f)} {f.name} = {f.number};"


def _type(f: pb.FieldDescriptorProto) -> str:
    return f.type_name if f.type_name else _SCALAR_NAMES[f.type]
