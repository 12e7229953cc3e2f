"""End-to-end exactly-once with Samsa and Spark Structured Streaming.

    transactional producers (librdkafka) -> Samsa topic `in`
        -> Spark (Kafka source, kafka.isolation.level=read_committed, failOnDataLoss=true)
        -> (A) a Samsa topic `out` through Spark's Kafka sink (idempotent producer)
        -> (B) a JSON file sink with a checkpoint: stopped mid-way, restarted from the checkpoint

and the checks: the file sink holds every committed record exactly once (and nothing from an
aborted or still-open transaction), with the offsets the broker gave; `out` holds the same
records (Spark's Kafka sink is at-least-once by design, but in a run without failures every
record must be there exactly once); a read_uncommitted batch read does see the aborted data.

Run it against a broker of your own:

    make run                                   # Samsa on 127.0.0.1:9092, in another terminal
    .venv/bin/python examples/spark_exactly_once.py --bootstrap 127.0.0.1:9092

or let it start a throw-away broker (`samsa serve` from this virtualenv):

    .venv/bin/python examples/spark_exactly_once.py

The Spark Kafka connector jars come from `make spark-deps` (.cache/spark-<pyspark version>/jars,
or --jars DIR). tests/spark/test_example.py runs `run_pipeline` in the test suite's session.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 30.0
PARTITIONS = 3
OFFSET_FETCHING_CONF = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"


# ----------------------------------------------------------------------------- the writer
@dataclass
class Written:
    """What was written to `in`: id -> (partition, offset), split by fate."""

    committed: dict[str, tuple[int, int]] = field(default_factory=dict)
    invisible: dict[str, tuple[int, int]] = field(default_factory=dict)  # aborted or open
    headers: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)


class TxnWriter:
    def __init__(self, bootstrap: str, topic: str, txn_id: str | None) -> None:
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
        if txn_id is None:
            conf["enable.idempotence"] = True  # plain, idempotent, non-transactional
        else:
            conf.update({"transactional.id": txn_id, "transaction.timeout.ms": 120000})
        self.p = Producer(conf)
        self.topic = topic
        self.transactional = txn_id is not None
        if self.transactional:
            self.p.init_transactions(TIMEOUT_S)

    def send(self, items: list[tuple[str, int, list[tuple[str, bytes]]]],
             kind: str) -> dict[str, tuple[int, int]]:
        """items: (id, partition, headers). Returns id -> (partition, offset)."""
        placed: dict[str, tuple[int, int]] = {}
        errors: list[str] = []
        for rid, partition, headers in items:
            value = json.dumps({"id": rid, "kind": kind}).encode()

            def cb(err: Any, msg: Any, rid: str = rid) -> None:
                if err is not None:
                    errors.append(f"{rid}: {err}")
                else:
                    placed[rid] = (msg.partition(), msg.offset())

            self.p.produce(self.topic, value, rid.encode(), partition=partition,
                           headers=headers or None, on_delivery=cb)
        if self.p.flush(TIMEOUT_S) != 0 or errors:
            raise RuntimeError(f"produce failed: {errors}")
        return placed


def new_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:12]}"


def items(kind: str, n: int, first_partition: int = 0,
          with_headers: bool = False) -> list[tuple[str, int, list[tuple[str, bytes]]]]:
    out = []
    for i in range(n):
        rid = new_id(kind)
        headers = [("kind", kind.encode()), ("i", str(i).encode())] if with_headers else []
        out.append((rid, (first_partition + i) % PARTITIONS, headers))
    return out


class Scenario:
    """The writes of spark-connector.md §5, step 2."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        u = uuid.uuid4().hex[:8]
        self.w = Written()
        self.p1 = TxnWriter(bootstrap, topic, f"eos-p1-{u}")
        self.p2 = TxnWriter(bootstrap, topic, f"eos-p2-{u}")
        self.p3 = TxnWriter(bootstrap, topic, f"eos-p3-{u}")
        self.plain = TxnWriter(bootstrap, topic, None)
        self.lso_probe: tuple[str, str] | None = None

    def _txn(self, p: TxnWriter, its: list[tuple[str, int, list[tuple[str, bytes]]]],
             kind: str, commit: bool) -> None:
        p.p.begin_transaction()
        placed = p.send(its, kind)
        if commit:
            p.p.commit_transaction(TIMEOUT_S)
            self.w.committed.update(placed)
        else:
            p.p.abort_transaction(TIMEOUT_S)
            self.w.invisible.update(placed)
        self.w.headers.update({rid: h for rid, _, h in its})

    def write_main(self) -> None:
        self._txn(self.p1, items("t1", 5, with_headers=True), "committed", True)   # T1
        self._txn(self.p1, items("t2", 5, with_headers=True), "aborted", False)    # T2
        its = items("plain", 4, first_partition=1)
        self.w.committed.update(self.plain.send(its, "plain"))                     # plain
        self.w.headers.update({rid: h for rid, _, h in its})
        for i in range(3):                                                         # back to back
            self._txn(self.p1, items(f"single{i}", 1, first_partition=i), "committed", True)
        its = items("plain2", 2, first_partition=2)                                # interleaved
        self.w.committed.update(self.plain.send(its, "plain"))
        self.w.headers.update({rid: h for rid, _, h in its})

    def open_lso_probe(self) -> None:
        """P1 begins a transaction and writes x; P2 then writes y after x in the same partition
        and commits. The LSO of partition 0 is stuck at x: neither may be visible yet."""
        x, y = items("x", 1), items("y", 1)
        self.p1.p.begin_transaction()
        self.w.invisible.update(self.p1.send(x, "open-then-aborted"))
        self.w.headers[x[0][0]] = []
        self._txn(self.p2, y, "committed-behind-open", True)
        self.w.invisible[y[0][0]] = self.w.committed.pop(y[0][0])
        self.lso_probe = (x[0][0], y[0][0])

    def close_lso_probe(self) -> None:
        """P1 aborts x: y becomes visible, x never does."""
        assert self.lso_probe is not None
        self.p1.p.abort_transaction(TIMEOUT_S)
        y = self.lso_probe[1]
        self.w.committed[y] = self.w.invisible.pop(y)

    def leave_one_open(self) -> None:
        its = items("open", 2, first_partition=1)
        self.p3.p.begin_transaction()
        self.w.invisible.update(self.p3.send(its, "open"))
        self.w.headers.update({rid: [] for rid, _, _ in its})

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.p3.p.abort_transaction(TIMEOUT_S)


