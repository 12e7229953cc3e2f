"""`samsa dump-log PATH`: print the batches of a log segment, like Kafka's DumpLogSegments.

Records are printed too with `--deep-iteration` (keys/values with `--print-data-log`); in a
`__consumer_offsets-N` directory records are always printed with their key and value decoded
(OffsetCommit / GroupMetadata), like DumpLogSegments `--offsets-decoder`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TextIO

from samsa.protocol.compression import CODEC_NAMES
from samsa.protocol.records import (
    BatchHeader,
    compute_crc,
    decode_records,
    iter_batches,
    parse_control_record,
)

from .consumer.records import describe_consumer_record
from .records import describe_record
from .share.records import describe_share_record

_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


def dump_segment(path: Path, out: TextIO | None = None, *, deep: bool = False,
                 print_data: bool = False) -> int:
    """Print one segment (to `out`, by default the current sys.stdout); returns the number of
    batches."""
    out = sys.stdout if out is None else out
    data = path.read_bytes()
    offsets_topic = re.fullmatch(r"__consumer_offsets-\d+", path.resolve().parent.name) is not None
    deep = deep or print_data or offsets_topic
    print(f"Dumping {path}", file=out)
    try:
        print(f"Log starting offset: {int(path.stem)}", file=out)
    except ValueError:
        pass
    batches = 0
    end = 0
    for pos, h in iter_batches(data):
        batches += 1
        end = pos + h.size
        _print_batch(out, data, pos, h)
        if deep:
            _print_records(out, data, pos, h, offsets_topic, print_data)
    if end < len(data):
        print(f"Found {len(data) - end} invalid bytes at the end of {path.name} "
              f"(position {end})", file=out)
    return batches


def _print_batch(out: TextIO, data: bytes, pos: int, h: BatchHeader) -> None:
    valid = compute_crc(data, pos, h.size) == h.crc
    ts_type = "LogAppendTime" if h.timestamp_type else "CreateTime"
    print(
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {str(h.is_transactional).lower()} "
        f"isControl: {str(h.is_control).lower()} position: {pos} "
        f"{ts_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
        f"compresscodec: {CODEC_NAMES.get(h.compression, h.compression)} crc: {h.crc} "
        f"isvalid: {str(valid).lower()}",
        file=out,
    )


def _print_records(out: TextIO, data: bytes, pos: int, h: BatchHeader, offsets_topic: bool,
                   print_data: bool) -> None:
    try:
        records = decode_records(data, pos, h)
    except Exception as exc:  # a corrupt batch: say so, keep dumping
        print(f"| <records not decodable: {exc}>", file=out)
        return
    ts_type = "LogAppendTime" if h.timestamp_type else "CreateTime"
    for i, r in enumerate(records):
        seq = h.base_sequence + i if h.base_sequence >= 0 else -1
        line = (f"| offset: {r.offset} {ts_type}: {r.timestamp} "
                f"keySize: {len(r.key) if r.key is not None else -1} "
                f"valueSize: {len(r.value) if r.value is not None else -1} sequence: {seq} "
                f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
        if h.is_control:
            ctype, epoch = parse_control_record(data, pos, h)
            line += f" endTxnMarker: {_CONTROL_TYPES.get(ctype, ctype)} coordinatorEpoch: {epoch}"
        elif offsets_topic:
            described = (describe_consumer_record(r.key, r.value)
                         or describe_share_record(r.key, r.value) if r.key is not None
                         else None)
            key, payload = described or describe_record(r.key, r.value)
            line += f" key: {key} payload: {payload}"
        elif print_data:
            key = r.key.decode("utf-8", "replace") if r.key is not None else "null"
            value = r.value.decode("utf-8", "replace") if r.value is not None else "null"
            line += f" key: {key} payload: {value}"
        print(line, file=out)
