"""Record batch v2 encoding, validation and decoding."""

import random
import struct

import pytest

from samsa.protocol import compression
from samsa.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    HEADER_SIZE,
    BatchHeader,
    build_batch,
    build_control_batch,
    compute_crc,
    decode_records,
    iter_batches,
    parse_control_record,
    set_base_offset_and_epoch,
    set_log_append_time,
    stamped_parts,
    validate_batch,
)
from samsa.protocol.varint import read_varint, write_varint
from samsa.storage.errors import CorruptRecord, InvalidRecord, UnsupportedForMessageFormat


def _records(n: int) -> list:
    return [(b"key%d" % i, b"value-%d" % i * 3, [(f"h{i}", b"x"), ("n", None)], 1000 + i)
            for i in range(n)]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_round_trip_all_codecs(codec: int) -> None:
    buf = build_batch(_records(10), base_offset=5, compression=codec, producer_id=7,
                      producer_epoch=1, base_sequence=3)
    h = validate_batch(buf, 0, client=True)
    assert h.compression == codec
    assert (h.base_offset, h.last_offset, h.records_count) == (5, 14, 10)
    assert (h.base_timestamp, h.max_timestamp) == (1000, 1009)
    assert h.last_sequence == 12
    recs = decode_records(buf, 0)
    assert [r.offset for r in recs] == list(range(5, 15))
    assert recs[4].key == b"key4" and recs[4].value == b"value-4" * 3
    assert recs[4].headers == [("h4", b"x"), ("n", None)]
    assert recs[9].timestamp == 1009


def test_null_key_and_value() -> None:
    buf = build_batch([(None, None, [], 1)])
    (r,) = decode_records(buf)
    assert r.key is None and r.value is None


def test_header_layout_matches_spec() -> None:
    buf = build_batch([(b"k", b"v", [], 42)], base_offset=0)
    assert buf[16] == 2
    (length,) = struct.unpack_from(">i", buf, 8)
    assert length == len(buf) - 12
    import crc32c

    assert struct.unpack_from(">I", buf, 17)[0] == crc32c.crc32c(buf[21:])


def test_varint_zigzag() -> None:
    for v in (0, -1, 1, 63, -64, 300, -300, 2**31 - 1, -(2**31), 2**62):
        out = bytearray()
        write_varint(out, v)
        assert read_varint(out, 0) == (v, len(out))
    out = bytearray()
    write_varint(out, -1)
    assert bytes(out) == b"\x01"


def test_crc_mismatch_is_corrupt() -> None:
    buf = bytearray(build_batch(_records(3)))
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecord):
        validate_batch(buf, 0)


def test_bad_magic() -> None:
    buf = bytearray(build_batch(_records(1)))
    buf[16] = 1
    with pytest.raises(UnsupportedForMessageFormat):
        validate_batch(buf, 0)
    buf[16] = 9
    with pytest.raises(CorruptRecord):
        validate_batch(buf, 0)


def test_last_offset_delta_mismatch_is_invalid() -> None:
    buf = build_batch(_records(3), offset_deltas=[0, 1, 5])
    validate_batch(buf, 0)  # fine for the log (compacted batches have gaps)
    with pytest.raises(InvalidRecord):
        validate_batch(buf, 0, client=True)


def test_client_may_not_write_control_batches() -> None:
    with pytest.raises(InvalidRecord):
        validate_batch(build_control_batch(1, 0, True, 0, 5), 0, client=True)


def test_set_base_offset_keeps_crc_valid() -> None:
    buf = bytearray(build_batch(_records(2)))
    set_base_offset_and_epoch(buf, 0, 1234, 7)
    h = validate_batch(buf, 0)
    assert (h.base_offset, h.partition_leader_epoch) == (1234, 7)


def test_stamped_parts_write_what_stamping_a_copy_does() -> None:
    data = build_batch(_records(2)) + build_batch(_records(5)) + build_batch(_records(1))
    batches = list(iter_batches(data))
    copy = bytearray(data)
    for n, (pos, h) in enumerate(batches):
        h.base_offset, h.partition_leader_epoch = 1000 * n + 7, n + 3
        set_base_offset_and_epoch(copy, pos, h.base_offset, h.partition_leader_epoch)
    assert b"".join(stamped_parts(data, batches)) == copy
    assert [validate_batch(copy, pos).base_offset for pos, _ in batches] == [7, 1007, 2007]


