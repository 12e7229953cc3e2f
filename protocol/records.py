"""Record batch v2 (magic 2) over raw bytes: header parsing, validation, offset stamping,
record decoding and building. Layout per DefaultRecordBatch (big-endian)."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import crc32c

from samsa.protocol import compression
from samsa.protocol.errors import (
    CorruptRecord,
    InvalidRecord,
    KafkaError,
    UnsupportedForMessageFormat,
)
from samsa.protocol.record_checks import check_records
from samsa.protocol.varint import Buf as Buf  # the buffers every function here reads
from samsa.protocol.varint import read_varint, write_varint

LOG_OVERHEAD = 12  # baseOffset + batchLength
HEADER_SIZE = 61
CRC_START = 21  # CRC-32C covers [attributes, end)
MAGIC = 2
INT32_MAX = 0x7FFFFFFF

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # 1 = LogAppendTime
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

# Control record types (key = int16 version, int16 type)
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_LEN_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength


@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: Buf, pos: int = 0) -> BatchHeader:
        return cls(*_HEADER.unpack_from(buf, pos))

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & ATTR_TIMESTAMP_TYPE else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """baseSequence + lastOffsetDelta, wrapping at INT32_MAX to 0 (incrementSequence)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        if self.base_sequence > INT32_MAX - self.last_offset_delta:
            return self.base_sequence + self.last_offset_delta - INT32_MAX - 1
        return self.base_sequence + self.last_offset_delta


