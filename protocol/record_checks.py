"""Kafka's structural check of a batch's records (DefaultRecord.readFrom on each, as
LogValidator runs it on what producers write): every record parses and fills exactly its
declared length, and the batch holds as many as its header says. Producers' batches are runs
of records of one length, so most are proven a run at a time with a few C calls rather than
walked record by record (see `_proven_by_runs`); the walk names the first bad record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.protocol.errors import InvalidRecord
from samsa.protocol.varint import Buf, read_varint

if TYPE_CHECKING:
    from samsa.protocol.records import BatchHeader


def _framing_steps() -> list[int]:
    """For the two bytes at a record's start (first byte + second byte * 256): the bytes
    from that record's start to the next one's (length varint + length) when the length is a
    1- or 2-byte varint; 0 when that length is not positive (malformed); -1 for a longer
    varint (decoded the general way)."""
    one = [1 + (b >> 1) if b and not b & 1 else 0 for b in range(0x80)]  # zigzag, positive
    steps: list[int] = []
    for b1 in range(0x100):
        steps += one
        if b1 & 0x80:
            steps += [-1] * 0x80
        else:
            for b0 in range(0x80, 0x100):
                raw = (b0 & 0x7F) | (b1 << 7)
                steps.append(2 + (raw >> 1) if raw and not raw & 1 else 0)
    return steps


_STEPS = _framing_steps()
_ONE_BYTE = [bytes((b,)) for b in range(0x100)]


def check_records(data: bytes | bytearray, p: int, end: int, h: BatchHeader) -> None:
    """Kafka's structural walk of a batch's records, [p, end) of `data` (the batch itself,
    or a compressed batch's records decompressed): DefaultRecord.readFrom on each record. The
    record length prefixes must tile the region exactly, their number must equal
    recordsCount, and each record's fields (attributes, timestampDelta, offsetDelta, key,
    value, headers) must fill exactly its declared length.

    This runs over every record of every produced batch, so it is done in as few Python steps
    as possible: one table lookup per record for length varints of one or two bytes, and a
    run of records of the same length (records of one producer are often all the same size)
    checked in C: if the records at p, p + s, p + 2s... start with the same length bytes, each
    is s bytes long, so comparing those bytes (an extended slice, then lstrip) proves them all.
    The fields of a run are proven the same way (`_fields_alike`). A producer's usual batch
    is one or a few such runs and is proven run by run (`_proven_by_runs`); any other is
    walked below: a record outside a run is parsed in Python, inline for the usual record,
    else (as are the records of a run that proof does not cover) by `_record_layout`, which
    reads every field the general way.
    """
    if h.records_count > 1 and _proven_by_runs(data, p, end, h):
        return
    n = 0
    last = end - 1  # a record needs at least two bytes (length and attributes)
    steps, one_byte = _STEPS, _ONE_BYTE
    prev = -2  # the previous record's step (-2: none to compare with)
    while p < last:
        s = steps[data[p] | data[p + 1] << 8]
        if s == prev:  # the same length as the record before: maybe a run
            if p + 2 * s < last and data[p + s] == data[p] == data[p + 2 * s]:
                first = one_byte[data[p]]
                second = one_byte[data[p + 1]] if data[p] & 0x80 else None  # 2-byte varint
                window = 16
                start = p
                while True:
                    count = min(window, (end - p) // s)  # records of s bytes that fit
                    stop = p + count * s
                    same = count - len(data[p:stop:s].lstrip(first))
                    if second is not None:
                        same = min(same, count - len(data[p + 1:stop:s].lstrip(second)))
                    p += same * s
                    n += same
                    if same < window:
                        break
                    window *= 4
                if p > start and not _run_parses_like_first(data, start, p, s, h):
                    for q in range(start, p, s):
                        _parse_record(data, q, q + s, h)
                continue
        elif s <= 0:
            if not s:
                raise InvalidRecord(f"malformed record in batch at offset {h.base_offset}")
            length, q = read_varint(data, p)
            if length <= 0 or q + length > end:
                raise InvalidRecord(f"malformed record in batch at offset {h.base_offset}")
            _record_layout(data, p, q + length, h)
            p, n, prev = q + length, n + 1, -2
            continue
        r = p + s  # the record's end (past the end: the tiling check below fails)
        if r <= end:  # its fields, inline for the usual record
            # (1 to 3 byte deltas, 1 or 2 byte lengths, no headers; see _parse_record, which
            # parses the same way: calling it here per record doubled the cost of a batch of
            # varied-length records, 10,000 of 50-150 B: 5.4 -> 11.1 ms)
            q = p + 3 if data[p] & 0x80 else p + 2  # past the length and attributes
            try:
                q += (1 if data[q] < 0x80 else 2 if data[q + 1] < 0x80  # timestampDelta
                      else 3 if data[q + 2] < 0x80 else s)
                q += (1 if data[q] < 0x80 else 2 if data[q + 1] < 0x80  # offsetDelta
                      else 3 if data[q + 2] < 0x80 else s)
                b = data[q]  # key length (negative: null)
                if b & 0x80:
                    c = data[q + 1]
                    raw = (b & 0x7F) | c << 7
                    q += s if c & 0x80 else 2 if raw & 1 else 2 + (raw >> 1)
                else:
                    q += 1 if b & 1 else 1 + (b >> 1)
                b = data[q]  # value length
                if b & 0x80:
                    c = data[q + 1]
                    raw = (b & 0x7F) | c << 7
                    q += s if c & 0x80 else 2 if raw & 1 else 2 + (raw >> 1)
                else:
                    q += 1 if b & 1 else 1 + (b >> 1)
                if q != r - 1 or data[q]:  # not (no headers, and the record filled)
                    _record_layout(data, p, r, h)
            except IndexError:
                _record_layout(data, p, r, h)
        p = r
        n += 1
        prev = s
    if p != end:
        raise InvalidRecord(f"malformed record in batch at offset {h.base_offset}")
    if n != h.records_count:
        raise InvalidRecord(f"batch declares {h.records_count} records but holds {n}")


# A producer's batch of over 64 records is not all of one length: its offsetDelta takes two
# bytes from the 64th record on (three from the 8,192nd), and timestampDelta widens likewise.
# Such a batch is a few runs of records of one length each, proven run by run.
_MAX_RUNS = 8
_RUN_WINDOW = 256  # records a run's first look at its length bytes covers (a batch's usual)


def _proven_by_runs(data: bytes | bytearray, p: int, end: int, h: BatchHeader) -> bool:
    """Whether [p, end) is h.records_count records in at most _MAX_RUNS runs, each of records
    of one length that parse alike: a run's extent is read from its records' length bytes
    (a stepped slice, lstrip), its first record is parsed, and `_fields_alike` shows the
    others parse as it does. A few C calls a run, whatever its length (160 records of 100 B:
    ~9 us, where a pattern per run took ~15). False when that is not shown, or a run before
    the last is a single record (records of varied lengths: the walk is the faster proof);
    the walk then judges every record, and names the first bad one."""
    steps, one_byte = _STEPS, _ONE_BYTE
    left = h.records_count
    for _ in range(_MAX_RUNS):
        if end - p < 2:
            return False
        s = steps[data[p] | data[p + 1] << 8]
        width = 1 if data[p] < 0x80 else 2  # of the length varint
        if s <= 0:
            if not s:  # malformed
                return False
            try:  # a length of three bytes or more
                length, q = _read_int(data, p, end, 5)
            except InvalidRecord:
                return False
            if length <= 0:
                return False
            width = q - p
            s = width + length
        if p + s > end:
            return False
        # The records from p with the same length bytes, in windows (a slice with a step
        # touches a cache line a record: a short run in a large batch must not cost them all).
        n, window = 0, _RUN_WINDOW
        while True:
            start = p + n * s
            count = min(window, (end - start) // s)  # records of s bytes that fit
            stop = start + count * s
            same = count
            for k in range(width):
                same = min(same, count - len(data[start + k:stop:s].lstrip(one_byte[data[p + k]])))
            n += same
            if same < window:
                break
            window *= 4
        stop = p + n * s
        fields = _usual_fields(data, p, p + s)
        if fields is None:
            try:
                fields = _record_layout(data, p, p + s, h)
            except InvalidRecord:
                return False
        if n > 1 and not _fields_alike(data, fields, stop, s, n):
            return False
        left -= n
        p = stop
        if p == end:
            return left == 0
        if n < 2:
            return False
    return False


def _usual_fields(data: Buf, p: int, end: int) -> list[tuple[int, int]] | None:
    """`_record_layout`'s fields of the usual record at [p, end), its length already read as
    end - p (one or two bytes): timestampDelta and offsetDelta of one to three bytes, key and
    value lengths of one or two, no headers. None for any other record (or one that does not
    parse), which `_record_layout` then reads."""
    if data[p] & 0x80:
        if data[p + 1] & 0x80:  # a length of three bytes or more
            return None
        q = p + 3  # past the length and attributes
    else:
        q = p + 2
    fields: list[tuple[int, int]] = []
    try:
        for _ in range(2):  # timestampDelta, offsetDelta
            width = (1 if data[q] < 0x80 else 2 if data[q + 1] < 0x80
                     else 3 if data[q + 2] < 0x80 else 0)
            if not width:
                return None
            fields.append((q, width))
            q += width
        for _ in range(2):  # the key's length and bytes, then the value's (negative: null)
            b = data[q]
            if b & 0x80:
                c = data[q + 1]
                if c & 0x80:
                    return None
                raw = (b & 0x7F) | c << 7
                fields.append((q, 2))
                q += 2 if raw & 1 else 2 + (raw >> 1)
            else:
                fields.append((q, 1))
                q += 1 if b & 1 else 1 + (b >> 1)
        if q != end - 1 or data[q]:  # not (no headers, and the record filled)
            return None
    except IndexError:
        return None
    fields.append((q, 1))
    return fields


def _read_int(data: Buf, p: int, end: int, longest: int) -> tuple[int, int]:
    """A varint of at most `longest` bytes (5 for an int, 10 for a long, as ByteUtils reads
    them) that must end before `end`; an int keeps its low 32 bits, as Java's does."""
    if p < end and data[p] < 0x80:  # one byte
        b = data[p]
        return (b >> 1) ^ -(b & 1), p + 1
    raw, shift, stop = 0, 0, min(end, p + longest)
    while p < stop:
        b = data[p]
        p += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            if longest == 5:
                raw &= 0xFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), p
        shift += 7
    raise InvalidRecord("malformed varint in record")


