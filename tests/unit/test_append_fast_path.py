"""The log's one-batch producer append (`Log._append_client_batch`, issue 47) against the
general path: the same sequence of appends, good and bad, made to two logs, one with the
fast path and one without it, must give the same answers (offsets, or the same error) and
leave the same bytes in every segment and index file and the same producer state."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.protocol import compression
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import LOG_APPEND_TIME, build_batch, build_control_batch
from samsa.storage.config import LogConfig
from samsa.storage.log import Log

NOW = 1_700_000_000_000
PID = 7


def _batch(n: int = 1, *, key: bytes | None = b"k", pid: int = PID, epoch: int = 0,
           seq: int = 0, ts: int = NOW, **kw: Any) -> bytes:
    return build_batch([(key, b"v" * 50, [], ts) for _ in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq if pid >= 0 else -1,
                       default_timestamp=ts, **kw)


def _corrupt(data: bytes) -> bytes:
    out = bytearray(data)
    out[-1] ^= 0xFF  # a record byte: the CRC no longer matches
    return bytes(out)


def _uncounted(data: bytes) -> bytes:
    out = bytearray(data)
    out[57:61] = (2).to_bytes(4, "big")  # recordsCount 2 for one record (CRC recomputed)
    from samsa.protocol.records import compute_crc
    out[17:21] = compute_crc(out, 0, len(out)).to_bytes(4, "big")
    return bytes(out)


# Each step: (what, its records given the next sequence of the producer PID in the log).
Step = tuple[str, Callable[[int], bytes]]


def _steps() -> list[Step]:
    return [
        ("no producer id", lambda _: _batch(pid=-1)),
        ("no producer id, 3 records", lambda _: _batch(3, pid=-1)),
        ("new producer", lambda _: _batch(seq=0)),
        ("next batch", lambda s: _batch(seq=s)),
        ("next batch, 4 records", lambda s: _batch(4, seq=s)),
        ("duplicate of the last", lambda s: _batch(4, seq=s - 4)),
        ("duplicate of an older one", lambda s: _batch(seq=s - 5)),
        ("out of order", lambda s: _batch(seq=s + 3)),
        ("CRC error", lambda s: _corrupt(_batch(seq=s))),
        ("records count mismatch", lambda s: _uncounted(_batch(seq=s))),
        ("gzip", lambda s: _batch(2, seq=s, compression=compression.GZIP)),
        ("transactional", lambda _: _batch(pid=PID + 1, transactional=True)),
        ("control batch from a client",
         lambda _: build_control_batch(PID, 0, commit=True, coordinator_epoch=0,
                                       timestamp=NOW)),
        ("two batches", lambda s: _batch(seq=s) + _batch(seq=s + 1)),
        ("partial batch", lambda s: _batch(seq=s)[:-3]),
        ("empty", lambda _: b""),
        ("new epoch", lambda _: _batch(epoch=1, seq=0)),
        ("fenced epoch", lambda s: _batch(epoch=0, seq=s)),
        ("after the new epoch", lambda s: _batch(epoch=1, seq=s)),
        ("no key", lambda s: _batch(key=None, epoch=1, seq=s)),
        ("old timestamp", lambda s: _batch(epoch=1, seq=s, ts=NOW - 7_200_000)),
        ("LogAppendTime from a producer",
         lambda s: _batch(epoch=1, seq=s, timestamp_type=LOG_APPEND_TIME)),
        ("LogAppendTime from a producer, no timestamps",
         lambda s: _batch(epoch=1, seq=s, ts=-1, timestamp_type=LOG_APPEND_TIME)),
        ("large", lambda s: _batch(40, epoch=1, seq=s)),
        ("after the refusals", lambda s: _batch(2, epoch=1, seq=s)),
    ] + [(f"roll {i}", lambda s, i=i: _batch(3, epoch=1, seq=s, ts=NOW + i))
       for i in range(30)]


CONFIGS = {
    "defaults": {},
    "small segments and index interval": {"segment_bytes": 2_000, "index_interval_bytes": 200},
    "compacted, timestamps bounded": {"cleanup_policy": "compact",
                                      "message_timestamp_before_max_ms": 3_600_000},
    "small max.message.bytes": {"max_message_bytes": 1_000},
    "LogAppendTime": {"message_timestamp_type": "LogAppendTime"},
    "flush.messages": {"flush_messages": 7},
}


def _outcome(append: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        info = append()
    except Exception as exc:  # whichever the general path raises: the same, with its words
        return (type(exc).__name__, str(exc), getattr(exc, "error_code", None),
                getattr(exc, "record_errors", None))
    return ("ok", info.first_offset, info.last_offset, info.log_append_time,
            info.log_start_offset, info.record_count, info.duplicate, info.max_timestamp)


def _files(log: Log) -> dict[str, bytes]:
    log.flush()
    return {p.name: p.read_bytes() for p in sorted(log.dir.iterdir()) if p.is_file()}


def _run(tmp: Path, cfg: dict[str, Any]) -> tuple[list[tuple[Any, ...]], Log]:
    log = Log.open(tmp / "t-0", LogConfig(**cfg), recover=False)
    out = []
    for what, records in _steps():
        last = log.producer_state.last_entry(PID)
        data = records(0 if last is None else last.last_sequence + 1)
        out.append((what, _outcome(lambda d=data: log.append_as_leader(d, 3, now_ms=NOW))))
    return out, log


@pytest.mark.parametrize("name", list(CONFIGS))
def test_fast_append_answers_and_writes_what_the_general_path_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    taken: list[bool] = []
    fast = Log._append_client_batch

    def counted(self: Log, *args: Any) -> Any:
        info = fast(self, *args)
        taken.append(info is not None)
        return info

    monkeypatch.setattr(Log, "_append_client_batch", counted)
    got, fast_log = _run(tmp_path / "fast", CONFIGS[name])
    monkeypatch.setattr(Log, "_append_client_batch", lambda self, *args: None)
    want, general_log = _run(tmp_path / "general", CONFIGS[name])
    assert got == want
    refused = dict(got)["LogAppendTime from a producer, no timestamps"]
    assert refused[0] == "RecordValidationError" and refused[2] == ErrorCode.invalid_timestamp
    assert fast_log.recovery_point == general_log.recovery_point  # flush.messages (before
    # the files are read: that flushes)
    assert _files(fast_log) == _files(general_log)
    assert (fast_log.producer_state.active_producers()
            == general_log.producer_state.active_producers())
    assert fast_log.producer_state.map_end_offset == general_log.producer_state.map_end_offset
    assert fast_log.leader_epoch_cache.latest_epoch == general_log.leader_epoch_cache.latest_epoch
    if name != "LogAppendTime":  # the one case the fast path leaves wholly to the other
        assert sum(taken) >= 20, taken
    if name == "small segments and index interval":
        assert fast_log.num_segments > 3