def test_log_append_time() -> None:
    buf = bytearray(build_batch(_records(3)))
    set_log_append_time(buf, 0, 99999)
    h = validate_batch(buf, 0)
    assert h.timestamp_type == 1 and h.max_timestamp == 99999
    assert all(r.timestamp == 99999 for r in decode_records(buf))


def test_iter_batches_stops_at_torn_tail() -> None:
    a, b = build_batch(_records(2)), build_batch(_records(3), base_offset=2)
    buf = a + b + b[:30]
    assert [p for p, _ in iter_batches(buf)] == [0, len(a)]
    assert [p for p, _ in iter_batches(a + b[: HEADER_SIZE + 2])] == [0]


def test_iter_batches_rejects_tiny_length() -> None:
    buf = bytearray(build_batch(_records(1)))
    struct.pack_into(">i", buf, 8, 10)
    with pytest.raises(CorruptRecord):
        list(iter_batches(buf))


def test_control_batch() -> None:
    buf = build_control_batch(11, 2, commit=False, coordinator_epoch=5, timestamp=77)
    h = BatchHeader.parse(buf)
    assert h.is_control and h.is_transactional and h.base_sequence == -1
    assert (h.producer_id, h.producer_epoch) == (11, 2)
    assert parse_control_record(buf, 0, h) == (CONTROL_ABORT, 5)
    (r,) = decode_records(buf)
    assert r.key == b"\x00\x00\x00\x00" and r.value == b"\x00\x00\x00\x00\x00\x05"
    commit = build_control_batch(11, 2, commit=True, coordinator_epoch=5, timestamp=77)
    assert parse_control_record(commit, 0, BatchHeader.parse(commit))[0] == CONTROL_COMMIT


def test_last_sequence_wraps() -> None:
    buf = build_batch(_records(3), producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    assert BatchHeader.parse(buf).last_sequence == 0


def test_snappy_raw_and_xerial() -> None:
    import cramjam

    data = b"hello world " * 5000
    assert compression.decompress(compression.SNAPPY, compression.compress(2, data)) == data
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert compression.decompress(compression.SNAPPY, raw) == data


def test_interop_with_reference_codecs() -> None:
    """Payloads produced by the libraries clients use (lz4 frame, zstd streaming, gzip)."""
    import gzip

    import lz4.frame
    import zstandard

    data = b"abc" * 10000
    assert compression.decompress(compression.GZIP, gzip.compress(data)) == data
    assert compression.decompress(compression.LZ4, lz4.frame.compress(data)) == data
    stream = zstandard.ZstdCompressor().compressobj()
    z = stream.compress(data) + stream.flush()
    assert compression.decompress(compression.ZSTD, z) == data


# The structural check of an uncompressed produced batch (record length prefixes must tile the
# records region, recordsCount of them, and each record's fields must fill exactly its length,
# as DefaultRecord.readFrom reads them). It skips runs of equal-length records in C, so it is
# compared here with a plain parse of every record, on batches that mix 1-, 2- and 3-byte
# length varints, keys, headers, long runs of equal records and runs that break, intact and
# damaged.

def _varint(buf: bytes | bytearray, p: int, end: int, longest: int) -> tuple[int, int]:
    raw = 0
    for i in range(longest):
        if p + i >= end:
            raise ValueError("truncated")
        raw |= (buf[p + i] & 0x7F) << (7 * i)
        if not buf[p + i] & 0x80:
            if longest == 5:
                raw &= 0xFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), p + i + 1
    raise ValueError("too long")


def _parses(buf: bytes | bytearray, p: int, end: int) -> int:
    """The end of the record at p, or ValueError where Kafka's readFrom would throw."""
    length, p = _varint(buf, p, end, 5)
    stop = p + length
    if length <= 0 or stop > end:
        raise ValueError("length")
    _, p = _varint(buf, p + 1, stop, 10)  # attributes, timestampDelta
    _, p = _varint(buf, p, stop, 5)  # offsetDelta
    for _ in range(2):  # key, value
        size, p = _varint(buf, p, stop, 5)
        p += max(size, 0)
    headers, p = _varint(buf, p, stop, 5)
    if headers < 0:
        raise ValueError("headers")
    for _ in range(headers):
        size, p = _varint(buf, p, stop, 5)
        if size < 0:
            raise ValueError("header key")
        size, p = _varint(buf, p + size, stop, 5)
        p += max(size, 0)
    if p != stop:
        raise ValueError("fields do not fill the record")
    return stop