def _record_layout(data: Buf, p: int, end: int, h: BatchHeader) -> list[tuple[int, int]]:
    """Parse the record at [p, end) (length varint first) as DefaultRecord.readFrom does;
    raise InvalidRecord if it does not parse or its fields do not fill it exactly. Returns
    its varint fields after the length as (position, width), in order: timestampDelta,
    offsetDelta, key length, value length, header count, then per header its key and value
    lengths."""
    length, q = _read_int(data, p, end, 5)
    if q + length != end:
        raise InvalidRecord(f"malformed record in batch at offset {h.base_offset}")
    q += 1  # attributes (not checked, as Kafka does not)
    fields: list[tuple[int, int]] = []
    for longest in (10, 5):  # timestampDelta, offsetDelta
        _, r = _read_int(data, q, end, longest)
        fields.append((q, r - q))
        q = r
    for _ in range(2):  # key, value: a negative length is null (Utils.readBytes)
        size, r = _read_int(data, q, end, 5)
        fields.append((q, r - q))
        q = r + max(size, 0)
    headers, r = _read_int(data, q, end, 5)
    fields.append((q, r - q))
    q = r
    if headers < 0 or headers > end - q:
        raise InvalidRecord(f"invalid number of record headers {headers} in batch at offset "
                            f"{h.base_offset}")
    for _ in range(headers):
        size, r = _read_int(data, q, end, 5)
        if size < 0:
            raise InvalidRecord(f"invalid negative header key size {size}")
        fields.append((q, r - q))
        q = r + size
        size, r = _read_int(data, q, end, 5)
        fields.append((q, r - q))
        q = r + max(size, 0)
    if q != end:
        raise InvalidRecord(f"record fields do not fill the record's length in batch at offset "
                            f"{h.base_offset}")
    return fields