# ----------------------------------------------------------------------------- Spark side
def source(spark: Any, bootstrap: str, topic: str, **extra: object) -> Any:
    opts: dict[str, object] = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "kafka.isolation.level": "read_committed",
        "failOnDataLoss": "true",
        "includeHeaders": "true",
        "kafkaConsumer.pollTimeoutMs": 10000,
        "fetchOffset.numRetries": 2,
        "kafka.metadata.max.age.ms": 1000,
        "kafka.request.timeout.ms": 15000,
        "kafka.default.api.timeout.ms": 15000,
    }
    opts.update(extra)
    return spark.readStream.format("kafka").options(**{k: str(v) for k, v in opts.items()}).load()


def batch_ids(spark: Any, bootstrap: str, topic: str, isolation: str) -> list[str]:
    df = (spark.read.format("kafka")
          .option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("kafka.isolation.level", isolation).option("failOnDataLoss", "true")
          .option("kafkaConsumer.pollTimeoutMs", "10000").load())
    return [json.loads(bytes(r["value"]))["id"] for r in df.select("value").collect()]


def await_done(q: Any, timeout_s: float = 180) -> None:
    if not q.awaitTermination(timeout_s):
        q.stop()
        raise RuntimeError(f"query {q.id} did not finish in {timeout_s}s: {q.lastProgress}")
    if q.exception() is not None:
        raise RuntimeError(f"query {q.id} failed: {q.exception()}")


