"""Samsa's librdkafka consume phase under alternating broker settings (or source trees).

For A/B questions such as samsa.fetch.sendfile.enable: each variant is a Samsa broker started
with its own `--set` options (and, optionally, another source tree on PYTHONPATH), given
--records records of --size bytes once (librdkafka, as bench/run.py's produce phase), then
consumed --runs times from offset 0 by bench/run.py's librdkafka consumer, after one unmeasured
consume of it all (it creates __consumer_offsets, and warms Kafka's JIT under --kafka).
Variants alternate --rounds times, so drift in the machine's load spreads over all of them.
Prints each run and, per variant, the median and range of the consume rate and of the
broker's CPU per GB read. No assertions: this measures.

--client K=V sets a librdkafka consumer property for every variant (e.g.
fetch.queue.backoff.ms=10: see docs/performance/consume.md on the 1 s fetch back-off).

--kafka adds Apache Kafka (started as bench/run.py starts it, from .cache/bench/kafka-broker)
as one more variant in the alternation, for a side-by-side ratio under the same load.

    .venv/bin/python bench/consume_ab.py \\
        --variant 'copy=samsa.fetch.sendfile.enable=false' \\
        --variant 'sendfile=samsa.fetch.sendfile.enable=true' \\
        --variant 'base@/tmp/base-tree='  # another tree: NAME@PATH=SETTINGS
        [--kafka]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/ is a directory of scripts, not a package)
from ab import Variant, parse_variant, running  # noqa: E402


def one_round(v: Variant, records: int, size: int, runs: int,
              client: dict[str, object]) -> None:
    with running(v, "samsa-ab") as (proc, b):
        bench.create_topic(b, "ab")
        out = bench.rdkafka_produce(b, "ab", records, size, "1")
        if out.error:
            raise RuntimeError(out.error)
        # One whole consume, not measured: creates __consumer_offsets (which would otherwise
        # land in the first measurement) and warms Kafka's JIT for the fetch path (make bench
        # warms it with its earlier phases; without this Kafka reads at 2-3x its CPU per GB).
        out = bench.rdkafka_consume(b, "ab", records, size, {**client, "group.id": "ab-warm"})
        if out.error:
            raise RuntimeError(out.error)
        for _ in range(runs):
            cpu0 = bench.cpu_seconds(proc.pid)
            out = bench.rdkafka_consume(b, "ab", records, size, client)
            cpu = bench.cpu_seconds(proc.pid) - cpu0
            if out.error:
                raise RuntimeError(out.error)
            v.mbps.append(out.figures["mbps"])
            v.cpu_per_gb.append(cpu / (records * size / 1e9))
            print(f"  {v.name:12} {out.figures['mbps']:8.1f} MB/s  "
                  f"{v.cpu_per_gb[-1]:.3f} s CPU/GB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", required=True, type=parse_variant,
                    help="NAME[@TREE][:PYTHON]=K=V,K=V: --set options (source tree, interpreter)")
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3, help="consumes per broker start")
    ap.add_argument("--client", action="append", default=[], metavar="K=V",
                    help="a librdkafka consumer property for every variant (e.g. "
                         "fetch.queue.backoff.ms=10)")
    ap.add_argument("--rounds", type=int, default=3, help="times the variants alternate")
    ap.add_argument("--kafka", action="store_true",
                    help="alternate Apache Kafka too (from .cache/bench/kafka-broker)")
    args = ap.parse_args()
    if args.kafka:
        if not (bench.KAFKA_DIR / "lib").is_dir():
            ap.error(f"--kafka: no Kafka broker in {bench.KAFKA_DIR} (bench/run.py fetches it)")
        args.variant.append(Variant("kafka", bench.REPO, [], kafka=True))
    client: dict[str, object] = dict(kv.split("=", 1) for kv in args.client)
    bench.touch_free_memory()
    try:
        for _ in range(args.rounds):
            for v in args.variant:
                one_round(v, args.records, args.size, args.runs, client)
    finally:
        bench.cleanup()
    print(f"\n{args.records:,} x {args.size} B, {args.rounds} rounds x {args.runs} runs")
    for v in args.variant:
        print(f"  {v.name:12} {statistics.median(v.mbps):8.1f} MB/s "
              f"({min(v.mbps):.0f}-{max(v.mbps):.0f})  "
              f"{statistics.median(v.cpu_per_gb):.3f} s CPU/GB "
              f"({min(v.cpu_per_gb):.3f}-{max(v.cpu_per_gb):.3f})")


if __name__ == "__main__":
    main()
