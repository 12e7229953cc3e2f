"""Bounded decompression of a batch's records (protocol/compression.py): a small batch that
inflates far past the limit (a decompression bomb) is refused as InflatedTooLarge
(INVALID_RECORD) without its inflated size ever being allocated, for every codec and framing;
records within the limit come out whole, as the clients' libraries write them."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
from collections.abc import Callable

import cramjam
import lz4.frame
import pytest
import zstandard

from samsa.protocol import compression
from samsa.protocol.compression import GZIP, LZ4, SNAPPY, ZSTD, InflatedTooLarge
from samsa.protocol.errors import ErrorCode, InvalidRecord
from samsa.protocol.records import BatchHeader, build_batch, records_region, validate_batch

MB = 1 << 20
GB = 1 << 30
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zstd_rle_bomb(size: int) -> bytes:
    """One zstd frame of RLE blocks (4 bytes each for 128 KiB of zeros): 1 GiB in 32 KiB."""
    block = 128 << 10
    frame = bytearray(struct.pack("<I", 0xFD2FB528) + b"\x00\x38")  # no FCS, 128 KiB window
    count = size // block
    for i in range(count):
        last = 1 if i == count - 1 else 0
        frame += ((block << 3) | (1 << 1) | last).to_bytes(3, "little") + b"\x00"
    return bytes(frame)


def gzip_bomb(size: int) -> bytes:
    """Gzip members of 1 MiB of zeros each, back to back (a valid gzip stream, as Java's
    GZIPInputStream reads it): 1 GiB in ~1 MB."""
    return gzip.compress(bytes(MB), 9) * (size // MB)


def lz4_bomb(size: int) -> bytes:
    c = lz4.frame.LZ4FrameCompressor()
    chunk = bytes(MB)
    return c.begin() + b"".join(c.compress(chunk) for _ in range(size // MB)) + c.flush()


def xerial_bomb(size: int) -> bytes:
    """Java's SnappyOutputStream framing: 32 KiB blocks of zeros (snappy inflates ~21:1 at
    most, so this one is larger than the others)."""
    block = bytes(cramjam.snappy.compress_raw(bytes(32 << 10)))
    return XERIAL_HEADER + (struct.pack(">i", len(block)) + block) * (size // (32 << 10))


def snappy_raw_bomb(size: int) -> bytes:
    return bytes(cramjam.snappy.compress_raw(bytes(size)))


def snappy_lying_raw(size: int) -> bytes:
    """A raw snappy block that declares `size` bytes and holds one."""
    return _varint(size) + b"\x00a"


def snappy_lying_xerial(size: int) -> bytes:
    block = snappy_lying_raw(size)
    return XERIAL_HEADER + struct.pack(">i", len(block)) + block


BOMBS: dict[str, tuple[int, Callable[[int], bytes], int]] = {
    "zstd": (ZSTD, zstd_rle_bomb, GB),
    "gzip": (GZIP, gzip_bomb, GB),
    "lz4": (LZ4, lz4_bomb, 256 * MB),
    "snappy-xerial": (SNAPPY, xerial_bomb, 64 * MB),
    "snappy-raw": (SNAPPY, snappy_raw_bomb, 64 * MB),
    "snappy-raw-lying-length": (SNAPPY, snappy_lying_raw, GB),
    "snappy-xerial-lying-length": (SNAPPY, snappy_lying_xerial, GB),
}


@pytest.mark.parametrize("name", list(BOMBS))
def test_bomb_is_refused_without_inflating_it(name: str) -> None:
    codec, make, size = BOMBS[name]
    bomb = make(size)
    assert len(bomb) < size // 20
    tracemalloc.start()
    try:
        with pytest.raises(InflatedTooLarge) as refused:
            compression.decompress(codec, bomb, limit=4 * MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.error_code == ErrorCode.invalid_record
    # no output buffer grows past the limit (+1 byte): at most the thread's scratch buffer,
    # one such buffer and the compressed bytes' copy are held at once
    assert peak < 2 * 4 * MB + 2 * len(bomb) + MB


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_limit_is_inclusive(codec: int) -> None:
    data = bytes(range(256)) * (4096 // 256) * 64  # 256 KiB, compressible
    packed = compression.compress(codec, data)
    assert compression.decompress(codec, packed, limit=len(data)) == data
    with pytest.raises(InflatedTooLarge):
        compression.decompress(codec, packed, limit=len(data) - 1)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_records_larger_than_the_scratch_buffer_come_out_whole(codec: int) -> None:
    """Records larger than a thread's scratch buffer are inflated again into larger ones."""
    assert 8 * MB > compression.SCRATCH_BYTES
    data = bytes(8 * MB) + b"end"
    assert compression.decompress(codec, compression.compress(codec, data),
                                  limit=32 * MB) == data