@dataclass
class Result:
    written: Written
    lso_probe_visible: list[str]          # ids visible to read_committed while x was open
    lso_probe_expected: list[str]         # the ids committed before x
    uncommitted_ids: list[str]            # a read_uncommitted batch read
    file_rows: list[dict[str, Any]]       # job B: id, partition, offset, headers
    kafka_out: list[dict[str, Any]]       # job A: what `out` holds (id, headers)
    end_offsets: dict[str, int]           # job B's last endOffset per partition
    expected_end_offsets: dict[str, int]  # the LSO per partition (open txn) / log end

    def problems(self) -> list[str]:
        """Every way in which the run is not exactly-once; empty when it is."""
        p: list[str] = []
        c, a = self.written.committed, self.written.invisible
        if Counter(self.lso_probe_visible) != Counter(self.lso_probe_expected):
            p.append(f"read_committed while a txn was open: saw {sorted(self.lso_probe_visible)}"
                     f", expected {sorted(self.lso_probe_expected)}")
        for sink, out in (("file sink", self.file_rows), ("kafka sink", self.kafka_out)):
            ids = Counter(r["id"] for r in out)
            if ids != Counter(list(c)):
                p.append(f"{sink}: missing {sorted(set(c) - set(ids))}, unexpected "
                         f"{sorted(set(ids) - set(c))}, duplicated "
                         f"{sorted(k for k, n in ids.items() if n > 1)}")
            for r in out:
                if r["id"] in c and r["headers"] != self.written.headers[r["id"]]:
                    p.append(f"{sink}: headers of {r['id']}: {r['headers']}")
        for r in self.file_rows:  # the Kafka sink's output has new offsets
            if r["id"] in c and (r["partition"], r["offset"]) != c[r["id"]]:
                p.append(f"file sink: {r['id']} at {(r['partition'], r['offset'])}, "
                         f"written at {c[r['id']]}")
        if not set(a) <= set(self.uncommitted_ids):
            p.append("read_uncommitted did not see the aborted/open records (vacuous test): "
                     f"{sorted(set(a) - set(self.uncommitted_ids))}")
        if Counter(self.uncommitted_ids) != Counter(list(c) + list(a)):
            p.append("read_uncommitted batch read is not exactly committed + aborted + open")
        if self.end_offsets != self.expected_end_offsets:
            p.append(f"end offsets {self.end_offsets} != LSOs {self.expected_end_offsets}")
        return p


def headers_of(row: Any) -> list[tuple[str, bytes]]:
    return [(h["key"], bytes(h["value"])) for h in (row["headers"] or [])]


def run_pipeline(spark: Any, bootstrap: str, work_dir: Path, *, in_topic: str | None = None,
                 out_topic: str | None = None) -> Result:
    u = uuid.uuid4().hex[:8]
    in_topic, out_topic = in_topic or f"eos-in-{u}", out_topic or f"eos-out-{u}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(in_topic, PARTITIONS, 1),
                                  NewTopic(out_topic, PARTITIONS, 1)]).values():
        f.result(timeout=TIMEOUT_S)

    sc = Scenario(bootstrap, in_topic)
    try:
        sc.write_main()
        probe_expected = list(sc.w.committed)
        sc.open_lso_probe()
        probe = batch_ids(spark, bootstrap, in_topic, "read_committed")
        sc.close_lso_probe()
        sc.leave_one_open()
        uncommitted = batch_ids(spark, bootstrap, in_topic, "read_uncommitted")

        # Job A: stream -> Samsa topic `out` (Spark's Kafka sink, default idempotent producer)
        qa = (
            source(spark, bootstrap, in_topic, maxOffsetsPerTrigger=3)
            .selectExpr("key", "value", "headers")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic)
            .option("checkpointLocation", str(work_dir / "ck-kafka"))
            .trigger(availableNow=True).start()
        )
        await_done(qa)

        # Job B: stream -> JSON files, stopped after two micro-batches, then restarted from
        # its checkpoint until everything available was read.
        def job_b() -> Any:
            return (
                source(spark, bootstrap, in_topic, maxOffsetsPerTrigger=3)
                .selectExpr("cast(value AS string) AS value", "partition", "offset", "headers")
                .writeStream.format("json")
                .option("path", str(work_dir / "files"))
                .option("checkpointLocation", str(work_dir / "ck-files"))
            )

        # Stopped between two triggers: a stop during a micro-batch whose offsets were already
        # logged makes the restart replay that batch, and Spark 4.1's Kafka source then fails
        # in its progress metrics (NullPointerException in KafkaMicroBatchStream.metrics: the
        # latest offsets are only known for batches it planned itself), whatever the broker.
        qb = job_b().trigger(processingTime="2 seconds").start()
        deadline = time.monotonic() + 120
        while qb.isActive and time.monotonic() < deadline and (
                qb.lastProgress is None or qb.lastProgress["batchId"] < 1
                or qb.status["isTriggerActive"]):
            time.sleep(0.05)
        qb.stop()
        if qb.exception() is not None:
            raise RuntimeError(f"job B (first run) failed: {qb.exception()}")
        qb = job_b().trigger(availableNow=True).start()
        await_done(qb)
        # Spark's own JSON: PySpark 4's progress objects give a source's offsets as the str()
        # of a Python dict.
        end = json.loads(qb.recentProgress[-1].json)["sources"][0]["endOffset"]

        files = spark.read.schema(
            "value string, partition int, offset long, "
            "headers array<struct<key:string,value:binary>>"
        ).json(str(work_dir / "files")).collect()
        file_rows = [
            {"id": json.loads(r["value"])["id"], "partition": r["partition"],
             "offset": r["offset"], "headers": headers_of(r)}
            for r in files
        ]
        out = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", out_topic).option("includeHeaders", "true").load()
               .collect())
        kafka_out = [{"id": json.loads(bytes(r["value"]))["id"], "headers": headers_of(r)}
                     for r in out]
        expected_end = lso_per_partition(bootstrap, in_topic, sc)
        return Result(sc.w, probe, probe_expected, uncommitted, file_rows, kafka_out,
                      {k: int(v) for k, v in end[in_topic].items()}, expected_end)
    finally:
        sc.close()


