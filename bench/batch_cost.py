"""The broker's Python cost per request and per partition-batch, without sockets (issue 47).

A broker is built in this process (as tests/protocol/test_fuzz_decoder.py does) and its
dispatcher is handed ready-made request frames on one event loop: what is measured is the
CPU of decoding, handling and encoding, nothing of the kernel's or a client's. Loads:

- produce: idempotent Produce v9, acks=-1, each request carrying batches of --records records
  (one by default; many for a saturated producer's batches) of --size bytes for --per-request
  partitions of a --partitions topic, partitions taken in turn (librdkafka sends one
  partition per request: --per-request 1; a Java producer at a tenth of its capacity sends
  many);
- fetch: Fetch v12 of every partition of the topic from the offsets last read, after each
  produce request (a consumer of many partitions at a low rate: little data per partition).

    .venv/bin/python bench/batch_cost.py --partitions 500 --per-request 1
    .venv/bin/python bench/batch_cost.py --partitions 500 --per-request 12 --profile
    .venv/bin/python bench/batch_cost.py --load fetch --partitions 500

Printed: CPU (time.process_time) per request and per partition-batch, the median of
--rounds rounds; with --profile, cProfile's top functions over one more round.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from samsa.broker.app import Broker  # noqa: E402
from samsa.broker.network.server import ConnectionInfo  # noqa: E402
from samsa.config.loader import load_config  # noqa: E402
from samsa.protocol.codec import build, encode, reader, request_type, response_type  # noqa: E402
from samsa.protocol.records import build_batch  # noqa: E402


class Harness:
    def __init__(self, data: Path) -> None:
        config = load_config(None, {"log.dirs": str(data),
                                    "listeners": "PLAINTEXT://127.0.0.1:0"})
        self.broker = Broker(config)
        self.broker.log_manager.startup(self.broker._config_for_topic_name)
        self.broker.replicas.load_all()
        self.dispatch = self.broker.dispatcher
        self.conn = ConnectionInfo("bench:0", None)  # type: ignore[arg-type]
        self._correlation = 0

    def frame(self, api_key: int, version: int, body: dict[str, Any]) -> bytes:
        self._correlation += 1
        req_type = request_type(api_key, version)
        header = struct.pack(">hhih", api_key, version, self._correlation, 5) + b"bench"
        if req_type.__flexible__:
            header += b"\x00"
        return header + encode(build(req_type, body))

    async def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        parts = await self.dispatch(self.frame(api_key, version, body), self.conn)
        assert parts is not None
        data = b"".join(bytes(p) for p in parts[1:]  # type: ignore[arg-type]  # no regions
                        )  # after the size prefix
        resp_type = response_type(api_key, version)
        offset = 5 if resp_type.__flexible__ else 4
        return reader(resp_type)(data, offset)[0]


async def produce_frames(h: Harness, topic: str, partitions: int, per_request: int,
                         size: int, count: int, records: int = 1) -> list[bytes]:
    init = await h.call(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60_000,
                                "producer_id": -1, "producer_epoch": -1})
    pid, epoch = init.producer_id, init.producer_epoch
    sequences = [0] * partitions
    frames, nxt, value = [], 0, b"v" * size
    now = int(time.time() * 1000)
    for _ in range(count):
        data = []
        for _ in range(per_request):
            p, nxt = nxt, (nxt + 1) % partitions
            batch = build_batch([(b"key-%d" % p, value)] * records, producer_id=pid,
                                producer_epoch=epoch, base_sequence=sequences[p],
                                default_timestamp=now)
            sequences[p] += records
            data.append({"index": p, "records": bytes(batch)})
        frames.append(h.frame(0, 9, {"transactional_id": None, "acks": -1,
                                     "timeout_ms": 30_000,
                                     "topic_data": [{"name": topic, "partition_data": data}]}))
    return frames


def fetch_frame(h: Harness, topic: str, offsets: list[int]) -> bytes:
    return h.frame(1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 52_428_800,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": p, "current_leader_epoch": -1, "fetch_offset": o,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20} for p, o in enumerate(offsets)]}],
        "forgotten_topics_data": [], "rack_id": ""})


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="batch-cost-") as tmp:
        h = Harness(Path(tmp))
        topic = "cost"
        created = await h.call(19, 5, {"topics": [{
            "name": topic, "num_partitions": args.partitions, "replication_factor": 1,
            "assignments": [], "configs": []}], "timeout_ms": 60_000, "validate_only": False})
        assert created.topics[0].error_code == 0, created
        list(h.broker.replicas.partitions())  # every log created before the clock
        rounds = args.rounds + (1 if args.profile else 0)
        frames = await produce_frames(h, topic, args.partitions, args.per_request, args.size,
                                      args.requests * (rounds + 1), args.records)
        produced = 0
        offsets = [0] * args.partitions

        async def produce_round(prof: cProfile.Profile | None = None) -> tuple[int, int, float]:
            nonlocal produced
            todo = frames[produced:produced + args.requests]
            produced += args.requests
            t0 = time.process_time()
            if prof is not None:
                prof.enable()
            for f in todo:
                await h.dispatch(f, h.conn)
            if prof is not None:
                prof.disable()
            return len(todo), len(todo) * args.per_request, time.process_time() - t0

        async def fetch_round(prof: cProfile.Profile | None = None) -> tuple[int, int, float]:
            # Produce one request, then fetch every partition from where the last fetch ended:
            # the fetches (built ahead, outside the clock) are what is timed.
            nonlocal produced
            cpu = 0.0
            for f in frames[produced:produced + args.requests]:
                await h.dispatch(f, h.conn)
                fetch = fetch_frame(h, topic, offsets)
                t0 = time.process_time()
                if prof is not None:
                    prof.enable()
                await h.dispatch(fetch, h.conn)
                if prof is not None:
                    prof.disable()
                cpu += time.process_time() - t0
                for i in range(args.per_request):
                    offsets[(produced * args.per_request + i) % args.partitions] += 1
                produced += 1
            return args.requests, args.requests * args.partitions, cpu

        one_round = produce_round if args.load == "produce" else fetch_round
        await one_round()  # warm-up: caches, first segment writes
        per_req, per_batch = [], []
        for _ in range(args.rounds):
            requests, batches, cpu = await one_round()
            per_req.append(1e6 * cpu / requests)
            per_batch.append(1e6 * cpu / batches)
        what = ("fetch of every partition after one produce request" if args.load == "fetch"
                else f"produce of {args.per_request} batch(es) of {args.records} record(s) of "
                     f"{args.size} B")
        print(f"{args.load}: {args.partitions} partitions, {what}: "
              f"{statistics.median(per_req):.1f} us/request, "
              f"{statistics.median(per_batch):.2f} us/partition "
              f"(rounds: {', '.join(f'{x:.1f}' for x in per_req)} us/request)")
        if args.profile:
            prof = cProfile.Profile()
            await one_round(prof)
            pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
        h.broker.log_manager.shutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load", choices=("produce", "fetch"), default="produce")
    ap.add_argument("--partitions", type=int, default=500)
    ap.add_argument("--per-request", type=int, default=1,
                    help="partition-batches a produce request carries")
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--records", type=int, default=1, help="records a batch (--load produce)")
    ap.add_argument("--requests", type=int, default=2000, help="requests a round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    try:
        import uvloop
        uvloop.run(run(args))
    except ImportError:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