def _kafka_like_payloads(data: bytes) -> list[tuple[str, int, bytes]]:
    """The framings clients write: Java's KafkaLZ4BlockOutputStream (an LZ4 frame of
    independent 64 KiB blocks, no content size) and librdkafka's (linked blocks, content size
    and checksum), zstd-jni's streaming frames (no content size) and one-shot ones, gzip
    members, raw snappy (librdkafka, sarama) and xerial snappy blocks (Java) of varied sizes."""
    stream = zstandard.ZstdCompressor().compressobj()
    zstd_stream = stream.compress(data) + stream.flush()
    half = len(data) // 2
    xerial = bytearray(XERIAL_HEADER)
    for part in (data[:1000], data[1000:half], data[half:]):
        block = bytes(cramjam.snappy.compress_raw(part))
        xerial += struct.pack(">i", len(block)) + block
    return [
        ("lz4-java", LZ4, lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                                             block_linked=False, content_checksum=False)),
        ("lz4-librdkafka", LZ4, lz4.frame.compress(data, block_linked=True, store_size=True,
                                                   content_checksum=True)),
        ("zstd-stream", ZSTD, zstd_stream),
        ("zstd-one-shot", ZSTD, zstandard.ZstdCompressor(write_content_size=True)
         .compress(data)),
        ("zstd-two-frames", ZSTD, zstandard.ZstdCompressor().compress(data[:half])
         + zstandard.ZstdCompressor().compress(data[half:])),
        ("gzip", GZIP, gzip.compress(data)),
        ("gzip-two-members", GZIP, gzip.compress(data[:half]) + gzip.compress(data[half:])),
        ("snappy-raw", SNAPPY, bytes(cramjam.snappy.compress_raw(data))),
        ("snappy-xerial", SNAPPY, bytes(xerial)),
    ]


def test_client_framings_round_trip_within_the_limit() -> None:
    data = b"".join(b"record-%06d:" % i + bytes([i % 251]) * (i % 97) for i in range(20000))
    for name, codec, payload in _kafka_like_payloads(data):
        assert compression.decompress(codec, payload, limit=len(data)) == data, name
        assert compression.decompress(codec, payload) == data, name
        with pytest.raises(InflatedTooLarge):
            compression.decompress(codec, payload, limit=len(data) // 2)


def test_a_producers_bomb_batch_is_an_invalid_record() -> None:
    """validate_batch (the log's check of a producer's batch) refuses a compressed batch whose
    records inflate past its limit: INVALID_RECORD, before any record is looked at."""
    plain = build_batch([(None, b"v", [], 1000)])
    bomb = zstd_rle_bomb(GB)
    batch = bytearray(plain[:61]) + bomb
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">h", batch, 21, ZSTD)
    from samsa.protocol.records import compute_crc

    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
    h = BatchHeader.parse(batch)
    with pytest.raises(InvalidRecord) as refused:
        validate_batch(batch, 0, h, client=True, limit=8 * MB)
    assert isinstance(refused.value, InflatedTooLarge)
    with pytest.raises(InflatedTooLarge):
        records_region(batch, 0, h, 8 * MB)


def test_bombs_cost_the_process_no_more_than_the_limit() -> None:
    """Measured where the decompressors allocate (Rust, outside tracemalloc's sight): a fresh
    process inflating every bomb above grows its peak RSS by little more than the limit."""
    script = """
import sys
from samsa.protocol import compression
from tests.unit.test_compression_limits import BOMBS
bombs = [(codec, make(size)) for codec, make, size in BOMBS.values()]
def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
before = hwm()
for codec, bomb in bombs:
    try:
        compression.decompress(codec, bomb, limit=4 << 20)
    except compression.InflatedTooLarge:
        pass
    else:
        sys.exit("not refused")
print(hwm() - before)
"""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                         text=True, timeout=120, check=True)
    grown_kb = int(out.stdout.split()[-1])
    assert grown_kb < 32 * 1024, f"peak RSS grew by {grown_kb} kB"