def _tiles(buf: bytes | bytearray, pos: int, h: BatchHeader) -> bool:
    p, end, n = pos + HEADER_SIZE, pos + h.size, 0
    while p < end:
        try:
            p = _parses(buf, p, end)
        except ValueError:
            return False
        n += 1
    return n == h.records_count


def _client_check(buf: bytes | bytearray, pos: int, count: int | None = None) -> bool:
    """validate_batch(client=True) on the batch at `pos` after re-stamping its CRC (and its
    recordsCount and lastOffsetDelta, when given), so that only the framing can fail."""
    b = bytearray(buf)
    if count is not None:
        struct.pack_into(">i", b, pos + 23, count - 1)
        struct.pack_into(">i", b, pos + 57, count)
    h = BatchHeader.parse(b, pos)
    struct.pack_into(">I", b, pos + 17, compute_crc(b, pos, h.size))
    h = BatchHeader.parse(b, pos)
    expected = _tiles(b, pos, h)
    try:
        validate_batch(b, pos, h, client=True)
        got = True
    except InvalidRecord:
        got = False
    assert got == expected, (bytes(b[pos:pos + 80]), h)
    return got


def test_framing_check_agrees_with_a_walk_over_every_record() -> None:
    rng = random.Random(19)
    shapes = [lambda i: 100, lambda i: 95 + rng.randrange(11), lambda i: 10, lambda i: 0,
              lambda i: 60 + (i % 3 == 0), lambda i: 9000,
              lambda i: rng.choice([1, 60, 64, 8190, 9000])]
    rejected = 0
    for _ in range(120):
        shape = rng.choice(shapes)
        n = rng.randint(1, 300)
        headers = rng.choice([[], [], [("h", b"v")], [("", None), ("k", b"")]])
        key = rng.choice([None, b"k", b"key" * 50])
        batch = build_batch([(key, bytes(shape(i)), headers, i) for i in range(n)])
        pad = rng.randint(0, 3)
        framed = bytes(pad) + batch + bytes(rng.randint(0, 3))  # not alone in the buffer
        assert _client_check(framed, pad)
        for _ in range(12):
            damaged = bytearray(framed)
            for _ in range(rng.randint(1, 3)):
                at = pad + rng.randrange(HEADER_SIZE, len(batch))
                damaged[at] = rng.choice([rng.randrange(256), damaged[at] ^ 1,
                                          (damaged[at] + 1) & 0xFF, damaged[at] | 0x80])
            count = n + rng.choice([-1, 1]) if rng.random() < 0.2 else None
            rejected += not _client_check(damaged, pad, count)
    assert rejected > 100  # the damage was seen, not only intact batches


def test_framing_check_finds_a_bad_record_inside_a_run_of_equal_records() -> None:
    batch = bytearray(build_batch([(None, b"v" * 100, [], 0) for _ in range(2000)]))
    starts = _record_starts(batch)
    assert _client_check(batch, 0)
    assert not _client_check(batch, 0, count=1999)
    assert not _client_check(batch, 0, count=2001)
    assert not _client_check(_spliced(batch, len(batch) - 1, 1, b""), 0)  # last record short
    assert not _client_check(_spliced(batch, len(batch), 0, b"\x02"), 0)  # a byte left over
    for empty in (b"\x00", b"\x80\x00", b"\x81\x00"):  # length 0 (1 and 2 bytes), -1
        assert not _client_check(_spliced(batch, starts[700], 0, empty), 0, count=2001)
    assert not _client_check(_spliced(batch, starts[700], 0, b"\x02\x00"), 0, count=2001)
    assert _client_check(_spliced(batch, starts[700], 0, b"\x0c\x00\x00\x00\x01\x01\x00"), 0,
                         count=2001)
    for index in (3, 64, 700, 1999):
        for which in (0, 1):  # the first or second byte of the 2-byte length varint
            damaged = bytearray(batch)
            damaged[starts[index] + which] ^= 0x02
            with pytest.raises(InvalidRecord):
                _raise_unless_tiles(damaged)


