"""The rows of issue 51's item 5 the full bench lacked, Samsa beside Kafka 4.x: TLS produce and
consume of 1 KiB records, lz4-compressed produce of JSON-like 1 KiB records, and 16
transactional producers committing 10-record transactions in parallel.

bench/run.py runs them as its `--tls-records`, `--lz4-records` and `--txn-producers` phases
(on a broker started for them with an SSL listener beside its PLAINTEXT one); alone:

    .venv/bin/python bench/tls_lz4_txn.py --runs 1      # Samsa and Kafka, alternating

The figure to compare on a loaded machine is the broker's CPU per GB (or per transaction):
a rate moves with whatever else runs. Not a test: nothing asserts on speed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from run import (
    MIB,
    Broker,
    Failures,
    Outcome,
    Results,
    cleanup,
    cpu_seconds,
    create_topic,
    ensure_kafka_lib,
    free_port,
    measured,
    median,
    rdkafka_consume,
    running,
)

TLS_SIZE = 1024


@dataclass
class Rows:
    """What the phases send: 0 skips a phase."""

    tls_records: int = 0  # 1 KiB records produced over TLS, then consumed (each pass)
    lz4_records: int = 0  # JSON-like 1 KiB records, lz4-compressed by the producer
    txn_producers: int = 0  # transactional producers committing 10-record transactions ...
    txn_seconds: float = 20  # ... for this long


# ------------------------------------------------------------------ TLS


def make_certificate(work: Path) -> Path:
    """A self-signed certificate for 127.0.0.1 and its unencrypted PKCS#8 key in one PEM file
    (a PEM key store both brokers read: Kafka's ssl.keystore.type=PEM)."""
    key, cert = work / "key.pem", work / "cert.pem"
    try:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True,
        )  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as e:  # the runner reports a RuntimeError
        raise RuntimeError(f"openssl could not make the bench's certificate: {e}") from e
    both = work / "broker.pem"
    both.write_text(key.read_text() + cert.read_text())
    return both


def tls_settings(pem: Path, port: int, ssl_port: int, kafka: bool) -> tuple[str, ...]:
    """A PLAINTEXT listener on `port` and an SSL one on `ssl_port`, the same for both brokers.
    Kafka's lines come after start_kafka's in its server.properties, so they win: its
    listeners also name its KRaft controller's, on a port of our choosing."""
    listeners = f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}"
    common = ("ssl.keystore.type=PEM", f"ssl.keystore.location={pem}")
    if not kafka:
        return (f"listeners={listeners}", *common)
    cport = free_port()
    return (f"listeners={listeners},CONTROLLER://127.0.0.1:{cport}",
            f"advertised.listeners={listeners}",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{cport}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
            *common)  # fmt: skip


def tls_conf(ssl_port: int, pem: Path) -> dict[str, object]:
    return {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
            "ssl.ca.location": str(pem)}


# ------------------------------------------------------------------ loads


