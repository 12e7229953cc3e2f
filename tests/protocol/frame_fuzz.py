"""A frame-level fuzzer of a broker's request decoding and dispatch, over real sockets.

Every API and version the broker serves starts from well-formed requests (every field set,
every array one element: tests/protocol/samples.py), which are mutated: bits flipped, bytes
set to edge values, length fields rewritten, nulls put where the schema does or does not
allow them, the frame cut short or its size prefix a lie, another version's body sent. Each
frame goes out on its own or a few back to back, and the broker must answer it or close the
connection. After each one the broker's log must hold no traceback and no error, the broker
must still run; every so often a fresh connection must get an ApiVersions answer and a
canary producer appends records (acks=-1) that must all read back, in order, at the end.

    report = fuzz_broker(broker, seconds=20, seed=7)
    assert report.ok, report.text()

The same run is `make chaos` (tests/chaos/run.py --workload fuzz, its duration and seed) and
`tests/protocol/test_frame_fuzz.py` in `make test` (SAMSA_FUZZ_SECONDS, SAMSA_FUZZ_SEED).
"""

from __future__ import annotations

import random
import socket
import struct
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from samsa.broker.apis import build_registry
from samsa.protocol.codec import reader, request_type
from samsa.protocol.framing import read_request_header
from samsa.protocol.lenient import decode_request
from samsa.protocol.records import build_batch, decode_records, iter_batches

from .samples import encode_body, frame, null_paths, sample, with_null
from .wire import WireClient

_EDGE_BYTES = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)
_EDGE_I16 = (-1, -2, 0, 1, 0x7FFF, -0x8000)
_EDGE_I32 = (-1, -2, 0, 1, 0x7FFF, 0x7FFFFFFF, -0x80000000, 0x10000)
_LOG_MARKS = ("Traceback", " ERROR ", " CRITICAL ", "Unhandled exception", "never retrieved")
CANARY = "fuzz-canary"
TARGET = "fuzz-target"  # a topic of 2 partitions the seeds name (CANARY they never name)
_BATCH = build_batch([(b"key", b"value"), (None, b"value 2", [("h", b"1")])])


class Broker(Protocol):
    bootstrap: str
    log_path: Path

    def is_running(self) -> bool: ...


@dataclass(frozen=True)
class Seed:
    api_key: int
    version: int
    flexible: bool
    body: bytes


@cache
def seeds() -> tuple[Seed, ...]:
    """Well-formed bodies of every served API and version: every field set; the same naming
    the topic TARGET (which exists), with a record batch in a Produce; each with one legal null
    in turn."""
    out = []
    for spec in build_registry().all():
        for version in range(spec.min_version, spec.max_version + 1):
            entity = request_type(spec.key, version)
            flexible = bool(entity.__flexible__)
            tree = sample(entity)
            out.append(Seed(spec.key, version, flexible, encode_body(entity, tree)))
            out.append(Seed(spec.key, version, flexible, encode_body(entity, _aimed(tree))))
            for path, f in null_paths(entity):
                if f.nullable and isinstance(path[-1], str):
                    out.append(Seed(spec.key, version, flexible,
                                    encode_body(entity, with_null(tree, path))))
    return tuple(out)


def _aimed(value: Any) -> Any:
    """`value` (a sample's tree) with every string TARGET and every record set a batch."""
    if isinstance(value, dict):
        return {k: _BATCH if k == "records" else _aimed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_aimed(v) for v in value]
    return TARGET if value == "x" else value


@cache
def _null_variants(api_key: int, version: int) -> tuple[bytes, ...]:
    """Bodies with a null where the version forbids one (arrays, strings, bytes)."""
    entity = request_type(api_key, version)
    tree = sample(entity)
    out = []
    for path, f in null_paths(entity):
        if not (f.entity is not None and not f.is_array) and not f.nullable:
            out.append(encode_body(entity, with_null(tree, path)))
    return tuple(out)


def _silent(data: bytes) -> bool:
    """Is `data` a Produce request the broker reads with acks=0 (no answer)?"""
    api_key, version = struct.unpack_from(">hh", data)
    if api_key != 0 or not 3 <= version <= 13:
        return False
    entity = request_type(api_key, version)
    try:
        _, offset = read_request_header(data, bool(entity.__flexible__))
        return decode_request(entity, reader(entity), data, offset).acks == 0
    except Exception:  # refused: the broker closes the connection
        return False


