"""The broker's CPU per request, with a raw client that is never the bottleneck.

The bench's rows are set partly by their load generators (ProducerPerformance and the Python
loop over librdkafka use more of the 2 cores than the broker does), so a change to the
broker's cost per request hides in their noise. This script sends ready-made requests over one
socket and reads the answers, doing no other work, and takes the broker's CPU from
/proc/<pid>/task/*/schedstat (all its threads; a JVM's compiler and GC threads included):

- produce: idempotent Produce v9 of one 16 KiB batch (records of --size bytes), acks=-1,
  five in flight (a Java producer's max.in.flight.requests.per.connection); with
  --compression, its records compressed with that codec (each record's value half random
  hex digits, half a repeated phrase: ~2-3x smaller);
- produce-plain: the same without a producer id (as librdkafka's default producer sends),
  so that the two show what idempotence costs;
- fetch: Fetch v12 with a 1 MiB partition limit, one in flight, each from the offset the last
  answer ended at, over 400,000 x 1 KiB records written by librdkafka in 1 MB batches (as the
  bench's consume phase reads);
- list-offsets: ListOffsets v7 (latest), one in flight: what a small request costs when the
  broker sleeps and wakes for each.

Each variant (NAME[@TREE]=K=V,...; --kafka [K=V,...] adds Apache Kafka) is started once per
--starts, the starts alternating, and measured for --rounds rounds of each load; a round's figure is
the broker's CPU divided by the requests it answered. Printed: every round, then per variant
and load the median and range over the last half of each start's rounds (Kafka's JIT compiles
through the first ones). No assertions: this measures.

    .venv/bin/python bench/request_cost.py --variant new= --kafka
    git worktree add /tmp/base-tree HEAD~1
    .venv/bin/python bench/request_cost.py --variant base@/tmp/base-tree= --variant new=
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import struct
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/ is a directory of scripts, not a package)
from ab import Variant, parse_variant, running  # noqa: E402

sys.path.insert(0, str(bench.REPO / "tests" / "protocol"))
from wire import WireClient  # noqa: E402  (the protocol tests' raw client)

from samsa.protocol.codec import reader, response_type  # noqa: E402
from samsa.protocol.records import build_batch, compute_crc, iter_batches  # noqa: E402

LOADS = ("produce", "produce-plain", "fetch", "list-offsets")
BATCH_BYTES = 16_384  # a Java producer's batch.size
IN_FLIGHT = 5
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
FETCH_RECORDS = 400_000
FETCH_LIMIT = 1 << 20
FETCH_RESPONSE = reader(response_type(1, 12))


def broker_cpu_ns(pid: int) -> int:
    """CPU time of every thread of `pid` so far (nanoseconds, from the scheduler)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that just ended
            pass
    return total


