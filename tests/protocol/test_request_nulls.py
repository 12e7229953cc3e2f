"""Every request API and version the broker serves, with each null its wire form can carry and
with the values Kafka reads more leniently than kio (booleans other than 0/1, strings that are
not UTF-8), judged against Kafka's own parser (tests/java/src/RequestParse.java, the generated
`*RequestData.read` of kafka-clients 4.x): the broker answers what Kafka parses, closes the
connection (one warning, no traceback) on what Kafka refuses, and no handler sees a shape its
schema forbids.
"""

from __future__ import annotations

import datetime
import socket
import struct
import subprocess
from dataclasses import dataclass
from functools import cache

import pytest

from samsa.broker.apis import build_registry
from samsa.broker.cluster.features import UNSTABLE_VERSIONS
from samsa.protocol.codec import reader, request_type
from samsa.protocol.guard import MalformedRequest
from samsa.protocol.lenient import decode_request, normal_form
from tests.support.java import JAVA_SRC, JVM_ARGS, _cp, compile_java, java_executable

from .samples import (
    UNKNOWN_TAGS,
    Forged,
    encode_body,
    frame,
    null_paths,
    sample,
    value_paths,
    with_null,
    with_value,
)

# A version still in development is not enabled on the default broker (Kafka closes the
# connection on it whatever its body): tests/transactions/test_two_phase_commit.py covers v6 of
# InitProducerId, the one today.
SPECS = [(s.key, s.name, v) for s in build_registry().all()
         for v in range(s.min_version, s.max_version + 1)
         if v < UNSTABLE_VERSIONS.get(s.key, 1 << 15)]
BAD_BOOLS = (2, 0xFF)
BAD_UTF8 = (b"\xc3\x28x", b"\xed\xa0\x80")  # a broken sequence; an encoded surrogate


@dataclass(frozen=True)
class Case:
    api_key: int
    name: str
    version: int
    what: str  # "null topics[0].name", "bool 2 at ...", "utf8 ... at ..."
    body: bytes

    def __str__(self) -> str:
        return f"{self.name} v{self.version} {self.what}"


def _path(path: tuple[str | int, ...]) -> str:
    return ".".join(str(p) for p in path)


@cache
def null_cases() -> tuple[Case, ...]:
    out = []
    for key, name, version in SPECS:
        entity = request_type(key, version)
        tree = sample(entity)
        out.append(Case(key, name, version, "no null", encode_body(entity, tree)))
        for path, field in null_paths(entity):
            if field.entity is not None and not field.is_array and not field.nullable:
                continue  # a struct that is not nullable has no null on the wire
            out.append(Case(key, name, version, f"null {_path(path)}",
                            encode_body(entity, with_null(tree, path))))
    return tuple(out)


@cache
def lenient_cases() -> tuple[Case, ...]:
    out = []
    for key, name, version in SPECS:
        entity = request_type(key, version)
        tree = sample(entity)
        for path in value_paths(entity, "bool"):
            for b in BAD_BOOLS:
                out.append(Case(key, name, version, f"bool {b} at {_path(path)}",
                                encode_body(entity, with_value(tree, path, b))))
        for path in value_paths(entity, "string"):
            for raw in BAD_UTF8:
                out.append(Case(key, name, version, f"utf8 {raw!r} at {_path(path)}",
                                encode_body(entity, with_value(tree, path, raw))))
        for path in value_paths(entity, "timedelta_i64"):
            for ms in (2**63 - 1, -2**63):
                out.append(Case(key, name, version, f"duration {ms} at {_path(path)}",
                                encode_body(entity, with_value(tree, path, ms))))
        for path, field in null_paths(entity):
            out.extend(_forged(key, name, version, entity, tree, path, field))
        if entity.__flexible__:
            unknown = with_value(tree, (UNKNOWN_TAGS,), [(999, b"\x01\x02")])
            out.append(Case(key, name, version, "unknown tag 999",
                            encode_body(entity, unknown)))
    return tuple(out)


def _forged(key: int, name: str, version: int, entity: type, tree: dict,
            path: tuple[str | int, ...], field) -> list[Case]:
    """Lengths below -1 (legacy encodings) and nullable struct markers other than -1 and 1."""
    if field.entity is not None and not field.is_array and field.nullable:
        forged = [Forged(marker=m, struct=tree_at(tree, path)) for m in (0x00, 0x05)]
        forged += [Forged(marker=m) for m in (0x80, 0xFE)]
    elif not entity.__flexible__ and isinstance(path[-1], str):
        forged = [Forged(length=-7)]
    else:
        return []
    return [Case(key, name, version,
                 f"{'length' if f.marker is None else 'marker'} {f.length or f.marker} at "
                 f"{_path(path)}", encode_body(entity, with_value(tree, path, f)))
            for f in forged]


def tree_at(tree: dict, path: tuple[str | int, ...]):
    node = tree
    for key in path:
        node = node[key]
    return node


@pytest.fixture(scope="module")
def kafka_verdicts() -> dict[Case, str]:
    """Kafka's parser on every case: "ok", "error <message>" or "unsupported"."""
    classes = compile_java([JAVA_SRC / "RequestParse.java"], classpath="kafka4")
    cases = null_cases() + lenient_cases()
    lines = "".join(f"{c.api_key} {c.version} {c.body.hex()}\n" for c in cases)
    proc = subprocess.run([java_executable(), *JVM_ARGS, "-cp", _cp("kafka4", [classes]),
                           "RequestParse"], input=lines, capture_output=True, text=True,
                          timeout=120)
    verdicts = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(verdicts) == len(cases), proc.stderr[-2000:]
    return dict(zip(cases, verdicts, strict=True))