def iter_batches(buf: Buf, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch; stop silently at a torn tail.

    A length field too small to hold a header raises CorruptRecord (like FileLogInputStream):
    there is no way to find the next batch boundary after it."""
    end = len(buf)
    pos = start
    while pos + HEADER_SIZE <= end:
        (length,) = _I32.unpack_from(buf, pos + 8)
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecord(f"batch at position {pos} has invalid length {length}")
        if pos + LOG_OVERHEAD + length > end:
            return
        yield pos, BatchHeader.parse(buf, pos)
        pos += LOG_OVERHEAD + length


ATTRIBUTES_LOW = 22  # the low byte of a batch's int16 attributes (at 21)


def first_batch_transactional(buf: Buf) -> bool:
    """Whether the first batch in `buf` has the transactional bit, from that one byte: the
    Produce path asks this of every partition's data, most of it not transactional."""
    return len(buf) >= HEADER_SIZE and bool(buf[ATTRIBUTES_LOW] & ATTR_TRANSACTIONAL)


def compute_crc(buf: Buf, pos: int, size: int) -> int:
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def validate_batch(
    buf: Buf,
    pos: int,
    header: BatchHeader | None = None,
    *,
    client: bool = False,
    limit: int | None = None,
    inflated: InflatedAhead | None = None,
) -> BatchHeader:
    """Check magic, length and CRC (CorruptRecord); with client=True also the LogValidator
    rules for producer-written batches (InvalidRecord), a compressed batch's records inflated
    to at most `limit` bytes (InflatedTooLarge beyond), or as `inflated` ahead of the append.
    Returns the parsed header."""
    h = header or BatchHeader.parse(buf, pos)
    # (the header's properties read once each, inline: this runs for every produced batch)
    size, attributes = h.batch_length + LOG_OVERHEAD, h.attributes
    codec = attributes & ATTR_COMPRESSION_MASK
    if h.magic != MAGIC:
        if h.magic in (0, 1):
            raise UnsupportedForMessageFormat(f"message format v{h.magic} is not supported")
        raise CorruptRecord(f"invalid magic {h.magic} at position {pos}")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecord(f"batch length {h.batch_length} smaller than the header")
    if pos + size > len(buf):
        raise CorruptRecord("batch extends past the end of the buffer")
    if crc32c.crc32c(memoryview(buf)[pos + CRC_START:pos + size]) != h.crc:  # compute_crc
        raise CorruptRecord(f"CRC mismatch for batch at offset {h.base_offset}")
    if codec > compression.ZSTD:
        raise InvalidRecord(f"unknown compression codec {codec}")
    if client:
        if h.records_count <= 0:
            raise InvalidRecord("batch must contain at least one record")
        if h.last_offset_delta != h.records_count - 1:
            raise InvalidRecord(
                f"lastOffsetDelta {h.last_offset_delta} does not match record count "
                f"{h.records_count}"
            )
        if attributes & ATTR_CONTROL:
            raise InvalidRecord("clients may not write control batches")
        if h.producer_id >= 0 and h.base_sequence < 0:
            raise InvalidRecord("idempotent batch without a base sequence")
        if attributes & ATTR_TRANSACTIONAL and h.producer_id < 0:
            raise InvalidRecord("transactional batch without a producer id")
        if codec == compression.NONE:
            data = buf.tobytes() if isinstance(buf, memoryview) else buf  # sliced with a step
            check_records(data, pos + HEADER_SIZE, pos + size, h)
        else:  # Kafka's LogValidator walks a compressed batch's records too, decompressed
            if inflated is not None and inflated.error is not None:
                raise inflated.error.with_traceback(None)
            if inflated is None or not inflated.checked:
                data = records_region(buf, pos, h, limit) if inflated is None else inflated.records
                check_records(data, 0, len(data), h)
    return h


def set_base_offset_and_epoch(buf: bytearray | memoryview, pos: int, base_offset: int,
                              epoch: int) -> None:
    """Stamp broker-assigned fields; both sit before the CRC-covered range."""
    _I64.pack_into(buf, pos, base_offset)
    _I32.pack_into(buf, pos + 12, epoch)


_STAMPED_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
STAMPED_PREFIX_SIZE = _STAMPED_PREFIX.size


def stamped_prefix(h: BatchHeader) -> bytes:
    """A batch's first STAMPED_PREFIX_SIZE bytes with its header's base offset and leader
    epoch (the part `stamped_parts` rebuilds)."""
    return _STAMPED_PREFIX.pack(h.base_offset, h.batch_length, h.partition_leader_epoch)


def stamped_parts(data: Buf, batches: list[tuple[int, BatchHeader]]) -> list[Buf]:
    """`data`'s batches, tiling it, as parts to write in order: each batch's first 16 bytes
    rebuilt from its header's base offset and leader epoch, then the rest of it as a view of
    `data`. What `set_base_offset_and_epoch` on a copy would write, without copying the batches
    (a 1 MB batch costs a millisecond to append, and a copy of it ~30 us)."""
    view = memoryview(data)
    parts: list[Buf] = []
    for pos, h in batches:
        parts.append(_STAMPED_PREFIX.pack(h.base_offset, h.batch_length, h.partition_leader_epoch))
        parts.append(view[pos + STAMPED_PREFIX_SIZE:pos + h.size])
    return parts


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp: int) -> None:
    """Set maxTimestamp and the LogAppendTime attribute bit, then recompute the CRC."""
    (length,) = _I32.unpack_from(buf, pos + 8)
    (attrs,) = _I16.unpack_from(buf, pos + 21)
    _I16.pack_into(buf, pos + 21, attrs | ATTR_TIMESTAMP_TYPE)
    _I64.pack_into(buf, pos + 35, timestamp)
    _U32.pack_into(buf, pos + 17, compute_crc(buf, pos, length + LOG_OVERHEAD))


# ---------------------------------------------------------------------------------------------
# records

Header = tuple[str, bytes | None]


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]


def _read_bytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise InvalidRecord("truncated record field")
    return bytes(buf[pos : pos + n]), pos + n


def records_region(buf: Buf, pos: int, h: BatchHeader,
                   limit: int | None = None) -> bytes | bytearray:
    """The batch's records bytes, decompressed (to at most `limit` bytes: InflatedTooLarge
    beyond)."""
    raw = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + h.size])
    return compression.decompress(h.compression, raw, limit) if h.compression else raw


# ---------------------------------------------------------------------------------------------
# compressed batches inflated ahead of their append


