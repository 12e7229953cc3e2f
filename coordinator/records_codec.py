"""The one reader and writer of coordinator records (`__consumer_offsets`,
`__transaction_state`, `__share_group_state`): Kafka's message-schema primitives, classic
(int16 string lengths, int32 array lengths) or flexible (compact lengths as unsigned varints,
tagged fields), over a bytes buffer.

Each record module says which error a malformed record raises (`error`), so its callers keep
catching what they caught; varints are read and written with the protocol layer's own.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator, Sequence
from functools import cache

from samsa.protocol.encoder import uvarint
from samsa.protocol.guard import MalformedRequest, read_uvarint


class RecordFormatError(ValueError):
    """A coordinator record that cannot be read (the default error of `RecordReader`)."""


@cache
def _struct(fmt: str) -> struct.Struct:
    return struct.Struct(fmt)


class RecordWriter:
    """Appends fields to `out`; `compact_*`/`tags` are the flexible forms. Each call returns the
    writer, so a short struct is one chain: `RecordWriter().i16(1).string(g).value()`."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def pack(self, fmt: str, *values: int) -> RecordWriter:
        self.out += _struct(fmt).pack(*values)
        return self

    def i8(self, v: int) -> RecordWriter:
        return self.pack(">b", v)

    def i16(self, v: int) -> RecordWriter:
        return self.pack(">h", v)

    def i32(self, v: int) -> RecordWriter:
        return self.pack(">i", v)

    def i64(self, v: int) -> RecordWriter:
        return self.pack(">q", v)

    def raw(self, b: bytes) -> RecordWriter:
        self.out += b
        return self

    def uuid(self, v: uuid.UUID) -> RecordWriter:
        self.out += v.bytes
        return self

    def string(self, v: str | None) -> RecordWriter:
        """int16 length (-1: null), then UTF-8."""
        if v is None:
            return self.i16(-1)
        b = v.encode()
        self.i16(len(b))
        self.out += b
        return self

    def bytes_(self, v: bytes | None) -> RecordWriter:
        """int32 length (-1: null), then the bytes."""
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.out += v
        return self

    def array_len(self, n: int) -> RecordWriter:
        return self.i32(n)

    def compact_string(self, v: str | None) -> RecordWriter:
        return self.compact_bytes(None if v is None else v.encode())

    def compact_bytes(self, v: bytes | None) -> RecordWriter:
        if v is None:
            self.out += uvarint(0)
            return self
        self.out += uvarint(len(v) + 1)
        self.out += v
        return self

    def compact_array_len(self, n: int) -> RecordWriter:
        self.out += uvarint(n + 1)
        return self

    def compact_strings(self, values: Sequence[str]) -> RecordWriter:
        self.compact_array_len(len(values))
        for v in values:
            self.compact_string(v)
        return self

    def uvarint(self, n: int) -> RecordWriter:
        self.out += uvarint(n)
        return self

    def tags(self, fields: Sequence[tuple[int, bytes]] = ()) -> RecordWriter:
        """The tagged-field section: (tag, encoded value) in tag order; none by default."""
        self.out += uvarint(len(fields))
        for tag, raw in fields:
            self.out += uvarint(tag) + uvarint(len(raw)) + raw
        return self

    def value(self) -> bytes:
        return bytes(self.out)


class RecordReader:
    """Reads fields from `buf` at `pos`; `flexible` says how string, bytes and array lengths
    are written (and whether `skip_tags` has anything to read)."""

    __slots__ = ("buf", "error", "flexible", "pos")

    def __init__(self, buf: bytes, *, flexible: bool = False,
                 error: type[Exception] = RecordFormatError) -> None:
        self.buf = buf
        self.pos = 0
        self.flexible = flexible
        self.error = error

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.error("record too short")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def unpack(self, fmt: str) -> tuple[int, ...]:
        s = _struct(fmt)
        if self.pos + s.size > len(self.buf):
            raise self.error("record too short")
        values = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return values

    def i8(self) -> int:
        return self.unpack(">b")[0]

    def i16(self) -> int:
        return self.unpack(">h")[0]

    def i32(self) -> int:
        return self.unpack(">i")[0]

    def i64(self) -> int:
        return self.unpack(">q")[0]

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos, len(self.buf))
        except MalformedRequest:
            raise self.error("bad unsigned varint") from None
        return value

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.i32() if wide else self.i16()

    def string(self) -> str | None:
        n = self._length(wide=False)
        return None if n < 0 else self.take(n).decode()

    def bytes_(self) -> bytes | None:
        n = self._length(wide=True)
        return None if n < 0 else self.take(n)

    def array_len(self) -> int:
        return self._length(wide=True)

    def tagged_fields(self) -> Iterator[int]:
        """Each tagged field's tag, positioned at its value; whatever the caller leaves
        unread of it is skipped."""
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            end = self.pos + size
            if end > len(self.buf):
                raise self.error("record too short")
            yield tag
            self.pos = end

    def skip_tags(self) -> None:
        """The tagged-field section of a flexible struct (nothing in a classic one)."""
        if self.flexible:
            for _ in self.tagged_fields():
                pass
