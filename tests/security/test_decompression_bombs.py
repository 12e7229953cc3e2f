"""Decompression bombs against a real broker process: small compressed batches (zstd, gzip,
lz4, snappy) whose records inflate to 64 MiB - 1 GiB, sent as raw Produce requests. Each is
answered INVALID_RECORD on a connection that stays open, while another connection's requests
are answered within a generous bound; the broker's peak RSS stays far below what inflating
them would cost, and the records written before (compressed, one batch of them inflating past
what is checked on the event loop) are read back, once each. Such a large batch whose records
break the topic's rules (keyless, to a compacted topic) is refused naming them; bombs as many
batches of one partition are refused without being inflated; and a request of many partitions,
each a batch inflating to 24 MiB, is taken without holding all their records at once."""

from __future__ import annotations

import struct
import time

from samsa.protocol.compression import GZIP, LZ4, SNAPPY, ZSTD
from samsa.protocol.records import (
    HEADER_SIZE,
    build_batch,
    compute_crc,
    decode_records,
    iter_batches,
)
from tests.protocol.wire import WireClient
from tests.support.liveness import Liveness
from tests.unit.test_compression_limits import (
    GB,
    MB,
    gzip_bomb,
    lz4_bomb,
    snappy_lying_xerial,
    xerial_bomb,
    zstd_rle_bomb,
)

API_VERSIONS, PRODUCE, FETCH, CREATE_TOPICS = 18, 0, 1, 19
INVALID_RECORD = 87
WIDE = 10


def _status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def _bomb_batch(codec: int, payload: bytes) -> bytes:
    """A producer's batch declaring one record, its records region `payload`, a valid CRC."""
    batch = bytearray(build_batch([(None, b"v", [], 1000)])[:HEADER_SIZE]) + payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)  # batchLength
    struct.pack_into(">h", batch, 21, codec)  # attributes
    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def _produce(c: WireClient, topic: str, batch: bytes) -> object:
    r = c.call(PRODUCE, 9, {"acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


def test_decompression_bombs_are_refused_while_others_are_served(broker_factory) -> None:
    # 8 MB batches (so that the 1 MB of gzip and 4 MB of lz4 that inflate to 1 GiB are
    # taken in); a batch's records may still inflate to no more than 32 MiB
    b = broker_factory(settings={"message.max.bytes": 8 * MB})
    assert b.pid is not None
    topic = "bombs"
    values = [b"%06d" % i + bytes(i % 200) for i in range(200)]
    big = [bytes([i]) * (64 << 10) for i in range(64)]  # 4 MiB of records: checked off-loop
    legit = [build_batch([(b"k", v, [], 1000) for v in values[i::4]], compression=codec)
             for i, codec in enumerate((ZSTD, GZIP, LZ4, SNAPPY))]
    legit.append(build_batch([(b"big", v, [], 1000) for v in big], compression=ZSTD))
    bombs = {
        "zstd": _bomb_batch(ZSTD, zstd_rle_bomb(GB)),  # 32 KiB
        "gzip": _bomb_batch(GZIP, gzip_bomb(GB)),  # ~1 MB
        "lz4": _bomb_batch(LZ4, lz4_bomb(GB)),  # ~4.4 MB
        "snappy": _bomb_batch(SNAPPY, xerial_bomb(64 * MB)),  # ~3 MB (snappy: ~21:1 at most)
        "snappy-lying": _bomb_batch(SNAPPY, snappy_lying_xerial(GB)),
    }
    wide = build_batch([(b"w", bytes([i]) * MB, [], 1000) for i in range(24)],
                       compression=ZSTD)
    with WireClient(b.bootstrap, timeout=60) as c:
        r = c.call(CREATE_TOPICS, 5, {"topics": [{
            "name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": [{"name": "cleanup.policy", "value": "compact"}]}],
            "timeout_ms": 10_000, "validate_only": False})
        assert r.topics[0].error_code == 0
        r = c.call(CREATE_TOPICS, 5, {"topics": [{
            "name": "wide", "num_partitions": WIDE, "replication_factor": 1, "assignments": [],
            "configs": []}], "timeout_ms": 10_000, "validate_only": False})
        assert r.topics[0].error_code == 0
        keyless = build_batch([(None if i in (1, 3) else b"big", v, [], 1000)
                               for i, v in enumerate(big)], compression=ZSTD)
        part = _produce(c, topic, keyless)
        assert part.error_code == INVALID_RECORD
        assert [e.batch_index for e in part.record_errors] == [1, 3]
        for batch in legit:
            assert _produce(c, topic, batch).error_code == 0
        baseline_kb = _status_kb(b.pid, "VmRSS")
        with Liveness(b.port, b.pid, interval_s=0.01).running() as watch:
            time.sleep(0.1)
            for name, bomb in bombs.items():
                part = _produce(c, topic, bomb)  # the same connection throughout: kept open
                assert part.error_code == INVALID_RECORD, name
                assert part.base_offset == -1, name
            # 50 of them as one partition's records: refused (one batch per partition) before
            # any is inflated
            assert _produce(c, topic, bombs["zstd"] * 50).error_code == INVALID_RECORD
            # a request of WIDE partitions, each a batch of 24 MiB of records (under the
            # limit): taken, and the records of all are never held at once
            r = c.call(PRODUCE, 9, {"acks": -1, "timeout": 30_000, "topic_data": [
                {"name": "wide", "partition_data": [{"index": i, "records": wide}
                                                    for i in range(WIDE)]}]})
            answers = r.responses[0].partition_responses
            assert [(p.error_code, p.base_offset) for p in answers] == [(0, 0)] * WIDE
            time.sleep(0.1)
        peak_kb = _status_kb(b.pid, "VmHWM")
        after = build_batch([(b"after", b"v", [], 1000)], compression=ZSTD)
        assert _produce(c, topic, after).base_offset == len(values) + len(big)
        r = c.call(FETCH, 11, {"max_wait": 0, "min_bytes": 0, "max_bytes": 50 << 20,
                               "topics": [{"topic": topic, "partitions": [
                                   {"partition": 0, "fetch_offset": 0,
                                    "partition_max_bytes": 50 << 20}]}]})
    data = r.responses[0].partitions[0].records
    got = [rec for pos, h in iter_batches(data) for rec in decode_records(data, pos, h)]
    expected = [v for i in range(4) for v in values[i::4]] + big + [b"v"]
    assert [rec.value for rec in got] == expected
    assert [rec.offset for rec in got] == list(range(len(expected)))
    assert max(watch.latencies) < 1.0, f"another client waited {max(watch.latencies):.2f} s"
    assert len(watch.latencies) >= 5
    grown_mb = (peak_kb - baseline_kb) / 1024
    assert grown_mb < 200, f"the broker's peak RSS grew by {grown_mb:.0f} MB"