@dataclass(slots=True)
class InflatedAhead:
    """A compressed batch's records as inflated before its append (and, if `checked`, walked
    by `_check_records`), or the error that refused them; the records may be dropped once
    checked. Found again by its partition, the batch's CRC and length, then by the very
    `bytes` it was inflated from or, in a copy of them, by its compressed bytes compared."""

    source: object
    payload: bytes
    records: bytes | bytearray
    checked: bool
    error: KafkaError | None = None
    # The log's per-record rules (storage's validate_records), if run ahead too: the error
    # they raised, if any.
    rules_checked: bool = False
    rules_error: Exception | None = None


# (the partition's "topic-index", crc, batch length) -> what was inflated for that partition.
# Held from the moment a Produce request's batches are put here until its appends (run without
# a pause of the event loop in between) have taken them: putting a request's batches here
# drops any left by an earlier one.
_AHEAD: dict[tuple[str, int, int], InflatedAhead] = {}


def inflate_ahead(buf: Buf, pos: int, h: BatchHeader, limit: int,
                  check: bool) -> InflatedAhead:
    """Inflate the compressed batch at pos (to at most `limit` bytes) and, with `check`, walk
    its records as `validate_batch` does; an error is kept, not raised. For a worker thread:
    this touches no shared state but the record shapes `_check_records` learns."""
    payload = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + h.size])
    source = buf if type(buf) is bytes and pos == 0 else None
    try:
        data = compression.decompress(h.compression, payload, limit)
        if check:
            check_records(data, 0, len(data), h)
    except (CorruptRecord, InvalidRecord) as e:
        return InflatedAhead(source, payload, b"", True, _bare(e))
    return InflatedAhead(source, payload, data, check)


def _bare(e: KafkaError) -> KafkaError:
    """The error without what it was raised through: kept, it must not hold the buffers of
    the frames it came from."""
    e.__context__ = e.__cause__ = None
    return e.with_traceback(None)


def hold_inflated(held: list[tuple[str, BatchHeader, InflatedAhead]]) -> None:
    """Keep these batches' inflated records, each for its partition ("topic-index"), for their
    appends, which follow at once."""
    _AHEAD.clear()
    for partition, h, ahead in held:
        _AHEAD[partition, h.crc, h.batch_length] = ahead


def release_inflated(partition: str, h: BatchHeader) -> None:
    _AHEAD.pop((partition, h.crc, h.batch_length), None)


def inflated_ahead(partition: str, buf: Buf, pos: int, h: BatchHeader) -> InflatedAhead | None:
    """What was inflated ahead for the batch at pos appended to `partition`, if anything."""
    if not _AHEAD:
        return None
    ahead = _AHEAD.get((partition, h.crc, h.batch_length))
    if ahead is None or (ahead.source is buf and pos == 0):  # immutable: the same bytes
        return ahead
    if bytes(memoryview(buf)[pos + HEADER_SIZE : pos + h.size]) != ahead.payload:
        return None  # another batch of the same CRC and length
    return ahead


def decode_records(buf: Buf, pos: int = 0, header: BatchHeader | None = None,
                   region: bytes | bytearray | None = None) -> list[Record]:
    """Decode every record of the batch at pos (compressed batches too; `region`: its records
    already decompressed)."""
    h = header or BatchHeader.parse(buf, pos)
    data = records_region(buf, pos, h) if region is None else region
    log_append = h.timestamp_type == LOG_APPEND_TIME
    out: list[Record] = []
    p = 0
    for _ in range(h.records_count):
        length, p = read_varint(data, p)
        end = p + length
        if length < 0 or end > len(data):
            raise InvalidRecord("truncated record")
        p += 1  # record attributes, unused
        ts_delta, p = read_varint(data, p)
        off_delta, p = read_varint(data, p)
        key, p = _read_bytes(data, p)
        value, p = _read_bytes(data, p)
        n_headers, p = read_varint(data, p)
        headers: list[Header] = []
        for _ in range(n_headers):
            hk, p = _read_bytes(data, p)
            hv, p = _read_bytes(data, p)
            headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        if p != end:
            raise InvalidRecord("record length does not match its contents")
        ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, headers))
    return out


