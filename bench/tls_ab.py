"""Samsa's TLS produce and consume phases under alternating source trees (or broker settings).

Each variant is a Samsa broker started from its own source tree (NAME@PATH, as in
bench/produce_ab.py) with a PLAINTEXT and an SSL listener (bench/tls_lz4_txn.py's self-signed
PEM key store); on each start 100,000 plaintext 1 KiB records warm it up, then --records 1 KiB
records are produced over TLS by librdkafka (acks=all, linger 5 ms, as the bench's TLS row) and
read back --passes times by new consumers (with --plaintext, the same again over the
PLAINTEXT listener: what TLS adds). Variants alternate --rounds times so drift in the
machine's load spreads over all of them. Prints each phase and, per variant, the median and
range of the rate and of the broker's CPU seconds per GB (/proc/<pid>/stat), and the cipher
suite and TLS version the broker negotiated with Python's client defaults. No assertions: this
measures.

--profile NAME samples that variant's broker during its phases of the first round: with py-spy
(on PATH or beside the interpreter) it prints the top Python functions (bench/profile_broker.py's
summary); with `--profiler perf` the top native symbols (OpenSSL, uvloop, the kernel's TCP: what
py-spy shows only as the Python frame that called them), perf's data kept in .cache/bench/.
Sampling slows the broker, so that round's figures are left out.

    git worktree add /tmp/base-tree <old commit>
    .venv/bin/python bench/tls_ab.py --variant 'base@/tmp/base-tree=' --variant 'new='
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import profile_broker  # noqa: E402  (bench/ is a directory of scripts, not a package)
import run as bench  # noqa: E402
from ab import Variant, parse_variant  # noqa: E402
from tls_lz4_txn import TLS_SIZE, make_certificate, produce, tls_conf, tls_settings  # noqa: E402


def negotiated(ssl_port: int, pem: Path) -> str:
    """The cipher suite and version the broker picks for a client with OpenSSL's defaults
    (librdkafka's too)."""
    ctx = ssl.create_default_context(cafile=str(pem))
    with socket.create_connection(("127.0.0.1", ssl_port), 10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        name, version, _ = tls.cipher() or ("?", "?", 0)
        return f"{name} {version}"


def start(v: Variant, work: Path, pem: Path) -> tuple[subprocess.Popen[bytes], str, int]:
    """The variant's broker started and answering: (process, plaintext bootstrap, SSL port)."""
    port, ssl_port = bench.free_port(), bench.free_port()
    cmd = [v.python, "-m", "samsa", "serve", "--listen", f"127.0.0.1:{port}",
           "--data-dir", str(work / "data")]
    for s in (*tls_settings(pem, port, ssl_port, kafka=False), *v.settings):
        cmd += ["--set", s]
    log = work / "samsa.log"
    os.environ["PYTHONPATH"] = str(v.tree)  # samsa is imported from the variant's tree
    proc = bench.spawn(cmd, log, cwd=v.tree)
    bench.wait_first_answer(proc, port, time.monotonic(), log)
    return proc, f"127.0.0.1:{port}", ssl_port


@contextlib.contextmanager
def perf_sampling(pid: int, out: Path) -> Iterator[None]:
    """perf record (call graphs) on `pid` while the block runs, into `out`."""
    rec = subprocess.Popen(["perf", "record", "-F", "999", "-g", "-p", str(pid), "-o", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        yield
    finally:
        rec.send_signal(2)  # SIGINT: perf writes its data and exits
        rec.wait(60)


def perf_summary(data: Path, top: int) -> str:
    """The symbols with the most samples of their own, with their library."""
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--no-children", "--sort", "dso,sym", "--stdio",
         "-g", "none", "--percent-limit", "0.5"],
        capture_output=True, text=True, check=False)  # fmt: skip
    rows = [line for line in report.stdout.splitlines() if line and not line.startswith("#")]
    return "\n".join(rows[:top]) or report.stderr[-500:]


def phase(proc: subprocess.Popen[bytes], label: str, volume: int,
          job: Callable[[], bench.Outcome], profile: Path | None, profiler: str
          ) -> tuple[float, float]:
    """(MB/s, broker CPU-s per GB) of one phase, sampled into `profile` if given."""
    cpu0 = bench.cpu_seconds(proc.pid)
    if profile is None:
        out = job()
    else:
        sampling = (perf_sampling(proc.pid, profile) if profiler == "perf"
                    else profile_broker.sampling(proc.pid, profile, 250))
        with sampling:
            out = job()
    cpu = bench.cpu_seconds(proc.pid) - cpu0
    if out.error:
        raise RuntimeError(f"{label}: {out.error}")
    return out.figures["mbps"], cpu / (volume / 1e9)


def one_round(v: Variant, pem: Path, args: argparse.Namespace, profiled: bool,
              figures: dict[str, list[float]]) -> None:
    work = Path(tempfile.mkdtemp(prefix=f"samsa-tlsab-{v.name}-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        proc, bootstrap, ssl_port = start(v, work, pem)
        bench.create_topic(bootstrap, "warm")
        produce({"bootstrap.servers": bootstrap}, "warm", [os.urandom(1024)], 100_000)
        listeners = {"tls": tls_conf(ssl_port, pem)}
        if args.plaintext:  # the same phases without TLS: what TLS adds
            listeners["plain"] = {"bootstrap.servers": bootstrap}
        shown = [f"  {v.name:10} {negotiated(ssl_port, pem):28}"]
        suffix = "perf.data" if args.profiler == "perf" else "txt"
        n, payload = args.records, [os.urandom(TLS_SIZE)]
        for listener, conf in listeners.items():
            topic = f"{listener}-{time.time_ns()}"
            bench.create_topic(bootstrap, topic)
            phases: dict[str, tuple[int, Callable[[], bench.Outcome]]] = {
                "produce": (n * TLS_SIZE, partial(produce, conf, topic, payload, n)),
                "consume": (n * TLS_SIZE * args.passes,
                            partial(bench.rdkafka_consume, str(conf["bootstrap.servers"]), topic,
                                    n, TLS_SIZE, extra=conf, passes=args.passes)),
            }
            for name, (volume, job) in phases.items():
                key = f"{listener} {name}"
                if name == "consume":  # __consumer_offsets made by a first, unmeasured consumer
                    bench.rdkafka_consume(str(conf["bootstrap.servers"]), topic, min(n, 1000),
                                          TLS_SIZE, extra=conf)
                raw = bench.CACHE / f"profile-{listener}-{name}.{suffix}" if profiled else None
                if raw is not None:
                    raw.unlink(missing_ok=True)
                mbps, per_gb = phase(proc, key, volume, job, raw, args.profiler)
                shown.append(f"{key} {mbps:6.1f} MB/s {per_gb:5.2f} s/GB")
                if raw is None:
                    figures.setdefault(f"{v.name}|{key}|mbps", []).append(mbps)
                    figures.setdefault(f"{v.name}|{key}|cpu", []).append(per_gb)
                elif not raw.exists():
                    shown.append("(the profiler wrote nothing)")
                else:
                    summary = (perf_summary(raw, args.top) if args.profiler == "perf"
                               else profile_broker.summarize(raw, args.top))
                    print(f"\n== {v.name} {key}\n{summary}", flush=True)
        print("   ".join(shown) + ("   (profiled: not counted)" if profiled else ""),
              flush=True)
    finally:
        if proc is not None:
            bench.stop(proc)
        shutil.rmtree(work, ignore_errors=True)


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):7.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", action="append", required=True, type=parse_variant,
                    help="NAME[@TREE][:PYTHON]=K=V,K=V: source tree (interpreter, --set options)")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--passes", type=int, default=3, help="consumer passes over the records")
    ap.add_argument("--rounds", type=int, default=3, help="times the variants alternate")
    ap.add_argument("--plaintext", action="store_true",
                    help="the same phases over the PLAINTEXT listener too, after the TLS ones")
    ap.add_argument("--profile", metavar="NAME", help="py-spy this variant's first round")
    ap.add_argument("--profiler", choices=("py-spy", "perf"), default="py-spy")
    ap.add_argument("--top", type=int, default=25, help="functions the profile shows")
    args = ap.parse_args()
    bench.CACHE.mkdir(parents=True, exist_ok=True)
    certs = Path(tempfile.mkdtemp(prefix="samsa-tlsab-certs-"))
    figures: dict[str, list[float]] = {}
    print(f"load average at start: {os.getloadavg()}")
    try:
        pem = make_certificate(certs)
        for r in range(args.rounds):
            order = args.variant if r % 2 == 0 else args.variant[::-1]
            for v in order:
                one_round(v, pem, args, r == 0 and v.name == args.profile, figures)
    finally:
        bench.cleanup()
        shutil.rmtree(certs, ignore_errors=True)
    print(f"load average at end: {os.getloadavg()}")
    for v in args.variant:
        for key in ("tls produce", "tls consume", "plain produce", "plain consume"):
            if f"{v.name}|{key}|cpu" in figures:
                print(f"{v.name:10} {key:13}  MB/s {spread(figures[f'{v.name}|{key}|mbps'])}"
                      f"   CPU-s/GB {spread(figures[f'{v.name}|{key}|cpu'])}")


if __name__ == "__main__":
    main()