class Mutator:
    """Frames made from the seeds by a seeded random choice of mutations."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seeds = seeds()
        self.correlation = 0

    def next(self) -> tuple[str, bytes, bool]:
        """(what was done, the frame with its size prefix, whether the answers to it cannot be
        counted: its size prefix lies, or it is a Produce with acks=0, which has none)."""
        rng = self.rng
        s = rng.choice(self.seeds)
        self.correlation += 1
        body = bytearray(s.body)
        version, what = s.version, []
        for _ in range(rng.choice((0, 1, 1, 1, 2, 3, 5))):
            what.append(self._mutate(s, body))
        if rng.random() < 0.03:  # another version's body under this header
            other = rng.choice([x for x in self.seeds if x.api_key == s.api_key])
            body, what = bytearray(other.body), [*what, f"body of v{other.version}"]
        if rng.random() < 0.05:
            version = rng.randrange(-1, 20)
            what.append(f"header v{version}")
        data = frame(s.api_key, version, s.flexible, bytes(body), self.correlation)
        size = len(data)
        if rng.random() < 0.02:
            size = rng.choice((0, 1, 7, size - 1, size + 1, -1))
            what.append(f"size prefix {size}")
        return (f"api {s.api_key} v{s.version}: {', '.join(what) or 'as is'}",
                struct.pack(">i", size) + data, size != len(data) or _silent(data))

    def _mutate(self, s: Seed, body: bytearray) -> str:
        rng = self.rng
        op = rng.randrange(8)
        if not body:
            body += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
            return "random body"
        at = rng.randrange(len(body))
        if op == 0:
            bit = rng.randrange(8)
            body[at] ^= 1 << bit
            return f"bit {bit} of byte {at}"
        if op == 1:
            body[at] = rng.choice(_EDGE_BYTES)
            return f"byte {at}={body[at]:#x}"
        if op == 2:
            v = rng.choice(_EDGE_I16)
            body[at:at + 2] = struct.pack(">h", v)
            return f"int16 {v} at {at}"
        if op == 3:
            v = rng.choice(_EDGE_I32)
            body[at:at + 4] = struct.pack(">i", v)
            return f"int32 {v} at {at}"
        if op == 4:
            del body[at:]
            return f"cut at {at}"
        if op == 5:
            n = rng.randrange(1, 6)
            body[at:at] = bytes(rng.randrange(256) for _ in range(n))
            return f"{n} bytes in at {at}"
        if op == 6:
            variants = _null_variants(s.api_key, s.version)
            if variants:
                body[:] = rng.choice(variants)
                return "null where forbidden"
        body[at:at] = body[at:at + rng.randrange(1, 17)]
        return f"repeat at {at}"


@dataclass
class FuzzReport:
    seed: int
    seconds: float
    frames: int = 0
    answered: int = 0
    closed: int = 0
    probes: int = 0
    canary_acked: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        head = (f"frame fuzz, seed {self.seed}: {self.frames} frames in {self.seconds:.0f} s "
                f"({self.answered} answered, {self.closed} closed), {self.probes} probes, "
                f"{self.canary_acked} canary records acked")
        return "\n".join([head, *self.problems[:20]])


class _Conn:
    def __init__(self, address: tuple[str, int], timeout: float) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)

    def exchange(self, data: bytes, expect: int | None) -> tuple[int, bool]:
        """Send `data`, read up to `expect` answers: (answers read, still open). With
        `expect` None (a frame whose size prefix lies) the sending side is shut and every
        answer read until the broker closes the connection."""
        n = 0
        try:
            self.sock.sendall(data)
            if expect is None:
                self.sock.shutdown(socket.SHUT_WR)
            while expect is None or n < expect:
                head = self._read(4)
                if head is None:
                    return n, False
                (size,) = struct.unpack(">i", head)
                if self._read(size) is None:
                    return n, False
                n += 1
        except (ConnectionError, OSError):
            return n, False
        return n, True

    def _read(self, n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                return None
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


class _LogWatch:
    """New lines of the broker's log since the last look."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def bad_lines(self) -> list[str]:
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            new = f.read()
        cut = new.rfind(b"\n") + 1  # whole lines only
        self.offset += cut
        text = new[:cut].decode(errors="replace")
        return [line for line in text.splitlines() if any(m in line for m in _LOG_MARKS)]


