"""Helpers for the Spark tests: connector jars, Kafka options, topics, producers, queries."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

REPO_ROOT = Path(__file__).resolve().parents[2]
OFFSET_FETCHING_CONF = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
QUERY_TIMEOUT_S = 120
TIMEOUT_S = 20.0
# The four artifacts Spark's Kafka source/sink need beyond what pyspark/jars already holds.
CONNECTOR_ARTIFACTS = (
    "spark-sql-kafka-0-10_",
    "spark-token-provider-kafka-0-10_",
    "kafka-clients-",
    "commons-pool2-",
)


def connector_jars() -> list[Path]:
    """The connector jars of the installed pyspark's exact version (see tests/spark/pom.xml)."""
    import pyspark

    configured = os.environ.get("SAMSA_SPARK_JARS")
    jar_dir = (
        Path(configured)
        if configured
        else REPO_ROOT / ".cache" / f"spark-{pyspark.__version__}" / "jars"
    )
    jars = sorted(jar_dir.glob("*.jar"))
    missing = [a for a in CONNECTOR_ARTIFACTS if not any(j.name.startswith(a) for j in jars)]
    if missing:
        raise RuntimeError(
            f"Spark Kafka connector jars for pyspark {pyspark.__version__} missing in {jar_dir} "
            f"({', '.join(missing)}): run `make spark-deps`"
        )
    for j in jars:
        if j.name.startswith("spark-sql-kafka") and pyspark.__version__ not in j.name:
            raise RuntimeError(f"{j} does not match pyspark {pyspark.__version__}")
    return jars


def source_options(bootstrap: str, **extra: object) -> dict[str, str]:
    """Options every test source uses: fail fast (small poll timeout) and never hide data loss."""
    opts: dict[str, object] = {
        "kafka.bootstrap.servers": bootstrap,
        "kafkaConsumer.pollTimeoutMs": 10000,
        "fetchOffset.numRetries": 2,
        "fetchOffset.retryIntervalMs": 200,
        "kafka.metadata.max.age.ms": 1000,
        "kafka.request.timeout.ms": 15000,
        "kafka.default.api.timeout.ms": 15000,
        "failOnDataLoss": "true",
    }
    opts.update(extra)
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in opts.items()}


# ----------------------------------------------------------------------------- topics / data
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, partitions: dict[str, int], replication: int = 1) -> None:
    client = admin(bootstrap)  # must outlive the futures
    futures = client.create_topics(
        [NewTopic(t, n, replication) for t, n in partitions.items()], operation_timeout=10
    )
    for f in futures.values():
        f.result(timeout=TIMEOUT_S)


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    client = admin(bootstrap)
    futures = client.create_partitions([NewPartitions(topic, total)])
    futures[topic].result(timeout=TIMEOUT_S)


Header = tuple[str, bytes | None]


class Rec:
    """One record as produced, and as the test expects Spark to return it."""

    def __init__(
        self,
        topic: str,
        partition: int,
        value: bytes,
        key: bytes | None = None,
        headers: Sequence[Header] = (),
        timestamp_ms: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.value = value
        self.key = key
        self.headers = list(headers)
        self.timestamp_ms = timestamp_ms
        self.offset = -1  # filled in from the delivery report

    def row(self) -> tuple[str, int, int, bytes | None, bytes]:
        return (self.topic, self.partition, self.offset, self.key, self.value)


def produce(bootstrap: str, records: Iterable[Rec], **conf: object) -> list[Rec]:
    """Plain (non-transactional) writes, acks=all, in order; fills in each record's offset."""
    recs = list(records)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", **conf})
    errors: list[str] = []

    def report(rec: Rec):  # noqa: ANN202
        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                rec.offset = msg.offset()

        return cb

    for r in recs:
        kwargs: dict[str, Any] = {}
        if r.timestamp_ms is not None:
            kwargs["timestamp"] = r.timestamp_ms
        if r.headers:
            kwargs["headers"] = r.headers
        p.produce(r.topic, r.value, r.key, partition=r.partition, on_delivery=report(r), **kwargs)
    left = p.flush(TIMEOUT_S)
    assert left == 0 and not errors, f"produce failed: {left} undelivered, errors {errors}"
    return recs


def values_of(rows: Iterable[Any]) -> list[bytes]:
    return [bytes(r["value"]) for r in rows]


def kafka_rows(rows: Iterable[Any]) -> list[tuple[str, int, int, bytes | None, bytes]]:
    """(topic, partition, offset, key, value) of Spark rows, sorted."""
    out = [
        (
            r["topic"],
            r["partition"],
            r["offset"],
            None if r["key"] is None else bytes(r["key"]),
            bytes(r["value"]),
        )
        for r in rows
    ]
    return sorted(out)


def expected_rows(recs: Iterable[Rec]) -> list[tuple[str, int, int, bytes | None, bytes]]:
    return sorted(r.row() for r in recs)


# ----------------------------------------------------------------------------- queries
def run_available_now(
    df: Any,
    *,
    fmt: str = "memory",
    name: str | None = None,
    checkpoint: Path | None = None,
    path: Path | None = None,
    options: dict[str, str] | None = None,
    timeout_s: float = QUERY_TIMEOUT_S,
) -> Any:
    """Run a streaming query with Trigger.AvailableNow to its end; returns the stopped query
    (its recentProgress is still readable). Raises the query's own exception if it failed."""
    w = df.writeStream.format(fmt).trigger(availableNow=True)
    if name:
        w = w.queryName(name)
    if checkpoint is not None:
        w = w.option("checkpointLocation", str(checkpoint))
    if path is not None:
        w = w.option("path", str(path))
    for k, v in (options or {}).items():
        w = w.option(k, v)
    q = w.start()
    return await_query(q, timeout_s)


def await_query(q: Any, timeout_s: float = QUERY_TIMEOUT_S) -> Any:
    finished = q.awaitTermination(timeout_s)
    if not finished:
        q.stop()
        raise AssertionError(
            f"query {q.name or q.id} did not finish within {timeout_s}s; "
            f"last progress: {q.lastProgress}"
        )
    exc = q.exception()
    if exc is not None:
        raise AssertionError(f"query {q.name or q.id} failed: {exc}")
    return q


def progress(q: Any) -> list[dict[str, Any]]:
    """q.recentProgress as plain dicts parsed from Spark's own JSON. (PySpark 4's
    StreamingQueryProgress turns a source's offsets into the str() of a Python dict.)"""
    out = []
    for p in q.recentProgress:
        text = getattr(p, "json", None)
        out.append(json.loads(text) if isinstance(text, str) else dict(p))
    return out


def data_progress(q: Any) -> list[dict[str, Any]]:
    """Progress entries of the micro-batches that read at least one Kafka offset range."""
    return [p for p in progress(q) if p["numInputRows"] > 0]


def source_end_offsets(q: Any) -> dict[str, dict[str, int]]:
    """endOffset of the query's (only) source after its last batch, as {topic: {part: off}}."""
    end = progress(q)[-1]["sources"][0]["endOffset"]
    return json.loads(end) if isinstance(end, str) else end


def wait_until(cond: Any, timeout_s: float = TIMEOUT_S, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)