class ProduceRequests:
    """Produce requests of one batch each, an idempotent one's sequences following on: the
    batch is built once, and each request's copy gets its base sequence and CRC."""

    def __init__(self, client: WireClient, topic: str, size: int, idempotent: bool,
                 codec: int = 0) -> None:
        producer_id, epoch, self._sequence = -1, -1, -1
        if idempotent:
            init = client.call(22, 4, {"transactional_id": None,
                                       "transaction_timeout_ms": 60_000,
                                       "producer_id": -1, "producer_epoch": -1})
            producer_id, epoch, self._sequence = init.producer_id, init.producer_epoch, 0
        self.per_batch = max(1, BATCH_BYTES // (size + 12))  # ~12 B of framing a record
        values = [b"x" * size] * self.per_batch
        if codec:
            phrase = b"the quick brown fox jumps over the lazy dog " * (size // 44 + 1)
            rand = random.Random(size)
            values = [rand.randbytes(size // 4).hex().encode()[:size // 2]
                      + phrase[:size - size // 2] for _ in range(self.per_batch)]
        self._batch = build_batch([(None, v) for v in values],
                                  producer_id=producer_id, producer_epoch=epoch,
                                  base_sequence=self._sequence, compression=codec,
                                  default_timestamp=int(time.time() * 1000))
        self._client, self._topic = client, topic

    def next(self, count: int) -> list[bytes]:
        frames = []
        for _ in range(count):
            batch = bytearray(self._batch)
            struct.pack_into(">i", batch, 53, self._sequence)  # baseSequence
            struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
            if self._sequence >= 0:
                self._sequence += self.per_batch
            frames.append(self._client.encode_request(0, 9, {
                "transactional_id": None, "acks": -1, "timeout_ms": 30_000,
                "topic_data": [{"name": self._topic,
                                "partition_data": [{"index": 0, "records": bytes(batch)}]}],
            })[1])
        return frames


def fetch_request(client: WireClient, topic: str, offset: int) -> bytes:
    return client.encode_request(1, 12, {
        "replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 52_428_800,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": FETCH_LIMIT}]}],
        "forgotten_topics_data": [], "rack_id": ""})[1]


def next_fetch_offset(frame: bytes, offset: int) -> int:
    """The offset after the last whole batch of a one-partition Fetch v12 answer."""
    value, _ = FETCH_RESPONSE(frame, 5)  # after the correlation id and empty tagged fields
    records = value.responses[0].partitions[0].records or b""
    # whole batches only: Kafka's answer may end with the start of the next one
    return max((h.next_offset for _, h in iter_batches(records)), default=offset)


def pipelined(client: WireClient, frames: list[bytes], in_flight: int) -> None:
    sent = answered = 0
    while answered < len(frames):
        while sent < len(frames) and sent - answered < in_flight:
            client.send_raw(frames[sent])
            sent += 1
        client.read_frame()
        answered += 1


def prepare(load: str, bootstrap: str, args: argparse.Namespace
            ) -> Callable[[], int]:
    """A round of `load` against the broker: a function that runs it and returns the number of
    requests it sent."""
    client = WireClient(bootstrap, timeout=60)
    topic = f"cost-{load}"
    bench.create_topic(bootstrap, topic)
    if load in ("produce", "produce-plain"):
        requests = ProduceRequests(client, topic, args.size, idempotent=load == "produce",
                                   codec=CODECS[args.compression])
        # built before the rounds, each round's sequences following the last's
        rounds = iter([requests.next(args.requests) for _ in range(args.rounds)])

        def produce_round() -> int:
            frames = next(rounds)
            pipelined(client, frames, IN_FLIGHT)
            return len(frames)
        return produce_round
    if load == "fetch":
        out = bench.rdkafka_produce(bootstrap, topic, FETCH_RECORDS, 1024, "1")
        if out.error:
            raise RuntimeError(out.error)
        offsets = [0]
        while True:  # where each fetch of one pass starts
            client.send_raw(fetch_request(client, topic, offsets[-1]))
            following = next_fetch_offset(client.read_frame(), offsets[-1])
            if following >= FETCH_RECORDS or following == offsets[-1]:
                break
            offsets.append(following)
        frames = [fetch_request(client, topic, o) for o in offsets]

        def fetch_round() -> int:
            for _ in range(3):
                pipelined(client, frames, 1)
            return 3 * len(frames)
        return fetch_round
    body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    small = [client.encode_request(2, 7, body)[1] for _ in range(args.requests)]

    def list_offsets_round() -> int:
        pipelined(client, small, 1)
        return len(small)
    return list_offsets_round


def measure(v: Variant, args: argparse.Namespace,
            figures: dict[tuple[str, str], list[float]]) -> None:
    with running(v, "samsa-cost") as (proc, bootstrap):
        for load in args.loads:
            run_round = prepare(load, bootstrap, args)
            for i in range(args.rounds):
                cpu0, t0 = broker_cpu_ns(proc.pid), time.perf_counter()
                n = run_round()
                us = (broker_cpu_ns(proc.pid) - cpu0) / 1e3 / n
                rate = n / (time.perf_counter() - t0)
                print(f"  {v.name:14} {load:12} round {i:2}: {us:7.1f} us of broker CPU per "
                      f"request, {rate:8.0f} requests/s", flush=True)
                if i >= args.rounds // 2:
                    figures[(v.name, load)].append(us)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", default=[], type=parse_variant,
                    help="NAME[@TREE][:PYTHON]=K=V,K=V: source tree (interpreter, --set options)")
    ap.add_argument("--kafka", action="append", nargs="?", const="", metavar="K=V,K=V",
                    help="Apache Kafka too (from .cache/bench/kafka-broker), with these "
                         "server.properties lines; repeated: one Kafka variant each")
    ap.add_argument("--loads", default=",".join(LOADS),
                    help=f"comma-separated, of {', '.join(LOADS)}")
    ap.add_argument("--size", type=int, default=100, help="produce: record size")
    ap.add_argument("--compression", choices=list(CODECS), default="none",
                    help="produce: the batches' codec")
    ap.add_argument("--requests", type=int, default=4000,
                    help="produce and list-offsets: requests per round")
    ap.add_argument("--rounds", type=int, default=8, help="rounds of each load per start")
    ap.add_argument("--starts", type=int, default=1, help="times the variants alternate")
    args = ap.parse_args()
    args.loads = [x for x in args.loads.split(",") if x]
    if unknown := set(args.loads) - set(LOADS):
        ap.error(f"unknown loads: {sorted(unknown)}")
    variants: list[Variant] = args.variant or [Variant("samsa", bench.REPO, [])]
    for i, settings in enumerate(args.kafka or []):
        if not (bench.KAFKA_DIR / "lib").is_dir():
            ap.error(f"--kafka: no Kafka broker in {bench.KAFKA_DIR} (bench/run.py fetches it)")
        variants.append(Variant("kafka" + (f"-{i}" if i else ""), bench.REPO,
                                [s for s in settings.split(",") if s], kafka=True))
    figures: dict[tuple[str, str], list[float]] = defaultdict(list)
    bench.touch_free_memory()  # as bench/run.py: the VM's first touch of a page costs more
    try:
        for s in range(args.starts):
            for v in variants:
                print(f"start {s}: {v.name}", flush=True)
                measure(v, args, figures)
    finally:
        bench.cleanup()
    print("\nbroker CPU per request, median (range) of the rounds after each start's first "
          "half:")
    for load in args.loads:
        for v in variants:
            got = figures.get((v.name, load))
            if got:
                print(f"  {load:12} {v.name:14} {statistics.median(got):7.1f} us "
                      f"({min(got):.1f}-{max(got):.1f})")


if __name__ == "__main__":
    main()
