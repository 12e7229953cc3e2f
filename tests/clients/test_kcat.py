"""kcat (Debian's `kcat` package, a command-line client built on librdkafka) against Samsa.

    metadata   `-L` (text) and `-L -J` (JSON): brokers, controller, partitions, leaders,
               replicas and ISRs of a 3-partition topic; an unknown topic with
               `allow.auto.create.topics=false` is reported, not created
    produce    `-P -K:` keys, `-H` headers (repeated, empty, without a value), `-Z` (empty key
               or value sent as null), `-z` every codec; read back by kafka-python (a decoder
               that shares no code with librdkafka), and the stored batches keep kcat's codec
    consume    `-C -o beginning -e` with `-f` format strings (partition, offset, key, value,
               headers, timestamp) and `-J`, of records another client wrote and acknowledged;
               `-p`/`-o <offset>`/`-c` for a slice of one partition
    isolation  `-X isolation.level=read_committed` vs `read_uncommitted` on a topic holding an
               aborted, a committed and a second aborted transaction (written by
               confluent-kafka's transactional producer): exactly the committed records vs all

Every kcat run is a subprocess with a timeout: a kcat that hangs (e.g. `-e` never reaching the
end of a partition) fails the test with its output instead of blocking the run.
`make test` installs kcat (`make kcat-deps`), so its absence fails rather than skips.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass

import pytest

from .pyclients import Rec, consume_all, create_topic, produce, stored_codecs, unique_name

pytestmark = pytest.mark.timeout(300)

KCAT_TIMEOUT = 60.0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# Field separator of the -f formats below: no key, value or header here contains it.
SEP = "|"


@dataclass
class KcatResult:
    cmd: list[str]
    returncode: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (
            f"$ {shlex.join(self.cmd)}\nexit {self.returncode}\n"
            f"--- stdout\n{self.stdout[-6000:]}\n--- stderr\n{self.stderr[-6000:]}"
        )


def kcat_executable() -> str:
    exe = shutil.which("kcat")
    if exe is None:
        # Not a skip: `make test` installs Debian's kcat package, so its absence is a broken
        # set-up.
        pytest.fail("kcat is not installed: run `make kcat-deps`", pytrace=False)
    return exe


def kcat(
    bootstrap: str,
    *args: str,
    stdin: str | None = None,
    timeout: float = KCAT_TIMEOUT,
    check: bool = True,
) -> KcatResult:
    """Run `kcat -b bootstrap args...`; fail the test on a timeout or (with check) a non-zero
    exit, with the whole command and its output."""
    cmd = [kcat_executable(), "-b", bootstrap, *args]
    try:
        proc = subprocess.run(
            cmd,
            input=(stdin or "").encode(),
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:  # run() has killed kcat
        out = (e.stdout or b"").decode(errors="replace")
        err = (e.stderr or b"").decode(errors="replace")
        pytest.fail(
            KcatResult(cmd, -9, out, err).describe() + f"\n(killed after {timeout:.0f}s)",
            pytrace=False,
        )
    res = KcatResult(
        cmd,
        proc.returncode,
        proc.stdout.decode(errors="replace"),
        proc.stderr.decode(errors="replace"),
    )
    if check and res.returncode != 0:
        pytest.fail(res.describe(), pytrace=False)
    return res


def admin_create(bootstrap: str, topic: str, partitions: int) -> None:
    create_topic("confluent-kafka", bootstrap, topic, partitions)




# =========================================================================== metadata
def test_metadata_list(shared_broker):
    bs = shared_broker.bootstrap
    topic = unique_name("kcat-meta")
    admin_create(bs, topic, 3)

    res = kcat(bs, "-L", "-t", topic)
    lines = [ln.strip() for ln in res.stdout.splitlines()]
    assert "1 brokers:" in lines, res.describe()
    assert f"broker 0 at {bs} (controller)" in lines, res.describe()
    assert "1 topics:" in lines, res.describe()
    assert f'topic "{topic}" with 3 partitions:' in lines, res.describe()
    parts = [ln for ln in lines if ln.startswith("partition ")]
    assert parts == [f"partition {p}, leader 0, replicas: 0, isrs: 0" for p in range(3)], (
        res.describe()
    )

    # every topic: ours is among them, with its partition count
    every = kcat(bs, "-L")
    assert f'topic "{topic}" with 3 partitions:' in [
        ln.strip() for ln in every.stdout.splitlines()
    ], every.describe()


def test_metadata_json(shared_broker):
    bs = shared_broker.bootstrap
    topic = unique_name("kcat-json")
    admin_create(bs, topic, 3)

    res = kcat(bs, "-L", "-J", "-t", topic)
    meta = json.loads(res.stdout)
    assert meta["controllerid"] == 0, meta
    assert meta["originating_broker"]["id"] == 0, meta
    assert meta["brokers"] == [{"id": 0, "name": bs}], meta
    assert meta["query"] == {"topic": topic}, meta
    [t] = meta["topics"]
    assert t["topic"] == topic and "error" not in t, t
    assert t["partitions"] == [
        {"partition": p, "leader": 0, "replicas": [{"id": 0}], "isrs": [{"id": 0}]}
        for p in range(3)
    ], t

    every = json.loads(kcat(bs, "-L", "-J").stdout)
    assert meta["brokers"] == every["brokers"]
    assert topic in {t["topic"] for t in every["topics"]}

    # A topic that does not exist, asked for without auto-creation: an error, and still absent.
    missing = unique_name("kcat-missing")
    res = kcat(bs, "-L", "-J", "-t", missing, "-X", "allow.auto.create.topics=false")
    [t] = json.loads(res.stdout)["topics"]
    assert t["topic"] == missing and t["partitions"] == [], t
    assert t["error"] == "Broker: Unknown topic or partition", t
    every = json.loads(kcat(bs, "-L", "-J").stdout)
    assert missing not in {t["topic"] for t in every["topics"]}


# =========================================================================== produce
@pytest.mark.parametrize("codec", CODECS)
def test_produce_keys_headers(shared_broker, codec: str):
    bs = shared_broker.bootstrap
    topic = unique_name(f"kcat-produce-{codec}")
    admin_create(bs, topic, 3)
    # Long, compressible values so that every codec really compresses something.
    lines = [(f"key-{i % 7}", f"value-{i}:" + "abc" * (i * 5)) for i in range(60)]
    lines += [("", "empty-key"), ("empty-value", "")]
    stdin = "".join(f"{k}:{v}\n" for k, v in lines)
    headers = ["-H", "app=kcat", "-H", f"codec={codec}", "-H", "dup=1", "-H", "dup=2",
               "-H", "empty=", "-H", "novalue"]
    before = int(time.time() * 1000)
    # linger.ms: each partition's records in one batch, however slowly kcat runs (a batch sent
    # early with one short record is stored uncompressed: librdkafka sends a batch as is when
    # compressing would not make it smaller).
    kcat(bs, "-P", "-t", topic, "-K:", "-z", codec, "-X", "linger.ms=1000", *headers,
         stdin=stdin)
    after = int(time.time() * 1000)
    seen = stored_codecs(shared_broker.data_dir, topic)
    assert set(seen) == {CODEC_IDS[codec]}, f"codec ids of stored batches: {dict(seen)}"

    # -Z: an empty key or value is sent as null (a null key, a tombstone). (librdkafka stores
    # a batch this small uncompressed: compressing would not make it smaller.)
    kcat(bs, "-P", "-t", topic, "-K:", "-Z", "-p", "1", "-z", codec,
         stdin=":null-key\ntombstone:\n")

    n_parts, read = consume_all("kafka-python", bs, topic)
    assert n_parts == 3
    want_headers = (
        ("app", b"kcat"),
        ("codec", codec.encode()),
        ("dup", b"1"),
        ("dup", b"2"),
        ("empty", b""),
        ("novalue", None),
    )
    first = [r for r in read if r.rec.headers]
    got = Counter((r.rec.key, r.rec.value) for r in first)
    # the value keeps every ':' after the first (the key delimiter)
    assert got == Counter((k.encode(), v.encode()) for k, v in lines), got
    for r in first:
        assert r.rec.headers == want_headers, r
        assert r.create_time and before - 1000 <= r.rec.timestamp <= after + 1000, r
    # librdkafka's default partitioner hashes the key: one key, one partition, in stdin order
    by_key: dict[bytes | None, set[int]] = {}
    for r in first:
        by_key.setdefault(r.rec.key, set()).add(r.partition)
    assert all(len(ps) == 1 for ps in by_key.values()), by_key
    for p in range(3):
        in_p = [r for r in first if r.partition == p]
        assert [r.offset for r in in_p] == list(range(len(in_p))), in_p  # dense from 0
        keys_p = {r.rec.key for r in in_p}
        assert [r.rec.value for r in in_p] == [v.encode() for k, v in lines if k.encode() in keys_p]

    nulls = [(r.partition, r.rec.key, r.rec.value, r.rec.headers) for r in read
             if not r.rec.headers]
    assert nulls == [(1, None, b"null-key", ()), (1, b"tombstone", None, ())], nulls



# =========================================================================== consume
def _written_by_confluent(bs: str, topic: str) -> list[tuple[int, int, Rec]]:
    base_ts = int(time.time() * 1000) - 60_000
    recs = [
        Rec(
            key=f"k{i % 5}".encode(),
            value=f"v{i}".encode(),
            headers=(("seq", str(i).encode()), ("src", b"confluent")),
            timestamp=base_ts + i,
        )
        for i in range(30)
    ]
    acks = produce("confluent-kafka", bs, topic, "lz4", recs)
    assert len(acks) == len(recs)
    return acks


def test_consume_format_string(shared_broker):
    bs = shared_broker.bootstrap
    topic = unique_name("kcat-consume")
    admin_create(bs, topic, 3)
    acks = _written_by_confluent(bs, topic)
    assert {p for p, _, _ in acks} == {0, 1, 2}, "the keys should spread over all partitions"

    fmt = SEP.join(["%t", "%p", "%o", "%k", "%s", "%h", "%T", "%K", "%S"]) + "\\n"
    res = kcat(bs, "-C", "-t", topic, "-o", "beginning", "-e", "-f", fmt)
    got = sorted(
        (int(p), int(o), t, k, s, h, int(ts), int(klen), int(slen))
        for t, p, o, k, s, h, ts, klen, slen in (
            ln.split(SEP) for ln in res.stdout.splitlines()
        )
    )
    want = sorted(
        (
            p,
            o,
            topic,
            r.key.decode(),
            r.value.decode(),
            ",".join(f"{hk}={hv.decode()}" for hk, hv in r.headers),
            r.timestamp,
            len(r.key),
            len(r.value),
        )
        for p, o, r in acks
    )
    assert got == want, res.describe()

    # -J: one JSON object per record
    res = kcat(bs, "-C", "-t", topic, "-o", "beginning", "-e", "-J")
    objs = [json.loads(ln) for ln in res.stdout.splitlines()]
    got_json = sorted(
        (o["partition"], o["offset"], o["key"], o["payload"], tuple(o["headers"]), o["ts"],
         o["tstype"])
        for o in objs
    )
    want_json = sorted(
        (p, o, r.key.decode(), r.value.decode(),
         tuple(x for hk, hv in r.headers for x in (hk, hv.decode())), r.timestamp, "create")
        for p, o, r in acks
    )
    assert got_json == want_json, res.describe()


def test_consume_slice_of_one_partition(shared_broker):
    bs = shared_broker.bootstrap
    topic = unique_name("kcat-slice")
    admin_create(bs, topic, 3)
    acks = _written_by_confluent(bs, topic)
    p1 = sorted((o, r) for p, o, r in acks if p == 1)
    assert len(p1) >= 4, "partition 1 needs a few records for this test"

    res = kcat(bs, "-C", "-t", topic, "-p", "1", "-o", "2", "-c", "2", "-f", "%p %o %s\\n")
    assert res.stdout.splitlines() == [f"1 {o} {r.value.decode()}" for o, r in p1[2:4]], (
        res.describe()
    )
    # from offset 2 to the end of partition 1
    res = kcat(bs, "-C", "-t", topic, "-p", "1", "-o", "2", "-e", "-f", "%o\\n")
    assert [int(x) for x in res.stdout.split()] == [o for o, _ in p1[2:]], res.describe()


# =========================================================================== isolation
def test_isolation_levels(shared_broker):
    from confluent_kafka import Producer

    bs = shared_broker.bootstrap
    topic = unique_name("kcat-txn")
    admin_create(bs, topic, 2)
    p = Producer(
        {
            "bootstrap.servers": bs,
            "transactional.id": unique_name("kcat-txn-id"),
            "transaction.timeout.ms": 30000,
            "linger.ms": 5,
        }
    )
    acked: dict[str, tuple[int, int]] = {}

    def on_delivery(err, msg) -> None:
        assert err is None, err
        acked[msg.value().decode()] = (msg.partition(), msg.offset())

    def txn(prefix: str, n: int, commit: bool) -> list[str]:
        values = [f"{prefix}-{i}" for i in range(n)]
        p.begin_transaction()
        for i, v in enumerate(values):
            p.produce(topic, value=v.encode(), key=f"k{i}".encode(), partition=i % 2,
                      on_delivery=on_delivery)
        p.flush(20)  # the records reach the log before the transaction ends
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
        return values

    p.init_transactions(20)
    aborted = txn("aborted-1", 4, commit=False)
    committed = txn("committed", 5, commit=True)
    # an aborted transaction (and its marker) last in both partitions: -e must still find the
    # end of each partition in read_committed
    aborted += txn("aborted-2", 2, commit=False)
    assert set(acked) == set(aborted) | set(committed)

    def read(*extra: str) -> list[tuple[int, int, str]]:
        res = kcat(bs, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%p %o %s\\n", *extra)
        out = []
        for ln in res.stdout.splitlines():
            part, off, value = ln.split(" ")
            out.append((int(part), int(off), value))
        return sorted(out)

    def expect(values: list[str]) -> list[tuple[int, int, str]]:
        return sorted((*acked[v], v) for v in values)

    assert read("-X", "isolation.level=read_committed") == expect(committed)
    assert read("-X", "isolation.level=read_uncommitted") == expect(aborted + committed)
    # librdkafka's default is read_committed
    assert read() == expect(committed)