def _decoded(case: Case) -> str:
    entity = request_type(case.api_key, case.version)
    try:
        decode_request(entity, reader(entity), case.body, 0)
    except MalformedRequest as exc:
        return f"error {exc}"
    return "ok"


def test_decoding_accepts_exactly_what_kafka_parses(kafka_verdicts):
    """Nulls where the version forbids them refused, legal nulls, odd booleans and broken
    UTF-8 read: the same verdict as Kafka's parser for every case (controlled shutdown,
    gone from Kafka 4, has no verdict)."""
    differ = [f"{case}: Kafka {kafka} / Samsa {ours}"
              for case, kafka in kafka_verdicts.items()
              if kafka != "unsupported"
              and kafka.split()[0] != (ours := _decoded(case)).split()[0]]
    assert not differ, "\n".join(differ[:40])
    refused = [c for c in null_cases() if kafka_verdicts[c].startswith("error")]
    assert len(refused) > 500  # the cases do reach the nulls Kafka refuses


def test_the_normal_form_of_a_request_kio_reads_is_itself():
    """Rewriting as Kafka reads changes nothing in a request that needs none."""
    for case in null_cases():
        if case.what == "no null":
            assert normal_form(request_type(case.api_key, case.version), case.body, 0) is None


def _decode(api_key: int, version: int, body: bytes):
    entity = request_type(api_key, version)
    return decode_request(entity, reader(entity), body, 0)


def test_kafkas_readings_are_what_handlers_see():
    """A boolean byte 2 is true, broken UTF-8 reads with U+FFFD in place (as Java's decoder)."""
    entity = request_type(3, 12)  # Metadata v12: topics[].name, allow_auto_topic_creation
    tree = with_value(sample(entity), ("allow_auto_topic_creation",), 2)
    tree = with_value(tree, ("topics", 0, "name"), b"a\xc3\x28b")
    request = _decode(3, 12, encode_body(entity, tree))
    assert request.allow_auto_topic_creation is True
    assert request.topics[0].name == "a\ufffd(b"


def test_any_negative_length_of_a_nullable_field_is_a_null():
    """Metadata v4 with topics of length -7: Kafka's null, all topics (kio read it as empty)."""
    assert _decode(3, 4, struct.pack(">i", -7) + b"\x01").topics is None


@pytest.mark.parametrize(("marker", "null"), [(0x00, False), (0x05, False), (0x80, True),
                                              (0xFE, True)])
def test_a_nullable_structs_marker_is_read_by_its_sign(marker, null):
    """DescribeTopicPartitions' cursor: a marker below zero is a null to Kafka, any other a
    cursor (kio read every marker but -1 as a cursor)."""
    entity = request_type(75, 0)
    tree = with_null(sample(entity), ("cursor",)) if null else sample(entity)
    body = bytearray(encode_body(entity, tree))
    at = body.index(b"\xff" if null else b"\x01\x02x", 8)  # after topics and the limit
    body[at] = marker
    cursor = _decode(75, 0, bytes(body)).cursor
    assert (cursor is None) is null


def test_a_duration_beyond_a_timedelta_is_the_longest_one():
    """OffsetCommit v2's retention_time of Long.MAX_VALUE: Kafka reads it; kio cannot hold it,
    so it is clamped to the longest kio holds (~292,000 years)."""
    entity = request_type(8, 2)
    body = encode_body(entity, with_value(sample(entity), ("retention_time",), 2**63 - 1))
    assert _decode(8, 2, body).retention_time == datetime.timedelta(
        milliseconds=(2**63 - 1) // 1000)


# ---- a broker answering them ---------------------------------------------------------------


class _Conn:
    """One connection to the broker, reopened after the broker closed it."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.sock: socket.socket | None = None

    def send(self, case: Case, correlation: int) -> str:
        """"answered", "closed" or "no answer"."""
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=10)
        flexible = request_type(case.api_key, case.version).__flexible__
        data = frame(case.api_key, case.version, flexible, case.body, correlation)
        self.sock.sendall(struct.pack(">i", len(data)) + data)
        try:
            size = struct.unpack(">i", self._read(4))[0]
            got = struct.unpack(">i", self._read(size)[:4])[0]
        except (ConnectionError, struct.error):
            self.close()
            return "closed"
        except TimeoutError:
            self.close()
            return "no answer"
        assert got == correlation, f"{case}: correlation {got} != {correlation}"
        return "answered"

    def _read(self, n: int) -> bytes:
        assert self.sock is not None
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _failures(log: str) -> list[str]:
    """Log lines of a traceback, an error, or an exception no task retrieved."""
    marks = ("Traceback", " ERROR ", " CRITICAL ", "Unhandled exception", "never retrieved")
    return [line for line in log.splitlines() if any(m in line for m in marks)]


def test_broker_answers_what_kafka_parses_and_closes_on_the_rest(broker, kafka_verdicts):
    """Over a socket: each case answered exactly when Kafka's parser accepts it, else the
    connection closed with one warning naming the reason; no traceback in the log."""
    conn = _Conn(broker.bootstrap)
    wrong, refused = [], 0
    try:
        for n, (case, kafka) in enumerate(kafka_verdicts.items(), 1):
            if kafka == "unsupported":
                continue
            got = conn.send(case, n)
            want = "answered" if kafka == "ok" else "closed"
            refused += want == "closed"
            if got != want:
                wrong.append(f"{case}: {got}, Kafka's parser: {kafka}")
    finally:
        conn.close()
    log = broker.log_text()
    assert not wrong, f"{len(wrong)} differ from Kafka:\n" + "\n".join(wrong[:40])
    failures = _failures(log)
    assert not failures, f"{len(failures)} log lines:\n" + "\n".join(failures[:40])
    assert log.count("request: non-nullable field") + log.count("had invalid length") \
        == refused, broker.log_tail(40)
