"""The broker's Python cost of a transaction over many partitions (issue 47, issue 51 item 5).

A broker is built and started in this process (bench/batch_cost.py's Harness) and its
dispatcher is handed ready-made request frames on one event loop, as a transactional producer
sends them: one record to each of --partitions partitions, then a commit. What is measured is
the broker's CPU (time.process_time) for each step of a transaction, per transaction and per
partition:

- tv1 (a classic client, librdkafka or a Java producer before transactions v2):
  AddPartitionsToTxn v3 of every partition, Produce v9 of one batch per partition (verified
  in-process at the append: transaction.partition.verification.enable), EndTxn v4;
- tv2 (a Java 4.x producer on a cluster with transaction.version 2): Produce v12, which adds
  the partitions to the transaction (the implicit add), and EndTxn v5, which bumps the epoch;

and in both, the markers: from EndTxn's answer until the coordinator has written every
partition's COMMIT marker and CompleteCommit (the local marker append, its producer state and
transaction index, the transaction log writes). Each round runs --txns transactions; the
median round is printed.

    .venv/bin/python bench/txn_cost.py --partitions 500
    .venv/bin/python bench/txn_cost.py --partitions 2000 --mode tv2 --profile

The broker is this process's only work, but the CPU clock counts every thread of it.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.batch_cost import Harness  # noqa: E402
from samsa.coordinator.transaction.metadata import TxnState  # noqa: E402
from samsa.protocol.codec import reader, response_type  # noqa: E402
from samsa.protocol.records import build_batch  # noqa: E402

TOPIC = "txn-cost"
TXN_ID = "txn-cost"
STEPS = ("add", "produce", "end", "markers")


class Producer:
    """The frames one transactional producer sends, built outside the clock."""

    def __init__(self, h: Harness, partitions: int, size: int, tv2: bool, commit: bool
                 ) -> None:
        self.h, self.partitions, self.tv2, self.commit = h, partitions, tv2, commit
        self.value = b"v" * size
        self.pid = self.epoch = -1
        self.sequences = [0] * partitions

    async def init(self) -> None:
        for _ in range(200):
            r = await self.h.call(22, 4, {"transactional_id": TXN_ID,
                                          "transaction_timeout": 60_000,
                                          "producer_id": -1, "producer_epoch": -1})
            if r.error_code == 0:
                self.pid, self.epoch = r.producer_id, r.producer_epoch
                return
            await asyncio.sleep(0.05)  # the coordinator loading __transaction_state
        raise RuntimeError(f"InitProducerId failed: {r.error_code}")

    def add_frame(self) -> bytes:
        return self.h.frame(24, 3, {
            "v3_and_below_transactional_id": TXN_ID, "v3_and_below_producer_id": self.pid,
            "v3_and_below_producer_epoch": self.epoch,
            "v3_and_below_topics": [{"name": TOPIC,
                                     "partitions": list(range(self.partitions))}]})

    def produce_frame(self) -> bytes:
        now = int(time.time() * 1000)
        data = []
        for p in range(self.partitions):
            batch = build_batch([(b"key-%d" % p, self.value)], producer_id=self.pid,
                                producer_epoch=self.epoch, base_sequence=self.sequences[p],
                                transactional=True, default_timestamp=now)
            self.sequences[p] += 1
            data.append({"index": p, "records": bytes(batch)})
        return self.h.frame(0, 12 if self.tv2 else 9, {
            "transactional_id": TXN_ID, "acks": -1, "timeout_ms": 30_000,
            "topic_data": [{"name": TOPIC, "partition_data": data}]})

    def end_frame(self) -> bytes:
        return self.h.frame(26, 5 if self.tv2 else 4, {
            "transactional_id": TXN_ID, "producer_id": self.pid,
            "producer_epoch": self.epoch, "committed": self.commit})

    def ended(self, answer: Any) -> None:
        if self.tv2 and (answer.producer_id, answer.producer_epoch) != (self.pid, self.epoch):
            self.pid, self.epoch = answer.producer_id, answer.producer_epoch
            self.sequences = [0] * self.partitions  # a new epoch starts its sequences at 0


async def call_frame(h: Harness, frame: bytes) -> Any:
    """Harness.call for a frame built ahead: the answer decoded."""
    api_key, version = struct.unpack_from(">hh", frame)
    parts = await h.dispatch(frame, h.conn)
    assert parts is not None
    data = b"".join(bytes(p) for p in parts[1:])  # type: ignore[arg-type]  # no regions
    resp_type = response_type(api_key, version)
    return reader(resp_type)(data, 5 if resp_type.__flexible__ else 4)[0]


def _check(answer: Any, step: str) -> None:
    """Every partition's (or the request's) error code is NONE."""
    codes: list[int] = []
    if hasattr(answer, "error_code"):
        codes.append(answer.error_code)
    for t in getattr(answer, "results_by_topic_v3_and_below", ()):
        codes += [p.partition_error_code for p in t.results_by_partition]
    for t in getattr(answer, "responses", ()):
        codes += [p.error_code for p in t.partition_responses]
    bad = [c for c in codes if c]
    if bad:
        raise RuntimeError(f"{step} answered {bad[:5]} ({len(bad)} errors)")


async def one_txn(h: Harness, prod: Producer, cpu: dict[str, float],
                  prof: cProfile.Profile | None) -> None:
    coord = h.broker.transactions
    frames = ([("add", prod.add_frame())] if not prod.tv2 else []) + [
        ("produce", prod.produce_frame()), ("end", prod.end_frame())]
    spawned: set[asyncio.Task[None]] = set()
    for step, frame in frames:
        tasks = set(coord._tasks._tasks)
        t0 = time.process_time()
        if prof is not None:
            prof.enable()
        answer = await call_frame(h, frame)
        if prof is not None:
            prof.disable()
        cpu[step] += time.process_time() - t0
        spawned |= coord._tasks._tasks - tasks
        _check(answer, step)
        if step == "end":
            prod.ended(answer)
    # The markers: the coordinator's task EndTxn started (awaited, not polled: a loop of
    # polls would be charged to it), until CompleteCommit is applied.
    t0 = time.process_time()
    if prof is not None:
        prof.enable()
    await asyncio.gather(*spawned)
    if prof is not None:
        prof.disable()
    cpu["markers"] += time.process_time() - t0
    md = coord._txns[TXN_ID]
    done = TxnState.COMPLETE_COMMIT if prod.commit else TxnState.COMPLETE_ABORT
    assert md.state is done and not md.pending, md


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="txn-cost-") as tmp:
        h = Harness(Path(tmp) / "data", serve=True)
        await h.broker.start()
        created = await h.call(19, 5, {"topics": [{
            "name": TOPIC, "num_partitions": args.partitions, "replication_factor": 1,
            "assignments": [], "configs": []}], "timeout_ms": 60_000, "validate_only": False})
        assert created.topics[0].error_code == 0, created
        list(h.broker.replicas.partitions())
        prod = Producer(h, args.partitions, args.size, args.mode == "tv2", not args.abort)
        await prod.init()
        await one_txn(h, prod, dict.fromkeys(STEPS, 0.0), None)  # warm-up
        rounds: list[dict[str, float]] = []
        for _ in range(args.rounds):
            cpu = dict.fromkeys(STEPS, 0.0)
            for _ in range(args.txns):
                await one_txn(h, prod, cpu, None)
            rounds.append({k: v / args.txns for k, v in cpu.items()})
        totals = [sum(r.values()) for r in rounds]
        median = sorted(range(len(rounds)), key=totals.__getitem__)[len(rounds) // 2]
        r, p = rounds[median], args.partitions
        steps = ", ".join(f"{k} {1e3 * v:.2f} ms ({1e6 * v / p:.1f} us/partition)"
                          for k, v in r.items() if k != "add" or not prod.tv2)
        ended = " aborted" if args.abort else ""
        print(f"txn {args.mode}{ended}: {p} partitions, one record of {args.size} B each: "
              f"{1e3 * totals[median]:.2f} ms/transaction, "
              f"{1e6 * totals[median] / p:.1f} us/partition; {steps} "
              f"(rounds: {', '.join(f'{1e3 * t:.2f}' for t in totals)} ms/transaction)")
        if args.profile:
            prof = cProfile.Profile(time.process_time)
            for _ in range(args.txns):
                await one_txn(h, prod, dict.fromkeys(STEPS, 0.0), prof)
            pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
        await h.broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("tv1", "tv2"), default="tv1")
    ap.add_argument("--partitions", type=int, default=500)
    ap.add_argument("--abort", action="store_true",
                    help="end each transaction with an abort (the transaction index)")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--txns", type=int, default=10, help="transactions a round")
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