def iter_record_timestamps(buf: Buf, pos: int, h: BatchHeader) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) per record, without materialising keys/values."""
    if h.timestamp_type == LOG_APPEND_TIME:
        for r in range(h.records_count):
            yield h.base_offset + r, h.max_timestamp
        return
    data = records_region(buf, pos, h)
    p = 0
    for _ in range(h.records_count):
        length, p = read_varint(data, p)
        end = p + length
        ts_delta, q = read_varint(data, p + 1)
        off_delta, _ = read_varint(data, q)
        yield h.base_offset + off_delta, h.base_timestamp + ts_delta
        p = end


# A record to build: (key, value[, headers[, timestamp]]); a header's key may be str or bytes.
HeaderInput = tuple[str | bytes, bytes | None]
RecordInput = (
    tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, Sequence[HeaderInput] | None]
    | tuple[bytes | None, bytes | None, Sequence[HeaderInput] | None, int | None]
)


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, key: bytes | None,
                   value: bytes | None,
                   headers: Sequence[HeaderInput]) -> None:
    body = bytearray(b"\x00")
    write_varint(body, ts_delta)
    write_varint(body, offset_delta)
    for field in (key, value):
        if field is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(field))
            body += field
    write_varint(body, len(headers))
    for hk, hv in headers:
        kb = hk.encode() if isinstance(hk, str) else hk
        write_varint(body, len(kb))
        body += kb
        if hv is None:
            write_varint(body, -1)
        else:
            write_varint(body, len(hv))
            body += hv
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[RecordInput],
    base_offset: int = 0,
    *,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    compression: int = 0,  # noqa: F811 - parameter shadows the module on purpose (API name)
    timestamp_type: int = CREATE_TIME,
    default_timestamp: int = 0,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """Encode a v2 batch. Each record is (key, value[, headers[, timestamp]])."""
    from samsa.protocol import compression as codecs

    recs = list(records)
    if not recs:
        raise ValueError("a batch needs at least one record")
    timestamps = [r[3] if len(r) > 3 and r[3] is not None else default_timestamp for r in recs]
    base_ts = timestamps[0]
    deltas = list(offset_deltas) if offset_deltas is not None else list(range(len(recs)))
    body = bytearray()
    for r, ts, od in zip(recs, timestamps, deltas, strict=True):
        headers = r[2] if len(r) > 2 and r[2] is not None else ()
        _encode_record(body, od, ts - base_ts, r[0], r[1], headers)
    payload = codecs.compress(compression, bytes(body))
    attrs = compression & ATTR_COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attrs |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attrs |= ATTR_TRANSACTIONAL
    if control:
        attrs |= ATTR_CONTROL
    total = HEADER_SIZE + len(payload)
    buf = bytearray(total)
    _HEADER.pack_into(buf, 0, base_offset, total - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0,
                      attrs, deltas[-1], base_ts, max(timestamps), producer_id, producer_epoch,
                      base_sequence, len(recs))
    buf[HEADER_SIZE:] = payload
    _U32.pack_into(buf, 17, compute_crc(buf, 0, total))
    return bytes(buf)


def build_control_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """An EndTransactionMarker batch (transactional|control, baseSequence -1, one record)."""
    key = struct.pack(">hh", 0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch(
        [(key, value, (), timestamp)], base_offset,
        partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
        producer_epoch=producer_epoch, transactional=True, control=True,
    )


def parse_control_record(buf: Buf, pos: int, h: BatchHeader) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control batch; coordinator epoch -1 if absent."""
    recs = decode_records(buf, pos, h)
    if not recs or recs[0].key is None or len(recs[0].key) < 4:
        raise CorruptRecord("control batch without a valid control record key")
    _, ctype = struct.unpack_from(">hh", recs[0].key)
    coord_epoch = -1
    if ctype in (CONTROL_ABORT, CONTROL_COMMIT) and recs[0].value and len(recs[0].value) >= 6:
        _, coord_epoch = struct.unpack_from(">hi", recs[0].value)
    return ctype, coord_epoch