def lso_per_partition(bootstrap: str, topic: str, sc: Scenario) -> dict[str, int]:
    """The log end of every partition (read_uncommitted watermark), except that a partition
    holding the still-open transaction is stable only up to that transaction's first offset."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-watermarks",
                  "isolation.level": "read_uncommitted"})
    try:
        out = {str(p): c.get_watermark_offsets(TopicPartition(topic, p), TIMEOUT_S)[1]
               for p in range(PARTITIONS)}
    finally:
        c.close()
    for rid, (p, off) in sc.w.invisible.items():
        if rid.startswith("open-"):
            out[str(p)] = min(out[str(p)], off)
    return out


# ----------------------------------------------------------------------------- standalone run
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def throwaway_broker() -> Iterator[str]:
    samsa = Path(sys.executable).parent / "samsa"
    cmd = [str(samsa)] if samsa.exists() else [shutil.which("samsa") or "samsa"]
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="samsa-example-") as d:
        proc = subprocess.Popen(cmd + ["serve", "--listen", f"127.0.0.1:{port}", "--data-dir",
                                       str(Path(d) / "data"), "--set",
                                       "group.initial.rebalance.delay.ms=0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(OSError), socket.create_connection(
                        ("127.0.0.1", port), timeout=0.5):
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("samsa did not start")
                time.sleep(0.1)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(30)


def spark_session(jar_dir: Path | None) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    import pyspark
    from pyspark.sql import SparkSession

    jar_dir = jar_dir or REPO_ROOT / ".cache" / f"spark-{pyspark.__version__}" / "jars"
    jars = sorted(jar_dir.glob("*.jar"))
    if len(jars) < 4:
        raise SystemExit(f"connector jars missing in {jar_dir}: run `make spark-deps`")
    spark = (SparkSession.builder.master("local[2]").appName("samsa-exactly-once")
             .config("spark.jars", ",".join(map(str, jars)))
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", help="a running broker; default: start a throw-away one")
    ap.add_argument("--jars", type=Path, help="directory of the Spark Kafka connector jars")
    ap.add_argument("--work", type=Path, help="checkpoints and output (default: a temp dir)")
    ap.add_argument("--deprecated-offset-fetching", action="store_true",
                    help=f"set {OFFSET_FETCHING_CONF}=true (consumer-group offset reader)")
    args = ap.parse_args(argv)

    spark = spark_session(args.jars)
    if args.deprecated_offset_fetching:
        spark.conf.set(OFFSET_FETCHING_CONF, "true")
    try:
        with contextlib.ExitStack() as stack:
            bootstrap = args.bootstrap or stack.enter_context(throwaway_broker())
            work = args.work or Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix="spark-eos-")))
            result = run_pipeline(spark, bootstrap, work)
    finally:
        spark.stop()
    problems = result.problems()
    c, a = result.written.committed, result.written.invisible
    print(f"committed records: {len(c)}; aborted/open records: {len(a)}")
    print(f"file sink rows: {len(result.file_rows)}; kafka sink records: {len(result.kafka_out)}")
    print(f"end offsets: {result.end_offsets} (LSOs {result.expected_end_offsets})")
    for p in problems:
        print("PROBLEM:", p)
    print("exactly-once: OK" if not problems else "exactly-once: FAILED")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