def fuzz_broker(broker: Broker, seconds: float, seed: int, timeout: float = 30.0) -> FuzzReport:
    """Fuzz `broker` for `seconds`; the report lists every problem seen."""
    host, port = broker.bootstrap.rsplit(":", 1)
    address = (host, int(port))
    report = FuzzReport(seed, seconds)
    mutator = Mutator(seed)
    watch = _LogWatch(broker.log_path)
    canary = _Canary(address, timeout)
    conn: _Conn | None = None
    deadline = time.monotonic() + seconds
    next_probe = 0.0
    try:
        while time.monotonic() < deadline and len(report.problems) < 20:
            batch = [mutator.next() for _ in range(mutator.rng.choice((1, 1, 1, 2, 3)))]
            lie = next((i for i, (_, _, lies) in enumerate(batch) if lies), None)
            batch = batch if lie is None else batch[:lie + 1]  # what follows one is noise
            if conn is None:
                conn = _Conn(address, timeout)
            started = time.monotonic()
            answers, still_open = conn.exchange(b"".join(f for _, f, _ in batch),
                                                None if lie is not None else len(batch))
            if time.monotonic() - started > timeout / 2:
                report.problems.append(f"slow answer ({time.monotonic() - started:.1f} s) to "
                                       f"{[w for w, _, _ in batch]}")
            report.frames += len(batch)
            report.answered += answers
            if not still_open:
                report.closed += 1
                conn.close()
                conn = None
            bad = watch.bad_lines()
            if bad:
                report.problems.append(
                    f"after {[w for w, _, _ in batch]} (frames {[f.hex() for _, f, _ in batch]}): "
                    + " | ".join(bad[:5]))
            if time.monotonic() >= next_probe:
                next_probe = time.monotonic() + 1.0
                report.probes += 1
                _probe(broker, address, timeout, report)
                canary.produce(report)
    finally:
        if conn is not None:
            conn.close()
    _probe(broker, address, timeout, report)
    canary.check(report)
    report.problems.extend(f"at the end: {line}" for line in watch.bad_lines())
    return report


def _probe(broker: Broker, address: tuple[str, int], timeout: float,
           report: FuzzReport) -> None:
    """The broker still runs and answers ApiVersions on a fresh connection."""
    if not broker.is_running():
        report.problems.append("the broker is no longer running")
        return
    body = frame(18, 0, False, b"", 1)
    try:
        conn = _Conn(address, timeout)
        answers, _ = conn.exchange(struct.pack(">i", len(body)) + body, 1)
        conn.close()
    except OSError as exc:
        answers = 0
        report.problems.append(f"no connection for ApiVersions: {exc!r}")
    if answers != 1:
        report.problems.append("no ApiVersions answer on a fresh connection")


class _Canary:
    """Records appended with acks=-1 between the fuzzed frames, all to be read back."""

    def __init__(self, address: tuple[str, int], timeout: float) -> None:
        self.address = address
        self.timeout = timeout
        self.acked: list[bytes] = []
        self.sent = 0
        _call(address, timeout, 19, 2, {"topics": [
            {"name": CANARY, "num_partitions": 1, "replication_factor": 1},
            {"name": TARGET, "num_partitions": 2, "replication_factor": 1}],
            "timeout": 10000})

    def produce(self, report: FuzzReport) -> None:
        self.sent += 1
        value = f"canary-{self.sent}".encode()
        try:
            answer = _call(self.address, self.timeout, 0, 7, {
                "acks": -1, "timeout": 10000,
                "topic_data": [{"name": CANARY, "partition_data": [
                    {"index": 0, "records": build_batch([(None, value)])}]}]})
        except OSError as exc:
            report.problems.append(f"canary produce {self.sent}: {exc!r}")
            return
        part = answer.responses[0].partition_responses[0]
        if part.error_code == 0:
            self.acked.append(value)
            report.canary_acked += 1
        else:
            report.problems.append(f"canary produce failed: {part.error_code!r}")

    def check(self, report: FuzzReport) -> None:
        answer = _call(self.address, self.timeout, 1, 11, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24,
            "isolation_level": 0, "session_epoch": -1,
            "topics": [{"topic": CANARY, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 24,
                 "current_leader_epoch": -1, "log_start_offset": -1}]}]})
        records = answer.responses[0].partitions[0].records or b""
        values = _values(bytes(records))
        if values != self.acked:
            report.problems.append(f"canary: {len(self.acked)} records acked, read back "
                                   f"{len(values)}; first difference at "
                                   f"{_first_difference(self.acked, values)}")


def _call(address: tuple[str, int], timeout: float, api_key: int, version: int,
          body: dict[str, Any]) -> Any:
    with WireClient(f"{address[0]}:{address[1]}", timeout=timeout) as c:
        return c.call(api_key, version, body)


def _values(records: bytes) -> list[bytes]:
    """Every record value in `records`, batch by batch."""
    return [r.value or b"" for pos, h in iter_batches(records)
            for r in decode_records(records, pos, h)]


def _first_difference(a: list[bytes], b: list[bytes]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


__all__ = ["CANARY", "FuzzReport", "Mutator", "fuzz_broker", "seeds"]
