"""Where Samsa's broker spends its time under the bench's loads (`make profile`).

Starts one Samsa broker, attaches py-spy (a sampling profiler that reads the interpreter's
stacks from outside, so the broker runs unmodified) for the duration of each load, and prints
the functions with the most samples: by self time (where the CPU is) and by inclusive time
(which request path costs). Loads: ProducerPerformance and ConsumerPerformance from Kafka's
tools, as in bench/run.py. The raw collapsed stacks are kept in .cache/bench/profile-*.txt for
flame graphs (e.g. `py-spy record --format speedscope` on the same command, or inferno).

    .venv/bin/python bench/profile_broker.py   # produce 1 KB acks=all, then consume
    .venv/bin/python bench/profile_broker.py --size 100 --acks 1 --records 2000000
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # frames of this checkout are named from here
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/ is a directory of scripts, not a package)


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        sys.exit("py-spy is not installed: .venv/bin/pip install py-spy")
    return found


@contextlib.contextmanager
def sampling(pid: int, out: Path, rate: int) -> object:
    """py-spy on `pid` while the block runs; collapsed stacks land in `out`."""
    proc = subprocess.Popen(
        [py_spy(), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw",
         "--output", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    time.sleep(1.0)  # py-spy attaches before the load starts
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        _, err = proc.communicate(timeout=60)
        if not out.exists():
            print(err.decode(errors="replace"))


def frame_name(frame: str) -> str:
    """'handle_fetch (broker/handlers/fetch.py:33)' → 'handle_fetch (broker/handlers/fetch.py)'"""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/lib/python3.11/", f"{REPO}/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{name} ({path})"


def summarize(raw: Path, top: int) -> str:
    self_samples: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [frame_name(f) for f in stack.split(";")]
        total += n
        self_samples[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
    if not total:
        return "no samples"
    lines = [f"{total} samples", "", "self %  function"]
    lines += [f"{100 * n / total:6.1f}  {f}" for f, n in self_samples.most_common(top)]
    lines += ["", "incl %  function"]
    lines += [f"{100 * n / total:6.1f}  {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    kafka_lib, why = bench.ensure_kafka_lib()  # the load generators come from kafka-tools
    if kafka_lib is None:
        sys.exit(f"Kafka's tools are unavailable: {why}")
    bench.CACHE.mkdir(parents=True, exist_ok=True)
    (bench.CACHE / "log4j2-tools.properties").write_text(
        bench.LOG4J2.format(target="SYSTEM_ERR", level="warn"))
    try:
        with bench.running("samsa", None) as broker:
            topic = f"profile-{args.size}"
            bench.create_topic(broker.bootstrap, topic)
            loads = {
                "produce": lambda: bench.java_produce(kafka_lib, broker.bootstrap, topic,
                                                      args.records, args.size, args.acks),
                "consume": lambda: bench.java_consume(kafka_lib, broker.bootstrap, topic,
                                                      args.records),
            }
            for name, load in loads.items():
                raw = bench.CACHE / f"profile-{name}.txt"
                raw.unlink(missing_ok=True)
                with sampling(broker.proc.pid, raw, args.rate):
                    outcome = load()
                print(f"\n== {name}: {outcome.figures or outcome.error}")
                print(summarize(raw, args.top) if raw.exists() else "py-spy wrote nothing")
    finally:
        bench.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