def _parse_record(data: Buf, p: int, end: int, h: BatchHeader) -> None:
    """Parse the record at [p, end) (InvalidRecord if it does not parse exactly): by
    `_usual_fields` for the usual record, else by `_record_layout`. For the records of a run
    that `_run_parses_like_first` did not prove, off the hot path (which has its own copy of
    this in _check_records, unrolled)."""
    if _usual_fields(data, p, end) is None:
        _record_layout(data, p, end, h)


# a byte with its continuation bit flipped
_FLIP_HIGH_BIT = bytes(b ^ 0x80 for b in range(0x100))


def _run_parses_like_first(data: bytes | bytearray, start: int, stop: int, s: int,
                           h: BatchHeader) -> bool:
    """Whether every record of the run start, start + s, ... < stop (all s bytes long, with
    the same length bytes) parses like the first: the first is parsed (InvalidRecord if it
    does not), then `_fields_alike` shows the others parse as it does. False when that is not
    shown (fields that differ): the caller parses each record then."""
    return _fields_alike(data, _record_layout(data, start, start + s, h), stop, s,
                         (stop - start) // s)


def _fields_alike(data: bytes | bytearray, fields: list[tuple[int, int]], stop: int, s: int,
                  count: int) -> bool:
    """Whether the `count` records of s bytes from the first one's (whose `fields` are its
    `_record_layout`) to `stop` parse as it does: with stepped slices, every record is shown
    to have the same varint widths for timestampDelta and offsetDelta (the same continuation
    bits) and byte-identical key length, value length, header count and header key and value
    length fields. Then each record's fields sit where the first's do and fill it exactly as
    they fill the first."""
    one_byte = _ONE_BYTE
    for i, (q, width) in enumerate(fields):
        if i < 2:  # timestampDelta, offsetDelta: only the widths must agree
            for k in range(width - 1):  # continuation bits set: flipped, all ASCII
                if not data[q + k:stop:s].translate(_FLIP_HIGH_BIT).isascii():
                    return False
            if not data[q + width - 1:stop:s].isascii():
                return False
        else:  # compared with the first's byte repeated (memset and memcmp)
            for k in range(q, q + width):
                if data[k:stop:s] != one_byte[data[k]] * count:
                    return False
    return True
