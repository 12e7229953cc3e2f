"""Acceptance of the foundation: the three Python clients interoperate through Samsa.

For each scenario one topic is set up, then every client produces keyed records with headers in
every compression codec (none, gzip, snappy, lz4, zstd), then every client reads the whole topic
back with manual assignment (no consumer group) and must see exactly what was acknowledged:
same keys/values/headers/timestamps, at the acknowledged (partition, offset), offsets dense
from 0 in every partition.

Scenarios: the topic is created with 3 partitions by each client's admin API, or auto-created
(1 partition) by each client's first produce.

The work runs once per scenario in a module-scoped fixture that records every failure; the tests
then report each (client, codec) producer and each consumer separately, so a failure says which.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from .pyclients import (
    CLIENTS,
    CODECS,
    ReadRec,
    Rec,
    consume_all,
    create_topic,
    make_records,
    produce,
    stored_codecs,
    unique_name,
)

pytestmark = pytest.mark.timeout(900)

PARTITIONS = 3
N_PER_PRODUCER = 40
SCENARIOS = [f"admin-{c}" for c in CLIENTS] + [f"auto-{c}" for c in CLIENTS]


@dataclass
class Roundtrip:
    topic: str
    expected_partitions: int
    data_dir: Path
    setup_error: str | None = None
    produced: dict[tuple[str, str], list[tuple[int, int, Rec]]] = field(default_factory=dict)
    produce_errors: dict[tuple[str, str], str] = field(default_factory=dict)
    consumed: dict[str, tuple[int, list[ReadRec]]] = field(default_factory=dict)
    consume_errors: dict[str, str] = field(default_factory=dict)

    def acked(self) -> dict[tuple[int, int], Rec]:
        out: dict[tuple[int, int], Rec] = {}
        for acks in self.produced.values():
            for p, o, r in acks:
                out[(p, o)] = r
        return out


def _err() -> str:
    return traceback.format_exc(limit=6)


@pytest.fixture(scope="module", params=SCENARIOS)
def roundtrip(request, shared_broker) -> Roundtrip:
    mode, client = request.param.split("-", 1)
    bootstrap = shared_broker.bootstrap
    rt = Roundtrip(
        topic=unique_name(f"py-{request.param}"),
        expected_partitions=PARTITIONS if mode == "admin" else 1,
        data_dir=shared_broker.data_dir,
    )
    producers = list(CLIENTS)
    if mode == "admin":
        try:
            create_topic(client, bootstrap, rt.topic, PARTITIONS)
        except Exception:
            rt.setup_error = _err()
    else:
        # The scenario's client produces first, so it is the one whose request auto-creates.
        producers.remove(client)
        producers.insert(0, client)

    base_ts = int(time.time() * 1000) - 3_600_000
    for pc in producers:
        for codec in CODECS:
            recs = make_records(pc, codec, N_PER_PRODUCER, base_ts)
            base_ts += N_PER_PRODUCER
            try:
                rt.produced[(pc, codec)] = produce(pc, bootstrap, rt.topic, codec, recs)
            except Exception:
                rt.produce_errors[(pc, codec)] = _err()
    for cc in CLIENTS:
        try:
            rt.consumed[cc] = consume_all(cc, bootstrap, rt.topic)
        except Exception:
            rt.consume_errors[cc] = _err()
    return rt


def test_topic_setup(roundtrip: Roundtrip):
    assert roundtrip.setup_error is None, roundtrip.setup_error


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_produce(roundtrip: Roundtrip, client: str, codec: str):
    key = (client, codec)
    assert key not in roundtrip.produce_errors, roundtrip.produce_errors[key]
    acks = roundtrip.produced[key]
    assert len(acks) == N_PER_PRODUCER
    for p, o, _ in acks:
        assert 0 <= p < roundtrip.expected_partitions, f"acked partition {p}"
        assert o >= 0, f"acked offset {o} (partition {p})"


def test_acknowledged_offsets_unique_and_dense(roundtrip: Roundtrip):
    seen = Counter((p, o) for acks in roundtrip.produced.values() for p, o, _ in acks)
    dups = [po for po, n in seen.items() if n > 1]
    assert not dups, f"two acknowledgements for the same (partition, offset): {dups[:10]}"
    if roundtrip.produce_errors:
        pytest.skip("some producers failed: density cannot be checked from acks alone")
    by_part: dict[int, list[int]] = defaultdict(list)
    for p, o in seen:
        by_part[p].append(o)
    for p, offs in by_part.items():
        assert sorted(offs) == list(range(len(offs))), f"partition {p} offsets not dense from 0"
    if roundtrip.expected_partitions > 1:
        assert set(by_part) == set(range(roundtrip.expected_partitions)), (
            f"keyed records reached only partitions {sorted(by_part)}"
        )


@pytest.mark.parametrize("client", CLIENTS)
def test_consume_reads_everything_exactly(roundtrip: Roundtrip, client: str):
    assert client not in roundtrip.consume_errors, roundtrip.consume_errors[client]
    nparts, records = roundtrip.consumed[client]
    assert nparts == roundtrip.expected_partitions, "partition count in metadata"

    # offsets dense from 0, in order, per partition
    by_part: dict[int, list[int]] = defaultdict(list)
    for r in records:
        by_part[r.partition].append(r.offset)
    for p, offs in by_part.items():
        assert offs == list(range(len(offs))), f"partition {p}: offsets {offs[:20]}..."

    got = {(r.partition, r.offset): r.rec for r in records}
    assert len(got) == len(records), "a record was delivered twice"
    expected = roundtrip.acked()
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    assert not missing, f"{len(missing)} acknowledged records not read, e.g. {missing[:5]}"
    if not roundtrip.produce_errors:
        assert not extra, f"{len(extra)} records read that were never acknowledged: {extra[:5]}"
    wrong = [(po, expected[po], got[po]) for po in sorted(expected) if expected[po] != got[po]]
    assert not wrong, (
        f"{len(wrong)} records differ; first: at {wrong[0][0]}\n"
        f"  expected {_short(wrong[0][1])}\n  got      {_short(wrong[0][2])}"
    )
    not_create_time = [(r.partition, r.offset) for r in records if not r.create_time]
    assert not not_create_time, f"timestamp type is not CreateTime at {not_create_time[:5]}"


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}




def test_stored_batches_keep_each_codec(roundtrip: Roundtrip):
    """compression.type=producer (the default): batches are stored as the producers sent them."""
    if roundtrip.produce_errors:
        pytest.skip("some producers failed")
    seen = stored_codecs(roundtrip.data_dir, roundtrip.topic)
    assert set(seen) == set(CODEC_IDS.values()), f"codec ids of stored batches: {dict(seen)}"


def _short(r: Rec) -> str:
    v = r.value if r.value is None or len(r.value) < 60 else r.value[:60] + b"..."
    return f"Rec(key={r.key!r}, value={v!r}, headers={r.headers!r}, timestamp={r.timestamp})"


@pytest.mark.parametrize("client", CLIENTS)
def test_idempotent_producer(shared_broker, client: str):
    """The idempotent producer path (InitProducerId + sequence numbers) round-trips."""
    topic = unique_name(f"py-idem-{client}")
    extra = {
        "kafka-python": {"enable_idempotence": True},
        "aiokafka": {"enable_idempotence": True},
        "confluent-kafka": {"enable.idempotence": True},
    }[client]
    create_topic("confluent-kafka", shared_broker.bootstrap, topic, 2)
    recs = make_records(client, "lz4", 50, int(time.time() * 1000))
    acks = produce(client, shared_broker.bootstrap, topic, "lz4", recs, **extra)
    nparts, read = consume_all(client, shared_broker.bootstrap, topic)
    assert nparts == 2
    assert {(r.partition, r.offset): r.rec for r in read} == {(p, o): r for p, o, r in acks}