def produce(conf: dict[str, object], topic: str, payloads: list[bytes], n: int) -> Outcome:
    """`n` records cycling through `payloads`, acks=all, as bench/run.py's rdkafka_produce."""
    conf = {"acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False, **conf}
    failed: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None and len(failed) < 5:
            failed.append(str(err))

    p = Producer(conf)
    k, size = len(payloads), sum(map(len, payloads)) / len(payloads)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payloads[i % k], on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(600)
    elapsed = time.perf_counter() - t0
    if left or failed:
        return Outcome(error=f"{left} undelivered; errors: {failed}",
                       command=f"confluent_kafka.Producer({conf}) x{n} to {topic}")
    return Outcome({"rps": n / elapsed, "mbps": n * size / elapsed / MIB})


def json_records(count: int, size: int, seed: int = 51) -> list[bytes]:
    """`count` JSON objects of about `size` bytes: an order event with repeated key names,
    small numbers, ids, timestamps and a free-text note, as a service's events look (lz4
    compresses them some 2-3x, not the 100x of a repeated random payload)."""
    rng = random.Random(seed)
    words = ("order shipped pending paid refund express warehouse customer priority note "
             "retry gift coupon standard region north south east west").split()
    out = []
    for i in range(count):
        items = [{"sku": f"SKU-{rng.randrange(10**6):06d}", "qty": rng.randrange(1, 9),
                  "price": round(rng.uniform(1, 500), 2)} for _ in range(rng.randrange(2, 5))]
        event = {"id": f"{rng.getrandbits(64):016x}", "type": rng.choice(words),
                 "ts": 1_796_000_000_000 + i * 37, "customer": rng.randrange(10**7),
                 "region": rng.choice(words[-4:]), "items": items, "note": ""}
        raw = json.dumps(event, separators=(",", ":"))
        note = " ".join(rng.choice(words) for _ in range(200))
        event["note"] = note[: max(0, size - len(raw))]
        out.append(json.dumps(event, separators=(",", ":")).encode())
    return out


def parallel_transactions(bootstrap: str, topic: str, producers: int, seconds: float,
                          per_txn: int = 10, size: int = 100) -> Outcome:
    """`producers` transactional producers (threads; librdkafka waits without the GIL), each
    beginning, producing `per_txn` records to its own partition and committing, back to back
    for `seconds`."""
    counts = [0] * producers
    errors: list[str] = []
    window = [0.0, 0.0]  # start, stop: set as the barrier opens, before any producer reads it

    def open_window() -> None:
        window[0] = time.monotonic()
        window[1] = window[0] + seconds

    start = threading.Barrier(producers + 1, action=open_window)
    payload = os.urandom(size)

    def worker(i: int) -> None:
        try:
            p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                          "transactional.id": f"bench-par-{topic}-{i}"})
            p.init_transactions(60)
            start.wait(120)
            while time.monotonic() < window[1]:
                p.begin_transaction()
                for _ in range(per_txn):
                    p.produce(topic, payload, partition=i)
                p.commit_transaction(60)
                counts[i] += 1
        except (KafkaException, threading.BrokenBarrierError) as e:
            errors.append(f"producer {i}: {e}")
            start.abort()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(producers)]
    for t in threads:
        t.start()
    try:
        start.wait(120)
    except threading.BrokenBarrierError:
        pass
    for t in threads:
        t.join(seconds + 120)
    elapsed = time.monotonic() - window[0]
    if errors:
        return Outcome(error="; ".join(errors[:3]),
                       command=f"{producers} transactional producers x {per_txn} records")
    return Outcome({"tps": sum(counts) / elapsed, "count": float(sum(counts))})


# ------------------------------------------------------------------ phases


def bench_tls(broker: Broker, ssl_port: int, pem: Path, n: int, results: Results,
              failures: Failures) -> None:
    conf = tls_conf(ssl_port, pem)
    topic = f"bench-tls-{time.time_ns()}"
    create_topic(broker.bootstrap, topic)
    payload = [os.urandom(TLS_SIZE)]
    measured(broker, "produce rdkafka TLS 1024B", n * TLS_SIZE,
             lambda: produce(conf, topic, payload, n), results, failures)
    passes = 3
    # One consumer first, not measured: its FindCoordinator makes the broker create
    # __consumer_offsets (both brokers), a one-off cost the row is not about.
    warm = rdkafka_consume(str(conf["bootstrap.servers"]), topic, min(n, 1000), TLS_SIZE,
                           extra=conf)
    if warm.error:
        failures.append({"broker": broker.name, "phase": "consume rdkafka TLS warm-up",
                         "command": warm.command, "error": warm.error})
        return
    measured(broker, "consume rdkafka TLS 1024B", n * TLS_SIZE * passes,
             lambda: rdkafka_consume(conf["bootstrap.servers"], topic, n, TLS_SIZE,  # type: ignore[arg-type]
                                     extra=conf, passes=passes),
             results, failures)


def bench_lz4(broker: Broker, n: int, results: Results, failures: Failures) -> None:
    topic = f"bench-lz4-{time.time_ns()}"
    create_topic(broker.bootstrap, topic)
    payloads = json_records(1000, 1024)
    volume = n * sum(map(len, payloads)) // len(payloads)  # uncompressed bytes
    conf: dict[str, object] = {"bootstrap.servers": broker.bootstrap, "compression.type": "lz4"}
    measured(broker, "produce rdkafka lz4 JSON 1KiB", volume,
             lambda: produce(conf, topic, payloads, n), results, failures)