def _record_starts(batch: bytearray) -> list[int]:
    """Where each record of a one-batch `batch` starts."""
    starts, p = [], HEADER_SIZE
    while p < len(batch):
        starts.append(p)
        length, q = read_varint(batch, p)
        p = q + length
    return starts


def _spliced(batch: bytearray, at: int, cut: int, insert: bytes) -> bytearray:
    """`batch` with `cut` bytes at `at` replaced by `insert`, its batchLength adjusted."""
    out = batch[:at] + insert + batch[at + cut:]
    struct.pack_into(">i", out, 8, len(out) - 12)
    return out


def _raise_unless_tiles(buf: bytearray) -> None:
    h = BatchHeader.parse(buf, 0)
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, h.size))
    validate_batch(buf, 0, BatchHeader.parse(buf, 0), client=True)


def test_record_check_finds_a_record_whose_fields_lie_inside_a_run() -> None:
    """Every record tiles; one record's key or value length (or timestampDelta width) is
    changed so that its fields no longer fill it, or fill it with another valid layout."""
    batch = bytearray(build_batch([(None, b"v" * 100, [], 0) for _ in range(2000)]))
    starts = _record_starts(batch)
    # each record: length (2 bytes), attributes, timestampDelta 0, offsetDelta (1 byte, 2 from
    # the 64th record),
    # key length -1 (0x01), value length 100 (0xc8 0x01), value, header count 0
    for index in (1, 2, 63, 64, 700, 1998, 1999):
        key_at = starts[index] + 5 + (index >= 64)
        assert batch[key_at] == 0x01
        for lie in (0x02, 0x04, 0x03, 0xff):  # key length 1, 2, -2 (null), a longer varint
            damaged = bytearray(batch)
            damaged[key_at] = lie
            assert _client_check(damaged, 0) is (lie == 0x03)
        damaged = bytearray(batch)
        damaged[key_at + 1] = 0xc6  # value length 99
        assert not _client_check(damaged, 0)
        # a valid record of the same length laid out otherwise: attributes 0x80 (Kafka does
        # not check them), timestampDelta 0 in two bytes, a value one byte shorter
        end = starts[index + 1] if index + 1 < len(starts) else len(batch)
        rec = batch[starts[index]:end]
        k = key_at - starts[index]
        other = rec[:2] + b"\x80\x80\x00" + rec[4:k + 1] + b"\xc6\x01" + b"v" * 99 + b"\x00"
        assert len(other) == len(rec)
        assert _client_check(batch[:starts[index]] + other + batch[end:], 0)


