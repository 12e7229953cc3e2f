"""The log's one-batch producer append (`Log._append_client_batch`, issue 47) against the
general path: the same sequence of appends, good and bad, made to two logs, one with the
fast path and one without it, must give the same answers (offsets, or the same error) and
leave the same bytes in every segment, index, transaction index and snapshot file and the
same producer state; a transactional producer's appends the same ongoing transactions (the
last stable offset after each append) and aborted transactions."""

from __future__ import annotations

import functools
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
# A step of any producer, or a coordinator's marker: (what, origin, transaction version of a
# marker, its records given the next sequence of a producer id in the log).
AnyStep = tuple[str, str, int, Callable[[Callable[[int], int]], bytes]]


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


CONFIGS: dict[str, dict[str, Any]] = {
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


def _client_steps() -> list[AnyStep]:
    def of_pid(records: Callable[[int], bytes]) -> Callable[[Callable[[int], int]], bytes]:
        return lambda seq_of: records(seq_of(PID))

    return [(what, "client", 0, of_pid(records)) for what, records in _steps()]


def _run(tmp: Path, cfg: dict[str, Any], steps: list[AnyStep]
         ) -> tuple[list[tuple[Any, ...]], Log]:
    """Each step's answer and, as the high watermark follows the log end, the last stable
    offset after it."""
    log = Log.open(tmp / "t-0", LogConfig(**cfg), recover=False)

    def seq_of(pid: int) -> int:
        last = log.producer_state.last_entry(pid)
        return 0 if last is None else last.last_sequence + 1

    out = []
    for what, origin, version, records in steps:
        data = records(seq_of)
        outcome = _outcome(functools.partial(log.append_as_leader, data, 3, origin=origin,
                                             now_ms=NOW, transaction_version=version))
        log.update_high_watermark(log.log_end_offset)
        out.append((what, outcome, log.last_stable_offset))
    return out, log


def _compare(tmp: Path, monkeypatch: pytest.MonkeyPatch, cfg: dict[str, Any],
             steps: list[AnyStep]) -> tuple[list[tuple[Any, ...]], list[str], Log]:
    """Run `steps` with the fast path and without it: the answers must be the same; returns
    them, the steps that took the fast path, and the fast run's log."""
    taken: list[bool] = []
    fast = Log._append_client_batch

    def counted(self: Log, *args: Any) -> Any:
        info = None
        try:  # (a refusal counts as not taken)
            info = fast(self, *args)
        finally:
            taken.append(info is not None)
        return info

    monkeypatch.setattr(Log, "_append_client_batch", counted)
    got, fast_log = _run(tmp / "fast", cfg, steps)
    monkeypatch.setattr(Log, "_append_client_batch", lambda self, *args: None)
    want, general_log = _run(tmp / "general", cfg, steps)
    assert got == want
    assert fast_log.recovery_point == general_log.recovery_point  # flush.messages (before
    # the files are read: that flushes)
    assert _files(fast_log) == _files(general_log)
    assert (fast_log.producer_state.active_producers()
            == general_log.producer_state.active_producers())
    assert fast_log.producer_state.map_end_offset == general_log.producer_state.map_end_offset
    assert fast_log.leader_epoch_cache.latest_epoch == general_log.leader_epoch_cache.latest_epoch
    leo = fast_log.log_end_offset
    assert (fast_log.collect_aborted_transactions(0, leo)
            == general_log.collect_aborted_transactions(0, leo))
    clients = [what for what, origin, _, _ in steps if origin == "client"]
    return got, [what for what, fast_taken in zip(clients, taken, strict=True) if fast_taken], \
        fast_log


@pytest.mark.parametrize("name", list(CONFIGS))
def test_fast_append_answers_and_writes_what_the_general_path_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    got, taken, fast_log = _compare(tmp_path, monkeypatch, CONFIGS[name], _client_steps())
    refused = {what: outcome for what, outcome, _ in got}[
        "LogAppendTime from a producer, no timestamps"]
    assert refused[0] == "RecordValidationError" and refused[2] == ErrorCode.invalid_timestamp
    if name != "LogAppendTime":  # the one case the fast path leaves wholly to the other
        assert len(taken) >= 20, taken
    if name == "small segments and index interval":
        assert fast_log.num_segments > 3


TXN = 20  # a transactional producer
OTHER = 21  # another, whose transaction overlaps TXN's


def _txn(pid: int, epoch: int, seq: int, n: int = 1, **kw: Any) -> bytes:
    return _batch(n, pid=pid, epoch=epoch, seq=seq, transactional=True, **kw)


def _marker(pid: int, epoch: int, commit: bool, version: int = 0,
            coordinator_epoch: int = 5) -> tuple[str, int, Callable[..., bytes]]:
    return "coordinator", version, lambda _: build_control_batch(
        pid, epoch, commit, coordinator_epoch, NOW)


def _client(records: Callable[[Callable[[int], int]], bytes]
            ) -> tuple[str, int, Callable[..., bytes]]:
    return "client", 0, records


def _txn_steps() -> list[AnyStep]:
    steps: list[tuple[str, tuple[str, int, Callable[..., bytes]]]] = [
        ("first batch of a new producer", _client(lambda s: _txn(TXN, 0, 0))),
        ("later batch", _client(lambda s: _txn(TXN, 0, s(TXN)))),
        ("later batch, 3 records", _client(lambda s: _txn(TXN, 0, s(TXN), 3))),
        ("other producer's first batch", _client(lambda s: _txn(OTHER, 0, 0))),
        ("later batch while the other's is open", _client(lambda s: _txn(TXN, 0, s(TXN)))),
        ("idempotent batch in a transaction",
         _client(lambda s: _batch(pid=TXN, epoch=0, seq=s(TXN)))),
        ("sequence gap", _client(lambda s: _txn(TXN, 0, s(TXN) + 2))),
        ("duplicate of the last", _client(lambda s: _txn(TXN, 0, s(TXN) - 1))),
        ("CRC error", _client(lambda s: _corrupt(_txn(TXN, 0, s(TXN))))),
        ("no producer id", _client(lambda s: _batch(pid=-1, transactional=True))),
        ("gzip", _client(lambda s: _txn(TXN, 0, s(TXN), 2, compression=compression.GZIP))),
        ("commit", _marker(TXN, 0, commit=True)),
        ("first batch after a commit", _client(lambda s: _txn(TXN, 0, s(TXN)))),
        ("later batch after a commit", _client(lambda s: _txn(TXN, 0, s(TXN), 2))),
        ("the other's commit", _marker(OTHER, 0, commit=True)),
        ("abort", _marker(TXN, 0, commit=False)),
        ("first batch after an abort", _client(lambda s: _txn(TXN, 0, s(TXN)))),
        ("abort, epoch bumped (transactions v2)", _marker(TXN, 1, commit=False, version=2)),
        ("first batch of the bumped epoch", _client(lambda s: _txn(TXN, 1, 0))),
        ("fenced epoch", _client(lambda s: _txn(TXN, 0, s(TXN)))),
        ("later batch of the bumped epoch", _client(lambda s: _txn(TXN, 1, s(TXN)))),
        ("new epoch in an open transaction", _client(lambda s: _txn(TXN, 2, 0))),
        ("commit, epoch bumped", _marker(TXN, 3, commit=True, version=2)),
        ("new epoch, first sequence", _client(lambda s: _txn(TXN, 5, 0))),
        ("abort of the new epoch", _marker(TXN, 5, commit=False)),
        ("new epoch, sequence not 0", _client(lambda s: _txn(TXN, 6, 4))),
        ("idempotent batch, new epoch", _client(lambda s: _batch(pid=TXN, epoch=6, seq=0))),
        ("first batch after idempotent ones", _client(lambda s: _txn(TXN, 6, s(TXN)))),
        ("old timestamp", _client(lambda s: _txn(TXN, 6, s(TXN), ts=NOW - 7_200_000))),
        ("LogAppendTime from a producer",
         _client(lambda s: _txn(TXN, 6, s(TXN), timestamp_type=LOG_APPEND_TIME))),
        ("large", _client(lambda s: _txn(TXN, 6, s(TXN), 25))),
        ("commit of epoch 6", _marker(TXN, 6, commit=True)),
    ]
    for i in range(12):  # transactions over rolled segments, one left open
        steps += [
            (f"round {i}: first batch",
             _client(functools.partial(lambda s, t: _txn(TXN, 6, s(TXN), 3, ts=t),
                                       t=NOW + i))),
            (f"round {i}: other's first batch", _client(lambda s: _txn(OTHER, 0, s(OTHER)))),
            (f"round {i}: later batch", _client(lambda s: _txn(TXN, 6, s(TXN), 2))),
            (f"round {i}: end", _marker(TXN, 6, commit=i % 3 != 0)),
            (f"round {i}: other's end", _marker(OTHER, 0, commit=i % 2 == 0)),
        ]
    steps.append(("left open", _client(lambda s: _txn(TXN, 6, s(TXN)))))
    return [(what, origin, version, records) for what, (origin, version, records) in steps]


# The usual transactional appends: the fast path takes them (all but LogAppendTime's).
TXN_FAST = {
    "later batch", "later batch, 3 records", "later batch while the other's is open", "gzip",
    "first batch after a commit", "later batch after a commit", "first batch after an abort",
    "first batch of the bumped epoch", "later batch of the bumped epoch",
    "new epoch, first sequence", "idempotent batch, new epoch",
    "first batch after idempotent ones", "old timestamp", "LogAppendTime from a producer",
    "large", "left open",
} | {f"round {i}: {step}" for i in range(12)
     for step in ("first batch", "later batch", "other's first batch")}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_transaction_appended_fast_as_the_general_path_appends_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    got, taken, fast_log = _compare(tmp_path, monkeypatch, CONFIGS[name], _txn_steps())
    answers = {what: outcome for what, outcome, _ in got}
    refusals = {what: outcome[0] for what, outcome in answers.items() if outcome[0] != "ok"}
    if name == "LogAppendTime":
        assert taken == []
        return
    want = {
        "idempotent batch in a transaction": "InvalidTxnState",
        "sequence gap": "OutOfOrderSequence",
        "CRC error": "CorruptRecord",
        "no producer id": "InvalidRecord",
        "fenced epoch": "InvalidProducerEpoch",
        "new epoch, sequence not 0": "OutOfOrderSequence",
        "old timestamp": "RecordValidationError",
    }
    if name == "small max.message.bytes":
        want["large"] = "MessageTooLarge"
    if name != "compacted, timestamps bounded":
        del want["old timestamp"]
    assert refusals == want
    assert answers["duplicate of the last"][6] is True  # answered with its own offsets
    assert set(taken) == TXN_FAST - set(want)
    # the transactions' effects, alike in both logs: aborted ones, an open one holding the LSO
    aborted = fast_log.collect_aborted_transactions(0, fast_log.log_end_offset)
    assert {a.producer_id for a in aborted} == {TXN, OTHER}
    assert len(aborted) == 1 + 1 + 1 + 4 + 6
    what, outcome, lso = got[-1]
    assert what == "left open" and lso == outcome[1]  # held at the open transaction's start
    if name == "small segments and index interval":
        assert fast_log.num_segments > 3