def bench_parallel_txn(broker: Broker, producers: int, seconds: float, results: Results,
                       failures: Failures) -> None:
    topic = f"bench-txn{producers}-{time.time_ns()}"
    create_topic(broker.bootstrap, topic, producers)
    label = f"txn rdkafka {producers}x10-record"
    cpu0 = cpu_seconds(broker.proc.pid)
    measured(broker, label, 0,
             lambda: parallel_transactions(broker.bootstrap, topic, producers, seconds),
             results, failures)
    done = results.get(f"{label}|count")
    if done and len(done) > len(results.get(f"{label}|cpu_ms_per_tx", [])):
        per_tx = 1000 * (cpu_seconds(broker.proc.pid) - cpu0) / max(1.0, done[-1])
        results.setdefault(f"{label}|cpu_ms_per_tx", []).append(per_tx)


def bench_rows(name: str, kafka_lib: Path | None, rows: Rows, results: Results,
               failures: Failures) -> None:
    """One broker started for these rows (with an SSL listener), then each phase on it."""
    certs = Path(tempfile.mkdtemp(prefix="samsa-bench-tls-"))
    try:
        pem = make_certificate(certs)
        port, ssl_port = free_port(), free_port()
        settings = tls_settings(pem, port, ssl_port, kafka_lib is not None)
        with running(name, kafka_lib, settings, port) as broker:
            warm = f"warmup-{time.time_ns()}"  # JIT for Kafka, imports for Samsa: not measured
            create_topic(broker.bootstrap, warm)
            produce({"bootstrap.servers": broker.bootstrap}, warm, [os.urandom(1024)], 300_000)
            if rows.tls_records:
                bench_tls(broker, ssl_port, pem, rows.tls_records, results, failures)
            if rows.lz4_records:
                bench_lz4(broker, rows.lz4_records, results, failures)
            if rows.txn_producers:
                bench_parallel_txn(broker, rows.txn_producers, rows.txn_seconds, results,
                                   failures)
    finally:
        shutil.rmtree(certs, ignore_errors=True)


def row_keys(producers: int) -> tuple[tuple[str, str], ...]:
    return (
        ("produce rdkafka TLS 1024B|mbps", "MB/s"),
        ("produce rdkafka TLS 1024B|cpu_s_per_gb", "CPU-s/GB"),
        ("consume rdkafka TLS 1024B|mbps", "MB/s"),
        ("consume rdkafka TLS 1024B|cpu_s_per_gb", "CPU-s/GB"),
        ("produce rdkafka lz4 JSON 1KiB|mbps", "MB/s"),
        ("produce rdkafka lz4 JSON 1KiB|cpu_s_per_gb", "CPU-s/GB"),
        (f"txn rdkafka {producers}x10-record|tps", "tx/s"),
        (f"txn rdkafka {producers}x10-record|cpu_ms_per_tx", "CPU-ms/tx"),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--tls-records", type=int, default=500_000)
    ap.add_argument("--lz4-records", type=int, default=1_000_000)
    ap.add_argument("--txn-producers", type=int, default=16)
    ap.add_argument("--txn-seconds", type=float, default=20)
    ap.add_argument("--only", choices=("samsa", "kafka"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = Rows(args.tls_records, args.lz4_records, args.txn_producers, args.txn_seconds)
    lib, why = ensure_kafka_lib()
    if lib is None and args.only != "samsa":
        raise SystemExit(f"no Kafka broker: {why}")
    res: dict[str, Results] = {"samsa": {}, "kafka": {}}
    failures: Failures = []
    names = [n for n in ("samsa", "kafka") if args.only in (None, n)]
    print(f"load average at start: {os.getloadavg()}")
    try:
        for run in range(args.runs):
            for name in names if run % 2 == 0 else names[::-1]:  # alternate who goes first
                bench_rows(name, lib if name == "kafka" else None, rows, res[name], failures)
    finally:
        cleanup()
    print(f"load average at end: {os.getloadavg()}")
    for key, unit in row_keys(args.txn_producers):
        s, k = median(res["samsa"], key), median(res["kafka"], key)
        ratio = f"{s / k:.2f}x" if s and k else "-"
        print(f"{key:45} {unit:10} samsa {s or 0:10.2f}  kafka {k or 0:10.2f}  {ratio}")
    for f in failures:
        print("FAILED", f["broker"], f["phase"], f["error"][:300])
    if args.json:
        args.json.write_text(json.dumps({"res": res, "failures": failures}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