def test_framing_check_of_one_run_agrees_with_a_walk_over_every_record() -> None:
    """Batches whose records are all of one length and layout (a producer's usual batch) are
    proven as one run (its first record parsed, the others shown alike by stepped slices);
    damaged ones must still be judged as a parse of every record judges them, whether the
    runs' proof or the walk decides."""
    from samsa.protocol import record_checks

    rng = random.Random(23)
    shapes = [(None, 1024, []), (b"k", 100, []), (None, 10, []), (None, 0, []),
              (b"key" * 40, 300, [("h", b"v"), ("", None)]), (None, 9000, [])]
    for key, size, headers in shapes:
        n = rng.randint(2, 40)
        batch = build_batch([(key, bytes(rng.randrange(256) for _ in range(size)), headers,
                              i // 4) for i in range(n)])
        records_size = len(batch) - HEADER_SIZE
        assert records_size % n == 0  # one length: one run
        assert _client_check(batch, 0)
        assert record_checks._proven_by_runs(batch, HEADER_SIZE, len(batch),
                                             BatchHeader.parse(batch, 0))
        starts = _record_starts(bytearray(batch))
        rejected = _rejected_when_damaged(batch, starts, 8 + len(key or b""), 150, 2, rng)
        assert rejected > 30, (key, size)
        # a record of the same length laid out otherwise (timestampDelta in two bytes, the
        # value one byte shorter) is not like the first and is still taken
        rec = batch[starts[-1]:]
        if key is None and not headers and 2 <= size < 63:
            # length, attributes | timestampDelta | offsetDelta, key length -1 | value length
            other = rec[:2] + b"\x80\x00" + rec[3:5] + bytes([(size - 1) * 2]) \
                + rec[6:5 + size] + b"\x00"
            assert len(other) == len(rec)
            assert _client_check(batch[:starts[-1]] + other, 0)


def _rejected_when_damaged(batch: bytes, starts: list[int], head: int, tries: int,
                           most_bytes: int, rng: random.Random) -> int:
    """How many of `tries` copies of `batch`, each with 1 to `most_bytes` bytes changed, the
    client check refuses; it must judge each as a parse of every record does. The bytes are
    mostly among the first `head` bytes of a record (its fields, not its value)."""
    rejected = 0
    for _ in range(tries):
        damaged = bytearray(batch)
        for _ in range(rng.randint(1, most_bytes)):
            start = rng.choice(starts)
            at = rng.choice([start + rng.randrange(head), start - 1,
                             rng.randrange(HEADER_SIZE, len(batch))])
            at = min(max(at, HEADER_SIZE), len(batch) - 1)
            damaged[at] = rng.choice([rng.randrange(256), damaged[at] ^ 1,
                                      (damaged[at] + 1) & 0xFF, damaged[at] | 0x80])
        rejected += not _client_check(damaged, 0)
    return rejected


def test_run_proof_keeps_the_varint_width_limits() -> None:
    """Records of one length whose timestampDelta takes 7 bytes: another record of that length
    with a 1-byte timestampDelta and a 7-byte offsetDelta (an int varint may take at most 5)
    is refused, as the walk refuses it."""
    def record(ts: bytes, offset: bytes) -> bytes:
        body = b"\x00" + ts + offset + b"\x01" + bytes([20 * 2]) + b"v" * 20 + b"\x00"
        return bytes([len(body) * 2]) + body

    wide = b"\x80" * 6 + b"\x00"
    n = 8
    head = bytearray(build_batch([(None, b"", [], 0)] * n)[:HEADER_SIZE])
    region = b"".join(record(wide, bytes([2 * i])) for i in range(n))
    batch = head + region
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    assert _client_check(batch, 0)
    damaged = head + region[:-len(record(wide, b"\x00"))] + record(b"\x00", wide)
    struct.pack_into(">i", damaged, 8, len(damaged) - 12)
    assert len(damaged) == len(batch)
    assert not _client_check(damaged, 0)


def test_framing_check_of_runs_agrees_with_a_walk_over_every_record(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of 65 to 256 records is runs of records of one length each (offsetDelta takes
    two bytes from the 64th record, timestampDelta from a delta of 64 ms): the runs' proof
    decides without the walk, and damaged batches (another count, a record cut or grown, a
    field changed) are judged as a parse of every record judges them."""
    from samsa.protocol import record_checks

    walked: list[int] = []
    walk = record_checks._run_parses_like_first

    def counted(*args: object) -> bool:
        walked.append(1)
        return walk(*args)  # type: ignore[arg-type]

    rng = random.Random(29)
    for key, size, n, ts_step in [(None, 100, 150, 0), (b"k", 30, 256, 0), (None, 1, 200, 1),
                                  (b"key", 60, 65, 2), (None, 9000, 70, 0)]:
        batch = build_batch([(key, bytes(rng.randrange(256) for _ in range(size)), [],
                              i * ts_step) for i in range(n)])
        starts = _record_starts(bytearray(batch))
        lengths = {b - a for a, b in zip(starts, [*starts[1:], len(batch)], strict=True)}
        assert len(lengths) > 1  # not one length: the runs decide
        walked.clear()
        monkeypatch.setattr(record_checks, "_run_parses_like_first", counted)
        assert _client_check(batch, 0)
        assert not walked, (key, size, n)  # the runs' proof decided, not the walk
        assert not _client_check(batch, 0, count=n - 1)
        assert not _client_check(batch, 0, count=n + 1)
        rejected = _rejected_when_damaged(batch, starts, 6 + len(key or b""), 120, 1, rng)
        assert rejected > 20, (key, size, n)
        # a record cut short in the second run, or one grown by a byte: the runs no longer
        # tile the batch as the count says
        assert not _client_check(_spliced(bytearray(batch), starts[100 % n] + 3, 1, b""), 0)
        assert not _client_check(_spliced(bytearray(batch), starts[-1], 0, b"\x00"), 0)
        monkeypatch.setattr(record_checks, "_run_parses_like_first", walk)
